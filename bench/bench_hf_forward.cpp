// bench_hf_forward: a Hugging Face model folder's forward pass with full capture (q, k, v, scores and attention of
// every head, as `attnscope capture` keeps them) over L tokens, single-threaded. Its peer is PyTorch's eager forward
// of the same weights (bench/gpt2_small_peer.py); bench/gpt2_side_by_side.sh runs both in one go on a random-weight
// GPT-2-small folder. The folder comes from the environment variable ATTNSCOPE_BENCH_MODEL (skipped when unset);
// the token ids are (7919 · p) mod vocab for position p, as in the peer. Counters: tokens per second and the peak
// resident memory of the process (getrusage) after the runs.
//
// BM_forward_logits and BM_streaming_statistics (argument: OpenMP threads) give the achieved GFLOP/s of the forward
// pass (logits, no captures) and of the streaming forward `rowstats --model` runs (every head's statistics, no
// logits, stopped after ATTNSCOPE_BENCH_LAYERS layers, default all) over ATTNSCOPE_BENCH_TOKENS tokens (default
// 1024); bench/forward_vs_sgemm.sh sets them against numpy's sgemm in the same run. BM_streaming_one_head analyses
// only the last layer's head 0 (the time a --layers/--heads selection saves); ns_per_pair is the streaming forward's
// time per visible (query, key) pair of each analysed head; ATTNSCOPE_BENCH_FFN_ROWS sets
// StreamingOptions::feed_forward_rows (default 512, 0: all rows at once). The statistics are the library's default
// ones (entropy, sink mass, max weight, max logit, log-partition, exact ‖J‖₂); ATTNSCOPE_BENCH_TOP_K=1,8,64 adds the
// top-k masses `rowstats` computes by default. Without logits the streaming forward's last
// layer computes its analysed heads' statistics only (q·kᵀ, no P·V or feed-forward);
// BM_streaming_statistics_whole_layers runs that layer whole too, as a layer whose output a later layer reads. Flops
// counted [derived]: 2 · (weights multiplied) · L for the projections and the head, plus 2 · 2 · head_size per
// visible (query, key) pair and head for q·kᵀ and P·V (2 · head_size for q·kᵀ alone in a statistics-only layer).
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <sys/resource.h>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <benchmark/benchmark.h>

#include "attnscope/model/load.hpp"

namespace {

const attnscope::model::Transformer* model_from_environment() {
  static const char* folder = std::getenv("ATTNSCOPE_BENCH_MODEL");
  if (folder == nullptr) return nullptr;
  static const attnscope::model::Transformer model = attnscope::model::load_model(folder);
  return &model;
}

double peak_resident_megabytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux: kilobytes
}

void run_forward(benchmark::State& state, const attnscope::model::CaptureOptions& capture) {
  const attnscope::model::Transformer* model = model_from_environment();
  if (model == nullptr) {
    state.SkipWithError("set ATTNSCOPE_BENCH_MODEL to a Hugging Face model folder");
    return;
  }
  const int length = static_cast<int>(state.range(0));
  if (length > model->config().seq_len) {
    state.SkipWithError("more tokens than the model's positions");
    return;
  }
  std::vector<int> tokens;
  for (int p = 0; p < length; ++p) tokens.push_back(static_cast<int>((7919L * p) % model->config().vocab_size));
  attnscope::model::ForwardOptions options;
  options.capture = capture;
  for (auto _ : state) benchmark::DoNotOptimize(model->forward(tokens, options));
  state.SetItemsProcessed(state.iterations() * length);
  state.counters["peak_rss_MB"] = peak_resident_megabytes();
}

void BM_forward_logits_only(benchmark::State& state) { run_forward(state, {}); }

void BM_forward_full_capture(benchmark::State& state) {
  attnscope::model::CaptureOptions capture;
  capture.q = capture.k = capture.v = capture.scores = capture.attention = true;
  run_forward(state, capture);
}

long environment_integer(const char* name, long fallback) {
  const char* text = std::getenv(name);
  return text ? std::atol(text) : fallback;
}

/// A comma-separated list of integers from the environment ("1,8,64"); empty when unset.
std::vector<attnscope::Index> environment_integers(const char* name) {
  std::vector<attnscope::Index> values;
  const char* text = std::getenv(name);
  for (std::string rest = text ? text : ""; !rest.empty();) {
    const std::size_t comma = rest.find(',');
    values.push_back(std::atol(rest.substr(0, comma).c_str()));
    rest = comma == std::string::npos ? std::string() : rest.substr(comma + 1);
  }
  return values;
}

/// Visible (query, key) pairs of one head over `length` tokens: causal, or the sliding window.
double visible_pairs(const attnscope::model::Transformer& model, long length) {
  const auto& c = model.config();
  double pairs = 0;
  for (long i = 0; i < length; ++i) pairs += c.sliding_window > 0 ? std::min<long>(i + 1, c.sliding_window) : i + 1;
  return pairs;
}

/// Flops of the forward over `length` tokens through `layers` layers, with or without the output head. With
/// `last_layer_heads` ≥ 0 the last layer is the statistics-only layer of a streaming pass without logits: its query
/// and key projections and q·kᵀ of that many heads (no values, P·V, output projection or feed-forward).
double forward_flops(const attnscope::model::Transformer& model, long length, int layers, bool head,
                     int last_layer_heads = -1) {
  const auto& w = model.weights();
  const auto& c = model.config();
  const int whole_layers = last_layer_heads >= 0 ? layers - 1 : layers;
  double weights = 0;
  for (int l = 0; l < whole_layers; ++l) {
    const auto& layer = w.layers[std::size_t(l)];
    for (const auto* m : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w1, &layer.w2, &layer.w3})
      weights += static_cast<double>(m->size());
  }
  if (last_layer_heads >= 0) {
    const auto& layer = w.layers[std::size_t(layers - 1)];
    weights += static_cast<double>(layer.wq.size() + layer.wk.size());
  }
  if (head) weights += static_cast<double>(w.output_head().size());
  const double pairs = visible_pairs(model, length);
  return 2 * weights * static_cast<double>(length) + 4.0 * c.head_dim * pairs * c.n_heads * whole_layers +
         (last_layer_heads >= 0 ? 2.0 * c.head_dim * pairs * last_layer_heads : 0.0);
}

std::vector<int> bench_tokens(const attnscope::model::Transformer& model, long length) {
  std::vector<int> tokens;
  for (long p = 0; p < length; ++p) tokens.push_back(static_cast<int>((7919L * p) % model.config().vocab_size));
  return tokens;
}

bool prepare(benchmark::State& state, const attnscope::model::Transformer*& model, long& length) {
  model = model_from_environment();
  length = environment_integer("ATTNSCOPE_BENCH_TOKENS", 1024);
  if (model == nullptr) {
    state.SkipWithError("set ATTNSCOPE_BENCH_MODEL to a Hugging Face model folder");
    return false;
  }
#if defined(_OPENMP)
  omp_set_num_threads(static_cast<int>(state.range(0)));
#else
  if (state.range(0) != 1) {
    state.SkipWithError("built without OpenMP");
    return false;
  }
#endif
  return true;
}

void BM_forward_logits(benchmark::State& state) {
  const attnscope::model::Transformer* model = nullptr;
  long length = 0;
  if (!prepare(state, model, length)) return;
  const std::vector<int> tokens = bench_tokens(*model, length);
  for (auto _ : state) benchmark::DoNotOptimize(model->forward(tokens));
  state.counters["GFLOP_per_s"] = benchmark::Counter(
      forward_flops(*model, length, model->config().n_layers, true) * 1e-9 * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(length * state.iterations()), benchmark::Counter::kIsRate);
}

// The streaming forward `rowstats --model` runs. With `whole_last_layer` it also captures the hidden states, so
// that the last layer runs whole (values, P·V, output projection, feed-forward) as every layer but the last does: its
// per-pair time is that of a layer whose output a later layer reads.
void run_streaming(benchmark::State& state, bool one_head, bool whole_last_layer = false) {
  const attnscope::model::Transformer* model = nullptr;
  long length = 0;
  if (!prepare(state, model, length)) return;
  const std::vector<int> tokens = bench_tokens(*model, length);
  const int layers = static_cast<int>(environment_integer("ATTNSCOPE_BENCH_LAYERS", model->config().n_layers));
  attnscope::model::ForwardOptions options;
  options.logits = false;
  options.last_layer = layers - 1;
  options.capture.hidden_states = whole_last_layer;
  attnscope::model::StreamingOptions streaming;
  streaming.allow_beyond_trained_positions = true;
  streaming.feed_forward_rows = environment_integer("ATTNSCOPE_BENCH_FFN_ROWS", streaming.feed_forward_rows);
  streaming.statistics.top_k = environment_integers("ATTNSCOPE_BENCH_TOP_K");
  if (one_head) streaming.heads = {{layers - 1, 0}};
  for (auto _ : state) benchmark::DoNotOptimize(model->forward_row_statistics(tokens, options, streaming));
  const auto& c = model->config();
  const int last_layer_heads = whole_last_layer ? -1 : (one_head ? 1 : c.n_heads);
  state.counters["GFLOP_per_s"] = benchmark::Counter(
      forward_flops(*model, length, layers, false, last_layer_heads) * 1e-9 * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(length * state.iterations()), benchmark::Counter::kIsRate);
  // the whole streaming forward's time per visible (query, key) pair of every analysed head: inverted rate of
  // 1e-9 · pairs, so the counter reads in nanoseconds
  const double pairs = visible_pairs(*model, length);
  const double heads = one_head ? 1.0 : static_cast<double>(c.n_heads) * layers;
  state.counters["ns_per_pair"] = benchmark::Counter(pairs * heads * 1e-9 * static_cast<double>(state.iterations()),
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_streaming_statistics(benchmark::State& state) { run_streaming(state, false); }

// The same forward with the statistics of one head only (the last layer's head 0); the others run plain attention.
void BM_streaming_one_head(benchmark::State& state) { run_streaming(state, true); }

// Every head's statistics with the last layer run whole (its output captured): the per-pair time of inner layers.
void BM_streaming_statistics_whole_layers(benchmark::State& state) { run_streaming(state, false, true); }

}  // namespace

BENCHMARK(BM_forward_logits)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_streaming_statistics)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_streaming_one_head)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_streaming_statistics_whole_layers)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_forward_logits_only)->Arg(1024)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_forward_full_capture)->Arg(1024)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK_MAIN();
