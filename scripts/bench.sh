#!/usr/bin/env bash
# Configure an optimized build with the Google Benchmark programs (-DATTNSCOPE_BUILD_BENCHMARKS=ON) in build-bench
# and run every bench_* binary; results are printed and saved as JSON in build-bench/results/<name>.json.
# Extra arguments are passed to every benchmark binary (e.g. --benchmark_filter=softmax).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
build=${ATTNSCOPE_BENCH_BUILD_DIR:-build-bench}
jobs=${ATTNSCOPE_JOBS:-$(nproc)}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DATTNSCOPE_BUILD_BENCHMARKS=ON -DATTNSCOPE_BUILD_TESTS=OFF \
      -DATTNSCOPE_BUILD_EXAMPLES=OFF -DATTNSCOPE_BUILD_TOOLS=OFF
targets=()
for source in bench/*.cpp; do
  targets+=("$(basename "$source" .cpp)")
done
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
mkdir -p "$build/results"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs; date: $(date -u +%Y-%m-%dT%H:%MZ)"
for target in "${targets[@]}"; do
  echo "== $target"
  "$build/bench/$target" --benchmark_out="$build/results/$target.json" --benchmark_out_format=json "$@"
done
