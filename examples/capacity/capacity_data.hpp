// Inputs of the capacity reproductions: per-head attention, scaled scores and value vectors of real sequences, from
// stories260K (default: its 256-token greedy sequence and seeded sampled sequences from BOS at temperature 1), from
// a Hugging Face model folder (`--model DIR`, e.g. GPT-2: passages of War and Peace, the normalization-limits
// paper's own setting) or from a capture file (`--capture FILE.npz`, arrays layer{i}.attention / layer{i}.scores
// [heads, L, L] and layer{i}.v [heads, L, d_head]).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/model.hpp"
#include "attnscope/model/load.hpp"
#include "attnscope/text.hpp"
#include "capacity/layer_inputs.hpp"
#include "support/example.hpp"
#include "support/spread.hpp"
#include "support/war_and_peace.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace attnscope::examples {

/// One sequence's captures, heads flattened layer-major (layer · heads_per_layer + head).
struct HeadCaptures {
  std::string name;                          // e.g. "greedy", "sampled seed 1", or the capture file name
  std::vector<RowMatrix<float>> attention;  // L × L, causal (future entries 0)
  std::vector<RowMatrix<float>> scores;     // L × L scaled pre-softmax scores (future entries may be −inf)
  std::vector<RowMatrix<float>> values;     // L × d_head
  std::vector<RowMatrix<float>> layer_input, normed_layer_input;  // per layer, L × dim (empty unless captured)
  Index heads_per_layer = 0;
  Index length() const { return attention.empty() ? 0 : attention.front().rows(); }
  /// Whether the x_i of `source` were captured (value vectors always; layer inputs with capture_layer_inputs).
  bool has(capacity::VectorSource source) const {
    return source == capacity::VectorSource::value ? !values.empty()
           : source == capacity::VectorSource::layer_input ? !layer_input.empty()
                                                            : !normed_layer_input.empty();
  }
  /// The x_i of head `head` (layer-major index) under `source`.
  const RowMatrix<float>& vectors(capacity::VectorSource source, std::size_t head) const {
    if (!has(source))
      detail::throw_invalid_argument("HeadCaptures::vectors", capacity::vector_source_name(source),
                                     " vectors were not captured for ", name);
    if (source == capacity::VectorSource::value) return values.at(head);
    const std::size_t layer = head / static_cast<std::size_t>(heads_per_layer);
    return source == capacity::VectorSource::layer_input ? layer_input.at(layer) : normed_layer_input.at(layer);
  }
};

/// Where the real-model inputs come from, for the report.
struct RealSource {
  std::string label;        // "stories260K" or the capture file name
  std::string description;  // one sentence for the report
  std::vector<HeadCaptures> sequences;
};

/// The top-left L × L block of every head (a causal model's captures for the first L tokens).
inline HeadCaptures prefix(const HeadCaptures& full, Index length) {
  HeadCaptures out;
  out.name = full.name;
  out.heads_per_layer = full.heads_per_layer;
  for (std::size_t h = 0; h < full.attention.size(); ++h) {
    out.attention.push_back(full.attention[h].topLeftCorner(length, length));
    out.scores.push_back(full.scores[h].topLeftCorner(length, length));
    out.values.push_back(full.values[h].topRows(length));
  }
  for (const auto& rows : full.layer_input) out.layer_input.push_back(rows.topRows(length));
  for (const auto& rows : full.normed_layer_input) out.normed_layer_input.push_back(rows.topRows(length));
  return out;
}

/// Runs a model on `tokens` and keeps attention, scores and values of every head, and with `layer_inputs` also the
/// residual stream entering each layer and its attention-norm output (capacity::VectorSource).
inline HeadCaptures capture_stories(const model::Transformer& llama, const std::vector<int>& tokens,
                                    const std::string& name, bool layer_inputs = false) {
  model::ForwardOptions options;
  options.capture.attention = options.capture.scores = options.capture.v = true;
  options.capture.hidden_states = layer_inputs;
  const model::ForwardResult result = llama.forward(tokens, options);
  HeadCaptures out;
  out.name = name;
  out.heads_per_layer = llama.config().n_heads;
  if (layer_inputs) {
    out.layer_input = layer_input_vectors(llama, result, capacity::VectorSource::layer_input);
    out.normed_layer_input = layer_input_vectors(llama, result, capacity::VectorSource::normed_layer_input);
  }
  for (const auto& layer : result.layers)
    for (std::size_t h = 0; h < layer.attention.size(); ++h) {
      out.attention.push_back(layer.attention[h]);
      out.scores.push_back(layer.scores[h]);
      out.values.push_back(layer.v[h]);
    }
  return out;
}

/// Reads a capture NPZ: layer0.attention, layer0.scores, layer0.v, layer1..., until a layer is missing.
inline HeadCaptures read_capture(const std::filesystem::path& path) {
  const auto arrays = io::read_npz(path.string());
  HeadCaptures out;
  out.name = path.filename().string();
  for (int layer = 0;; ++layer) {
    const std::string prefix_name = "layer" + std::to_string(layer) + ".";
    const auto attention = arrays.find(prefix_name + "attention");
    if (attention == arrays.end()) break;
    const auto scores = arrays.find(prefix_name + "scores");
    const auto values = arrays.find(prefix_name + "v");
    if (scores == arrays.end() || values == arrays.end())
      detail::throw_io_error("read_capture", path.string(), "layer ", layer, " lacks scores or v");
    const auto& shape = attention->second.shape();
    if (shape.size() != 3 || values->second.shape().size() != 3 || scores->second.shape() != shape ||
        values->second.shape()[0] != shape[0] || values->second.shape()[1] != shape[1] || shape[1] != shape[2])
      detail::throw_io_error("read_capture", path.string(), "layer ", layer,
                             ": expected attention/scores [heads, L, L] and v [heads, L, d]");
    out.heads_per_layer = shape[0];
    for (std::int64_t h = 0; h < shape[0]; ++h) {
      out.attention.push_back(attention->second.slice_matrix<float>({h}));
      out.scores.push_back(scores->second.slice_matrix<float>({h}));
      out.values.push_back(values->second.slice_matrix<float>({h}));
    }
  }
  if (out.attention.empty())
    detail::throw_io_error("read_capture", path.string(), "no layer0.attention array (capture layout expected)");
  return out;
}

/// The inputs from a Hugging Face model folder (`--model DIR`): `count` passages of War and Peace of
/// min(1024, max positions) tokens (128 with --quick), encoded by the folder's tokenizer.
inline RealSource model_folder_source(const Options& options, const std::string& folder, int count,
                                      bool layer_inputs = false) {
  const model::Transformer transformer = model::load_model(folder);
  const text::ByteLevelBpeTokenizer tokenizer = text::ByteLevelBpeTokenizer::from_folder(folder);
  const auto& config = transformer.config();
  const Index length = std::min<Index>(options.quick ? 128 : 1024, config.seq_len);
  RealSource source;
  source.label = std::filesystem::path(folder).filename().string();
  if (source.label.empty()) source.label = std::filesystem::path(folder).parent_path().filename().string();
  source.description = "the " + config.architecture + " model folder `" + source.label + "` (" +
                       std::to_string(config.n_layers) + " layers × " + std::to_string(config.n_heads) +
                       " heads, head_dim " + std::to_string(config.head_size()) + ", given with --model) on " +
                       std::to_string(count) + " passages of War and Peace of " + std::to_string(length) +
                       " tokens each, the normalization-limits paper's text";
  const auto passages = war_and_peace_passages(options, tokenizer, count, length);
  for (std::size_t i = 0; i < passages.size(); ++i)
    source.sequences.push_back(capture_stories(transformer, passages[i], "passage " + std::to_string(i + 1), layer_inputs));
  return source;
}

/// The real-model inputs (with `layer_inputs`, also each layer's input and normed input; not in capture files):
/// `--capture FILE.npz` if given, `--model DIR` if given, otherwise stories260K's greedy 256-token sequence and
/// `sampled` seeded sequences of `sampled_length` tokens sampled from BOS at temperature 1 (seeds 1, 2, ...).
inline RealSource real_source(const Options& options, int sampled = 3, int sampled_length = 512,
                              bool layer_inputs = false) {
  RealSource source;
  const std::string capture = options.get("capture");
  if (!capture.empty()) {
    source.label = std::filesystem::path(capture).filename().string();
    source.description = "capture file `" + source.label + "` (given with --capture)";
    source.sequences.push_back(read_capture(capture));
    return source;
  }
  const std::string folder = options.get("model");
  if (!folder.empty()) return model_folder_source(options, folder, std::max(sampled, 1) + 1, layer_inputs);
  const model::LlamaModel llama = model::LlamaModel::load((options.data_dir / "stories260K.bin").string());
  if (options.quick) sampled_length = std::min(sampled_length, 128);
  source.label = "stories260K";
  source.description = "stories260K (5 layers × 8 heads = 40 heads, head_dim 8): its greedy 256-token sequence from BOS";
  if (sampled > 0)
    source.description += " and " + std::to_string(sampled) + " sequences of " + std::to_string(sampled_length) +
                          " tokens sampled from BOS at temperature 1 (seeds 1.." + std::to_string(sampled) + ")";
  source.description += "; a Hugging Face model such as GPT-2 runs with --model DIR, captures with --capture FILE.npz";
  source.sequences.push_back(capture_stories(llama, llama.generate_greedy({1}, options.quick ? 127 : 255), "greedy",
                                             layer_inputs));
  for (int seed = 1; seed <= sampled; ++seed)
    source.sequences.push_back(capture_stories(
        llama, llama.generate_sampled({1}, sampled_length - 1, 1.0, static_cast<std::uint64_t>(seed)),
        "sampled seed " + std::to_string(seed), layer_inputs));
  return source;
}

/// Threads for the row loops: `--threads N` (default 1). Measured on the shared 2-core machine (load ≈ 10): the five
/// reproductions took 257 s wall with OpenMP's default 2 threads (each per-head row loop is a short parallel region,
/// and the hand-offs dominate when the cores are busy) and 86 s single-threaded; results are identical either way.
inline int configure_threads(const Options& options) {
  const int threads = std::stoi(options.get("threads", "1"));
  if (threads < 1) throw std::runtime_error("--threads must be >= 1");
#if defined(_OPENMP)
  omp_set_num_threads(threads);
#endif
  return threads;
}

/// Logarithmically spaced values from 10^low to 10^high.
inline std::vector<double> logspace(double low, double high, int count) {
  std::vector<double> out;
  for (int i = 0; i < count; ++i) out.push_back(std::pow(10.0, low + (high - low) * i / (count - 1)));
  return out;
}

}  // namespace attnscope::examples
