#!/usr/bin/env bash
# Configure, build and run the whole attnscope test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
# Idle OpenMP threads sleep instead of spinning (row loops are short; spinning starves the other core).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
./scripts/install-deps.sh
build=${ATTNSCOPE_BUILD_DIR:-build}
jobs=${ATTNSCOPE_JOBS:-$(nproc)}
# Ninja when installed (a fresh build folder only: an existing one keeps the generator it was made with).
generator=()
if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DATTNSCOPE_BUILD_TESTS=ON -DATTNSCOPE_BUILD_EXAMPLES=ON \
      -DATTNSCOPE_BUILD_TOOLS=ON -DATTNSCOPE_EXAMPLES_COMPILE_CHECK=ON -DATTNSCOPE_BUILD_PYTHON=ON
cmake --build "$build" -j "$jobs"
# ctest also runs the Python module's pytest suite (python.pytest) and example (python.example_analyse_attention).
ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@"
# The Slurm recipes of docs/cli.md on a single-node cluster (skipped, saying so, without slurm-wlm and munge or root).
./scripts/slurm-test.sh "$build/tools"
