// bench_model: the Llama forward pass on stories260K (256 tokens). Baseline: token-by-token decoding with the
// key/value cache (generate_greedy over the same length, i.e. run.c's schedule); compare the matrix-form forward
// with and without per-head capture against it. Run: build with -DATTNSCOPE_BUILD_BENCHMARKS=ON, then
// ./bench/bench_model (OMP_NUM_THREADS=1 recommended on a shared machine).
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "attnscope/analysis.hpp"
#include "attnscope/model.hpp"

namespace {

const attnscope::model::LlamaModel& stories260k() {
  static const attnscope::model::LlamaModel model =
      attnscope::model::LlamaModel::load(std::string(ATTNSCOPE_DATA_DIR) + "/stories260K.bin");
  return model;
}

const std::vector<int>& story(int length) {
  static const std::vector<int> tokens = stories260k().generate_greedy({1}, 511);
  static std::vector<std::vector<int>> prefixes(513);
  auto& prefix = prefixes[std::size_t(length)];
  if (prefix.empty()) prefix.assign(tokens.begin(), tokens.begin() + length);
  return prefix;
}

// Baseline: token-by-token decoding with the cache over `length` positions (argmax per step included).
void BM_token_by_token_decode(benchmark::State& state) {
  const int length = static_cast<int>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(stories260k().generate_greedy({1}, length - 1));
  state.SetItemsProcessed(state.iterations() * length);
}

void run_forward(benchmark::State& state, const attnscope::model::CaptureOptions& capture) {
  const auto& tokens = story(static_cast<int>(state.range(0)));
  attnscope::model::ForwardOptions options;
  options.capture = capture;
  for (auto _ : state) benchmark::DoNotOptimize(stories260k().forward(tokens, options));
  state.SetItemsProcessed(state.iterations() * static_cast<long>(tokens.size()));
}

void BM_forward_logits_only(benchmark::State& state) { run_forward(state, {}); }
void BM_forward_attention_capture(benchmark::State& state) {
  run_forward(state, attnscope::model::CaptureOptions::attention_only());
}
void BM_forward_full_capture(benchmark::State& state) {
  run_forward(state, attnscope::model::CaptureOptions::everything());
}

// The per-head report on a 256-token capture (6 standard columns, 40 heads).
void BM_head_report(benchmark::State& state) {
  attnscope::model::ForwardOptions options;
  options.capture = attnscope::model::CaptureOptions::attention_only();
  const auto heads = attnscope::analysis::head_inputs(stories260k().forward(story(256), options));
  const auto columns = attnscope::analysis::default_report_columns();
  for (auto _ : state) benchmark::DoNotOptimize(attnscope::analysis::compute_head_report(heads, columns));
}

}  // namespace

BENCHMARK(BM_token_by_token_decode)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_forward_logits_only)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_forward_attention_capture)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_forward_full_capture)->Arg(64)->Arg(256)->Arg(512)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_head_report)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
