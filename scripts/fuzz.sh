#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined) in build-fuzz and runs each parser's
# fuzzer for a bounded time: FUZZ_SECONDS per fuzzer (default 60). Fails if any fuzzer reports a crash, a sanitizer
# error, a leak, an out-of-memory or a timeout; prints the number of executions of each.
# Usage: scripts/fuzz.sh [PARSER...]   (PARSER: npy, safetensors, llama2c, gguf, hf_config, tokenizer_json,
#                                       vocab_merges, capture; default all eight)
# Environment: FUZZ_SECONDS (60), FUZZ_BUILD_DIR (<repo>/build-fuzz), FUZZ_JOBS (build jobs, 2), CXX_FUZZ (clang++).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-60}
compiler=${CXX_FUZZ:-clang++}
command -v "$compiler" >/dev/null || { echo "fuzz.sh: $compiler not found (scripts/install-deps.sh installs clang)" >&2; exit 1; }

cmake -S "$root" -B "$build" -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DATTNSCOPE_BUILD_FUZZERS=ON -DATTNSCOPE_BUILD_TESTS=OFF -DATTNSCOPE_BUILD_EXAMPLES=OFF -DATTNSCOPE_BUILD_TOOLS=OFF \
  >"$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; exit 1; }
all_parsers=(npy safetensors llama2c gguf hf_config tokenizer_json vocab_merges capture)
parsers=("$@")
[ ${#parsers[@]} -gt 0 ] || parsers=("${all_parsers[@]}")
cmake --build "$build" --target fuzz_seed_corpus $(printf 'fuzz_%s ' "${parsers[@]}") -j"${FUZZ_JOBS:-2}"

seeds=$build/fuzz-seeds
rm -rf "$seeds"
"$build/fuzz/fuzz_seed_corpus" "$seeds"
# seeds of the file readers: the fixtures' files and the hostile corpus of tests/tools/hostile
fixtures=$root/tests/fixtures/hf hostile=$root/tests/tools/hostile
mkdir -p "$seeds/hf_config" "$seeds/tokenizer_json" "$seeds/vocab_merges" "$seeds/capture" "$seeds/gguf"
cp "$root"/tests/fixtures/gguf/*.gguf "$seeds/gguf/"
for f in "$fixtures"/*/config.json "$fixtures"/bad/*/config.json "$hostile"/config/*/config.json; do
  [ -f "$f" ] && cp "$f" "$seeds/hf_config/$(echo "$f" | md5sum | cut -c1-12).json"; done
for f in "$fixtures"/*/tokenizer.json "$hostile"/tokenizer/*/tokenizer.json; do
  [ -f "$f" ] && cp "$f" "$seeds/tokenizer_json/$(echo "$f" | md5sum | cut -c1-12).json"; done
for d in "$fixtures"/gpt2 "$hostile"/tokenizer/*; do
  [ -f "$d/vocab.json" ] && { cat "$d/vocab.json"; printf '\377'; cat "$d/merges.txt" 2>/dev/null || true; } \
    >"$seeds/vocab_merges/$(echo "$d" | md5sum | cut -c1-12)"; done
cp "$seeds"/npy/* "$seeds"/safetensors/* "$hostile"/attention/* "$hostile"/qk/* "$seeds/capture/" 2>/dev/null || true
status=0
summary=""
for parser in "${parsers[@]}"; do
  [ -x "$build/fuzz/fuzz_$parser" ] || { echo "fuzz.sh: unknown parser '$parser' (${all_parsers[*]})" >&2; exit 2; }
  dict=()
  [ -f "$root/fuzz/$parser.dict" ] && dict=(-dict="$root/fuzz/$parser.dict")
  work=$build/fuzz-work/$parser
  mkdir -p "$work/corpus" "$work/artifacts"
  echo "== fuzz_$parser for ${seconds}s" >&2
  if "$build/fuzz/fuzz_$parser" -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
       "${dict[@]}" -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds/$parser" >"$work/log.txt" 2>&1; then
    result=ok
  else
    result=FAILED
    status=1
    tail -n 60 "$work/log.txt" >&2
  fi
  executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log.txt" | grep -o '[0-9]*$' || echo "?")
  coverage=$(grep -o 'cov: [0-9]*' "$work/log.txt" | tail -n 1 | grep -o '[0-9]*' || echo "?")
  # libFuzzer's "Done N runs in S second(s)" ends a run that found nothing; a finding stops it early
  ran=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$work/log.txt" | grep -o '[0-9]* second' | grep -o '[0-9]*' || true)
  [ -n "$ran" ] && ran="${ran}s" || ran="until the first finding (artifact in $work/artifacts/)"
  summary+="fuzz_$parser: $result, $executions executions in $ran, coverage $coverage edges (log: $work/log.txt)"$'\n'
done
printf '%s' "$summary"
exit $status
