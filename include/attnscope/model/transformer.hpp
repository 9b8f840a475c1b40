// attnscope/model/transformer.hpp — one decoder-only transformer for every supported architecture (llama2.c,
// GPT-2, Llama, Mistral, Qwen2): a TransformerConfig says which norm, position encoding, biases and feed-forward a
// model uses, TransformerWeights hold its tensors, and Transformer runs the forward pass over a whole token sequence
// in matrix form with per-layer, per-head capture, swappable attention normalization, head ablation, generation and
// likelihood; forward_row_statistics is the streaming mode (blockwise softmax attention, exact per-row statistics
// from stream::row_statistics, no L×L matrix).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/model/layers.hpp"
#include "attnscope/normalize/maps.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "attnscope/stream/row_statistics.hpp"

namespace attnscope::model {

/// Normalization of the residual stream before each block and before the output head.
enum class NormKind {
  rms_norm,    // w ⊙ x / √(mean(x²) + ε) (Zhang & Sennrich 2019; llama2.c, Llama, Mistral, Qwen2)
  layer_norm,  // w ⊙ (x − mean) / √(var + ε) + b (Ba et al. 2016; GPT-2)
};

/// How positions enter the model.
enum class PositionEncoding {
  learned,           // a learned absolute embedding added to the token embedding (GPT-2 `wpe`)
  rope_interleaved,  // RoPE on pairs (2i, 2i+1) (llama2.c run.c)
  rope_rotate_half,  // RoPE on pairs (i, i + head_size/2) (Hugging Face Llama, Mistral, Qwen2)
};

/// The feed-forward block.
enum class FeedForwardKind {
  swiglu,     // w2(silu(w1 x) ⊙ w3 x) (Shazeer 2020)
  gelu_tanh,  // w2 gelu_tanh(w1 x + b1) + b2 (GPT-2 "gelu_new")
};

/// Hyper-parameters and architectural choices of a decoder-only transformer.
struct TransformerConfig {
  std::string architecture;  // "llama2.c", "gpt2", "llama", "mistral", "qwen2" (informational)
  int dim = 0;               // model (residual) width
  int hidden_dim = 0;        // feed-forward hidden width
  int n_layers = 0;
  int n_heads = 0;           // query heads
  int n_kv_heads = 0;        // key/value heads; query head h uses kv head h / (n_heads / n_kv_heads)
  int head_dim = 0;          // width of one head (usually dim / n_heads); head_size() returns it
  int vocab_size = 0;
  int seq_len = 0;           // maximum number of positions
  NormKind norm = NormKind::rms_norm;
  float norm_epsilon = 1e-5f;
  PositionEncoding position_encoding = PositionEncoding::rope_interleaved;
  double rope_theta = 10000.0;       // RoPE base θ (RoPE encodings only)
  bool attention_qkv_bias = false;   // q/k/v projections have biases (GPT-2, Qwen2)
  bool attention_output_bias = false;  // the output projection wo has a bias (GPT-2)
  FeedForwardKind feed_forward = FeedForwardKind::swiglu;
  bool feed_forward_bias = false;    // w1 and w2 have biases (GPT-2)
  bool tied_embeddings = true;       // the output head is the token embedding
  int sliding_window = 0;            // > 0: query p sees keys p − window + 1 .. p only (Mistral); 0 = full causal

  int head_size() const { return head_dim; }
  int query_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
};

/// One transformer block. Matrices are nn.Linear weights (out_features × in_features), i.e. y = W x; bias vectors
/// are empty when the configuration has none; norm biases exist for LayerNorm only.
struct TransformerLayerWeights {
  Vector<float> attention_norm, attention_norm_bias;  // dim
  RowMatrix<float> wq;  // query_dim × dim
  RowMatrix<float> wk;  // kv_dim × dim
  RowMatrix<float> wv;  // kv_dim × dim
  RowMatrix<float> wo;  // dim × query_dim
  Vector<float> wq_bias, wk_bias, wv_bias, wo_bias;
  Vector<float> ffn_norm, ffn_norm_bias;  // dim
  RowMatrix<float> w1;  // hidden_dim × dim (SwiGLU gate / GELU MLP input)
  RowMatrix<float> w2;  // dim × hidden_dim (output)
  RowMatrix<float> w3;  // hidden_dim × dim (SwiGLU up; empty for the GELU MLP)
  Vector<float> w1_bias, w2_bias;
};

/// All tensors of a model, float32.
struct TransformerWeights {
  TransformerConfig config;
  RowMatrix<float> token_embedding;     // vocab × dim
  RowMatrix<float> position_embedding;  // seq_len × dim for learned positions, else empty
  std::vector<TransformerLayerWeights> layers;
  Vector<float> final_norm, final_norm_bias;  // dim (bias: LayerNorm only)
  RowMatrix<float> classifier;          // vocab × dim, empty when the head is tied to token_embedding

  /// The output head: classifier, or token_embedding when tied.
  const RowMatrix<float>& output_head() const { return config.tied_embeddings ? token_embedding : classifier; }
};

/// What forward() records besides the logits; everything off by default so callers pay only for what they ask.
struct CaptureOptions {
  bool q = false;            // queries after RoPE, per head (L × head_size)
  bool k = false;            // keys after RoPE, per query head (L × head_size; GQA: copy of the shared kv head)
  bool v = false;            // values, per query head (L × head_size; GQA: copy of the shared kv head)
  bool scores = false;       // scaled scores q·k/√head_size (L × L; invisible entries −inf)
  bool attention = false;    // attention weights after the normalization map (L × L; invisible entries 0)
  bool head_output = false;  // attention · V of each head before wo, after ablation (L × head_size)
  bool hidden_states = false;  // residual stream at each layer input, then before the final norm (L × dim)

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

/// A normalization of attention scores: gets the scaled scores of one head (rows = queries, invisible entries −inf)
/// and the visibility (causal, or a banded mask under a sliding window), returns weights of the same shape (entries
/// outside the visibility are set to 0).
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
  /// Attention normalization map applied to each head's scaled scores (apply_map with the causal visibility), e.g.
  /// parse_normalization_map("ssmax:0.43"); empty = softmax. Mutually exclusive with `normalizer`.
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

/// Settings of the streaming forward (Transformer::forward_row_statistics) besides the ForwardOptions.
struct StreamingOptions {
  /// Which statistics stream::row_statistics computes per head: sink_keys, max_weight_excludes_sinks, top_k,
  /// jacobian_norm, block_rows, threads. causal, window, scale and key_mask belong to the model (causal mask,
  /// config.sliding_window, 1/√head_size, no padding) and must stay at their defaults.
  stream::RowStatisticsOptions statistics{};
  /// RoPE models only: allow L > config.seq_len (positions the model was not trained on; RoPE extrapolates, the
  /// result's beyond_trained_positions says so). Learned absolute positions (GPT-2) have no embedding past seq_len.
  bool allow_beyond_trained_positions = false;
  /// Query rows and keys per block of the blockwise attention (memory per head: query_block × key_block scores).
  Index query_block = 64;
  Index key_block = 256;
};

/// Result of forward_row_statistics(): logits, per layer and head the exact softmax row statistics, the requested
/// L×head_size / L×dim captures, and whether positions beyond the trained length were used.
struct StreamingForwardResult {
  RowMatrix<float> logits;                                         // L × vocab
  std::vector<std::vector<stream::RowStatistics>> row_statistics;  // [layer][head], each of length L
  std::vector<LayerCapture> layers;              // q, k, v, head_output when requested; scores/attention never
  std::vector<RowMatrix<float>> hidden_states;  // n_layers + 1 entries when requested
  Index trained_positions = 0;          // config.seq_len
  bool beyond_trained_positions = false;  // L > trained_positions (RoPE extrapolation, opted in)
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

/// Empty when the configuration is usable, otherwise a description of the first problem found.
inline std::string transformer_config_problem(const TransformerConfig& c) {
  const struct {
    const char* name;
    int value;
  } sizes[] = {{"dim", c.dim},           {"hidden_dim", c.hidden_dim}, {"n_layers", c.n_layers},
               {"n_heads", c.n_heads},   {"n_kv_heads", c.n_kv_heads}, {"head_dim", c.head_dim},
               {"vocab_size", c.vocab_size}, {"seq_len", c.seq_len}};
  for (const auto& size : sizes)
    if (size.value <= 0) return attnscope::detail::concat(size.name, " = ", size.value, " must be > 0");
  if (c.n_heads % c.n_kv_heads != 0)
    return attnscope::detail::concat("n_kv_heads = ", c.n_kv_heads, " does not divide n_heads = ", c.n_heads);
  if (!(c.norm_epsilon > 0) || !std::isfinite(c.norm_epsilon))
    return attnscope::detail::concat("norm_epsilon = ", c.norm_epsilon, " must be finite and > 0");
  if (c.position_encoding != PositionEncoding::learned) {
    if (c.head_dim % 2 != 0) return attnscope::detail::concat("head_dim = ", c.head_dim, " is odd (RoPE needs pairs)");
    if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta))
      return attnscope::detail::concat("rope_theta = ", c.rope_theta, " must be finite and > 0");
  }
  if (c.sliding_window < 0) return attnscope::detail::concat("sliding_window = ", c.sliding_window, " must be >= 0");
  return {};
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

/// A decoder-only transformer of any supported architecture, float32. The forward pass processes a whole sequence
/// with matrix products: per layer, x += wo·attention(norm(x)), x += ffn(norm(x)) (pre-norm residual blocks), then
/// logits = head · norm(x). Which norm, position encoding, biases and feed-forward are used comes from the config.
class Transformer {
 public:
  /// Takes the weights (from llama2.c via LlamaModel, from load_huggingface_model, or built in memory); throws
  /// attnscope::invalid_argument on an invalid configuration or a tensor whose shape disagrees with it (named).
  explicit Transformer(TransformerWeights weights) : weights_(std::move(weights)) { validate_weights(); }

  const TransformerConfig& config() const { return weights_.config; }
  const TransformerWeights& weights() const { return weights_; }

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

  /// Streaming forward over tokens[0..L) at positions 0..L−1: the same logits as forward() (softmax attention), but
  /// every head's attention runs blockwise in the flash-attention style (Dao et al. 2022, "FlashAttention", Alg. 1:
  /// blocks of query rows × blocks of keys, online softmax with a running max, running sum and output accumulator;
  /// Milakov & Gimelshein 2018), so no L×L matrix (scores or attention) is allocated. Per layer and head it returns
  /// stream::row_statistics of that head's post-RoPE q and k (causal, the config's sliding window, scale
  /// 1/√head_size, the statistics chosen in streaming.statistics). options: capture of q, k, v, head_output and
  /// hidden_states, and ablation work as in forward(); the attention is softmax only.
  /// Throws attnscope::invalid_argument, naming the problem, for: options.map or options.normalizer set; a capture
  /// of scores or attention; streaming.statistics with causal = false, a window, a scale or a key mask; block sizes
  /// ≤ 0; L > seq_len with learned positions (GPT-2), or with RoPE unless allow_beyond_trained_positions; plus every
  /// error of forward() and of stream::row_statistics.
  /// Memory: the key/value cache O(n_layers·L·kv_dim), activations and logits O(L·(dim + hidden_dim + vocab)), the
  /// statistics O(n_layers·n_heads·L), query_block·key_block scores per head and stream::row_statistics' strips; never
  /// O(L²). Cost as forward() plus the statistics' O(n_layers·n_heads·L²·head_size).
  StreamingForwardResult forward_row_statistics(const std::vector<int>& tokens, const ForwardOptions& options = {},
                                                const StreamingOptions& streaming = {}) const {
    const char* fn = "Transformer::forward_row_statistics";
    const auto& c = config();
    if (options.map || options.normalizer)
      attnscope::detail::throw_invalid_argument(fn, "only softmax attention streams: options.map and ",
                                                "options.normalizer must be unset");
    if (options.capture.scores || options.capture.attention)
      attnscope::detail::throw_invalid_argument(fn, "capture.scores and capture.attention are L x L matrices, ",
                                                "which the streaming forward never forms; use forward()");
    const stream::RowStatisticsOptions& statistics = streaming.statistics;
    if (!statistics.causal || statistics.window || statistics.scale || statistics.key_mask.size() != 0)
      attnscope::detail::throw_invalid_argument(fn, "streaming.statistics.causal, window, scale and key_mask are ",
                                                "set by the model (causal, sliding_window, 1/sqrt(head_size)); leave ",
                                                "them at their defaults");
    if (streaming.query_block <= 0 || streaming.key_block <= 0)
      attnscope::detail::throw_invalid_argument(fn, "query_block = ", streaming.query_block, " and key_block = ",
                                                streaming.key_block, " must be >= 1");
    const Index length = static_cast<Index>(tokens.size());
    const bool beyond = length > c.seq_len;
    if (beyond && c.position_encoding == PositionEncoding::learned)
      attnscope::detail::throw_invalid_argument(fn, "sequence length ", length, " exceeds seq_len ", c.seq_len,
                                                ": the learned position embedding has only ", c.seq_len,
                                                " positions");
    if (beyond && !streaming.allow_beyond_trained_positions)
      attnscope::detail::throw_invalid_argument(fn, "sequence length ", length, " exceeds the trained length seq_len ",
                                                c.seq_len, "; set allow_beyond_trained_positions to run RoPE past it");
    validate_tokens(fn, tokens, beyond ? length : c.seq_len);
    validate_options(fn, options);
    StreamingRun run_state{&streaming, {}};
    run_state.statistics.resize(std::size_t(c.n_layers));
    detail::DecoderState state = start_state(length);
    ForwardResult captures;
    StreamingForwardResult result;
    result.logits = run(tokens, state, options, &captures, false, &run_state);
    result.row_statistics = std::move(run_state.statistics);
    result.layers = std::move(captures.layers);
    result.hidden_states = std::move(captures.hidden_states);
    result.trained_positions = c.seq_len;
    result.beyond_trained_positions = beyond;
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
  TransformerWeights weights_;

  // What run() needs in the streaming mode: the settings, and the statistics it fills per layer and head.
  struct StreamingRun {
    const StreamingOptions* options;
    std::vector<std::vector<stream::RowStatistics>> statistics;
  };

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
    const char* fn = "Transformer";
    if (const std::string problem = detail::transformer_config_problem(c); !problem.empty())
      attnscope::detail::throw_invalid_argument(fn, "invalid configuration: ", problem);
    const Index dim = c.dim, hidden = c.hidden_dim, query_dim = c.query_dim(), kv_dim = c.kv_dim();
    const bool layer_norm = c.norm == NormKind::layer_norm, swiglu = c.feed_forward == FeedForwardKind::swiglu;
    auto shape = [&](const std::string& name, Index rows, Index cols, Index want_rows, Index want_cols) {
      if (rows != want_rows || cols != want_cols)
        attnscope::detail::throw_invalid_argument(fn, name, " has shape ", rows, "x", cols, ", expected ", want_rows,
                                                  "x", want_cols);
    };
    auto check_matrix = [&](const std::string& name, const RowMatrix<float>& m, Index rows, Index cols) {
      shape(name, m.rows(), m.cols(), rows, cols);
    };
    auto check_vector = [&](const std::string& name, const Vector<float>& v, Index size) {
      if (v.size() != size)
        attnscope::detail::throw_invalid_argument(fn, name, " has ", v.size(), " entries, expected ", size);
    };
    check_matrix("token_embedding", weights_.token_embedding, c.vocab_size, dim);
    check_matrix("position_embedding", weights_.position_embedding,
           c.position_encoding == PositionEncoding::learned ? c.seq_len : 0,
           c.position_encoding == PositionEncoding::learned ? dim : 0);
    check_matrix("classifier", weights_.classifier, c.tied_embeddings ? 0 : c.vocab_size, c.tied_embeddings ? 0 : dim);
    check_vector("final_norm", weights_.final_norm, dim);
    check_vector("final_norm_bias", weights_.final_norm_bias, layer_norm ? dim : 0);
    if (weights_.layers.size() != static_cast<std::size_t>(c.n_layers))
      attnscope::detail::throw_invalid_argument(fn, "have ", weights_.layers.size(), " layers, config says ",
                                                c.n_layers);
    for (std::size_t l = 0; l < weights_.layers.size(); ++l) {
      const auto& layer = weights_.layers[l];
      const std::string at = attnscope::detail::concat("layers[", l, "].");
      check_vector(at + "attention_norm", layer.attention_norm, dim);
      check_vector(at + "attention_norm_bias", layer.attention_norm_bias, layer_norm ? dim : 0);
      check_vector(at + "ffn_norm", layer.ffn_norm, dim);
      check_vector(at + "ffn_norm_bias", layer.ffn_norm_bias, layer_norm ? dim : 0);
      check_matrix(at + "wq", layer.wq, query_dim, dim);
      check_matrix(at + "wk", layer.wk, kv_dim, dim);
      check_matrix(at + "wv", layer.wv, kv_dim, dim);
      check_matrix(at + "wo", layer.wo, dim, query_dim);
      check_vector(at + "wq_bias", layer.wq_bias, c.attention_qkv_bias ? query_dim : 0);
      check_vector(at + "wk_bias", layer.wk_bias, c.attention_qkv_bias ? kv_dim : 0);
      check_vector(at + "wv_bias", layer.wv_bias, c.attention_qkv_bias ? kv_dim : 0);
      check_vector(at + "wo_bias", layer.wo_bias, c.attention_output_bias ? dim : 0);
      check_matrix(at + "w1", layer.w1, hidden, dim);
      check_matrix(at + "w2", layer.w2, dim, hidden);
      check_matrix(at + "w3", layer.w3, swiglu ? hidden : 0, swiglu ? dim : 0);
      check_vector(at + "w1_bias", layer.w1_bias, c.feed_forward_bias ? hidden : 0);
      check_vector(at + "w2_bias", layer.w2_bias, c.feed_forward_bias ? dim : 0);
    }
  }

  void validate_tokens(const char* function, const std::vector<int>& tokens) const {
    validate_tokens(function, tokens, config().seq_len);
  }

  void validate_tokens(const char* function, const std::vector<int>& tokens, Index max_length) const {
    if (tokens.empty()) attnscope::detail::throw_invalid_argument(function, "empty token sequence");
    if (tokens.size() > static_cast<std::size_t>(max_length))
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
    detail::DecoderState state;
    state.keys.assign(std::size_t(c.n_layers), RowMatrix<float>(capacity, c.kv_dim()));
    state.values.assign(std::size_t(c.n_layers), RowMatrix<float>(capacity, c.kv_dim()));
    state.head_output_sums.assign(std::size_t(c.n_layers), RowMatrix<double>::Zero(c.n_heads, c.head_dim));
    return state;
  }

  // Keys query row i (at position offset + i) may see among `total` keys: causal, or a causal band of
  // sliding_window keys.
  Visibility visibility(Index rows, Index offset, Index total) const {
    const Index window = config().sliding_window;
    if (window <= 0 || offset + rows <= window) return Causal{offset};
    Mask mask(rows, total);
    for (Index i = 0; i < rows; ++i)
      for (Index j = 0; j < total; ++j) mask(i, j) = j <= offset + i && j > offset + i - window;
    return mask;
  }

  // Divides the visible scores by √head_size and sets the invisible ones to −inf, in place.
  static void scale_and_mask(RowMatrix<float>& scores, const Visibility& visible, float divisor) {
    const Index cols = scores.cols();
    const float minus_infinity = -std::numeric_limits<float>::infinity();
    for (Index i = 0; i < scores.rows(); ++i) {
      float* row = scores.data() + i * cols;
      if (visible.is_prefix()) {
        const Index visible_keys = visible.prefix_length(i, cols);
        for (Index j = 0; j < visible_keys; ++j) row[j] /= divisor;
        for (Index j = visible_keys; j < cols; ++j) row[j] = minus_infinity;
      } else {
        for (Index j = 0; j < cols; ++j) row[j] = visible.visible(i, j, cols) ? row[j] / divisor : minus_infinity;
      }
    }
  }

  // The attention weights of one head: the map, the callable, or softmax (default), written into `weights`.
  void normalize_into(const RowMatrix<float>& scores, const Visibility& visible, const ForwardOptions& options,
                      RowMatrix<float>& weights) const {
    if (options.map) {
      weights = apply_map(*options.map, scores, visible);
      return;
    }
    if (!options.normalizer) {
      softmax_into(scores, weights, 1.0f, visible);
      return;
    }
    weights = options.normalizer(scores, visible);
    attnscope::detail::require_same_shape("Transformer::forward", "normalizer output/scores", weights.rows(),
                                          weights.cols(), scores.rows(), scores.cols());
    for (Index i = 0; i < weights.rows(); ++i)
      for (Index j = 0; j < weights.cols(); ++j) {
        if (!visible.visible(i, j, weights.cols())) weights(i, j) = 0.0f;
        else if (!std::isfinite(weights(i, j)))
          attnscope::detail::throw_invalid_argument("Transformer::forward", "normalizer returned ", weights(i, j),
                                                    " at row ", i, ", column ", j);
      }
  }

  RowMatrix<float> norm(const RowMatrix<float>& rows, const Vector<float>& weight, const Vector<float>& bias) const {
    if (config().norm == NormKind::layer_norm) return layer_norm(rows, weight, bias, config().norm_epsilon);
    return rms_norm(rows, weight, config().norm_epsilon);
  }

  static void add_bias(RowMatrix<float>& rows, const Vector<float>& bias) {
    if (bias.size() > 0) rows.rowwise() += bias.transpose();
  }

  // Processes `tokens` at positions state.length.. (appending to the cache); returns logits of every new row, or of
  // the last one only. Fills `capture` (rows = new positions, score columns = all positions so far) when given.
  // With `streaming` (whole sequence from position 0, softmax only) each head attends blockwise and its row
  // statistics are appended to streaming->statistics; no L×L buffer is allocated.
  RowMatrix<float> run(const std::vector<int>& tokens, detail::DecoderState& state, const ForwardOptions& options,
                       ForwardResult* capture, bool last_logits_only, StreamingRun* streaming = nullptr) const {
    const auto& c = config();
    const Index rows = static_cast<Index>(tokens.size()), offset = state.length, total = offset + rows;
    const Index head_size = c.head_dim, heads_per_kv = c.n_heads / c.n_kv_heads;
    const float score_divisor = std::sqrt(static_cast<float>(head_size));
    const CaptureOptions want = capture ? options.capture : CaptureOptions{};
    if (capture && want.any_head_capture()) capture->layers.resize(std::size_t(c.n_layers));
    // (streaming: unused; the window's L×L mask is not built)
    const Visibility visible = streaming ? Visibility(Causal{offset}) : visibility(rows, offset, total);
    stream::RowStatisticsOptions statistics_options = streaming ? streaming->options->statistics
                                                                : stream::RowStatisticsOptions{};
    if (c.sliding_window > 0) statistics_options.window = c.sliding_window;
    const bool rope = c.position_encoding != PositionEncoding::learned;
    const RopeConvention convention = c.position_encoding == PositionEncoding::rope_interleaved
                                          ? RopeConvention::interleaved
                                          : RopeConvention::rotate_half;
    const RotaryTable rotary = rope ? rotary_table(offset, rows, head_size, c.rope_theta) : RotaryTable{};

    RowMatrix<float> residual(rows, c.dim);
    for (Index r = 0; r < rows; ++r) residual.row(r) = weights_.token_embedding.row(tokens[std::size_t(r)]);
    if (!rope) residual += weights_.position_embedding.middleRows(offset, rows);  // GPT-2: wte + wpe

    RowMatrix<float> queries(rows, c.query_dim()), head_outputs(rows, c.query_dim());
    RowMatrix<float> scores(streaming ? 0 : rows, streaming ? 0 : total);
    RowMatrix<float> attention_buffer;  // reused across heads unless the attention is captured
    for (int l = 0; l < c.n_layers; ++l) {
      const auto& layer = weights_.layers[std::size_t(l)];
      if (want.hidden_states) capture->hidden_states.push_back(residual);
      // Attention block: norm, q/k/v projections (+ biases), RoPE, per-head causal attention, wo (+ bias).
      const RowMatrix<float> normed = norm(residual, layer.attention_norm, layer.attention_norm_bias);
      queries.noalias() = normed * layer.wq.transpose();
      add_bias(queries, layer.wq_bias);
      RowMatrix<float> new_keys = normed * layer.wk.transpose();
      add_bias(new_keys, layer.wk_bias);
      if (rope) {
        apply_rotary(queries, head_size, rotary, convention);
        apply_rotary(new_keys, head_size, rotary, convention);
      }
      RowMatrix<float>& keys = state.keys[std::size_t(l)];
      RowMatrix<float>& values = state.values[std::size_t(l)];
      keys.middleRows(offset, rows) = new_keys;
      values.middleRows(offset, rows).noalias() = normed * layer.wv.transpose();
      if (layer.wv_bias.size() > 0) values.middleRows(offset, rows).rowwise() += layer.wv_bias.transpose();

      LayerCapture* layer_capture = want.any_head_capture() ? &capture->layers[std::size_t(l)] : nullptr;
      for (int h = 0; h < c.n_heads; ++h) {
        const Index kv_head = h / heads_per_kv;
        const auto head_queries = queries.middleCols(h * head_size, head_size);
        const auto head_keys = keys.topRows(total).middleCols(kv_head * head_size, head_size);
        const auto head_values = values.topRows(total).middleCols(kv_head * head_size, head_size);
        auto output = head_outputs.middleCols(h * head_size, head_size);
        RowMatrix<float> captured_attention;
        if (streaming) {
          blockwise_softmax_attention(head_queries, head_keys, head_values, score_divisor, c.sliding_window,
                                      *streaming->options, output);
          streaming->statistics[std::size_t(l)].push_back(
              stream::row_statistics(head_queries, head_keys, statistics_options));
        } else {
          // Scaled scores q·k/√head_size (Vaswani et al. 2017, eq. 1; run.c divides by sqrtf(head_size)).
          scores.noalias() = head_queries * head_keys.transpose();
          scale_and_mask(scores, visible, score_divisor);
          const bool keep_attention = layer_capture && want.attention;
          RowMatrix<float>& attention = keep_attention ? captured_attention : attention_buffer;
          normalize_into(scores, visible, options, attention);
          output.noalias() = attention * head_values;
        }
        ablate(state, options, l, h, output);
        if (layer_capture) {
          if (want.q) layer_capture->q.emplace_back(head_queries);
          if (want.k) layer_capture->k.emplace_back(head_keys);
          if (want.v) layer_capture->v.emplace_back(head_values);
          if (want.scores) {  // hand the buffer over instead of copying it
            layer_capture->scores.push_back(std::move(scores));
            scores.resize(rows, total);
          }
          if (want.attention) layer_capture->attention.push_back(std::move(captured_attention));
          if (want.head_output) layer_capture->head_output.emplace_back(output);
        }
      }
      residual.noalias() += head_outputs * layer.wo.transpose();
      add_bias(residual, layer.wo_bias);
      // Feed-forward block on norm(x).
      const RowMatrix<float> normed_ffn = norm(residual, layer.ffn_norm, layer.ffn_norm_bias);
      if (c.feed_forward == FeedForwardKind::swiglu) {
        // w2(silu(w1 x) ⊙ w3 x) (run.c; Shazeer 2020 SwiGLU).
        const RowMatrix<float> gate = normed_ffn * layer.w1.transpose();
        const RowMatrix<float> up = normed_ffn * layer.w3.transpose();
        residual.noalias() += swiglu_gate(gate, up) * layer.w2.transpose();
      } else {
        // w2 gelu_tanh(w1 x + b1) + b2 (GPT-2 MLP).
        RowMatrix<float> hidden = normed_ffn * layer.w1.transpose();
        add_bias(hidden, layer.w1_bias);
        gelu_tanh_in_place(hidden);
        residual.noalias() += hidden * layer.w2.transpose();
      }
      add_bias(residual, layer.w2_bias);
    }
    state.length = total;
    if (want.hidden_states) capture->hidden_states.push_back(residual);
    // Final norm then the output head.
    if (last_logits_only) {
      const RowMatrix<float> last_row = residual.bottomRows(1);
      return norm(last_row, weights_.final_norm, weights_.final_norm_bias) * weights_.output_head().transpose();
    }
    return norm(residual, weights_.final_norm, weights_.final_norm_bias) * weights_.output_head().transpose();
  }

  // softmax(q·kᵀ/divisor)·V of one head over a whole sequence from position 0, causal (and within `window` keys when
  // window > 0), without the L×L matrix: FlashAttention (Dao et al. 2022, Alg. 1) — per block of query rows, the key
  // blocks they can see; per row the online softmax (Milakov & Gimelshein 2018) keeps the running max m, the running
  // sum ℓ = Σ exp(s − m) and the accumulator a = Σ exp(s − m)·v; a new block with max m' rescales ℓ and a by
  // exp(m − m'); the output row is a / ℓ. Scores are formed as the dense path does (float q·k, then ÷ divisor).
  template <class Queries, class Keys, class Values, class Output>
  static void blockwise_softmax_attention(const Queries& queries, const Keys& keys, const Values& values,
                                          float divisor, Index window, const StreamingOptions& streaming,
                                          Output& output) {
    const Index length = queries.rows(), head_size = queries.cols();
    const Index query_block = std::min(streaming.query_block, length), key_block = std::min(streaming.key_block, length);
    const float minus_infinity = -std::numeric_limits<float>::infinity();
    RowMatrix<float> block_scores(query_block, key_block), accumulator(query_block, head_size);
    Vector<float> running_max(query_block), running_sum(query_block);
    for (Index query_first = 0; query_first < length; query_first += query_block) {
      const Index rows = std::min(query_block, length - query_first);
      running_max.head(rows).setConstant(minus_infinity);
      running_sum.head(rows).setZero();
      accumulator.topRows(rows).setZero();
      const Index key_end = query_first + rows;  // causal: the block's last row sees keys < key_end
      const Index key_start = window > 0 ? std::max<Index>(0, query_first - window + 1) : 0;
      for (Index key_first = key_start; key_first < key_end; key_first += key_block) {
        const Index cols = std::min(key_block, key_end - key_first);
        auto block = block_scores.topLeftCorner(rows, cols);
        block.noalias() = queries.middleRows(query_first, rows) * keys.middleRows(key_first, cols).transpose();
        for (Index i = 0; i < rows; ++i) {
          const Index position = query_first + i;
          // visible keys of this row inside the block: [begin, end) relative to key_first
          const Index begin = std::max<Index>(0, (window > 0 ? position - window + 1 : 0) - key_first);
          const Index end = std::min<Index>(cols, position + 1 - key_first);
          float* row = block_scores.data() + i * key_block;
          if (begin >= end) {  // no visible key of this row here
            std::fill(row, row + cols, 0.0f);
            continue;
          }
          float block_max = minus_infinity;
          for (Index j = begin; j < end; ++j) {
            row[j] /= divisor;
            block_max = std::max(block_max, row[j]);
          }
          const float new_max = std::max(running_max(i), block_max);
          const float correction = std::exp(running_max(i) - new_max);  // exp(−inf) = 0 on the first visible block
          float block_sum = 0;
          for (Index j = 0; j < cols; ++j) {
            row[j] = (j >= begin && j < end) ? std::exp(row[j] - new_max) : 0.0f;
            block_sum += row[j];
          }
          running_sum(i) = running_sum(i) * correction + block_sum;
          accumulator.row(i) *= correction;
          running_max(i) = new_max;
        }
        accumulator.topRows(rows).noalias() += block * values.middleRows(key_first, cols);
      }
      for (Index i = 0; i < rows; ++i) output.row(query_first + i) = accumulator.row(i) / running_sum(i);
    }
  }

  // Applies the ablation of head (layer, head) if requested; mean ablation adds each row of the head's output to
  // the running sum first, then replaces the row by the mean over positions 0..p.
  template <class Block>
  void ablate(detail::DecoderState& state, const ForwardOptions& options, int layer, int head, Block& output) const {
    if (options.ablated_heads.count({layer, head}) == 0) return;
    if (options.ablation_mode == AblationMode::zero) {
      output.setZero();
      return;
    }
    auto sum = state.head_output_sums[std::size_t(layer)].row(head);
    for (Index i = 0; i < output.rows(); ++i) {
      sum += output.row(i).template cast<double>();
      const double count = static_cast<double>(state.length + i + 1);
      output.row(i) = (sum / count).template cast<float>();
    }
  }
};

}  // namespace attnscope::model
