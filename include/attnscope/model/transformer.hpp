// attnscope/model/transformer.hpp — one decoder-only transformer for every supported architecture (llama2.c and the
// Hugging Face families of docs/models.md): BasicTransformer runs the forward pass over a whole token sequence in matrix form with
// per-layer, per-head capture, swappable attention normalization, head ablation, generation and likelihood;
// forward_row_statistics is the streaming mode (exact per-row statistics, no L×L matrix). Every head's attention is
// the one blockwise kernel of stream/attention.hpp. Configuration, weights, options and sampling live in
// model/config.hpp, model/weights.hpp, model/forward_options.hpp and model/sampling.hpp.
//
// The class is a template on its scalar (float, the weights' type) so that including this header instantiates no
// matrix product: code is generated only in the translation units that call the model. The forward pass (run and the
// public members that start it) is defined below the class, so that with the optional compiled part
// (ATTNSCOPE_EXTERN_TEMPLATES) only src/extern_templates/transformer.cpp compiles it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/model/config.hpp"
#include "attnscope/model/detail/decoder_state.hpp"
#include "attnscope/model/detail/linear.hpp"
#include "attnscope/model/detail/mixture_of_experts.hpp"
#include "attnscope/model/detail/step_statistics.hpp"
#include "attnscope/model/forward_options.hpp"
#include "attnscope/model/layers.hpp"
#include "attnscope/model/sampling.hpp"
#include "attnscope/model/weights.hpp"
#include "attnscope/normalize/maps.hpp"
#include "attnscope/stream/attention.hpp"
#include "attnscope/stream/row_statistics.hpp"

namespace attnscope::model {

/// A decoder-only transformer of any supported architecture. The forward pass processes a whole sequence with matrix
/// products: per layer, x += wo·attention(norm(x)), x += ffn(norm(x)) (pre-norm residual blocks; or with post-norms
/// around the branches, on the branches only, or with both branches reading the same x), then
/// logits = head · norm(x) (softcapped when configured). Which norms, position encoding and RoPE scaling, attention
/// scale, softcap and per-layer window, biases and feed-forward are used comes from the config.
/// Scalar is float (the type of TransformerWeights); use the alias Transformer.
template <class Scalar>
class BasicTransformer {
  static_assert(std::is_same<Scalar, float>::value, "attnscope::model::BasicTransformer: the weights are float32");

 public:
  /// Takes the weights (from llama2.c via LlamaModel, from load_huggingface_model, or built in memory); throws
  /// attnscope::invalid_argument on an invalid configuration or a tensor whose shape disagrees with it (named).
  explicit BasicTransformer(TransformerWeights weights) : weights_(std::move(weights)) { validate_weights(); }

  const TransformerConfig& config() const { return weights_.config; }
  const TransformerWeights& weights() const { return weights_; }

  /// Forward pass over tokens[0..L) at positions 0..L−1: logits (L × vocab) and the requested captures.
  /// Throws attnscope::invalid_argument for empty input, L > seq_len, a token outside [0, vocab), an ablated head
  /// outside the model, or a normalizer that returns a wrong shape or non-finite weights.
  /// Cost O(n_layers·(L·dim·(dim + hidden) + n_heads·L²·head_size)) + O(L·vocab·dim).
  ForwardResult forward(const std::vector<int>& tokens, const ForwardOptions& options = {}) const;

  /// Streaming forward over tokens[0..L) at positions 0..L−1: the same logits as forward() (softmax attention), with
  /// every head's attention run by the blockwise kernel of stream/attention.hpp without capturing any L×L matrix: per
  /// block of query_block rows one GEMM of scaled scores against the keys the rows see, the softmax and the requested
  /// statistics from the same exponentials, and P·V. Per layer and head it returns the exact row statistics of that
  /// head (causal, the layer's window, the model's scale and softcap, the statistics chosen in streaming.statistics)
  /// for the heads in streaming.heads (every head when empty; the others run the same attention without statistics and
  /// get empty entries). options: capture of q, k, v, head_output and hidden_states, and ablation work as in forward();
  /// the attention is softmax only.
  /// Throws attnscope::invalid_argument, naming the problem, for: options.map or options.normalizer set; a capture of
  /// scores or attention; streaming.statistics with a visibility other than the default causal one or a scale; block
  /// sizes ≤ 0; feed_forward_rows < 0 or not a multiple of 8; a streaming.heads pair outside the layers run;
  /// L > seq_len with learned positions (GPT-2), or with RoPE unless allow_beyond_trained_positions; plus every error
  /// of forward() and of stream::row_statistics.
  /// Memory: the key/value cache of one layer O(L·kv_dim), activations O(L·dim + feed_forward_rows·hidden_dim), the
  /// logits O(L·vocab) when asked, the statistics O(n_layers·n_heads·L), and the kernel's strips of query_block × L
  /// scores per thread; never O(L²).
  /// Cost as forward() plus the statistics' O(n_layers·n_heads·L·visible keys).
  StreamingForwardResult forward_row_statistics(const std::vector<int>& tokens, const ForwardOptions& options = {},
                                                const StreamingOptions& streaming = {}) const;

  /// Greedy decoding (argmax, first index on ties, as run.c): returns prefix followed by `steps` new tokens.
  /// Uses a key/value cache, so each step costs one row of the forward pass. Throws if prefix is invalid, steps < 0
  /// or prefix.size() + steps > seq_len. Capture flags in options are ignored.
  std::vector<int> generate_greedy(const std::vector<int>& prefix, int steps, const ForwardOptions& options = {},
                                   const ProgressCallback& progress = {}) const {
    return generate("generate_greedy", prefix, steps, options, progress,
                    [](const RowMatrix<Scalar>& logits) { return argmax_token(logits.row(0)); });
  }

  /// Sampling from softmax(logits / temperature) with attnscope::Random(seed) (deterministic for a seed);
  /// temperature 0 means greedy (as run.c). Returns prefix followed by `steps` new tokens. Throws like
  /// generate_greedy and for a negative or non-finite temperature.
  std::vector<int> generate_sampled(const std::vector<int>& prefix, int steps, double temperature,
                                    std::uint64_t seed, const ForwardOptions& options = {},
                                    const ProgressCallback& progress = {}) const {
    check_temperature("generate_sampled", temperature);
    Random random(seed);
    return generate("generate_sampled", prefix, steps, options, progress,
                    [&](const RowMatrix<Scalar>& logits) { return choose_token(logits, temperature, random); });
  }

  /// Decoding with the key/value cache and, at every step, the exact row statistics of the step's query row: the
  /// prompt runs once, then each step runs the one row of the token fed back (O(n_layers·L·dim) per step, the
  /// prefix never recomputed). Tokens are chosen as generate_greedy (temperature 0) or generate_sampled (temperature
  /// > 0, the same Random(seed) draws) choose them, from the same logits, so the tokens equal theirs. Step s is the
  /// step that picks tokens[P + s] from query row P − 1 + s (see GenerationResult); per head selected by
  /// streaming.heads (every head when empty) its statistics are those forward_row_statistics computes for row
  /// P − 1 + s of the returned tokens with the same streaming.statistics (the same kernel, causal, each layer's
  /// window, the model's scale, softcap and learned sinks), equal up to the order of float summation (the one row is
  /// a product of its own, not a row of a block). It also returns each step's most attended key and the attention
  /// on key 0 of the first generation.first_key_queries rows (sink rate, analysis/sink_rate.hpp). options: matmul
  /// and ablation as in forward(); its captures, last_layer and layer callbacks are ignored. `progress` gets
  /// (steps done, steps).
  /// Throws attnscope::invalid_argument, naming the problem, for: an invalid prefix, steps < 0, prefix.size() + steps
  /// > seq_len, a negative or non-finite temperature, first_key_queries < 0, a stop token outside the vocabulary,
  /// options.map or options.normalizer, and every error forward_row_statistics raises for `streaming`.
  /// Memory: the cache O(n_layers·(P + steps)·kv_dim) and the statistics O(n_layers·n_heads·steps).
  GenerationResult generate_with_statistics(const std::vector<int>& prefix, int steps,
                                            const GenerationOptions& generation = {},
                                            const StreamingOptions& streaming = {}, const ForwardOptions& options = {},
                                            const ProgressCallback& progress = {}) const;

  /// Teacher-forced mean negative log-likelihood (nats/token): mean over p in [0, L−1) of
  /// −log softmax(logits[p])[tokens[p+1]], computed in double from the float logits. Needs L ≥ 2.
  double mean_negative_log_likelihood(const std::vector<int>& tokens, const ForwardOptions& options = {}) const {
    if (tokens.size() < 2)
      attnscope::detail::throw_invalid_argument("mean_negative_log_likelihood", "need at least 2 tokens, got ",
                                                tokens.size());
    ForwardOptions plain = options;
    plain.capture = CaptureOptions{};
    plain.last_layer = -1;
    plain.logits = true;
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
    const StreamingOptions* options = nullptr;
    std::vector<std::vector<stream::RowStatistics>> statistics;
    // Generation: the cache stays for the next run, and each analysed head gets the statistics and the most attended
    // key of the run's last row only (the query that picks the next token).
    bool generation = false;
    std::vector<std::vector<Index>> most_attended;  // [layer][head], generation only
    // The attention on key 0 of the run's rows at positions < first_key_rows, per [layer][head] (sink rate).
    Index first_key_rows = 0;
    std::vector<std::vector<Vector<double>>> first_key_attention;
    // whether head `head` of layer `layer` is analysed (options->heads empty: every head)
    bool analyses(int layer, int head) const {
      return options->heads.empty() || options->heads.count({layer, head}) > 0;
    }
  };

  // The arguments every generation checks: the prefix, the options, steps ≥ 0 and prefix + steps ≤ seq_len.
  void validate_generation(const char* function, const std::vector<int>& prefix, int steps,
                           const ForwardOptions& options) const {
    validate_tokens(function, prefix);
    validate_options(function, options);
    if (steps < 0) attnscope::detail::throw_invalid_argument(function, "steps must be >= 0, got ", steps);
    const Index total = static_cast<Index>(prefix.size()) + steps;
    if (total > config().seq_len)
      attnscope::detail::throw_invalid_argument(function, "prefix length ", prefix.size(), " + steps ", steps,
                                                " exceeds seq_len ", config().seq_len);
  }

  // The options of a generation's passes: no captures, every layer, no layer callbacks.
  static ForwardOptions generation_pass_options(const ForwardOptions& options) {
    ForwardOptions plain = options;
    plain.capture = CaptureOptions{};
    plain.last_layer = -1;
    plain.layer_progress = {};
    plain.layer_attention_inputs = {};
    return plain;
  }

  // The next token from a row of logits: argmax at temperature 0, else one draw of `random` (generate_sampled).
  static int choose_token(const RowMatrix<Scalar>& logits, double temperature, Random& random) {
    if (temperature == 0) return argmax_token(logits.row(0));
    return sample_token(logits.row(0), temperature, random);
  }

  static void check_temperature(const char* function, double temperature) {
    if (!(temperature >= 0) || !std::isfinite(temperature))
      attnscope::detail::throw_invalid_argument(function, "temperature must be finite and >= 0, got ", temperature);
  }

  // Checks the streaming settings of forward_row_statistics and generate_with_statistics against the model.
  void validate_streaming(const char* fn, const ForwardOptions& options, const StreamingOptions& streaming) const;

  // The statistics, most attended key and key-0 attention of one analysed head in a streaming run (see StreamingRun):
  // `statistics` and `last_row_scores` come from the kernel's pass when it computed them (whole sequences, or a
  // generation run of one row); for a longer generation run they are computed here for the last row.
  // The rows' attention is run again by the kernel for the rows it needs (their outputs are discarded).
  void record_streaming_head(StreamingRun& streaming, int l, int h, const RowMatrixView<Scalar>& head_queries,
                             const RowMatrixView<Scalar>& head_keys, const RowMatrixView<Scalar>& head_values,
                             Index offset, Index window, const stream::RowStatisticsOptions& kernel_options,
                             stream::RowStatistics& statistics, RowMatrix<Scalar>& last_row_scores) const {
    const Index rows = head_queries.rows(), total = head_keys.rows();
    // the kernel on query rows [first, first + count) (positions offset + first…) against the keys they see
    const auto rerun = [&](Index first, Index count, const stream::RowStatisticsOptions& settings,
                           const stream::AttentionCapture<Scalar>& targets) {
      RowMatrix<Scalar> discarded(count, head_values.cols());
      const Index keys = offset + first + count;
      stream::attention_into<Scalar>(RowMatrixView<Scalar>(head_queries.middleRows(first, count)),
                                     RowMatrixView<Scalar>(head_keys.topRows(keys)),
                                     RowMatrixView<Scalar>(head_values.topRows(keys)), discarded, settings, targets);
    };
    if (streaming.generation) {
      if (rows > 1) {  // the prompt: its last row again
        stream::RowStatisticsOptions last = kernel_options;
        last.visibility = visibility(1, total - 1, window);
        stream::AttentionCapture<Scalar> targets;
        targets.statistics = &statistics;
        targets.scores = &last_row_scores;
        rerun(rows - 1, 1, last, targets);
      }
      Index best = 0;  // the largest logit, the earliest key on ties
      for (Index j = 1; j < total; ++j)
        if (last_row_scores(0, j) > last_row_scores(0, best)) best = j;
      streaming.most_attended[std::size_t(l)][std::size_t(h)] = best;
    }
    if (offset >= streaming.first_key_rows) return;
    // the sink mass of key 0 alone, from the model's visibility, scale, softcap and learned sink
    const Index count = std::min(rows, streaming.first_key_rows - offset);
    stream::RowStatisticsOptions first = kernel_options;
    first.visibility = visibility(count, offset, window);
    first.sink_keys = {0};
    first.max_weight_excludes_sinks = false;
    first.top_k.clear();
    first.jacobian_norm = false;
    stream::RowStatistics first_rows;
    stream::AttentionCapture<Scalar> targets;
    targets.statistics = &first_rows;
    rerun(0, count, first, targets);
    streaming.first_key_attention[std::size_t(l)][std::size_t(h)] = std::move(first_rows.sink_mass);
  }

  template <class Choose>
  std::vector<int> generate(const char* function, const std::vector<int>& prefix, int steps,
                            const ForwardOptions& options, const ProgressCallback& progress, Choose&& choose) const {
    validate_generation(function, prefix, steps, options);
    const Index total = static_cast<Index>(prefix.size()) + steps;
    const ForwardOptions plain = generation_pass_options(options);
    std::vector<int> tokens = prefix;
    if (steps == 0) return tokens;
    detail::BasicDecoderState<Scalar> state = start_state(total);
    RowMatrix<Scalar> last_logits = run(prefix, state, plain, nullptr, true);
    for (int step = 0; step < steps; ++step) {
      const int next = choose(last_logits);
      tokens.push_back(next);
      if (progress) progress(step + 1, steps);
      if (step + 1 < steps) last_logits = run({next}, state, plain, nullptr, true);
    }
    return tokens;
  }

  void validate_weights() const;

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
    if (options.last_layer < -1 || options.last_layer >= config().n_layers)
      attnscope::detail::throw_invalid_argument(function, "options.last_layer = ", options.last_layer,
                                                " outside [-1, ", config().n_layers, ")");
    if (options.map && options.normalizer)
      attnscope::detail::throw_invalid_argument(function, "set either options.map or options.normalizer, not both");
    if (options.map) attnscope::detail::validate_map(function, *options.map);
    if ((options.map || options.normalizer) && config().learned_sinks)
      attnscope::detail::throw_invalid_argument(function, "the model's learned sinks join a softmax denominator; ",
                                                "options.map and options.normalizer replace the softmax and are not ",
                                                "defined for them");
    for (const auto& [layer, head] : options.ablated_heads)
      if (layer < 0 || layer >= config().n_layers || head < 0 || head >= config().n_heads)
        attnscope::detail::throw_invalid_argument(function, "ablated head (", layer, ", ", head,
                                                  ") outside the model's ", config().n_layers, " layers x ",
                                                  config().n_heads, " heads");
    const int layers_run = options.last_layer >= 0 ? options.last_layer + 1 : config().n_layers;
    for (const auto& [layer, head] : options.capture.heads)
      if (layer < 0 || layer >= layers_run || head < 0 || head >= config().n_heads)
        attnscope::detail::throw_invalid_argument(function, "capture.heads names (layer ", layer, ", head ", head,
                                                  ") outside the ", layers_run, " layers run x ", config().n_heads,
                                                  " heads");
  }

  detail::BasicDecoderState<Scalar> start_state(Index capacity) const {
    const auto& c = config();
    return detail::start_decoder_state<Scalar>(capacity, c.n_layers, c.kv_dim(), c.n_heads, c.head_dim);
  }

  // Keys query row i (at position offset + i) may see in a layer with this window: causal, or a causal window of
  // `window` keys counting the query itself (causal when the window covers every position so far).
  static Visibility visibility(Index rows, Index offset, Index window) {
    if (window <= 0 || offset + rows <= window) return Causal{offset};
    return SlidingWindow{window, true, offset};
  }

  // The attention weights of one head from its scaled scores: the map or the callable, written into `weights`.
  void normalize_into(const RowMatrix<Scalar>& scores, const Visibility& visible, const ForwardOptions& options,
                      RowMatrix<Scalar>& weights) const {
    if (options.map) {
      weights = apply_map(*options.map, scores, visible);
      return;
    }
    weights = options.normalizer(scores, visible);
    attnscope::detail::require_same_shape("Transformer::forward", "normalizer output/scores", weights.rows(),
                                          weights.cols(), scores.rows(), scores.cols());
    for (Index i = 0; i < weights.rows(); ++i)
      for (Index j = 0; j < weights.cols(); ++j) {
        if (!visible.visible(i, j, weights.cols())) weights(i, j) = Scalar(0);
        else if (!std::isfinite(weights(i, j)))
          attnscope::detail::throw_invalid_argument("Transformer::forward", "normalizer returned ", weights(i, j),
                                                    " at row ", i, ", column ", j);
      }
  }

  template <class Rows>
  RowMatrix<Scalar> norm(const Rows& rows, const Vector<Scalar>& weight, const Vector<Scalar>& bias) const {
    if (config().norm == NormKind::layer_norm) return layer_norm(rows, weight, bias, config().norm_epsilon);
    if (config().norm == NormKind::rms_norm_unit_offset)
      return rms_norm(rows, (weight.array() + Scalar(1)).matrix(), config().norm_epsilon);
    return rms_norm(rows, weight, config().norm_epsilon);
  }

  // The q or k norm in place: over each head of head_size columns (per_head) or the whole row (full_width).
  void query_key_norm(RowMatrix<Scalar>& rows, const Vector<Scalar>& weight) const {
    if (config().query_key_norm == QueryKeyNorm::none) return;
    if (config().query_key_norm == QueryKeyNorm::full_width) {
      rows = norm(rows, weight, Vector<Scalar>());
      return;
    }
    const Index head_size = config().head_dim, heads = rows.cols() / head_size;
    Eigen::Map<RowMatrix<Scalar>> per_head(rows.data(), rows.rows() * heads, head_size);
    per_head = norm(per_head, weight, Vector<Scalar>());
  }

  // q, k or v (a matrix or a block of its rows) clamped to [−clip_qkv, clip_qkv] (OLMoE: after the projections and
  // q/k norms, before RoPE).
  template <class Rows>
  void clip(Rows&& rows) const {
    if (config().clip_qkv <= 0) return;
    const Scalar bound = static_cast<Scalar>(config().clip_qkv);
    rows.array() = rows.array().max(-bound).min(bound);
  }

  // The residual update of one branch from its last activation `input` and output projection `w`:
  // pre-norm residual += input·wᵀ + bias; sandwich and post placements residual += post_norm(input·wᵀ + bias).
  // residual is the whole matrix or a block of its rows.
  template <class Residual>
  void add_branch(Residual&& residual, const RowMatrix<Scalar>& input, const WeightMatrix& w,
                  const Vector<Scalar>& bias, const Vector<Scalar>& post_norm, MatmulMode matmul) const {
    if (config().norm_placement == NormPlacement::pre) {
      detail::linear_add(residual, input, w, matmul);
      add_bias(residual, bias);
      return;
    }
    RowMatrix<Scalar> branch = detail::linear<Scalar>(input, w, matmul);
    add_bias(branch, bias);
    add_output(std::forward<Residual>(residual), branch, post_norm);
  }

  // The residual update of a branch whose output is already computed: residual += output (pre-norm) or
  // residual += post_norm(output).
  template <class Residual>
  void add_output(Residual&& residual, const RowMatrix<Scalar>& output, const Vector<Scalar>& post_norm) const {
    if (config().norm_placement == NormPlacement::pre) residual += output;
    else residual += norm(output, post_norm, Vector<Scalar>());
  }

  // The kernel's learned sink logit for head h of a layer with learned sinks (unset otherwise).
  void set_sink_logit(stream::RowStatisticsOptions& kernel_options, const TransformerLayerWeights& layer,
                      int h) const {
    if (config().learned_sinks) kernel_options.sink_logit = static_cast<double>(layer.sinks(h));
    else kernel_options.sink_logit.reset();
  }

  // Appends the rows of one feed-forward pass's routing to the layer's.
  static void append_routing(Routing& all, const Routing& pass) {
    const auto append = [](auto& target, const auto& rows) {
      const Index before = target.rows();
      target.conservativeResize(before + rows.rows(), rows.cols());
      target.bottomRows(rows.rows()) = rows;
    };
    append(all.router_logits, pass.router_logits);
    append(all.experts, pass.experts);
    append(all.weights, pass.weights);
  }

  // The feed-forward branch's hidden activation on its (normed) input, before the output projection w2: gated
  // (SwiGLU, GeGLU) or plain GELU (tanh or exact) of w1 x + b1. input is a matrix or a block of its rows.
  template <class Rows>
  RowMatrix<Scalar> feed_forward_hidden(const Eigen::MatrixBase<Rows>& input,
                                        const TransformerLayerWeights& layer, MatmulMode matmul) const {
    const FeedForwardKind kind = config().feed_forward;
    RowMatrix<Scalar> hidden = detail::linear<Scalar>(input, layer.w1, matmul);
    add_bias(hidden, layer.w1_bias);
    if (kind == FeedForwardKind::swiglu) {
      // silu(w1 x) ⊙ w3 x (run.c; Shazeer 2020 SwiGLU)
      hidden = swiglu_gate(hidden, detail::linear<Scalar>(input, layer.w3, matmul));
    } else if (kind == FeedForwardKind::geglu_tanh) {
      // gelu_tanh(w1 x) ⊙ w3 x (Shazeer 2020 GEGLU; Gemma)
      gelu_tanh_in_place(hidden);
      hidden.array() *= detail::linear<Scalar>(input, layer.w3, matmul).array();
    } else if (kind == FeedForwardKind::gelu_erf) {
      gelu_erf_in_place(hidden);  // gelu(w1 x + b1) (GPT-NeoX)
    } else {
      gelu_tanh_in_place(hidden);  // gelu_tanh(w1 x + b1) (GPT-2 MLP)
    }
    return hidden;
  }

  template <class Rows>
  static void add_bias(Rows&& rows, const Vector<Scalar>& bias) {
    detail::add_bias(std::forward<Rows>(rows), bias);
  }

  // Processes `tokens` at positions state.length.. (appending to the cache); returns logits of every new row, or of
  // the last one only. Fills `capture` (rows = new positions, score columns = all positions so far) when given.
  // With `streaming` (softmax only) the kernel also returns each head's row statistics, appended to
  // streaming->statistics (a whole sequence from position 0: every row's; a generation run: its last row's, with the
  // cache kept for the next run; see StreamingRun); no L×L buffer is allocated.
  RowMatrix<Scalar> run(const std::vector<int>& tokens, detail::BasicDecoderState<Scalar>& state,
                        const ForwardOptions& options, ForwardResult* capture, bool last_logits_only,
                        StreamingRun* streaming = nullptr) const;
};

template <class Scalar>
ForwardResult BasicTransformer<Scalar>::forward(const std::vector<int>& tokens, const ForwardOptions& options) const {
  validate_tokens("forward", tokens);
  validate_options("forward", options);
  detail::BasicDecoderState<Scalar> state = start_state(static_cast<Index>(tokens.size()));
  ForwardResult result;
  result.logits = run(tokens, state, options, &result, false);
  return result;
}

template <class Scalar>
StreamingForwardResult BasicTransformer<Scalar>::forward_row_statistics(const std::vector<int>& tokens,
                                                                      const ForwardOptions& options,
                                                                      const StreamingOptions& streaming) const {
  const char* fn = "Transformer::forward_row_statistics";
  const auto& c = config();
  validate_streaming(fn, options, streaming);
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
  StreamingRun run_state;
  run_state.options = &streaming;
  run_state.statistics.resize(std::size_t(c.n_layers));
  detail::BasicDecoderState<Scalar> state = start_state(length);
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

template <class Scalar>
GenerationResult BasicTransformer<Scalar>::generate_with_statistics(const std::vector<int>& prefix, int steps,
                                                                    const GenerationOptions& generation,
                                                                    const StreamingOptions& streaming,
                                                                    const ForwardOptions& options,
                                                                    const ProgressCallback& progress) const {
  const char* fn = "Transformer::generate_with_statistics";
  const auto& c = config();
  validate_generation(fn, prefix, steps, options);
  check_temperature(fn, generation.temperature);
  if (generation.first_key_queries < 0)
    attnscope::detail::throw_invalid_argument(fn, "generation.first_key_queries must be >= 0, got ",
                                              generation.first_key_queries);
  for (const int token : generation.stop_tokens)
    if (token < 0 || token >= c.vocab_size)
      attnscope::detail::throw_invalid_argument(fn, "stop token ", token, " outside [0, vocab_size = ", c.vocab_size,
                                                ")");
  const ForwardOptions plain = generation_pass_options(options);
  validate_streaming(fn, plain, streaming);
  const std::size_t layers = std::size_t(c.n_layers), heads = std::size_t(c.n_heads);
  const Index prompt_length = static_cast<Index>(prefix.size());
  StreamingRun run_state;
  run_state.options = &streaming;
  run_state.generation = true;
  run_state.first_key_rows = generation.first_key_queries;
  run_state.most_attended.assign(layers, std::vector<Index>(heads, 0));
  run_state.first_key_attention.assign(layers, std::vector<Vector<double>>(heads));
  GenerationResult result;
  result.tokens = prefix;
  result.prompt_length = prompt_length;
  result.step_statistics.assign(layers, std::vector<stream::RowStatistics>(heads));
  result.most_attended_key.assign(layers, std::vector<Eigen::Matrix<Index, Eigen::Dynamic, 1>>(heads));
  result.first_key_attention.assign(layers, std::vector<Vector<double>>(heads));
  const auto analysed = [&](std::size_t l, std::size_t h) { return run_state.analyses(int(l), int(h)); };
  for (std::size_t l = 0; l < layers; ++l)
    for (std::size_t h = 0; h < heads; ++h)
      if (analysed(l, h)) result.most_attended_key[l][h].resize(steps);
  if (steps == 0) return result;
  detail::BasicDecoderState<Scalar> state = start_state(prompt_length + steps);
  Random random(generation.seed);
  std::vector<int> input = prefix;
  Index done = 0;
  for (int step = 0; step < steps; ++step) {
    run_state.statistics.assign(layers, {});
    const RowMatrix<Scalar> logits = run(input, state, plain, nullptr, true, &run_state);
    for (std::size_t l = 0; l < layers; ++l)
      for (std::size_t h = 0; h < heads; ++h) {
        if (!analysed(l, h)) continue;
        detail::set_step_statistics(result.step_statistics[l][h], steps, step, run_state.statistics[l][h]);
        result.most_attended_key[l][h](step) = run_state.most_attended[l][h];
        Vector<double>& first_key = result.first_key_attention[l][h];
        const Vector<double>& rows = run_state.first_key_attention[l][h];
        if (rows.size() == 0) continue;
        first_key.conservativeResize(first_key.size() + rows.size());
        first_key.tail(rows.size()) = rows;
        run_state.first_key_attention[l][h].resize(0);
      }
    const int next = choose_token(logits, generation.temperature, random);
    result.tokens.push_back(next);
    done = step + 1;
    if (generation.on_token) generation.on_token(next);
    if (progress) progress(step + 1, steps);
    if (std::find(generation.stop_tokens.begin(), generation.stop_tokens.end(), next) != generation.stop_tokens.end())
      break;
    input.assign(1, next);
  }
  result.steps = done;
  if (done < steps)
    for (std::size_t l = 0; l < layers; ++l)
      for (std::size_t h = 0; h < heads; ++h)
        if (analysed(l, h)) {
          detail::keep_step_statistics(result.step_statistics[l][h], done);
          result.most_attended_key[l][h].conservativeResize(done);
        }
  return result;
}

template <class Scalar>
void BasicTransformer<Scalar>::validate_streaming(const char* fn, const ForwardOptions& options,
                                                  const StreamingOptions& streaming) const {
  const auto& c = config();
  if (options.map || options.normalizer)
    attnscope::detail::throw_invalid_argument(fn, "only softmax attention streams: options.map and ",
                                              "options.normalizer must be unset");
  if (options.capture.scores || options.capture.attention)
    attnscope::detail::throw_invalid_argument(fn, "capture.scores and capture.attention are L x L matrices, ",
                                              "which the streaming forward never forms; use forward()");
  const stream::RowStatisticsOptions& statistics = streaming.statistics;
  if (statistics.visibility.kind() != Visibility::Kind::causal_prefix || statistics.visibility.causal_offset() != 0 ||
      statistics.scale || statistics.logit_softcap || statistics.sink_logit)
    attnscope::detail::throw_invalid_argument(fn, "streaming.statistics.visibility, scale, logit_softcap and ",
                                              "sink_logit are set by the model (causal, each layer's window, its ",
                                              "attention scale, softcap and learned sinks); leave them at their ",
                                              "defaults");
  if (streaming.query_block <= 0 || streaming.key_block <= 0)
    attnscope::detail::throw_invalid_argument(fn, "query_block = ", streaming.query_block, " and key_block = ",
                                              streaming.key_block, " must be >= 1");
  if (streaming.feed_forward_rows < 0 || streaming.feed_forward_rows % 8 != 0)
    attnscope::detail::throw_invalid_argument(fn, "feed_forward_rows = ", streaming.feed_forward_rows,
                                              " must be a multiple of 8 (0: every row at once)");
  const int layers_run = options.last_layer >= 0 ? options.last_layer + 1 : c.n_layers;
  for (const auto& [layer, head] : streaming.heads)
    if (layer < 0 || layer >= layers_run || head < 0 || head >= c.n_heads)
      attnscope::detail::throw_invalid_argument(fn, "streaming.heads names (layer ", layer, ", head ", head,
                                                "), outside the ", layers_run, " layers run (of ", c.n_layers,
                                                ") x ", c.n_heads, " heads");
}

template <class Scalar>
void BasicTransformer<Scalar>::validate_weights() const {
  const auto& c = weights_.config;
  const char* fn = "Transformer";
  if (const std::string problem = detail::transformer_config_problem(c); !problem.empty())
    attnscope::detail::throw_invalid_argument(fn, "invalid configuration: ", problem);
  const Index dim = c.dim, hidden = c.hidden_dim, query_dim = c.query_dim(), kv_dim = c.kv_dim();
  const bool layer_norm = c.norm == NormKind::layer_norm, gated = is_gated(c.feed_forward);
  const bool pre_norms = c.norm_placement != NormPlacement::post, post_norms = c.norm_placement != NormPlacement::pre;
  const Index q_norm_size = c.query_key_norm == QueryKeyNorm::per_head ? c.head_dim
                            : c.query_key_norm == QueryKeyNorm::full_width ? query_dim : 0;
  const Index k_norm_size = c.query_key_norm == QueryKeyNorm::per_head ? c.head_dim
                            : c.query_key_norm == QueryKeyNorm::full_width ? kv_dim : 0;
  auto shape = [&](const std::string& name, Index rows, Index cols, Index want_rows, Index want_cols) {
    if (rows != want_rows || cols != want_cols)
      attnscope::detail::throw_invalid_argument(fn, name, " has shape ", rows, "x", cols, ", expected ", want_rows,
                                                "x", want_cols);
  };
  auto check_matrix = [&](const std::string& name, const WeightMatrix& m, Index rows, Index cols) {
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
  if (layer_norm && (c.norm_placement != NormPlacement::pre || c.query_key_norm != QueryKeyNorm::none))
    attnscope::detail::throw_invalid_argument(fn, "LayerNorm is implemented for pre-norm blocks without q/k norms "
                                              "only (the post and q/k norms have no bias)");
  if (weights_.layers.size() != static_cast<std::size_t>(c.n_layers))
    attnscope::detail::throw_invalid_argument(fn, "have ", weights_.layers.size(), " layers, config says ",
                                              c.n_layers);
  for (std::size_t l = 0; l < weights_.layers.size(); ++l) {
    const auto& layer = weights_.layers[l];
    const std::string at = attnscope::detail::concat("layers[", l, "].");
    check_vector(at + "attention_norm", layer.attention_norm, pre_norms ? dim : 0);
    check_vector(at + "attention_norm_bias", layer.attention_norm_bias, pre_norms && layer_norm ? dim : 0);
    check_vector(at + "ffn_norm", layer.ffn_norm, pre_norms ? dim : 0);
    check_vector(at + "ffn_norm_bias", layer.ffn_norm_bias, pre_norms && layer_norm ? dim : 0);
    check_vector(at + "post_attention_norm", layer.post_attention_norm, post_norms ? dim : 0);
    check_vector(at + "post_ffn_norm", layer.post_ffn_norm, post_norms ? dim : 0);
    check_vector(at + "q_norm", layer.q_norm, q_norm_size);
    check_vector(at + "k_norm", layer.k_norm, k_norm_size);
    check_matrix(at + "wq", layer.wq, query_dim, dim);
    check_matrix(at + "wk", layer.wk, kv_dim, dim);
    check_matrix(at + "wv", layer.wv, kv_dim, dim);
    check_matrix(at + "wo", layer.wo, dim, query_dim);
    check_vector(at + "wq_bias", layer.wq_bias, c.attention_qkv_bias ? query_dim : 0);
    check_vector(at + "wk_bias", layer.wk_bias, c.attention_qkv_bias ? kv_dim : 0);
    check_vector(at + "wv_bias", layer.wv_bias, c.attention_qkv_bias ? kv_dim : 0);
    check_vector(at + "wo_bias", layer.wo_bias, c.attention_output_bias ? dim : 0);
    check_vector(at + "sinks", layer.sinks, c.learned_sinks ? c.n_heads : 0);
    const bool sparse = c.moe.is_sparse(int(l));
    check_matrix(at + "w1", layer.w1, sparse ? 0 : hidden, sparse ? 0 : dim);
    check_matrix(at + "w2", layer.w2, sparse ? 0 : dim, sparse ? 0 : hidden);
    check_matrix(at + "w3", layer.w3, gated && !sparse ? hidden : 0, gated && !sparse ? dim : 0);
    check_vector(at + "w1_bias", layer.w1_bias, c.feed_forward_bias && !sparse ? hidden : 0);
    check_vector(at + "w2_bias", layer.w2_bias, c.feed_forward_bias && !sparse ? dim : 0);
    const MixtureOfExperts& moe = c.moe;
    const Index experts = sparse ? moe.experts : 0, expert_hidden = moe.expert_hidden_dim;
    check_matrix(at + "moe.router", layer.moe.router, experts, sparse ? dim : 0);
    check_vector(at + "moe.router_bias", layer.moe.router_bias, sparse && moe.router_bias ? experts : 0);
    if (layer.moe.experts.size() != std::size_t(experts))
      attnscope::detail::throw_invalid_argument(fn, at, "moe.experts has ", layer.moe.experts.size(),
                                                " experts, expected ", experts);
    for (std::size_t e = 0; e < layer.moe.experts.size(); ++e) {
      const ExpertWeights& expert = layer.moe.experts[e];
      const std::string name = attnscope::detail::concat(at, "moe.experts[", e, "].");
      const bool fused = expert.gate_up.size() > 0, biased = moe.expert_bias;
      check_matrix(name + "gate_up", expert.gate_up, fused ? 2 * expert_hidden : 0, fused ? dim : 0);
      check_matrix(name + "gate", expert.gate, fused ? 0 : expert_hidden, fused ? 0 : dim);
      check_matrix(name + "up", expert.up, fused ? 0 : expert_hidden, fused ? 0 : dim);
      check_matrix(name + "down", expert.down, dim, expert_hidden);
      check_vector(name + "gate_up_bias", expert.gate_up_bias, biased && fused ? 2 * expert_hidden : 0);
      check_vector(name + "gate_bias", expert.gate_bias, biased && !fused ? expert_hidden : 0);
      check_vector(name + "up_bias", expert.up_bias, biased && !fused ? expert_hidden : 0);
      check_vector(name + "down_bias", expert.down_bias, biased ? dim : 0);
    }
  }
}

template <class Scalar>
RowMatrix<Scalar> BasicTransformer<Scalar>::run(const std::vector<int>& tokens,
                                                detail::BasicDecoderState<Scalar>& state, const ForwardOptions& options,
                                                ForwardResult* capture, bool last_logits_only,
                                                StreamingRun* streaming) const {
  const auto& c = config();
  const Index rows = static_cast<Index>(tokens.size()), offset = state.length, total = offset + rows;
  const Index head_size = c.head_dim, heads_per_kv = c.n_heads / c.n_kv_heads;
  const CaptureOptions want = capture ? options.capture : CaptureOptions{};
  if (capture && (want.any_head_capture() || want.routing)) capture->layers.resize(std::size_t(c.n_layers));
  // the attention kernel's settings: the layer's visibility and the scale (1/√head_size by default: Vaswani et al.
  // 2017, eq. 1; run.c divides the scores by sqrtf(head_size)), the softcap, the streaming statistics' choices
  stream::RowStatisticsOptions kernel_options = streaming ? streaming->options->statistics
                                                          : stream::RowStatisticsOptions{};
  kernel_options.scale = c.attention_scale > 0 ? c.attention_scale : 1.0 / std::sqrt(static_cast<double>(head_size));
  if (c.attention_softcap > 0) kernel_options.logit_softcap = c.attention_softcap;
  if (streaming) kernel_options.block_rows = streaming->options->query_block;
  const Index feed_forward_rows =
      streaming && streaming->options->feed_forward_rows > 0 ? streaming->options->feed_forward_rows : rows;
  const bool softmax = !options.map && !options.normalizer;
  const bool rope = c.position_encoding != PositionEncoding::learned;
  const RopeConvention convention = c.position_encoding == PositionEncoding::rope_interleaved
                                        ? RopeConvention::interleaved
                                        : RopeConvention::rotate_half;
  // RoPE tables: the global one, and the sliding-window layers' own when they have their own base (Gemma 3)
  const RotaryTable rotary = rope ? rotary_table(offset, rows, rope_frequencies(c, total)) : RotaryTable{};
  const bool local_rope = rope && c.rope_local_theta > 0;
  const RotaryTable local_rotary = local_rope ? rotary_table(offset, rows, rope_frequencies(c, total, true))
                                             : RotaryTable{};

  RowMatrix<Scalar> residual;
  detail::embedding_rows(residual, weights_.token_embedding, tokens);
  if (c.embedding_scale != 1.0f) residual *= c.embedding_scale;                        // Gemma: √dim
  if (!rope) detail::add_embedding_rows(residual, weights_.position_embedding, offset);  // GPT-2: wte + wpe

  const bool pre_norm = c.norm_placement != NormPlacement::post;
  RowMatrix<Scalar> queries(rows, c.query_dim()), head_outputs(rows, c.query_dim());
  RowMatrix<Scalar> scores, attention_buffer;  // reused across heads unless captured
  const int layers_run = options.last_layer >= 0 ? options.last_layer + 1 : c.n_layers;
  const bool returns_logits = last_logits_only || (options.logits && layers_run == c.n_layers);
  // A streaming pass that returns no logits and captures neither hidden states nor per-head arrays reads nothing of
  // its last layer but the statistics: that layer computes its analysed heads' statistics only (q·kᵀ and the row
  // passes; no values, no P·V, no output projection, no feed-forward). The statistics are bitwise those of a full
  // layer: the kernel's logits and row passes do not depend on whether it goes on to P·V.
  const bool statistics_only_last_layer =
      streaming && !returns_logits && !want.hidden_states && !want.any_head_capture() && !want.routing;
  for (int l = 0; l < layers_run; ++l) {
    const auto& layer = weights_.layers[std::size_t(l)];
    const bool statistics_only = statistics_only_last_layer && l == layers_run - 1;
    if (want.hidden_states) capture->hidden_states.push_back(residual);
    const Index window = c.window_of_layer(l);
    const Visibility visible = visibility(rows, offset, window);
    kernel_options.visibility = visible;
    kernel_options.sink_logit.reset();  // set per head (set_sink_logit)
    // Attention block: norm, q/k/v projections (+ biases), q/k norms, RoPE, per-head attention, wo (+ bias).
    const RowMatrix<Scalar> normed =
        pre_norm ? norm(residual, layer.attention_norm, layer.attention_norm_bias) : residual;
    // parallel residual (GPT-NeoX): the feed-forward reads the same x as attention
    RowMatrix<Scalar> ffn_input = c.parallel_residual && !statistics_only
                                      ? norm(residual, layer.ffn_norm, layer.ffn_norm_bias)
                                      : RowMatrix<Scalar>();
    detail::linear_into(queries, normed, layer.wq, options.matmul);
    add_bias(queries, layer.wq_bias);
    RowMatrix<Scalar> new_keys = detail::linear<Scalar>(normed, layer.wk, options.matmul);
    add_bias(new_keys, layer.wk_bias);
    query_key_norm(queries, layer.q_norm);
    query_key_norm(new_keys, layer.k_norm);
    clip(queries);
    clip(new_keys);
    if (rope) {
      const RotaryTable& table = local_rope && window > 0 ? local_rotary : rotary;
      apply_rotary(queries, head_size, table, convention);
      apply_rotary(new_keys, head_size, table, convention);
    }
    RowMatrix<Scalar>& keys = state.keys[std::size_t(l)];
    RowMatrix<Scalar>& values = state.values[std::size_t(l)];
    keys.middleRows(offset, rows) = new_keys;
    if (options.layer_attention_inputs && !last_logits_only)
      options.layer_attention_inputs(l, queries, keys.topRows(total), kernel_options);
    if (statistics_only) {
      for (int h = 0; h < c.n_heads; ++h) {
        stream::RowStatistics statistics;  // stays empty for a head that is not analysed
        set_sink_logit(kernel_options, layer, h);
        if (streaming->analyses(l, h))
          statistics = stream::row_statistics(queries.middleCols(h * head_size, head_size),
                                              keys.topRows(total).middleCols(h / heads_per_kv * head_size, head_size),
                                              kernel_options);
        streaming->statistics[std::size_t(l)].push_back(std::move(statistics));
      }
      keys = values = RowMatrix<Scalar>();
      if (options.layer_progress) options.layer_progress(l + 1, layers_run);
      continue;
    }
    detail::linear_into(values.middleRows(offset, rows), normed, layer.wv, options.matmul);
    if (layer.wv_bias.size() > 0) values.middleRows(offset, rows).rowwise() += layer.wv_bias.transpose();
    clip(values.middleRows(offset, rows));

    LayerCapture* layer_capture = want.any_head_capture() ? &capture->layers[std::size_t(l)] : nullptr;
    for (int h = 0; h < c.n_heads; ++h) {
      const bool record = layer_capture && want.records(l, h);  // an unselected head keeps empty entries
      const bool keep_scores = record && want.scores, keep_attention = record && want.attention;
      const Index kv_head = h / heads_per_kv;
      const RowMatrixView<Scalar> head_queries(queries.middleCols(h * head_size, head_size));
      const RowMatrixView<Scalar> head_keys(keys.topRows(total).middleCols(kv_head * head_size, head_size));
      const RowMatrixView<Scalar> head_values(values.topRows(total).middleCols(kv_head * head_size, head_size));
      auto output = head_outputs.middleCols(h * head_size, head_size);
      RowMatrix<Scalar> captured_attention;
      Vector<double> captured_sink;
      set_sink_logit(kernel_options, layer, h);
      if (softmax) {
        // one pass of the kernel: scaled scores, softmax (+ statistics), P·V; L×L buffers only when captured
        stream::AttentionCapture<Scalar> targets;
        if (keep_scores) targets.scores = &scores;
        if (keep_attention) targets.probabilities = &captured_attention;
        if (keep_attention && c.learned_sinks) targets.learned_sink = &captured_sink;
        stream::RowStatistics statistics;  // stays empty for a head that is not analysed
        RowMatrix<Scalar> last_row_scores;
        const bool analysed = streaming && streaming->analyses(l, h);
        // the kernel's own pass gives every row's statistics, or in a generation run of one row that row's
        if (analysed && (!streaming->generation || rows == 1)) targets.statistics = &statistics;
        if (analysed && streaming->generation && rows == 1 && !targets.scores) targets.scores = &last_row_scores;
        stream::attention_into<Scalar>(head_queries, head_keys, head_values, output, kernel_options, targets);
        if (analysed) {
          if (targets.scores == &scores) last_row_scores = scores.bottomRows(1);
          record_streaming_head(*streaming, l, h, head_queries, head_keys, head_values, offset, window, kernel_options,
                                statistics, last_row_scores);
        }
        if (streaming) streaming->statistics[std::size_t(l)].push_back(std::move(statistics));
      } else {
        // other maps: the kernel forms the scaled scores (−inf where invisible), the map normalizes them
        stream::attention_scores<Scalar>(head_queries, head_keys, scores, kernel_options);
        RowMatrix<Scalar>& attention = keep_attention ? captured_attention : attention_buffer;
        normalize_into(scores, visible, options, attention);
        if (!detail::packed_product(output, RowMatrixView<Scalar>(attention), head_values))
          output.noalias() = attention * head_values;
      }
      detail::ablate(state, options, l, h, output);
      if (record) {
        if (want.q) layer_capture->q.emplace_back(head_queries);
        if (want.k) layer_capture->k.emplace_back(head_keys);
        if (want.v) layer_capture->v.emplace_back(head_values);
        if (want.scores) layer_capture->scores.push_back(std::move(scores));  // handed over, not copied
        if (want.attention) layer_capture->attention.push_back(std::move(captured_attention));
        if (want.attention && c.learned_sinks) layer_capture->learned_sink.push_back(std::move(captured_sink));
        if (want.head_output) layer_capture->head_output.emplace_back(output);
      } else if (layer_capture) {  // keeps entry h of every recorded array at index h
        if (want.q) layer_capture->q.emplace_back();
        if (want.k) layer_capture->k.emplace_back();
        if (want.v) layer_capture->v.emplace_back();
        if (want.scores) layer_capture->scores.emplace_back();
        if (want.attention) layer_capture->attention.emplace_back();
        if (want.attention && c.learned_sinks) layer_capture->learned_sink.emplace_back();
        if (want.head_output) layer_capture->head_output.emplace_back();
      }
    }
    // a whole sequence: no later pass reads this layer's cache (a generation's next step does)
    if (streaming && !streaming->generation) keys = values = RowMatrix<Scalar>();
    add_branch(residual, head_outputs, layer.wo, layer.wo_bias, layer.post_attention_norm, options.matmul);
    // Feed-forward block on norm(x) (x before the attention update with a parallel residual), in passes of
    // feed_forward_rows rows: a row's branch reads and updates that row only, so the rows × hidden_dim activations
    // exist for one pass at a time (a pass reads its rows of the residual before it updates them). The packed GEMM
    // (kernels/gemm.hpp) sums every element in an order fixed by the depth, so the passes give bitwise the products
    // of one pass; with Eigen's GEMM (no AVX2) passes of a multiple of 8 rows keep every row in its full blocks of
    // rows (only the sequence's last rows fall in its remainder kernels, as in one pass), with the same effect.
    if (!c.parallel_residual && pre_norm) ffn_input = norm(residual, layer.ffn_norm, layer.ffn_norm_bias);
    const RowMatrix<Scalar>& ffn_rows = c.parallel_residual || pre_norm ? ffn_input : residual;
    const bool sparse = c.moe.is_sparse(l);
    Routing* routing = capture && want.routing && sparse ? &capture->layers[std::size_t(l)].routing : nullptr;
    for (Index first = 0; first < rows; first += feed_forward_rows) {
      const Index count = std::min(feed_forward_rows, rows - first);
      if (sparse) {  // the routing-weighted sum of the chosen experts (model/detail/mixture_of_experts.hpp)
        Routing pass_routing;
        const RowMatrix<Scalar> branch = detail::mixture_forward<Scalar>(ffn_rows.middleRows(first, count), layer.moe,
                                                                         c.moe, routing ? &pass_routing : nullptr,
                                                                         options.matmul);
        if (routing) append_routing(*routing, pass_routing);
        add_output(residual.middleRows(first, count), branch, layer.post_ffn_norm);
        continue;
      }
      const RowMatrix<Scalar> hidden = feed_forward_hidden(ffn_rows.middleRows(first, count), layer, options.matmul);
      add_branch(residual.middleRows(first, count), hidden, layer.w2, layer.w2_bias, layer.post_ffn_norm,
                 options.matmul);
    }
    if (options.layer_progress) options.layer_progress(l + 1, layers_run);
  }
  state.length = total;
  if (want.hidden_states) capture->hidden_states.push_back(residual);
  if (!last_logits_only && (!options.logits || layers_run < c.n_layers)) return RowMatrix<Scalar>();
  // Final norm then the output head.
  RowMatrix<Scalar> logits;
  if (last_logits_only) {
    const RowMatrix<Scalar> last_row = residual.bottomRows(1);
    logits = detail::linear<Scalar>(norm(last_row, weights_.final_norm, weights_.final_norm_bias), weights_.output_head(),
                                    options.matmul);
  } else {
    logits = detail::linear<Scalar>(norm(residual, weights_.final_norm, weights_.final_norm_bias), weights_.output_head(),
                                    options.matmul);
  }
  if (c.final_logit_softcap > 0) softcap_in_place(logits, c.final_logit_softcap);  // Gemma: c·tanh(z/c)
  return logits;
}

/// The transformer of float32 weights (every supported architecture).
using Transformer = BasicTransformer<float>;

#ifdef ATTNSCOPE_EXTERN_TEMPLATES
// Compiled once in the optional compiled part (src/extern_templates/transformer.cpp): the forward pass, defined outside the class
// above so that this declaration keeps every other translation unit from instantiating it.
extern template class BasicTransformer<float>;
#endif

}  // namespace attnscope::model
