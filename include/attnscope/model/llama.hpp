// attnscope/model/llama.hpp — Llama (llama2.c) forward pass over a whole token sequence in matrix form, with
// per-layer, per-head capture, swappable attention normalization, head ablation, generation and likelihood.
#pragma once

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <numeric>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/io/llama2c.hpp"
#include "attnscope/model/layers.hpp"
#include "attnscope/normalize/maps.hpp"
#include "attnscope/normalize/softmax.hpp"

namespace attnscope::model {

/// What forward() records besides the logits; everything off by default so callers pay only for what they ask.
struct CaptureOptions {
  bool q = false;            // queries after RoPE, per head (L × head_size)
  bool k = false;            // keys after RoPE, per query head (L × head_size; GQA: copy of the shared kv head)
  bool v = false;            // values, per query head (L × head_size; GQA: copy of the shared kv head)
  bool scores = false;       // scaled scores q·k/√head_size (L × L; future entries −inf)
  bool attention = false;    // attention weights after the normalization map (L × L; future entries 0)
  bool head_output = false;  // attention · V of each head before wo, after ablation (L × head_size)
  bool hidden_states = false;  // residual stream at each layer input, then before the final RMSNorm (L × dim)

  /// Every flag on.
  static CaptureOptions everything() { return {true, true, true, true, true, true, true}; }
  /// Scores and attention only (what the per-head report needs).
  static CaptureOptions attention_only() {
    CaptureOptions options;
    options.scores = options.attention = true;
    return options;
  }
  bool any_head_capture() const { return q || k || v || scores || attention || head_output; }
};

/// A normalization of attention scores: gets the scaled scores of one head (rows = queries, future entries −inf)
/// and the causal visibility, returns weights of the same shape (entries outside the visibility are set to 0).
using AttentionNormalizer =
    std::function<RowMatrix<float>(const RowMatrix<float>& scaled_scores, const Visibility& visibility)>;

/// How an ablated head's output (attention · V, before wo) is replaced.
enum class AblationMode {
  zero,  // by 0 (head pruning)
  mean,  // [derived] by the running mean of that head's output over positions 0..p (keeps the pass causal)
};

/// Options of a forward pass.
struct ForwardOptions {
  CaptureOptions capture{};
  /// Attention normalization map applied to each head's scaled scores (apply_map with causal visibility), e.g.
  /// parse_normalization_map("ssmax:0.43"); empty = softmax (llama2.c). Mutually exclusive with `normalizer`.
  std::optional<NormalizationMap> map{};
  /// Any other normalization as a callable (see AttentionNormalizer). Mutually exclusive with `map`.
  AttentionNormalizer normalizer{};
  /// (layer, head) pairs whose head output is replaced inside the pass, see ablation_mode.
  std::set<std::pair<int, int>> ablated_heads{};
  AblationMode ablation_mode = AblationMode::zero;
};

/// Per-head captures of one layer; each vector has n_heads entries (or is empty when not requested).
struct LayerCapture {
  std::vector<RowMatrix<float>> q, k, v, scores, attention, head_output;
};

/// Result of forward(): logits (L × vocab) and the requested captures.
struct ForwardResult {
  RowMatrix<float> logits;
  std::vector<LayerCapture> layers;              // n_layers entries when any per-head capture is requested
  std::vector<RowMatrix<float>> hidden_states;  // n_layers + 1 entries when requested
};

/// Progress callback: (steps done, total steps).
using ProgressCallback = std::function<void(int, int)>;

namespace detail {

/// Cache of one decoding run: keys after RoPE and values of every layer for the positions processed so far,
/// and the running sums of each head's output (for mean ablation).
struct DecoderState {
  std::vector<RowMatrix<float>> keys, values;          // per layer: capacity × kv_dim
  std::vector<RowMatrix<double>> head_output_sums;     // per layer: n_heads × head_size
  Index length = 0;                                    // positions processed
};

/// Numerically stable log-softmax entry: logits[target] − log Σ exp(logits), in double.
template <class Derived>
double log_probability(const Eigen::MatrixBase<Derived>& logits, Index target) {
  double max_value = -std::numeric_limits<double>::infinity();
  for (Index j = 0; j < logits.size(); ++j) max_value = std::max(max_value, double(logits(j)));
  double sum = 0;
  for (Index j = 0; j < logits.size(); ++j) sum += std::exp(double(logits(j)) - max_value);
  return double(logits(target)) - max_value - std::log(sum);
}

}  // namespace detail

/// Index of the largest logit, the first one on ties (run.c argmax). Throws on an empty row. O(n).
template <class Derived>
int argmax_token(const Eigen::MatrixBase<Derived>& logits) {
  if (logits.size() == 0) attnscope::detail::throw_invalid_argument("argmax_token", "empty logits");
  Index best = 0;
  for (Index j = 1; j < logits.size(); ++j)
    if (logits(j) > logits(best)) best = j;
  return static_cast<int>(best);
}

/// Draws a token from softmax(logits / temperature) by inverse-CDF sampling with one uniform from `random`
/// (run.c sample_mult, computed in double). Throws on empty or non-finite logits or a temperature that is not
/// finite and > 0. O(n).
template <class Derived>
int sample_token(const Eigen::MatrixBase<Derived>& logits, double temperature, Random& random) {
  const char* fn = "sample_token";
  if (logits.size() == 0) attnscope::detail::throw_invalid_argument(fn, "empty logits");
  attnscope::detail::require_positive(fn, "temperature", temperature);
  std::vector<double> row(static_cast<std::size_t>(logits.size())), weights(row.size());
  for (Index j = 0; j < logits.size(); ++j) {
    row[std::size_t(j)] = double(logits(j));
    if (!std::isfinite(row[std::size_t(j)]))
      attnscope::detail::throw_invalid_argument(fn, "non-finite logit ", logits(j), " at index ", j);
  }
  attnscope::detail::softmax_row(row.data(), logits.size(), 1.0 / temperature, weights.data());  // softmax(z / T)
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);  // 1 up to rounding
  const double coin = random.uniform() * sum;
  double cumulative = 0;
  for (Index j = 0; j < logits.size(); ++j) {
    cumulative += weights[std::size_t(j)];
    if (coin < cumulative) return static_cast<int>(j);
  }
  return static_cast<int>(logits.size() - 1);  // rounding: coin ≥ the final cumulative sum
}

/// A Llama-architecture transformer (llama2.c run.c): RMSNorm, RoPE, grouped-query attention, SwiGLU FFN,
/// tied or untied classifier, float32. The forward pass processes a whole sequence with matrix products.
class LlamaModel {
 public:
  /// Takes the weights (e.g. from io::read_llama2c); throws attnscope::invalid_argument on inconsistent shapes.
  explicit LlamaModel(io::LlamaWeights weights) : weights_(std::move(weights)) { validate_weights(); }

  /// Reads a llama2.c checkpoint (io::read_llama2c; throws attnscope::io_error on a bad file).
  static LlamaModel load(const std::string& path) { return LlamaModel(io::read_llama2c(path)); }

  const io::LlamaConfig& config() const { return weights_.config; }
  const io::LlamaWeights& weights() const { return weights_; }

  /// Forward pass over tokens[0..L) at positions 0..L−1: logits (L × vocab) and the requested captures.
  /// Throws attnscope::invalid_argument for empty input, L > seq_len, a token outside [0, vocab), an ablated head
  /// outside the model, or a normalizer that returns a wrong shape or non-finite weights.
  /// Cost O(n_layers·(L·dim·(dim + hidden) + n_heads·L²·head_size)) + O(L·vocab·dim).
  ForwardResult forward(const std::vector<int>& tokens, const ForwardOptions& options = {}) const {
    validate_tokens("forward", tokens);
    validate_options("forward", options);
    detail::DecoderState state = start_state(static_cast<Index>(tokens.size()));
    ForwardResult result;
    result.logits = run(tokens, state, options, &result, false);
    return result;
  }

  /// Greedy decoding (argmax, first index on ties, as run.c): returns prefix followed by `steps` new tokens.
  /// Uses a key/value cache, so each step costs one row of the forward pass. Throws if prefix is invalid, steps < 0
  /// or prefix.size() + steps > seq_len. Capture flags in options are ignored.
  std::vector<int> generate_greedy(const std::vector<int>& prefix, int steps, const ForwardOptions& options = {},
                                   const ProgressCallback& progress = {}) const {
    return generate("generate_greedy", prefix, steps, options, progress,
                    [](const RowMatrix<float>& logits) { return argmax_token(logits.row(0)); });
  }

  /// Sampling from softmax(logits / temperature) with attnscope::Random(seed) (deterministic for a seed);
  /// temperature 0 means greedy (as run.c). Returns prefix followed by `steps` new tokens. Throws like
  /// generate_greedy and for a negative or non-finite temperature.
  std::vector<int> generate_sampled(const std::vector<int>& prefix, int steps, double temperature,
                                    std::uint64_t seed, const ForwardOptions& options = {},
                                    const ProgressCallback& progress = {}) const {
    if (!(temperature >= 0) || !std::isfinite(temperature))
      attnscope::detail::throw_invalid_argument("generate_sampled", "temperature must be finite and >= 0, got ",
                                                temperature);
    Random random(seed);
    return generate("generate_sampled", prefix, steps, options, progress,
                    [&](const RowMatrix<float>& logits) -> int {
                      if (temperature == 0) return argmax_token(logits.row(0));
                      return sample_token(logits.row(0), temperature, random);
                    });
  }

  /// Teacher-forced mean negative log-likelihood (nats/token): mean over p in [0, L−1) of
  /// −log softmax(logits[p])[tokens[p+1]], computed in double from the float logits. Needs L ≥ 2.
  double mean_negative_log_likelihood(const std::vector<int>& tokens, const ForwardOptions& options = {}) const {
    if (tokens.size() < 2)
      attnscope::detail::throw_invalid_argument("mean_negative_log_likelihood", "need at least 2 tokens, got ",
                                                tokens.size());
    ForwardOptions plain = options;
    plain.capture = CaptureOptions{};
    const ForwardResult result = forward(tokens, plain);
    double total = 0;
    for (std::size_t p = 0; p + 1 < tokens.size(); ++p)
      total -= detail::log_probability(result.logits.row(static_cast<Index>(p)), tokens[p + 1]);
    return total / static_cast<double>(tokens.size() - 1);
  }

 private:
  io::LlamaWeights weights_;

  template <class Choose>
  std::vector<int> generate(const char* function, const std::vector<int>& prefix, int steps,
                            const ForwardOptions& options, const ProgressCallback& progress, Choose&& choose) const {
    validate_tokens(function, prefix);
    validate_options(function, options);
    if (steps < 0) attnscope::detail::throw_invalid_argument(function, "steps must be >= 0, got ", steps);
    const Index total = static_cast<Index>(prefix.size()) + steps;
    if (total > config().seq_len)
      attnscope::detail::throw_invalid_argument(function, "prefix length ", prefix.size(), " + steps ", steps,
                                                " exceeds seq_len ", config().seq_len);
    ForwardOptions plain = options;
    plain.capture = CaptureOptions{};
    std::vector<int> tokens = prefix;
    if (steps == 0) return tokens;
    detail::DecoderState state = start_state(total);
    RowMatrix<float> last_logits = run(prefix, state, plain, nullptr, true);
    for (int step = 0; step < steps; ++step) {
      const int next = choose(last_logits);
      tokens.push_back(next);
      if (progress) progress(step + 1, steps);
      if (step + 1 < steps) last_logits = run({next}, state, plain, nullptr, true);
    }
    return tokens;
  }

  void validate_weights() const {
    const auto& c = weights_.config;
    const char* fn = "LlamaModel";
    if (const std::string problem = io::detail::llama_config_problem(c); !problem.empty())
      attnscope::detail::throw_invalid_argument(fn, "invalid configuration: ", problem);
    const Index dim = c.dim, hidden = c.hidden_dim, kv_dim = Index(c.dim) / c.n_heads * c.n_kv_heads;
    auto shape = [&](const char* name, Index rows, Index cols, Index want_rows, Index want_cols) {
      if (rows != want_rows || cols != want_cols)
        attnscope::detail::throw_invalid_argument(fn, name, " has shape ", rows, "x", cols, ", expected ", want_rows,
                                                  "x", want_cols);
    };
    shape("token_embedding", weights_.token_embedding.rows(), weights_.token_embedding.cols(), c.vocab_size, dim);
    shape("classifier", weights_.classifier.rows(), weights_.classifier.cols(), c.vocab_size, dim);
    shape("rms_final", weights_.rms_final.size(), 1, dim, 1);
    if (weights_.layers.size() != static_cast<std::size_t>(c.n_layers))
      attnscope::detail::throw_invalid_argument(fn, "have ", weights_.layers.size(), " layers, config says ",
                                                c.n_layers);
    for (const auto& layer : weights_.layers) {
      shape("rms_attention", layer.rms_attention.size(), 1, dim, 1);
      shape("rms_ffn", layer.rms_ffn.size(), 1, dim, 1);
      shape("wq", layer.wq.rows(), layer.wq.cols(), dim, dim);
      shape("wk", layer.wk.rows(), layer.wk.cols(), kv_dim, dim);
      shape("wv", layer.wv.rows(), layer.wv.cols(), kv_dim, dim);
      shape("wo", layer.wo.rows(), layer.wo.cols(), dim, dim);
      shape("w1", layer.w1.rows(), layer.w1.cols(), hidden, dim);
      shape("w2", layer.w2.rows(), layer.w2.cols(), dim, hidden);
      shape("w3", layer.w3.rows(), layer.w3.cols(), hidden, dim);
    }
  }

  void validate_tokens(const char* function, const std::vector<int>& tokens) const {
    if (tokens.empty()) attnscope::detail::throw_invalid_argument(function, "empty token sequence");
    if (tokens.size() > static_cast<std::size_t>(config().seq_len))
      attnscope::detail::throw_invalid_argument(function, "sequence length ", tokens.size(), " exceeds seq_len ",
                                                config().seq_len);
    for (std::size_t p = 0; p < tokens.size(); ++p)
      if (tokens[p] < 0 || tokens[p] >= config().vocab_size)
        attnscope::detail::throw_invalid_argument(function, "token ", tokens[p], " at position ", p,
                                                  " outside [0, vocab_size = ", config().vocab_size, ")");
  }

  void validate_options(const char* function, const ForwardOptions& options) const {
    if (options.map && options.normalizer)
      attnscope::detail::throw_invalid_argument(function, "set either options.map or options.normalizer, not both");
    if (options.map) attnscope::detail::validate_map(function, *options.map);
    for (const auto& [layer, head] : options.ablated_heads)
      if (layer < 0 || layer >= config().n_layers || head < 0 || head >= config().n_heads)
        attnscope::detail::throw_invalid_argument(function, "ablated head (", layer, ", ", head,
                                                  ") outside the model's ", config().n_layers, " layers x ",
                                                  config().n_heads, " heads");
  }

  detail::DecoderState start_state(Index capacity) const {
    const auto& c = config();
    const Index kv_dim = Index(c.dim) / c.n_heads * c.n_kv_heads;
    detail::DecoderState state;
    state.keys.assign(std::size_t(c.n_layers), RowMatrix<float>(capacity, kv_dim));
    state.values.assign(std::size_t(c.n_layers), RowMatrix<float>(capacity, kv_dim));
    state.head_output_sums.assign(std::size_t(c.n_layers), RowMatrix<double>::Zero(c.n_heads, c.dim / c.n_heads));
    return state;
  }

  RowMatrix<float> normalize(const RowMatrix<float>& scores, Index offset, const ForwardOptions& options) const {
    const Visibility visibility = Causal{offset};
    if (options.map) return apply_map(*options.map, scores, visibility);
    if (!options.normalizer) return softmax(scores, 1.0f, visibility);  // run.c softmax
    RowMatrix<float> weights = options.normalizer(scores, visibility);
    attnscope::detail::require_same_shape("LlamaModel::forward", "normalizer output/scores", weights.rows(),
                                          weights.cols(), scores.rows(), scores.cols());
    for (Index i = 0; i < weights.rows(); ++i)
      for (Index j = 0; j < weights.cols(); ++j) {
        if (!visibility.visible(i, j, weights.cols())) weights(i, j) = 0.0f;
        else if (!std::isfinite(weights(i, j)))
          attnscope::detail::throw_invalid_argument("LlamaModel::forward", "normalizer returned ", weights(i, j),
                                                    " at row ", i, ", column ", j);
      }
    return weights;
  }

  // Processes `tokens` at positions state.length.. (appending to the cache); returns logits of every new row, or of
  // the last one only. Fills `capture` (rows = new positions, score columns = all positions so far) when given.
  RowMatrix<float> run(const std::vector<int>& tokens, detail::DecoderState& state, const ForwardOptions& options,
                       ForwardResult* capture, bool last_logits_only) const {
    const auto& c = config();
    const Index rows = static_cast<Index>(tokens.size()), offset = state.length, total = offset + rows;
    const Index head_size = c.dim / c.n_heads, heads_per_kv = c.n_heads / c.n_kv_heads;
    const float score_divisor = std::sqrt(static_cast<float>(head_size));
    const CaptureOptions want = capture ? options.capture : CaptureOptions{};
    if (capture && want.any_head_capture()) capture->layers.resize(std::size_t(c.n_layers));

    RowMatrix<float> residual(rows, c.dim);
    for (Index r = 0; r < rows; ++r) residual.row(r) = weights_.token_embedding.row(tokens[std::size_t(r)]);

    for (int l = 0; l < c.n_layers; ++l) {
      const auto& layer = weights_.layers[std::size_t(l)];
      if (want.hidden_states) capture->hidden_states.push_back(residual);
      // Attention block (run.c forward): RMSNorm, q/k/v projections, RoPE, per-head causal attention, wo.
      const RowMatrix<float> normed = rms_norm(residual, layer.rms_attention);
      RowMatrix<float> queries = normed * layer.wq.transpose();
      RowMatrix<float> new_keys = normed * layer.wk.transpose();
      apply_rope(queries, head_size, offset);
      apply_rope(new_keys, head_size, offset);
      RowMatrix<float>& keys = state.keys[std::size_t(l)];
      RowMatrix<float>& values = state.values[std::size_t(l)];
      keys.middleRows(offset, rows) = new_keys;
      values.middleRows(offset, rows).noalias() = normed * layer.wv.transpose();

      RowMatrix<float> head_outputs(rows, c.dim);
      LayerCapture* layer_capture = want.any_head_capture() ? &capture->layers[std::size_t(l)] : nullptr;
      for (int h = 0; h < c.n_heads; ++h) {
        const Index kv_head = h / heads_per_kv;
        const auto head_queries = queries.middleCols(h * head_size, head_size);
        const auto head_keys = keys.topRows(total).middleCols(kv_head * head_size, head_size);
        const auto head_values = values.topRows(total).middleCols(kv_head * head_size, head_size);
        // Scaled scores q·k/√head_size (Vaswani et al. 2017, eq. 1; run.c divides by sqrtf(head_size)).
        RowMatrix<float> scores = (head_queries * head_keys.transpose()) / score_divisor;
        for (Index i = 0; i < rows; ++i)
          for (Index j = offset + i + 1; j < total; ++j) scores(i, j) = -std::numeric_limits<float>::infinity();
        RowMatrix<float> attention = normalize(scores, offset, options);
        RowMatrix<float> output = attention * head_values;
        accumulate_and_ablate(state, options, l, h, output);
        head_outputs.middleCols(h * head_size, head_size) = output;
        if (layer_capture) {
          if (want.q) layer_capture->q.emplace_back(head_queries);
          if (want.k) layer_capture->k.emplace_back(head_keys);
          if (want.v) layer_capture->v.emplace_back(head_values);
          if (want.scores) layer_capture->scores.push_back(std::move(scores));
          if (want.attention) layer_capture->attention.push_back(std::move(attention));
          if (want.head_output) layer_capture->head_output.push_back(std::move(output));
        }
      }
      residual.noalias() += head_outputs * layer.wo.transpose();
      // Feed-forward block: w2(silu(w1 x) ⊙ w3 x) (run.c; Shazeer 2020 SwiGLU).
      const RowMatrix<float> normed_ffn = rms_norm(residual, layer.rms_ffn);
      const RowMatrix<float> gate = normed_ffn * layer.w1.transpose();
      const RowMatrix<float> up = normed_ffn * layer.w3.transpose();
      residual.noalias() += swiglu_gate(gate, up) * layer.w2.transpose();
    }
    state.length = total;
    if (want.hidden_states) capture->hidden_states.push_back(residual);
    // Final RMSNorm then classifier (run.c).
    if (last_logits_only) {
      const RowMatrix<float> last = rms_norm(residual.bottomRows(1), weights_.rms_final);
      return last * weights_.classifier.transpose();
    }
    const RowMatrix<float> normed_final = rms_norm(residual, weights_.rms_final);
    return normed_final * weights_.classifier.transpose();
  }

  // Adds each row of a head's output to the running sum (mean ablation), then applies the ablation if requested.
  void accumulate_and_ablate(detail::DecoderState& state, const ForwardOptions& options, int layer, int head,
                             RowMatrix<float>& output) const {
    const bool ablated = options.ablated_heads.count({layer, head}) > 0;
    if (!ablated) return;
    if (options.ablation_mode == AblationMode::zero) {
      output.setZero();
      return;
    }
    auto sum = state.head_output_sums[std::size_t(layer)].row(head);
    for (Index i = 0; i < output.rows(); ++i) {
      sum += output.row(i).cast<double>();
      const double count = static_cast<double>(state.length + i + 1);
      output.row(i) = (sum / count).cast<float>();
    }
  }
};

}  // namespace attnscope::model
