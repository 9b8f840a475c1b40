// bench_tokenizer: GPT-2's byte-level BPE on War and Peace (3.3 MB, 819,760 tokens). Baselines in the same run: the
// UTF-8 check alone and the pre-tokenizer regex (PCRE2) alone, which every encode pays; then encode with a cold word
// cache (a fresh copy of the tokenizer per iteration) and with a warm one, and decode. Bytes/s = MB/s of input text
// (output text for decode). SentencePiece-style BPE on the same text: Phi-3-mini's tokenizer.json (Llama-2's
// vocabulary; Prepend/Replace normalizers, character symbols, byte_fallback) cold and warm, and NFC normalization
// alone. Run: build with -DATTNSCOPE_BUILD_BENCHMARKS=ON, then ./bench/bench_tokenizer.
#include <filesystem>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "attnscope/io/file.hpp"
#include "attnscope/text.hpp"

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

}  // namespace

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
