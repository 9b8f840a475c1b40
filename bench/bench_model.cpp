// bench_model: the Llama forward pass on stories260K (256 tokens). Baseline: token-by-token decoding with the
// key/value cache (generate_greedy over the same length, i.e. run.c's schedule); compare the matrix-form forward
// with and without per-head capture against it. Second part: a GPT-2-small-size Transformer (12 layers, 12 heads,
// width 768, vocabulary 50257, 1024 positions; random weights, GPT-2's layout) over 1024 tokens with and without
// full capture — compare with PyTorch eager on the same shapes (docs/models.md, "Performance").
// Third part: the streaming forward with per-head row statistics (forward_row_statistics: every head's attention
// output, log-partition, entropy, sink mass, max weight, top-k masses and exact ‖J‖₂) on stories260K at 512 positions
// and, extrapolating RoPE, 2048.
// Run: build with -DATTNSCOPE_BUILD_BENCHMARKS=ON, then OMP_NUM_THREADS=1 ./bench/bench_model.
#include <string>
#include <vector>

#include <Eigen/Core>

#include <benchmark/benchmark.h>

#include "attnscope/analysis.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/model.hpp"

namespace {

const attnscope::model::LlamaModel& stories260k() {
  static const attnscope::model::LlamaModel model =
      attnscope::model::LlamaModel::load(std::string(ATTNSCOPE_DATA) + "/stories260K.bin");
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

// GPT-2 small's shapes with N(0, 0.02²) weights (GPT-2's initialisation scale), LayerNorm weights 1 and biases 0.
const attnscope::model::Transformer& gpt2_small_shape() {
  static const attnscope::model::Transformer model = [] {
    using attnscope::RowMatrix;
    using attnscope::Vector;
    attnscope::Random random(2019);
    auto normal = [&](long rows, long cols) {
      RowMatrix<float> m(rows, cols);
      for (long i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(0.02 * random.normal());
      return m;
    };
    attnscope::model::TransformerWeights w;
    auto& c = w.config;
    c.architecture = "gpt2";
    c.dim = 768;
    c.hidden_dim = 3072;
    c.n_layers = c.n_heads = c.n_kv_heads = 12;
    c.head_dim = 64;
    c.vocab_size = 50257;
    c.seq_len = 1024;
    c.norm = attnscope::model::NormKind::layer_norm;
    c.position_encoding = attnscope::model::PositionEncoding::learned;
    c.attention_qkv_bias = c.attention_output_bias = c.feed_forward_bias = true;
    c.feed_forward = attnscope::model::FeedForwardKind::gelu_tanh;
    w.token_embedding = normal(c.vocab_size, c.dim);
    w.position_embedding = normal(c.seq_len, c.dim);
    for (int l = 0; l < c.n_layers; ++l) {
      attnscope::model::TransformerLayerWeights layer;
      layer.attention_norm = layer.ffn_norm = Vector<float>::Ones(c.dim);
      layer.attention_norm_bias = layer.ffn_norm_bias = layer.wo_bias = layer.w2_bias = Vector<float>::Zero(c.dim);
      layer.wq = normal(c.dim, c.dim);
      layer.wk = normal(c.dim, c.dim);
      layer.wv = normal(c.dim, c.dim);
      layer.wo = normal(c.dim, c.dim);
      layer.wq_bias = layer.wk_bias = layer.wv_bias = Vector<float>::Zero(c.dim);
      layer.w1 = normal(c.hidden_dim, c.dim);
      layer.w1_bias = Vector<float>::Zero(c.hidden_dim);
      layer.w2 = normal(c.dim, c.hidden_dim);
      w.layers.push_back(std::move(layer));
    }
    w.final_norm = Vector<float>::Ones(c.dim);
    w.final_norm_bias = Vector<float>::Zero(c.dim);
    return attnscope::model::Transformer(std::move(w));
  }();
  return model;
}

void run_gpt2_forward(benchmark::State& state, const attnscope::model::CaptureOptions& capture) {
  attnscope::Random random(7);
  std::vector<int> tokens(static_cast<std::size_t>(state.range(0)));
  for (int& token : tokens) token = static_cast<int>(random.below(50257));
  attnscope::model::ForwardOptions options;
  options.capture = capture;
  const auto& model = gpt2_small_shape();
  for (auto _ : state) benchmark::DoNotOptimize(model.forward(tokens, options));
  state.SetItemsProcessed(state.iterations() * static_cast<long>(tokens.size()));
  state.counters["eigen_threads"] = Eigen::nbThreads();
}

void BM_gpt2_small_forward_logits_only(benchmark::State& state) { run_gpt2_forward(state, {}); }
void BM_gpt2_small_forward_full_capture(benchmark::State& state) {
  run_gpt2_forward(state, attnscope::model::CaptureOptions::everything());
}

}  // namespace

// The streaming forward with the row statistics of every head (top-k 1, 8, 64; exact ‖J‖₂) over `length` tokens.
void BM_streaming_forward_statistics(benchmark::State& state) {
  const auto length = static_cast<std::size_t>(state.range(0));
  std::vector<int> tokens;
  while (tokens.size() < length) tokens.insert(tokens.end(), story(512).begin(), story(512).end());
  tokens.resize(length);
  attnscope::model::StreamingOptions streaming;
  streaming.statistics.top_k = {1, 8, 64};
  streaming.allow_beyond_trained_positions = true;
  for (auto _ : state) benchmark::DoNotOptimize(stories260k().forward_row_statistics(tokens, {}, streaming));
}

BENCHMARK(BM_streaming_forward_statistics)->Arg(512)->Arg(2048)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_gpt2_small_forward_logits_only)->Arg(1024)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_gpt2_small_forward_full_capture)->Arg(1024)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_token_by_token_decode)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_forward_logits_only)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_forward_attention_capture)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_forward_full_capture)->Arg(64)->Arg(256)->Arg(512)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_head_report)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
