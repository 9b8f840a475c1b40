// Shared inputs of the composition reproductions: the real model and its sequences (stories260K: its greedy sequence
// from BOS and seeded sampled sequences at temperature 1; a Hugging Face folder given with `--model DIR`, e.g. GPT-2 or
// gpt2-wp-mini: passages of War and Peace), per-head attention rows in double, and synthetic heads with a known sink
// and content (docs/theory/composition.md, "Reproduction targets").
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "attnscope/composition.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/model.hpp"
#include "attnscope/model/load.hpp"
#include "attnscope/text.hpp"
#include "support/example.hpp"
#include "support/war_and_peace.hpp"

namespace attnscope::examples::composition_data {

constexpr int kBos = 1;
constexpr int kSequenceLength = 256;                       // BOS + 255 generated tokens
constexpr std::uint64_t kSampleSeeds[] = {1, 2, 3};        // sampled sequences used for the analyses
constexpr std::uint64_t kHeldOutSeeds[] = {101, 102, 103};  // held-out sampled text for the pruning NLL
constexpr Index kFirstRow = 2;  // causal rows 0 and 1 have fewer than 2 content keys: skipped (docs/theory/composition.md §7)

/// The rows analysed per head: query rows kFirstRow..L−1 of the causal attention (row r sees keys 0..r+kFirstRow).
inline Visibility analysed_rows() { return Visibility{Causal{kFirstRow}}; }

/// A named token sequence.
struct Sequence {
  std::string name;
  std::vector<int> tokens;
};

/// stories260K's greedy sequence from BOS and one sampled sequence per seed (temperature 1).
inline std::vector<Sequence> model_sequences(const model::Transformer& llama, bool quick,
                                             const std::vector<std::uint64_t>& seeds = {std::begin(kSampleSeeds),
                                                                                        std::end(kSampleSeeds)}) {
  const int steps = (quick ? 96 : kSequenceLength) - 1;
  std::vector<Sequence> out;
  out.push_back({"greedy", llama.generate_greedy({kBos}, steps)});
  for (std::uint64_t seed : seeds)
    out.push_back({"sampled(seed=" + std::to_string(seed) + ",T=1)", llama.generate_sampled({kBos}, steps, 1.0, seed)});
  return out;
}

/// Attention rows of every head (index layer·n_heads + head) for a forward pass, rows kFirstRow.., in double.
inline std::vector<RowMatrix<double>> head_attention(const model::Transformer& llama, const std::vector<int>& tokens,
                                                     const model::ForwardOptions& base = {}) {
  model::ForwardOptions options = base;
  options.capture.attention = true;
  const model::ForwardResult result = llama.forward(tokens, options);
  std::vector<RowMatrix<double>> heads;
  for (const auto& layer : result.layers)
    for (const auto& attention : layer.attention) {
      const Index rows = attention.rows() - kFirstRow;
      heads.push_back(attention.bottomRows(rows).cast<double>());
    }
  return heads;
}

/// The real model of a reproduction with its analysed sequences and held-out text.
struct ModelInputs {
  model::Transformer transformer;
  std::string label;               // "stories260K" or the model folder's name (a column of REPORT.md)
  std::string description;         // one sentence for the report
  std::vector<Sequence> analysis;  // sequences whose attention rows are analysed
  std::vector<Sequence> held_out;  // text for the pruning NLL, never used to rank heads
  int heads_per_layer() const { return transformer.config().n_heads; }
  Index head_count() const { return static_cast<Index>(transformer.config().n_layers) * heads_per_layer(); }
};

/// Tokens per War and Peace passage of a model folder (stories260K's sequences have 256 tokens too).
inline Index passage_length(const Options& options) { return options.quick ? 96 : kSequenceLength; }

/// stories260K (default; greedy + sampled seeds 1–3, held out: sampled seeds 101–103) or the Hugging Face folder of
/// `--model DIR`: 4 passages of War and Peace for the analysis (starting at 1/8, 3/8, 5/8, 7/8 of the book) and 3
/// others held out (at 1/6, 1/2, 5/6), passage_length() tokens of the folder's tokenizer each.
inline ModelInputs model_inputs(const Options& options) {
  const std::string folder = options.get("model");
  if (folder.empty()) {
    ModelInputs in{model::load_model((options.data_dir / "stories260K.bin").string()), "stories260K", "", {}, {}};
    in.analysis = model_sequences(in.transformer, options.quick);
    in.held_out = model_sequences(in.transformer, options.quick, {std::begin(kHeldOutSeeds), std::end(kHeldOutSeeds)});
    in.held_out.erase(in.held_out.begin());  // only the sampled sequences
    in.description = "stories260K (5 layers × 8 heads = 40 heads, head_dim 8) on its greedy sequence from BOS and "
                     "sequences sampled at T = 1 with seeds 1, 2, 3 (" + std::to_string(in.analysis.front().tokens.size()) +
                     " tokens each)";
    return in;
  }
  ModelInputs in{model::load_model(folder), std::filesystem::path(folder).filename().string(), "", {}, {}};
  if (in.label.empty()) in.label = std::filesystem::path(folder).parent_path().filename().string();
  const auto tokenizer = text::ByteLevelBpeTokenizer::from_folder(folder);
  const Index length = std::min<Index>(passage_length(options), in.transformer.config().seq_len);
  const auto analysis = war_and_peace_passages(options, tokenizer, 4, length);
  const auto held_out = war_and_peace_passages(options, tokenizer, 3, length);
  for (std::size_t i = 0; i < analysis.size(); ++i)
    in.analysis.push_back({"passage at " + std::to_string(2 * i + 1) + "/8", analysis[i]});
  for (std::size_t i = 0; i < held_out.size(); ++i)
    in.held_out.push_back({"passage at " + std::to_string(2 * i + 1) + "/6", held_out[i]});
  const auto& config = in.transformer.config();
  in.description = "the " + config.architecture + " model folder `" + in.label + "` (" + std::to_string(config.n_layers) +
                   " layers × " + std::to_string(config.n_heads) + " heads = " + std::to_string(in.head_count()) +
                   " heads, head_dim " + std::to_string(config.head_size()) + ", given with --model) on 4 passages of "
                   "War and Peace of " + std::to_string(length) + " tokens (starting at 1/8, 3/8, 5/8, 7/8 of the book)";
  return in;
}

/// "L<layer>H<head>" label of a head index.
inline std::string head_label(Index index, int heads_per_layer) {
  return "L" + std::to_string(index / heads_per_layer) + "H" + std::to_string(index % heads_per_layer);
}

/// Synthetic heads with known channels: head h has its own sink level (rows a = (s, (1−s)·c), s ~ Beta(α_h, 1)
/// around the head's level) and one of `patterns` content patterns (Dirichlet(1) rows shared by the heads of that
/// pattern, perturbed per head), causal rows of `keys` keys. Returns heads; fills the true mean sink mass.
inline std::vector<RowMatrix<double>> synthetic_heads(Random& random, int count, int patterns, Index rows, Index keys,
                                                      Vector<double>& true_sink_mass) {
  const Visibility visibility = analysed_rows();
  std::vector<RowMatrix<double>> pattern_rows;
  auto exponential = [&random] {
    double u;
    do u = random.uniform(); while (u <= 0.0);
    return -std::log(u);
  };
  for (int p = 0; p < patterns; ++p) {
    RowMatrix<double> content = RowMatrix<double>::Zero(rows, keys);
    for (Index i = 0; i < rows; ++i)
      for (Index j = 1; j < keys; ++j)
        if (visibility.visible(i, j, keys)) content(i, j) = std::pow(exponential(), 2.0);  // peaky content
    pattern_rows.push_back(content);
  }
  std::vector<RowMatrix<double>> heads;
  true_sink_mass.resize(count);
  for (int h = 0; h < count; ++h) {
    const double alpha = 0.3 + 8.0 * random.uniform();  // Beta(α, 1): mean α/(α+1) from 0.23 to 0.9
    RowMatrix<double> head = pattern_rows[static_cast<std::size_t>(h % patterns)];
    double sink_total = 0;
    for (Index i = 0; i < rows; ++i) {
      for (Index j = 1; j < keys; ++j)
        if (visibility.visible(i, j, keys)) head(i, j) *= std::exp(0.3 * random.normal());  // per-head noise
      const double s = std::pow(random.uniform(1e-9, 1.0), 1.0 / alpha) * 0.999;
      head.row(i).tail(keys - 1) *= (1 - s) / head.row(i).tail(keys - 1).sum();
      head(i, 0) = s;
      sink_total += s;
    }
    true_sink_mass(h) = sink_total / static_cast<double>(rows);
    heads.push_back(head);
  }
  return heads;
}

/// Head-by-head mean metrics under both conventions for one set of matched heads.
struct HeadMetrics {
  RowMatrix<double> cosine_keep, cosine_drop, js_keep, js_drop;
  Vector<double> entropy_keep, entropy_drop;  // per head mean H(a), mean H(c)
  Vector<double> sink_mass;                   // per head mean s
};

inline HeadMetrics convention_matrices(const std::vector<RowMatrix<double>>& heads, const Visibility& visibility) {
  const Index count = static_cast<Index>(heads.size());
  HeadMetrics out;
  out.entropy_keep.resize(count);
  out.entropy_drop.resize(count);
  out.sink_mass.resize(count);
  for (Index h = 0; h < count; ++h) {
    const auto split = composition::entropy_split(heads[static_cast<std::size_t>(h)], visibility);
    out.entropy_keep(h) = split.entropy.mean();
    out.entropy_drop(h) = split.content_entropy.mean();
    out.sink_mass(h) = split.sink_mass.mean();
  }
  const auto cosine = composition::pair_metric_matrices(heads, composition::Metric::cosine, visibility);
  const auto js = composition::pair_metric_matrices(heads, composition::Metric::jensen_shannon, visibility);
  out.cosine_keep = cosine.keep, out.cosine_drop = cosine.drop, out.js_keep = js.keep, out.js_drop = js.drop;
  return out;
}

/// Element-wise mean of equally shaped matrices.
inline RowMatrix<double> mean_of(const std::vector<RowMatrix<double>>& matrices) {
  RowMatrix<double> total = RowMatrix<double>::Zero(matrices.front().rows(), matrices.front().cols());
  for (const auto& m : matrices) total += m;
  return total / static_cast<double>(matrices.size());
}

}  // namespace attnscope::examples::composition_data
