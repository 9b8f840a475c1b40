// tools/attnscope.cpp — the `attnscope` command: capture attention from a llama2.c checkpoint, report per-head
// statistics of a capture / attention file / checkpoint, and apply a normalization map to an NPY array.
// Documented in docs/cli.md. Exit codes: 0 success, 1 runtime error (bad file, bad input), 2 usage error.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnscope/io.hpp"
#include "attnscope/model.hpp"
#include "attnscope/analysis.hpp"
#include "attnscope/normalize/maps.hpp"
#include "cli_arguments.hpp"
#include "cli_progress.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
using attnscope::cli::Arguments;
using attnscope::cli::usage_error;
namespace io = attnscope::io;
namespace model = attnscope::model;
namespace analysis = attnscope::analysis;

constexpr const char* general_usage = R"(usage: attnscope <command> [options]

Commands:
  capture    run a llama2.c checkpoint and write q, k, v, scores, attention and logits (NPZ or safetensors)
  report     per-layer, per-head table (sink mass, entropy, max weight, max scaled logit, Jacobian norms)
  normalize  apply a normalization map row-wise to an NPY array

Run `attnscope <command> --help` for the options of a command. Documentation: docs/cli.md.
Every command accepts --threads N (default 1; 0 = all cores via OpenMP): the model's matrices are small, so
threads rarely pay off and on a busy machine they cost far more than they save.
)";

constexpr const char* capture_usage = R"(usage: attnscope capture --checkpoint FILE [--tokens 1,2,3 | --tokens-file FILE] [--generate N]
                         [--map NAME[:PARAM]] [--compress] --out FILE.npz|FILE.safetensors

Runs the model over the tokens (default: BOS = 1), after first decoding N greedy tokens when --generate N is
given, and writes per layer i: layer{i}.q, layer{i}.k, layer{i}.v [heads, L, head_size] (k and v of grouped-query
attention are copied to every query head of the group), layer{i}.scores [heads, L, L] (q.k/sqrt(head_size), future
entries -inf), layer{i}.attention [heads, L, L] (row = query, future entries 0), plus tokens [L] (int32) and
logits [L, vocab] (float32).

Options:
  --checkpoint FILE   llama2.c checkpoint (version 0, 1 or 2)
  --tokens LIST       token ids separated by commas or spaces
  --tokens-file FILE  token ids separated by commas, spaces or newlines
  --generate N        first append N greedy tokens (uses the --map too)
  --map NAME          attention normalization: softmax (default), temperature:T, ssmax:S, sparsemax, entmax15,
                      entmax:ALPHA, sa_softmax, sa_softmax_normalized, sink, sink:LOGIT
  --compress          deflate NPZ members (smaller, slower); default: stored
  --out FILE          output; .npz or .safetensors decides the format
  --threads N         OpenMP threads (default 1; 0 = OpenMP default)
  --help              this text
)";

constexpr const char* report_usage = R"(usage: attnscope report INPUT [--csv FILE] [--json FILE] [--basic]
                        [--tokens LIST | --tokens-file FILE] [--generate N] [--map NAME]

INPUT is one of
  - a capture written by `attnscope capture` (.npz or .safetensors with layer{i}.attention, and optionally
    layer{i}.scores and layer{i}.v),
  - an attention file: .npy, or .npz/.safetensors holding one array (or one named "attention"), of shape
    [heads, L, L], [layers, heads, L, L] or [L, L] (row = query),
  - a llama2.c checkpoint: captured first (default: BOS = 1 then 255 greedy tokens; --tokens, --tokens-file,
    --generate and --map as for capture).
Prints one line per layer and head: sink_mass (mean weight on key 0), entropy (mean row entropy, nats),
max_attention, max_scaled_logit (needs scores), mean_jacobian_norm and max_jacobian_norm (exact ||diag p - pp^T||_2
over rows; "-" when rows are not distributions), then the analysis modules' columns: content_entropy and
sink_entropy_share (sink = key 0), causal_stable_rank (needs scores), separability_at_critical_n and
gradient_sensitivity = g(T=1, eps=1e-3) (need scores and values). "-" = not available.

Options:
  --csv FILE    also write the table as CSV
  --json FILE   also write the table as JSON
  --basic       only the six standard columns (skips the slower analysis columns)
  --threads N   OpenMP threads (default 1; 0 = OpenMP default)
  --help        this text
)";

constexpr const char* normalize_usage = R"(usage: attnscope normalize --map NAME[:PARAM] IN.npy -o OUT.npy

Applies a normalization map to every row (last axis) of an NPY array of any rank >= 1. Entries equal to -inf are
treated as masked (weight exactly 0); NaN or +inf entries, and rows with every entry masked, are errors.
float32 input gives float32 output; float64 and integer input give float64.

Options:
  --map NAME    softmax, temperature:T, ssmax:S, sparsemax, entmax15, entmax:ALPHA, sa_softmax,
                sa_softmax_normalized, sink, sink:LOGIT
  -o, --out FILE  output .npy
  --threads N   OpenMP threads (default 1; 0 = OpenMP default)
  --help        this text
)";

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string read_text_file(const std::string& path) {
  const std::vector<unsigned char> bytes = io::read_file(path);
  return std::string(bytes.begin(), bytes.end());
}

// ---------------------------------------------------------------------------------------------------------------
// Running a checkpoint (shared by capture and report)

struct CaptureRequest {
  std::string checkpoint;
  std::vector<int> tokens{1};
  int generate = 0;
  model::ForwardOptions options;
};

// Applies --threads (default 1): OpenMP threads for Eigen products and row loops of this process.
void apply_threads(const Arguments& arguments) {
  const long threads = attnscope::cli::parse_integer(arguments.get("threads", "1"), "--threads", 0, 4096);
#if defined(_OPENMP)
  if (threads > 0) omp_set_num_threads(static_cast<int>(threads));
#else
  (void)threads;
#endif
}

// Adds --threads and --help, parses argv[2..), applies --threads; prints the usage and returns true for --help.
bool parse_subcommand(Arguments& arguments, int argc, char** argv, const char* usage) {
  arguments.value_option("threads").flag("help");
  arguments.parse(argc, argv, 2);
  apply_threads(arguments);
  if (!arguments.has("help")) return false;
  std::cout << usage;
  return true;
}

void add_model_options(Arguments& arguments) {
  arguments.value_option("tokens").value_option("tokens-file").value_option("generate").value_option("map");
}

CaptureRequest model_request(const Arguments& arguments, const std::string& checkpoint, int default_generate) {
  CaptureRequest request;
  request.checkpoint = checkpoint;
  if (arguments.has("tokens") && arguments.has("tokens-file"))
    throw usage_error("give either --tokens or --tokens-file, not both");
  const bool explicit_tokens = arguments.has("tokens") || arguments.has("tokens-file");
  if (arguments.has("tokens")) request.tokens = attnscope::cli::parse_token_list(arguments.get("tokens"), "--tokens");
  if (arguments.has("tokens-file"))
    request.tokens = attnscope::cli::parse_token_list(read_text_file(arguments.get("tokens-file")), "--tokens-file");
  request.generate = arguments.has("generate")
                         ? static_cast<int>(attnscope::cli::parse_integer(arguments.get("generate"), "--generate", 0,
                                                                          1 << 20))
                         : (explicit_tokens ? 0 : default_generate);
  if (arguments.has("map")) request.options.map = attnscope::parse_normalization_map(arguments.get("map"));
  return request;
}

struct CaptureRun {
  model::ForwardResult result;
  std::vector<int> tokens;
  io::LlamaConfig config;
};

CaptureRun run_capture(const CaptureRequest& request, const model::CaptureOptions& capture) {
  const auto start = std::chrono::steady_clock::now();
  const model::LlamaModel llama = model::LlamaModel::load(request.checkpoint);
  const double load_ms = milliseconds_since(start);
  CaptureRun run;
  run.config = llama.config();
  run.tokens = request.tokens;
  double generate_ms = 0;
  if (request.generate > 0) {
    attnscope::cli::ProgressBar bar("generate");
    const auto generate_start = std::chrono::steady_clock::now();
    run.tokens = llama.generate_greedy(request.tokens, request.generate, request.options, bar.callback());
    generate_ms = milliseconds_since(generate_start);
  }
  model::ForwardOptions options = request.options;
  options.capture = capture;
  const auto forward_start = std::chrono::steady_clock::now();
  run.result = llama.forward(run.tokens, options);
  const double forward_ms = milliseconds_since(forward_start);
  std::cerr << "attnscope: " << run.tokens.size() << " tokens, " << run.config.n_layers << " layers x "
            << run.config.n_heads << " heads; load " << load_ms << " ms, generate " << request.generate
            << " tokens " << generate_ms << " ms, forward with capture " << forward_ms << " ms\n";
  return run;
}

// Stacks per-head matrices (all the same shape) into one float32 array [heads, rows, cols].
io::Array stack_heads(const std::vector<RowMatrix<float>>& heads) {
  const Index rows = heads.at(0).rows(), cols = heads.at(0).cols();
  std::vector<float> values;
  values.reserve(static_cast<std::size_t>(heads.size() * rows * cols));
  for (const auto& head : heads) values.insert(values.end(), head.data(), head.data() + head.size());
  return io::Array::from_vector(values, {static_cast<std::int64_t>(heads.size()), rows, cols});
}

// ---------------------------------------------------------------------------------------------------------------
// capture

int command_capture(int argc, char** argv) {
  Arguments arguments;
  arguments.value_option("checkpoint").value_option("out", "-o").flag("compress");
  add_model_options(arguments);
  if (parse_subcommand(arguments, argc, argv, capture_usage)) return 0;
  if (!arguments.positional().empty()) throw usage_error("unexpected argument '" + arguments.positional()[0] + "'");
  const std::string out = arguments.require("out");
  const bool safetensors = ends_with(out, ".safetensors");
  if (!safetensors && !ends_with(out, ".npz")) throw usage_error("--out must end in .npz or .safetensors: " + out);
  const CaptureRequest request = model_request(arguments, arguments.require("checkpoint"), 0);

  model::CaptureOptions capture;
  capture.q = capture.k = capture.v = capture.scores = capture.attention = true;
  const CaptureRun run = run_capture(request, capture);

  const auto write_start = std::chrono::steady_clock::now();
  io::NamedArrays arrays;
  for (std::size_t l = 0; l < run.result.layers.size(); ++l) {
    const model::LayerCapture& layer = run.result.layers[l];
    const std::string prefix = "layer" + std::to_string(l) + ".";
    arrays.emplace_back(prefix + "q", stack_heads(layer.q));
    arrays.emplace_back(prefix + "k", stack_heads(layer.k));
    arrays.emplace_back(prefix + "v", stack_heads(layer.v));
    arrays.emplace_back(prefix + "scores", stack_heads(layer.scores));
    arrays.emplace_back(prefix + "attention", stack_heads(layer.attention));
  }
  arrays.emplace_back("tokens", io::Array::from_vector(std::vector<std::int32_t>(run.tokens.begin(), run.tokens.end()),
                                                       {static_cast<std::int64_t>(run.tokens.size())}));
  arrays.emplace_back("logits", io::Array::from(run.result.logits));
  if (safetensors) {
    io::write_safetensors(out, arrays,
                          {{"checkpoint", request.checkpoint},
                           {"map", request.options.map ? attnscope::to_string(*request.options.map) : "softmax"},
                           {"generated", std::to_string(request.generate)}});
  } else {
    io::write_npz(out, arrays, arguments.has("compress") ? io::Compression::deflated : io::Compression::stored);
  }
  std::cerr << "attnscope: wrote " << arrays.size() << " arrays to " << out << " in " << milliseconds_since(write_start)
            << " ms\n";
  return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// report

std::map<std::string, io::Array> read_arrays(const std::string& path) {
  if (ends_with(path, ".npz")) return io::read_npz(path);
  if (ends_with(path, ".safetensors")) return io::read_safetensors(path);
  return {{"attention", io::read_npy(path)}};
}

// Head inputs from named arrays: a capture (layer{i}.attention ...) or a single attention array.
std::vector<analysis::HeadInput> heads_from_arrays(const std::map<std::string, io::Array>& arrays, const std::string& path) {
  std::vector<analysis::HeadInput> heads;
  auto require_rank3 = [&](const std::string& name, const io::Array& array) {
    if (array.rank() != 3)
      attnscope::detail::throw_io_error("report", path, name, " has shape ", io::detail::shape_string(array.shape()),
                                        ", expected [heads, L, L]");
  };
  if (arrays.count("layer0.attention")) {
    for (int l = 0; arrays.count("layer" + std::to_string(l) + ".attention"); ++l) {
      const std::string prefix = "layer" + std::to_string(l) + ".";
      const io::Array& attention = arrays.at(prefix + "attention");
      require_rank3(prefix + "attention", attention);
      const auto scores = arrays.find(prefix + "scores");
      const auto values = arrays.find(prefix + "v");
      for (std::int64_t h = 0; h < attention.shape()[0]; ++h) {
        analysis::HeadInput head;
        head.layer = l;
        head.head = static_cast<int>(h);
        head.attention = attention.slice_matrix<double>({h});
        if (scores != arrays.end()) {
          require_rank3(prefix + "scores", scores->second);
          head.scores = scores->second.slice_matrix<double>({h});
        }
        if (values != arrays.end()) {
          require_rank3(prefix + "v", values->second);
          head.values = values->second.slice_matrix<double>({h});
        }
        heads.push_back(std::move(head));
      }
    }
    return heads;
  }
  const io::Array* attention = nullptr;
  if (arrays.count("attention")) attention = &arrays.at("attention");
  else if (arrays.size() == 1) attention = &arrays.begin()->second;
  else
    attnscope::detail::throw_io_error("report", path, "holds ", arrays.size(),
                                      " arrays but neither layer0.attention nor one named 'attention'");
  const auto& shape = attention->shape();
  if (attention->rank() < 2 || attention->rank() > 4)
    attnscope::detail::throw_io_error("report", path, "attention has shape ", io::detail::shape_string(shape),
                                      ", expected [L, L], [heads, L, L] or [layers, heads, L, L]");
  const std::int64_t layers = attention->rank() == 4 ? shape[0] : 1;
  const std::int64_t heads_per_layer = attention->rank() >= 3 ? shape[attention->rank() - 3] : 1;
  for (std::int64_t l = 0; l < layers; ++l)
    for (std::int64_t h = 0; h < heads_per_layer; ++h) {
      analysis::HeadInput head;
      head.layer = static_cast<int>(l);
      head.head = static_cast<int>(h);
      std::vector<std::int64_t> prefix;
      if (attention->rank() == 4) prefix = {l, h};
      else if (attention->rank() == 3) prefix = {h};
      head.attention = attention->slice_matrix<double>(prefix);
      heads.push_back(std::move(head));
    }
  return heads;
}

int command_report(int argc, char** argv) {
  Arguments arguments;
  arguments.value_option("csv").value_option("json").flag("basic");
  add_model_options(arguments);
  if (parse_subcommand(arguments, argc, argv, report_usage)) return 0;
  if (arguments.positional().size() != 1) throw usage_error("expected exactly one INPUT");
  const std::string input = arguments.positional()[0];
  const bool array_file = ends_with(input, ".npz") || ends_with(input, ".npy") || ends_with(input, ".safetensors");
  if (array_file && (arguments.has("tokens") || arguments.has("tokens-file") || arguments.has("generate") ||
                     arguments.has("map")))
    throw usage_error("--tokens, --tokens-file, --generate and --map apply to a checkpoint INPUT only");

  std::vector<analysis::HeadInput> heads;
  if (array_file) {
    heads = heads_from_arrays(read_arrays(input), input);
  } else {
    model::CaptureOptions capture;
    capture.scores = capture.attention = capture.v = true;
    const CaptureRun run = run_capture(model_request(arguments, input, 255), capture);
    heads = analysis::head_inputs(run.result);
  }
  const auto start = std::chrono::steady_clock::now();
  analysis::HeadReport report;
  {
    attnscope::cli::ProgressBar bar("report");
    report = analysis::compute_head_report(
        heads, arguments.has("basic") ? analysis::default_report_columns() : analysis::all_report_columns(), bar.callback());
  }
  const Index length = heads.front().attention.rows();
  std::cout << "# " << input << ": " << heads.size() << " heads, L = " << length << " (report "
            << milliseconds_since(start) << " ms)\n"
            << analysis::head_report_table(report);
  if (arguments.has("csv")) io::write_file(arguments.get("csv"), analysis::head_report_csv(report));
  if (arguments.has("json")) io::write_file(arguments.get("json"), analysis::head_report_json(report).dump(2) + "\n");
  return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// normalize

template <class Scalar>
io::Array normalize_rows(const attnscope::NormalizationMap& map, const io::Array& input) {
  const auto& shape = input.shape();
  const std::int64_t cols = shape.back();
  const std::int64_t rows = cols == 0 ? 0 : input.element_count() / cols;
  if (rows == 0 || cols == 0)
    attnscope::detail::throw_invalid_argument("normalize", "empty array of shape ", io::detail::shape_string(shape));
  const std::vector<Scalar> values = input.to_vector<Scalar>();
  const Eigen::Map<const RowMatrix<Scalar>> logits(values.data(), rows, cols);
  attnscope::Mask mask(rows, cols);
  bool masked = false;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      mask(i, j) = !(std::isinf(logits(i, j)) && logits(i, j) < 0);
      masked = masked || !mask(i, j);
    }
  const attnscope::Visibility visibility = masked ? attnscope::Visibility(mask) : attnscope::Visibility();
  const RowMatrix<Scalar> weights = attnscope::apply_map(map, logits, visibility);
  return io::Array::from_vector(std::vector<Scalar>(weights.data(), weights.data() + weights.size()), shape);
}

int command_normalize(int argc, char** argv) {
  Arguments arguments;
  arguments.value_option("map").value_option("out", "-o");
  if (parse_subcommand(arguments, argc, argv, normalize_usage)) return 0;
  if (arguments.positional().size() != 1) throw usage_error("expected exactly one input .npy file");
  const attnscope::NormalizationMap map = attnscope::parse_normalization_map(arguments.require("map"));
  const std::string out = arguments.require("out");
  const io::Array input = io::read_npy(arguments.positional()[0]);
  if (input.rank() == 0) throw usage_error("input is a scalar; need an array of rank >= 1");
  const io::Array output = input.dtype() == io::DType::float32 ? normalize_rows<float>(map, input)
                                                               : normalize_rows<double>(map, input);
  io::write_npy(out, output);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  const char* usage = command == "capture"     ? capture_usage
                      : command == "report"    ? report_usage
                      : command == "normalize" ? normalize_usage
                                               : general_usage;
  try {
    if (command == "capture") return command_capture(argc, argv);
    if (command == "report") return command_report(argc, argv);
    if (command == "normalize") return command_normalize(argc, argv);
    if (command == "--help" || command == "-h" || command == "help") {
      std::cout << general_usage;
      return 0;
    }
    if (command == "--version") {
      std::cout << "attnscope 0.1.0\n";
      return 0;
    }
    std::cerr << (command.empty() ? std::string("attnscope: missing command")
                                  : "attnscope: unknown command '" + command + "'")
              << "\n\n"
              << general_usage;
    return 2;
  } catch (const usage_error& error) {
    std::cerr << "attnscope " << command << ": " << error.what() << "\n\n" << usage;
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "attnscope " << command << ": error: " << error.what() << "\n";
    return 1;
  }
}
