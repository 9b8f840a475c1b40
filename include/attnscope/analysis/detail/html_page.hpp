// attnscope/analysis/detail/html_page.hpp — the template of the HTML report's page: its style sheet and script
// (sorting, the large view of a head with token axes, error display) and the escaping of text and JSON placed in it.
// Internal to analysis/html_report.hpp.
#pragma once

#include <cmath>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace attnscope::analysis::detail {

inline std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

/// JSON for a <script> element: invalid UTF-8 replaced, "</" written as "<\/" so that no string ends the element.
inline std::string html_script_json(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '<' && i + 1 < text.size() && text[i + 1] == '/') out += '\\';
  }
  return out;
}

inline std::string html_format_value(double value) {
  if (!std::isfinite(value)) return "-";
  std::ostringstream stream;
  stream.precision(4);
  stream << value;
  return stream.str();
}


/// The run record (io/run_options.hpp) as the page header shows it: a line with the model, the input and the
/// version, and the table of every key (long values, such as the token ids, in a scrolling cell).
inline std::string html_run_record(const std::map<std::string, std::string>& run) {
  if (run.empty()) return "";
  const auto value = [&](const char* key) {
    const auto found = run.find(key);
    return found == run.end() ? std::string() : found->second;
  };
  std::string line;
  const auto add = [&](const std::string& label, const std::string& text) {
    if (!text.empty()) line += (line.empty() ? "" : "; ") + label + text;
  };
  add("model ", value("model"));
  add("", value("architecture"));
  add("weights ", value("model_dtype"));
  add("text ", value("text_file"));
  add("input ", value("input"));
  add("tokens: ", value("tokens"));
  add("attnscope ", value("attnscope_version"));
  std::ostringstream out;
  out << "<details class=\"run\" open><summary>Run: " << html_escape(line) << "</summary>\n<table class=\"run\">";
  for (const auto& [key, text] : run)
    out << "<tr><th>" << html_escape(key) << "</th><td>" << (text.size() > 120 ? "<div class=\"long\">" : "")
        << html_escape(text) << (text.size() > 120 ? "</div>" : "") << "</td></tr>";
  out << "</table></details>\n";
  return out.str();
}

inline const char* html_page_style() {
  return R"(body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222}h1{margin-bottom:0}
.source{color:#555;margin-top:0}details.run{margin:.3em 0;font-size:12px;color:#444}
table.run th{text-align:left;padding-right:1em;vertical-align:top}table.run .long{max-height:4.5em;overflow:auto;
word-break:break-all;max-width:90ch}.note{background:#f3f3f3;padding:.4em .6em}.warn{background:#fde8e8}
.hint{color:#666;font-size:12px}.layer{display:flex;align-items:center;gap:4px;margin:2px 0}
.layer-label{width:5em;font-size:12px;color:#444}.cell{border:1px solid #ccc;background:#fff;padding:2px;cursor:pointer;
display:flex;flex-direction:column;align-items:center}.cell:hover,.cell.selected{border-color:#d33}
.thumb{width:96px;height:96px;object-fit:contain;image-rendering:pixelated;background:#440154}
.cell-label{font-size:10px;color:#555}.bar{display:inline-block;width:96px;height:5px;background:#3b6fb6;
vertical-align:middle}.bar .sink{display:block;height:100%;background:#f28e2b}.bar.empty{background:#ccc}
#detail{border:1px solid #ccc;padding:.5em 1em;margin:1em 0}#detail .plot{display:inline-grid;
grid-template-columns:max-content max-content;align-items:start}.yaxis,.xaxis{position:relative;font:10px monospace;color:#333}
.yaxis span{position:absolute;right:4px;white-space:pre}.xaxis span{position:absolute;top:2px;white-space:pre;
transform:rotate(60deg);transform-origin:0 0}.big{image-rendering:pixelated;display:block;border:1px solid #999}
#readout{font:12px monospace;min-height:1.4em}table{border-collapse:collapse;margin:.5em 0}
.scroll{overflow-x:auto}th,td{border:1px solid #ddd;padding:2px 5px;text-align:right;font-size:12px;white-space:nowrap}
th{background:#eee;cursor:pointer;white-space:normal;overflow-wrap:anywhere;max-width:7.5em;vertical-align:bottom}
td .bar{width:40px}.layer{flex-wrap:wrap}
tbody tr:hover{background:#fff6d5;cursor:pointer}dt{font-weight:bold;margin-top:.6em}dd{margin-left:1.5em}
#script-errors{background:#fdd;color:#900;padding:.5em})";
}

inline const char* html_page_script() {
  return R"((function(){
var errors=document.getElementById('script-errors');
window.onerror=function(message){errors.hidden=false;errors.textContent+='script error: '+message+'\n';};
var data=JSON.parse(document.getElementById('attnscope-data').textContent);
var detail=document.getElementById('detail');
function esc(s){return String(s).replace(/[&<>"']/g,function(c){return '&#'+c.charCodeAt(0)+';';});}
function halves(b64){var s=atob(b64),out=new Float64Array(s.length>>1);for(var i=0;i<out.length;i++){
var u=s.charCodeAt(2*i)|(s.charCodeAt(2*i+1)<<8),e=(u>>10)&31,f=u&1023;
out[i]=e===31?NaN:(e===0?f*Math.pow(2,-24):(1+f/1024)*Math.pow(2,e-15));}return out;}
function weight(v){return isNaN(v)?'not finite':(v===0?'0':v.toPrecision(3));}
function label(pos,keys){var t=data.tokens;var s=String(pos);if(t.length>=keys&&pos<t.length){s+=' '+JSON.stringify(t[pos]);}
return s;}
function show(index){
var h=data.heads[index];if(!h){return;}
document.querySelectorAll('.cell.selected').forEach(function(c){c.classList.remove('selected');});
var cell=document.querySelector('.cell[data-index="'+index+'"]');if(cell){cell.classList.add('selected');}
var scale=Math.max(1,Math.floor(512/Math.max(h.width,h.height)));
var w=h.width*scale,hh=h.height*scale,offset=h.rows<=h.cols?h.cols-h.rows:0;
var html='<h2>layer '+h.layer+' head '+h.head+'</h2><p class="note" id="detail-note">'+h.rows+' queries &times; '+h.cols+
' keys';
if(h.block>1){html+=', downsampled '+h.block+'&times;: each pixel is the block '+data.method+' of '+h.block+'&times;'+
h.block+' entries';}
html+='. Sink mass '+(h.sink===null?'-':h.sink.toPrecision(3))+', content mass '+
(h.content===null?'-':h.content.toPrecision(3))+(h.nonfinite?', '+h.nonfinite+' non-finite entries':'')+
'.</p><div id="readout">move over the matrix: query &rarr; key, weight</div><div class="plot"><div class="yaxis" style="width:'+
'11em;height:'+hh+'px">';
var step=Math.max(1,Math.ceil(h.height/Math.max(1,Math.floor(hh/12))));
for(var y=0;y<h.height;y+=step){html+='<span style="top:'+(y*scale+scale/2-6)+'px">'+esc(label(offset+y*h.block,h.cols))+
'</span>';}
html+='</div><img class="big" id="big" alt="layer '+h.layer+' head '+h.head+'" src="'+h.image+'" width="'+w+
'" height="'+hh+'"><div></div><div class="xaxis" style="width:'+w+'px;height:8em">';
step=Math.max(1,Math.ceil(h.width/Math.max(1,Math.floor(w/12))));
for(var x=0;x<h.width;x+=step){html+='<span style="left:'+(x*scale+scale/2)+'px">'+esc(label(x*h.block,h.cols))+
'</span>';}
html+='</div></div>';
detail.innerHTML=html;detail.hidden=false;
var big=document.getElementById('big'),readout=document.getElementById('readout');
if(!h.decoded){h.decoded=halves(h.values);}
big.addEventListener('mousemove',function(e){var r=big.getBoundingClientRect();
point(h,Math.floor((e.clientY-r.top)/scale),Math.floor((e.clientX-r.left)/scale),offset);});
if(location.hash.indexOf('#head-'+h.layer+'-'+h.head)!==0){history.replaceState(null,'','#head-'+h.layer+'-'+h.head);}
}
function point(h,y,x,offset){
x=Math.min(h.width-1,Math.max(0,x));y=Math.min(h.height-1,Math.max(0,y));
var q0=offset+y*h.block,k0=x*h.block,b=h.block>1?'+'+(h.block-1):'',v=h.decoded[y*h.width+x];
document.getElementById('readout').textContent='query '+label(q0,h.cols)+b+'  \u2192  key '+label(k0,h.cols)+b+
'  '+(h.block>1?'block '+data.method+' weight ':'weight ')+weight(v);}
document.querySelectorAll('.cell').forEach(function(c){c.addEventListener('click',function(){
show(+c.dataset.index);detail.scrollIntoView();});});
document.querySelectorAll('#stats tbody tr').forEach(function(r){r.addEventListener('click',function(){
if(+r.dataset.index>=0){show(+r.dataset.index);detail.scrollIntoView();}});});
var table=document.getElementById('stats');
table.querySelectorAll('th').forEach(function(th,col){th.addEventListener('click',function(e){
if(e.target.tagName==='A'){return;}
var asc=th.dataset.sort!=='asc';table.querySelectorAll('th').forEach(function(o){delete o.dataset.sort;});
th.dataset.sort=asc?'asc':'desc';var body=table.tBodies[0];var rows=Array.prototype.slice.call(body.rows);
function key(r){var c=r.cells[col],v=c.dataset.value!==undefined?c.dataset.value:c.textContent;
return v===''?NaN:parseFloat(v);}
rows.sort(function(a,b){var x=key(a),y=key(b);if(isNaN(x)){return isNaN(y)?0:1;}if(isNaN(y)){return -1;}
return asc?x-y:y-x;});rows.forEach(function(r){body.appendChild(r);});});});
var m=/^#head-(\d+)-(\d+)(?::(\d+),(\d+))?$/.exec(location.hash);
if(m){data.heads.forEach(function(h,i){if(h.layer===+m[1]&&h.head===+m[2]){show(i);
if(m[3]!==undefined){var off=h.rows<=h.cols?h.cols-h.rows:0;point(h,Math.floor((+m[3]-off)/h.block),Math.floor(+m[4]/h.block),off);}}});}
document.body.setAttribute('data-table-width',String(table.offsetWidth));
document.body.setAttribute('data-ready','1');
})();)";
}

}  // namespace attnscope::analysis::detail
