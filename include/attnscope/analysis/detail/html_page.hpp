// attnscope/analysis/detail/html_page.hpp — the template of the HTML report's page: its style sheet and script
// (sorting, the large view of a head with token axes, error display) and the escaping of text and JSON placed in it.
// Internal to analysis/html_report.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <iterator>
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

/// How a token's bytes are shown on the pages: quoted, as JSON writes a string ("\n", "\t", "\r", "\"", "\\"), other
/// control characters as \xHH, and every byte that is not part of a valid UTF-8 sequence (RFC 3629 §4: no overlong
/// forms, no surrogates, nothing above U+10FFFF) as \xHH of that byte, so that a byte-level token such as the first two
/// bytes of "’" reads "\xe2\x80" rather than a replacement character.
inline std::string html_token_label(const std::string& bytes) {
  static const char hex[] = "0123456789abcdef";
  const auto escaped = [](unsigned char byte) { return std::string("\\x") + hex[byte >> 4] + hex[byte & 15]; };
  std::string out = "\"";
  const std::size_t n = bytes.size();
  for (std::size_t i = 0; i < n;) {
    const auto byte = static_cast<unsigned char>(bytes[i]);
    if (byte < 0x80) {
      if (byte == '"' || byte == '\\') out += std::string("\\") + static_cast<char>(byte);
      else if (byte == '\n') out += "\\n";
      else if (byte == '\t') out += "\\t";
      else if (byte == '\r') out += "\\r";
      else if (byte < 0x20 || byte == 0x7f) out += escaped(byte);
      else out += static_cast<char>(byte);
      ++i;
      continue;
    }
    // the length of the sequence a lead byte starts and the range of its second byte (RFC 3629 §4, UTF8-2..UTF8-4)
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xbf;
    if (byte >= 0xc2 && byte <= 0xdf) length = 2;
    else if (byte >= 0xe0 && byte <= 0xef) length = 3, low = byte == 0xe0 ? 0xa0 : 0x80, high = byte == 0xed ? 0x9f : 0xbf;
    else if (byte >= 0xf0 && byte <= 0xf4) length = 4, low = byte == 0xf0 ? 0x90 : 0x80, high = byte == 0xf4 ? 0x8f : 0xbf;
    bool valid = length > 0 && i + length <= n;
    for (std::size_t k = 1; valid && k < length; ++k) {
      const auto next = static_cast<unsigned char>(bytes[i + k]);
      valid = k == 1 ? next >= low && next <= high : next >= 0x80 && next <= 0xbf;
    }
    if (valid) {
      out.append(bytes, i, length);
      i += length;
    } else {
      out += escaped(byte);
      ++i;
    }
  }
  return out + "\"";
}

inline std::string html_format_value(double value) {
  if (!std::isfinite(value)) return "-";
  std::ostringstream stream;
  stream.precision(4);
  stream << value;
  return stream.str();
}


/// The run record (io/run_options.hpp) as the page header shows it: a line with what was analysed (the model or the
/// two models, the text or input file with its window, the length L, the version), a line with how (every option
/// the record holds: the keys that name neither the model nor the document), and the table of every key (long
/// values, such as the token ids, in a scrolling cell).
inline std::string html_run_record(const std::map<std::string, std::string>& run) {
  if (run.empty()) return "";
  const auto value = [&](const std::string& key) {
    const auto found = run.find(key);
    return found == run.end() ? std::string() : found->second;
  };
  std::string line;
  const auto add = [&](const std::string& label, const std::string& text) {
    if (!text.empty()) line += (line.empty() ? "" : "; ") + label + text;
  };
  for (const char* prefix : {"", "a_", "b_"}) {
    const std::string p = prefix, model = value(p + "model");
    if (model.empty()) continue;
    const std::string arch = value(p + "architecture"), dtype = value(p + "model_dtype");
    add(p.empty() ? "model " : std::string(1, static_cast<char>(p[0] - 32)) + ": ",
        model + (arch.empty() ? "" : " (" + arch + (dtype.empty() ? "" : ", " + dtype) + ")"));
  }
  add("text ", value("text_file"));
  add("input ", value("input"));
  add("tokens file ", value("tokens_file"));
  add("from ", value("from").empty() ? "" : "\"" + value("from") + "\"");
  add("skip ", value("skip_tokens"));
  add("max-tokens ", value("max_tokens"));
  add("L = ", value("tokens"));
  add("attnscope ", value("attnscope_version"));
  // what was analysed is said above; the rest of the record is how
  static const char* const what[] = {"model", "architecture", "model_dtype", "a_model", "a_architecture",
                                     "a_model_dtype", "b_model", "b_architecture", "b_model_dtype", "text_file",
                                     "text_crc32", "text", "input", "input_crc32", "tokens", "tokens_crc32",
                                     "token_ids", "tokens_file", "from", "skip_tokens", "max_tokens",
                                     "attnscope_version", "command"};
  std::string how;
  for (const auto& [key, text] : run)
    if (std::find(std::begin(what), std::end(what), key) == std::end(what))
      how += (how.empty() ? "" : "; ") + key + " " + text;
  std::ostringstream out;
  out << "<details class=\"run\" open><summary id=\"run-what\">Run: " << html_escape(line) << "</summary>\n";
  if (!how.empty()) out << "<p id=\"run-options\">Options: " << html_escape(how) << "</p>\n";
  out << "<table class=\"run\">";
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
#script-errors{background:#fdd;color:#900;padding:.5em}.spark{display:block;width:96px;height:16px;background:#fafafa}
.readout{font:12px monospace;min-height:1.4em}#run-options{margin:.2em 0;word-break:break-word})";
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
function label(pos,keys){var t=data.tokens;var s=String(pos);if(t.length>=keys&&pos<t.length){s+=' '+t[pos];}
return s;}
function curve(h){var c=h.curve,n=c.sink.length,W=512,H=120,L=44,R=52,T=8,B=30,top=c.entropy_max>0?c.entropy_max:1;
function xs(k){return L+(n>1?k*W/(n-1):W/2);}
function ys(v,scale){return T+H-Math.min(1,Math.max(0,v/scale))*H;}
function path(values,scale,name,color){var d='',pen=false;for(var k=0;k<n;k++){var v=values[k];
if(v===null){pen=false;continue;}d+=(pen?'L':'M')+xs(k).toFixed(1)+' '+ys(v,scale).toFixed(1);pen=true;}
return '<path class="'+name+'" fill="none" stroke="'+color+'" stroke-width="1.5" d="'+d+'"></path>';}
var s='<svg id="curve" width="'+(L+W+R)+'" height="'+(T+H+B)+'" font-size="10" font-family="monospace">'+
'<rect x="'+L+'" y="'+T+'" width="'+W+'" height="'+H+'" fill="#fafafa" stroke="#999"></rect>';
[0,0.5,1].forEach(function(f){var y=T+H-f*H;s+='<text x="'+(L-4)+'" y="'+(y+3)+'" text-anchor="end" fill="#b5651d">'+f+
'</text><text x="'+(L+W+4)+'" y="'+(y+3)+'" fill="#3b6fb6">'+(f*top).toPrecision(3)+'</text>';});
var last=c.first+h.rows-1;
s+='<text x="'+L+'" y="'+(T+H+14)+'">'+c.first+'</text><text x="'+(L+W)+'" y="'+(T+H+14)+'" text-anchor="end">'+last+
'</text><text x="'+(L+W/2)+'" y="'+(T+H+26)+'" text-anchor="middle">query position</text>';
s+=path(c.sink,1,'curve-sink','#f28e2b')+path(c.entropy,top,'curve-entropy','#3b6fb6');
if(c.learned){s+=path(c.learned,1,'curve-learned','#8c6bb1');}
return '<h3>Along the sequence</h3><p class="hint" id="curve-note">Each query row\'s mass on the sink keys (orange, '+
'left axis) and its entropy (blue, right axis, nats; top = ln '+h.cols+' = '+top.toPrecision(3)+')'+
(c.learned?', and the learned sink\'s share (purple, left axis); the entropy is the real keys\' renormalised row\'s':'')+
(c.block>1?'; each point is the mean of '+c.block+' consecutive rows':'')+'.</p>'+s+
'</svg><div id="curve-readout" class="readout">move over the curve: query rows, sink mass, entropy</div>';}
function curvePoint(h,k){var c=h.curve;k=Math.min(c.sink.length-1,Math.max(0,k));var a=c.first+k*c.block,
b=Math.min(c.first+h.rows-1,a+c.block-1);function f(v){return v===null?'-':v.toPrecision(3);}
document.getElementById('curve-readout').textContent='query '+(a===b?a:a+'-'+b)+': sink mass '+f(c.sink[k])+
', entropy '+f(c.entropy[k])+(c.learned?', learned sink '+f(c.learned[k]):'');}
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
html+='</div></div>'+curve(h);
detail.innerHTML=html;detail.hidden=false;
var svg=document.getElementById('curve');svg.addEventListener('mousemove',function(e){var r=svg.getBoundingClientRect(),
n=h.curve.sink.length;curvePoint(h,Math.round((e.clientX-r.left-44)/(n>1?512/(n-1):1)));});
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
var m=/^#head-(\d+)-(\d+)(?::(\d+),(\d+))?$/.exec(location.hash);
if(m){data.heads.forEach(function(h,i){if(h.layer===+m[1]&&h.head===+m[2]){show(i);
if(m[3]!==undefined){var off=h.rows<=h.cols?h.cols-h.rows:0;point(h,Math.floor((+m[3]-off)/h.block),Math.floor(+m[4]/h.block),off);}}});}
document.body.setAttribute('data-table-width',String(table.offsetWidth));
document.body.setAttribute('data-ready','1');
})();)";
}

/// The sorting of the pages' tables (every table.sortable): a click on a heading sorts the rows by that column
/// (numbers, each cell's data-value or its text; empty and non-numbers last), a second click reverses; ?sort=NAME or
/// ?sort=NAME:desc in the page's address (NAME a heading's data-name) sorts on load, so that a sorted view can be
/// linked.
inline const char* html_table_sort_script() {
  return R"((function(){
function sortable(table){
var heads=Array.prototype.slice.call(table.tHead.rows[0].cells);
function sortBy(col,asc){heads.forEach(function(o){delete o.dataset.sort;});heads[col].dataset.sort=asc?'asc':'desc';
var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows);
function key(r){var c=r.cells[col],v=c.dataset.value!==undefined?c.dataset.value:c.textContent;
return v===''?NaN:parseFloat(v);}
rows.sort(function(a,b){var x=key(a),y=key(b);if(isNaN(x)){return isNaN(y)?0:1;}if(isNaN(y)){return -1;}
return asc?x-y:y-x;});rows.forEach(function(r){body.appendChild(r);});}
heads.forEach(function(th,col){th.addEventListener('click',function(e){if(e.target.tagName==='A'){return;}
sortBy(col,th.dataset.sort!=='asc');});});
var m=/[?&]sort=([^&]*)/.exec(location.search);
if(m){var spec=decodeURIComponent(m[1]).split(':');heads.forEach(function(th,col){
if(th.dataset.name===spec[0]){sortBy(col,spec[1]!=='desc');}});}}
document.querySelectorAll('table.sortable').forEach(sortable);
})();)";
}

}  // namespace attnscope::analysis::detail
