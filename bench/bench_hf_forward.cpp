// bench_hf_forward: a Hugging Face model folder's forward pass with full capture (q, k, v, scores and attention of
// every head, as `attnscope capture` keeps them) over L tokens, single-threaded. Its peer is PyTorch's eager forward
// of the same weights (bench/gpt2_small_peer.py); bench/gpt2_side_by_side.sh runs both in one go on a random-weight
// GPT-2-small folder. The folder comes from the environment variable ATTNSCOPE_BENCH_MODEL (skipped when unset);
// the token ids are (7919 · p) mod vocab for position p, as in the peer. Counters: tokens per second and the peak
// resident memory of the process (getrusage) after the runs.
#include <cstdlib>
#include <string>
#include <vector>

#include <sys/resource.h>

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

}  // namespace

BENCHMARK(BM_forward_logits_only)->Arg(1024)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_forward_full_capture)->Arg(1024)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK_MAIN();
