// attnscope/model/forward_options.hpp — what a forward pass computes and returns: captures, the attention
// normalization, head ablation, the streaming settings, the generation settings, and the result types of forward(),
// forward_row_statistics() and generate_with_statistics().
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/normalize/maps.hpp"
#include "attnscope/stream/statistics_types.hpp"

namespace attnscope::model {

/// What forward() records besides the logits; everything off by default so callers pay only for what they ask.
struct CaptureOptions {
  bool q = false;            // queries after RoPE, per head (L × head_size)
  bool k = false;            // keys after RoPE, per query head (L × head_size; GQA: copy of the shared kv head)
  bool v = false;            // values, per query head (L × head_size; GQA: copy of the shared kv head)
  bool scores = false;       // scaled scores q·k/√head_size (L × L; invisible entries −inf)
  bool attention = false;    // attention weights after the normalization map (L × L; invisible entries 0)
  bool head_output = false;  // attention · V of each head before wo, after ablation (L × head_size)
  bool hidden_states = false;  // residual stream at each layer input, then before the final norm (L × dim)
  bool routing = false;      // Mixture-of-Experts layers: router logits, chosen experts and their weights (Routing)
  /// The (layer, head) pairs whose per-head arrays (q, k, v, scores, attention, head_output) are recorded; empty:
  /// every head. The other heads still run (their outputs feed the next layer) but their entries in
  /// ForwardResult::layers stay empty matrices, so a report on a few heads does not keep every head's L × L arrays.
  std::set<std::pair<int, int>> heads{};

  /// Every flag on.
  static CaptureOptions everything() {
    CaptureOptions options;
    options.q = options.k = options.v = options.scores = options.attention = true;
    options.head_output = options.hidden_states = options.routing = true;
    return options;
  }
  /// Scores and attention only (what the per-head report needs).
  static CaptureOptions attention_only() {
    CaptureOptions options;
    options.scores = options.attention = true;
    return options;
  }
  bool any_head_capture() const { return q || k || v || scores || attention || head_output; }
  /// Whether head `head` of layer `layer` has its per-head arrays recorded (see `heads`).
  bool records(int layer, int head) const { return heads.empty() || heads.count({layer, head}) > 0; }
};

/// A normalization of attention scores: gets the scaled scores of one head (rows = queries, invisible entries −inf)
/// and the visibility (causal, or a causal SlidingWindow under config.sliding_window), returns weights of the same
/// shape (entries outside the visibility are set to 0).
using AttentionNormalizer =
    std::function<RowMatrix<float>(const RowMatrix<float>& scaled_scores, const Visibility& visibility)>;

/// How an ablated head's output (attention · V, before wo) is replaced.
enum class AblationMode {
  zero,  // by 0 (head pruning)
  mean,  // [derived] by the running mean of that head's output over positions 0..p (keeps the pass causal)
};

/// Progress callback: (steps done, total steps).
using ProgressCallback = std::function<void(int, int)>;

/// Per-layer view of what the attention of one layer reads: (layer, queries, keys, attention), called once per layer
/// run, after the q/k projections, biases, q/k norms and RoPE and before the heads' attention. queries: the pass's rows
/// × n_heads·head_dim (head h in columns h·head_dim…), keys: every position so far × n_kv_heads·head_dim (query head h
/// reads kv head h / (n_heads / n_kv_heads)), attention: the kernel's settings of the layer (visibility with its row
/// offset and window, scale, softcap). The views are valid during the call only.
using LayerAttentionInputs = std::function<void(int layer, const RowMatrixView<float>& queries,
                                                const RowMatrixView<float>& keys,
                                                const stream::RowStatisticsOptions& attention)>;

/// How the forward pass multiplies activations with block-quantized (GGUF) weight matrices (model/detail/linear.hpp):
/// `exact` multiplies the float32 activations with the dequantized weights in float32; `llama_cpp` rounds each
/// activation row to 8 bits per block and multiplies by integer dot products as llama.cpp's CPU backend does
/// (kernels/integer_dot.hpp; the formats of kernels::integer_dot_supported: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K … Q6_K,
/// IQ4_NL, IQ4_XS and MXFP4; every other format stays exact).
enum class MatmulMode { exact, llama_cpp };

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
  /// Run layers 0..last_layer only (−1: every layer). A pass that stops early returns no logits (an empty matrix),
  /// its captures and row statistics cover the layers run (hidden_states: their inputs, then the last one's
  /// output), and the key/value cache of the layers not run is never touched. Ignored by generation and likelihood.
  int last_layer = -1;
  /// Whether forward() and forward_row_statistics() compute the logits (L × vocab: 2 GB for 4096 tokens of a
  /// 128256-word vocabulary); false returns an empty matrix.
  bool logits = true;
  /// Called after each layer with (layers done, layers to run).
  ProgressCallback layer_progress{};
  /// Called in each layer with its post-RoPE queries and keys (see LayerAttentionInputs) by forward(),
  /// forward_row_statistics() and the likelihood; generation ignores it.
  LayerAttentionInputs layer_attention_inputs{};
  /// How block-quantized weights are multiplied (see MatmulMode); exact by default.
  MatmulMode matmul = MatmulMode::exact;
};

/// The routing of one sparse (Mixture-of-Experts) layer: per token its router logits (tokens × E), the k chosen experts
/// in descending order of their router logit (ties: the lower expert index first) and their weights (tokens × k).
struct Routing {
  RowMatrix<float> router_logits;
  Eigen::Matrix<int, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> experts;
  RowMatrix<double> weights;
};

/// Per-head captures of one layer; each vector has n_heads entries (or is empty when not requested).
struct LayerCapture {
  std::vector<RowMatrix<float>> q, k, v, scores, attention, head_output;
  /// With learned sinks (config.learned_sinks) and `attention` captured: per head, the sink's share σ of every row
  /// (the attention rows then sum to 1 − σ).
  std::vector<Vector<double>> learned_sink;
  /// With `routing` captured, for a sparse (MoE) layer: the router's logits, choices and weights of every row.
  Routing routing;
};

/// Result of forward(): logits (L × vocab) and the requested captures.
struct ForwardResult {
  RowMatrix<float> logits;
  std::vector<LayerCapture> layers;              // n_layers entries when any per-head capture is requested
  std::vector<RowMatrix<float>> hidden_states;  // n_layers + 1 entries when requested
};

/// Settings of the streaming forward (Transformer::forward_row_statistics) besides the ForwardOptions.
struct StreamingOptions {
  /// Which statistics the attention kernel computes per head: sink_keys, max_weight_excludes_sinks, top_k,
  /// jacobian_norm, threads. visibility and scale belong to the model (causal, config.sliding_window,
  /// 1/√head_size) and must stay at their defaults; the block size is query_block.
  stream::RowStatisticsOptions statistics{};
  /// RoPE models only: allow L > config.seq_len (positions the model was not trained on; RoPE extrapolates, the
  /// result's beyond_trained_positions says so). Learned absolute positions (GPT-2) have no embedding past seq_len.
  bool allow_beyond_trained_positions = false;
  /// Query rows per block of the attention kernel (memory per thread: query_block × visible keys scores).
  Index query_block = 64;
  /// Must be ≥ 1; has no effect (a block's strip holds all keys its rows see, so keys are not split in blocks).
  Index key_block = 256;
  /// The (layer, head) pairs whose statistics are computed; empty: every head of every layer run. The other heads
  /// run the plain softmax attention (the same probabilities and outputs, no statistics) and their entries of
  /// row_statistics stay empty. Each pair must name a head of a layer that runs (see ForwardOptions::last_layer).
  /// When the pass returns no logits (ForwardOptions::logits false, or last_layer set) and captures no hidden states
  /// and no per-head array, nothing reads the last layer's output: that layer computes only its selected heads'
  /// statistics (q·kᵀ and the row passes, no values, P·V, output projection or feed-forward), bitwise the same.
  std::set<std::pair<int, int>> heads{};
  /// Query rows per pass of the feed-forward block: its L × hidden_dim activations (the up projection, the gate and
  /// their product) exist for this many rows at a time, so their memory does not grow with L. 0: every row at once.
  /// Must be a multiple of 8: rows are independent and such passes give bitwise the results of one pass (Eigen's
  /// GEMM; other pass sizes would put a pass's last rows in its remainder kernels, which round differently).
  Index feed_forward_rows = 512;
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

/// Called with each generated token as soon as it is chosen (before the next step runs).
using TokenCallback = std::function<void(int token)>;

/// How Transformer::generate_with_statistics picks tokens and what it records besides the step statistics.
struct GenerationOptions {
  /// 0: greedy (argmax, first index on ties, as generate_greedy); > 0: sampling from softmax(logits / temperature)
  /// with attnscope::Random(seed), as generate_sampled.
  double temperature = 0;
  std::uint64_t seed = 0;
  /// Generation stops after a step whose token is one of these (that token is kept); empty: run every step.
  std::vector<int> stop_tokens{};
  /// T of the sink rate (Gu et al. 2024, arXiv 2410.10781, §3.1): the attention on key 0 is returned for the query
  /// rows at positions 0..T−1 (fewer when the sequence is shorter). 0: none.
  Index first_key_queries = 64;
  /// Sees each generated token as soon as it is chosen (e.g. to print the text as it goes).
  TokenCallback on_token{};
};

/// Result of generate_with_statistics(). Step s (0 ≤ s < steps) is the decoding step that picks tokens[P + s]
/// (P = prompt_length) from the output of query row P − 1 + s: the prompt's last row for s = 0, then the row of each
/// token fed back. Per layer and head the entries are empty for the heads not selected by StreamingOptions::heads.
struct GenerationResult {
  std::vector<int> tokens;  // the prompt, then the generated tokens
  Index prompt_length = 0;
  Index steps = 0;          // tokens generated (fewer than asked when a stop token came)
  /// [layer][head]: the exact row statistics (as forward_row_statistics computes them) of each step's query row,
  /// length `steps`.
  std::vector<std::vector<stream::RowStatistics>> step_statistics;
  /// [layer][head]: per step, the key its query row attends most (the largest scaled, capped logit, which is the
  /// largest weight; the earliest key on ties).
  std::vector<std::vector<Eigen::Matrix<Index, Eigen::Dynamic, 1>>> most_attended_key;
  /// [layer][head]: the attention weight on key 0 of the query rows at positions 0..min(first_key_queries, rows
  /// run) − 1 (the rows run are the prompt and the fed-back tokens, P + steps − 1).
  std::vector<std::vector<Vector<double>>> first_key_attention;
};

}  // namespace attnscope::model
