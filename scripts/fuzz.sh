#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined) in build-fuzz and runs each parser's
# fuzzer for a bounded time: FUZZ_SECONDS per fuzzer (default 60). Fails if any fuzzer reports a crash, a sanitizer
# error, a leak, an out-of-memory or a timeout; prints the number of executions of each.
# Usage: scripts/fuzz.sh [PARSER...]   (PARSER: npy, safetensors, llama2c; default all three)
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
cmake --build "$build" --target fuzz_npy fuzz_safetensors fuzz_llama2c fuzz_seed_corpus -j"${FUZZ_JOBS:-2}"

seeds=$build/fuzz-seeds
rm -rf "$seeds"
"$build/fuzz/fuzz_seed_corpus" "$seeds"
status=0
summary=""
parsers=("$@")
[ ${#parsers[@]} -gt 0 ] || parsers=(npy safetensors llama2c)
for parser in "${parsers[@]}"; do
  [ -x "$build/fuzz/fuzz_$parser" ] || { echo "fuzz.sh: unknown parser '$parser' (npy, safetensors, llama2c)" >&2; exit 2; }
  work=$build/fuzz-work/$parser
  mkdir -p "$work/corpus" "$work/artifacts"
  echo "== fuzz_$parser for ${seconds}s" >&2
  if "$build/fuzz/fuzz_$parser" -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
       -dict="$root/fuzz/$parser.dict" -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds/$parser" >"$work/log.txt" 2>&1; then
    result=ok
  else
    result=FAILED
    status=1
    tail -n 60 "$work/log.txt" >&2
  fi
  executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log.txt" | grep -o '[0-9]*$' || echo "?")
  coverage=$(grep -o 'cov: [0-9]*' "$work/log.txt" | tail -n 1 | grep -o '[0-9]*' || echo "?")
  summary+="fuzz_$parser: $result, $executions executions in ${seconds}s, coverage $coverage edges (log: $work/log.txt)"$'\n'
done
printf '%s' "$summary"
exit $status
