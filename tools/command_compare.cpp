// tools/command_compare.cpp — `attnscope compare`: two models on the same tokens, head by head
// (analysis::compare_models): the change of sink mass, entropy (sink and content parts), max weight and ‖J‖₂, the
// Jensen–Shannon divergence of the two models' attention rows (keep and drop conventions) and the top-k overlap,
// most changed heads first; optional CSV and HTML page. Documented in docs/cli.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/analysis/compare.hpp"
#include "attnscope/analysis/compare_html.hpp"
#include "cli_model.hpp"
#include "cli_progress.hpp"
#include "cli_provenance.hpp"
#include "cli_selection.hpp"
#include "cli_token_strings.hpp"
#include "commands.hpp"

namespace attnscope::cli {
namespace {

const char* compare_usage() {
  static const std::string usage =
      R"(usage: attnscope compare --model A --model B
                        (--tokens LIST | --tokens-file FILE | --text STRING | --text-file FILE)
                        [--max-tokens N] [--csv FILE] [--html FILE] [--html-heads N] [--top-k K]
                        [--sink-keys LIST] [--show N] [--beyond-trained-length] [--from TEXT] [--skip-tokens N]
                        [--special-tokens] [--add-special-tokens] [--matmul-a MODE] [--matmul-b MODE] [--threads N]

Runs the same tokens through two models (a model and its quantized copy, two checkpoints, a base model and its
fine-tune; they must have the same vocabulary and the same numbers of layers and heads) and compares their attention
head by head. Per head: the mean over the query rows of the sink mass, the entropy and its exact sink and content
parts (H = [H_b(s) + s·H(sinks)] + (1 − s)·H(content)), the max weight and ‖J‖₂ in each model and their change
(B − A); the Jensen–Shannon divergence (nats) between the two models' attention rows, js_keep over the whole rows and
js_drop between the content compositions (sink keys dropped, the rest renormalised); and the overlap of the top-k
attended keys. Heads are ordered by js_keep, largest first. Both forwards are streaming forwards run in lock-step,
layer by layer; the attention rows are formed block by block (64 query rows), never as an L×L matrix.

With --text or --text-file each model's tokenizer encodes the text (a Hugging Face folder's, or the one stored in a
GGUF file) and the two token lists must be equal; llama2.c checkpoints take token ids only.

Options:
  --model PATH        a Hugging Face model folder, a GGUF file or a llama2.c checkpoint; give it twice (A, then B)
  --tokens LIST, --tokens-file FILE, --text STRING, --text-file FILE, --max-tokens N, --special-tokens,
  --add-special-tokens   the input (as for `attnscope capture`; - as FILE reads stdin)
  --csv FILE          every head: rank, layer, head, js_keep, js_drop, drop_rows, top_k_overlap, then for
                      sink_mass, entropy, entropy_sink, entropy_content, max_weight, jacobian_norm the columns
                      <name>_a, <name>_b and delta_<name>
  --html FILE         a page with the table and, for the --html-heads most changed heads, A's and B's attention side
                      by side with |B − A| (collected in the same pass)
  --html-heads N      heads shown as images (default 4)
  --top-k K           the k of the top-k statistics, the k keys of largest weight in a row: the overlap of A's and
                      B's top k keys (one k; default 5)
  --sink-keys LIST    keys forming the sink channel (default 0)
  --show N            heads printed on stdout (default 20; 0: all)
  --beyond-trained-length  let RoPE models run past their trained length (seq_len)
  --threads N         OpenMP threads (default 1; 0 = OpenMP default)
  --matmul-a MODE, --matmul-b MODE   how model A / model B multiply GGUF block-quantized weights: exact (default) or
                      llama.cpp (as for capture); one GGUF file as both models with --matmul-b llama.cpp
                      shows what llama.cpp's 8-bit activations change
)" + std::string(input_window_usage) + R"(  --help              this text
)";
  return usage.c_str();
}

/// The tokens both models read: token ids as given, or the text encoded by each model's tokenizer (which must agree).
std::vector<int> compare_tokens_argument(const Arguments& arguments, const std::string& path_a,
                                         const std::string& path_b, std::size_t& input_length) {
  const CaptureRequest request_a = model_request(arguments, path_a, 0);
  if (arguments.has("text") || arguments.has("text-file")) {
    const CaptureRequest request_b = model_request(arguments, path_b, 0);
    if (request_a.tokens != request_b.tokens) {
      std::size_t at = 0;
      while (at < request_a.tokens.size() && at < request_b.tokens.size() &&
             request_a.tokens[at] == request_b.tokens[at])
        ++at;
      const auto id = [](const std::vector<int>& tokens, std::size_t i) {
        return i < tokens.size() ? std::to_string(tokens[i]) : std::string("(end)");
      };
      attnscope::detail::throw_invalid_argument(
          "compare", "the two models' tokenizers encode the text differently (", request_a.tokens.size(), " and ",
          request_b.tokens.size(), " tokens; first difference at token ", at, ": ", id(request_a.tokens, at), " vs ",
          id(request_b.tokens, at), "); the models must share a tokenizer");
    }
  }
  input_length = request_a.input_length;
  return request_a.tokens;
}

void print_comparison(const analysis::ModelComparison& comparison, std::size_t show) {
  std::printf("%-5s %-6s %-5s %9s %9s %8s %10s %10s %10s %10s %10s %10s", "rank", "layer", "head", "js_keep",
              "js_drop", "top_k", "d_sink", "d_entropy", "d_H_sink", "d_H_cont", "d_max_w", "d_J_mean");
  if (comparison.learned_sinks) std::printf(" %10s", "d_sigma");  // the learned sink's share, B − A
  std::printf("\n");
  const std::size_t rows = show == 0 ? comparison.heads.size() : std::min(show, comparison.heads.size());
  for (std::size_t r = 0; r < rows; ++r) {
    const analysis::HeadComparison& h = comparison.heads[r];
    const analysis::HeadAttentionSummary d = h.delta();
    std::printf("%-5zu %-6d %-5d %9.3g %9.3g %8.4f %10.3g %10.3g %10.3g %10.3g %10.3g %10.3g", r + 1, h.layer, h.head,
                h.js_keep, h.js_drop, h.top_k_overlap, d.sink_mass, d.entropy, d.entropy_sink, d.entropy_content,
                d.max_weight, d.jacobian_norm);
    if (comparison.learned_sinks) std::printf(" %10.3g", d.learned_sink);
    std::printf("\n");
  }
  if (rows < comparison.heads.size())
    std::printf("... %zu more heads (--show 0 prints all; --csv writes all)\n", comparison.heads.size() - rows);
  if (comparison.learned_sinks)
    std::printf("# learned sink logits: rows compared as the composition of the keys' weights and sigma, sigma part "
                "of the sink channel\n");
  for (const analysis::LayerRoutingChange& layer : comparison.routing)
    std::printf("# layer %d experts: %.4g of the tokens chose a different set of experts\n", layer.layer,
                layer.expert_set_change);
}

int command_compare(int argc, char** argv) {
  Arguments arguments;
  arguments.repeated_option("model");
  arguments.value_option("tokens").value_option("tokens-file").value_option("text").value_option("text-file");
  arguments.value_option("max-tokens").flag("special-tokens").flag("add-special-tokens");
  arguments.value_option("csv").value_option("html").value_option("html-heads").value_option("top-k");
  arguments.value_option("sink-keys").value_option("show").flag("beyond-trained-length");
  arguments.value_option("matmul-a").value_option("matmul-b");
  add_input_window_options(arguments);
  if (parse_subcommand(arguments, argc, argv, compare_usage())) return 0;
  require_no_positional(arguments);
  const std::vector<std::string> models = arguments.get_all("model");
  if (models.size() != 2)
    throw usage_error("give two models: --model A --model B (got " + std::to_string(models.size()) + ")");
  if (!(arguments.has("tokens") || arguments.has("tokens-file") || arguments.has("text") || arguments.has("text-file")))
    throw usage_error("give the input: --text, --text-file, --tokens or --tokens-file");
  if (arguments.has("html-heads") && !arguments.has("html")) throw usage_error("--html-heads applies to --html only");
  check_output_options(arguments, {"csv", "html"});
  analysis::CompareOptions options;
  if (arguments.has("top-k")) {
    const std::vector<Index> k = top_k_argument(arguments, "");
    if (k.size() != 1)
      throw usage_error("--top-k: compare takes one k (the top-k overlap), got " + arguments.get("top-k"));
    options.top_k = k[0];
  }
  if (arguments.has("sink-keys")) {
    options.sink_keys.clear();
    for (const int key : parse_token_list(arguments.get("sink-keys"), "--sink-keys")) {
      if (key < 0) throw usage_error("--sink-keys: expected non-negative integers, got " + std::to_string(key));
      options.sink_keys.push_back(key);
    }
  }
  const long html_heads = parse_integer(arguments.get("html-heads", "4"), "--html-heads", 1, 1L << 20);
  const long show = parse_integer(arguments.get("show", "20"), "--show", 0, 1L << 30);
  options.allow_beyond_trained_positions = arguments.has("beyond-trained-length");
  options.matmul[0] = matmul_argument(arguments, "matmul-a");
  options.matmul[1] = matmul_argument(arguments, "matmul-b");
  for (const std::string& path : models) require_model_format(path);  // a data error naming the path

  std::size_t input_length = 0;
  const std::vector<int> tokens = compare_tokens_argument(arguments, models[0], models[1], input_length);
  if (tokens.size() < input_length)
    std::cerr << "attnscope: input cut from " << input_length << " to " << tokens.size() << " tokens by --max-tokens\n";
  const auto start = std::chrono::steady_clock::now();
  const model::Transformer a = model::load_model(models[0]);
  const model::Transformer b = model::load_model(models[1]);
  const double load_ms = milliseconds_since(start);
  if (arguments.has("html")) options.image_most_changed = static_cast<int>(html_heads);
  const auto compare_start = std::chrono::steady_clock::now();
  analysis::ModelComparison comparison;
  {
    ProgressBar bar("compare");
    options.layer_progress = bar.callback();
    comparison = analysis::compare_models(a, b, tokens, options);
  }
  const double compare_ms = milliseconds_since(compare_start);
  std::cerr << "attnscope: " << tokens.size() << " tokens, " << a.config().n_layers << " layers x "
            << a.config().n_heads << " heads; load " << load_ms << " ms, compare " << compare_ms << " ms\n";
  print_comparison(comparison, static_cast<std::size_t>(show));
  // what the CSV and the page record (io/run_options.hpp): both models, the tokens and their source, the options
  RunOptions recorded = command_record("compare");
  record_model(recorded, models[0], a.config().architecture, "a_");
  record_model(recorded, models[1], b.config().architecture, "b_");
  record_model_input(recorded, arguments, tokens);
  recorded["top_k"] = std::to_string(options.top_k);
  recorded["sink_keys"] = join_integers(options.sink_keys);
  recorded["matmul_a"] = arguments.get("matmul-a", "exact");
  recorded["matmul_b"] = arguments.get("matmul-b", "exact");
  recorded["sort"] = "js_keep";  // the rows are ranked by js_keep: a merge keeps their order
  if (arguments.has("beyond-trained-length")) recorded["beyond_trained_length"] = "true";
  if (arguments.has("csv")) {
    std::ostringstream csv;
    csv << io::csv_run_line(recorded);
    analysis::write_comparison_csv(csv, comparison);
    io::write_file(arguments.get("csv"), csv.str(), temporary_files());
    std::cerr << "attnscope: wrote " << comparison.heads.size() << " heads to " << arguments.get("csv") << "\n";
  }
  if (arguments.has("html")) {
    analysis::CompareHtmlOptions page;
    page.model_a = models[0];
    page.model_b = models[1];
    page.run = recorded;
    page.tokens = token_strings(tokens, models[0]);  // the models share a tokenizer (compare_tokens_argument)
    analysis::write_comparison_html(arguments.get("html"), comparison, page, temporary_files());
    std::cerr << "attnscope: wrote " << arguments.get("html") << "\n";
  }
  return 0;
}

}  // namespace

const Command& compare_command() {
  static const Command command{"compare", "what changed between two models' attention, head by head (JS, sinks, entropy)",
                               compare_usage(), command_compare};
  return command;
}

}  // namespace attnscope::cli
