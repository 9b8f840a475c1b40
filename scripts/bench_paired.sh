#!/usr/bin/env bash
# Paired comparison of the working tree against a baseline commit: the baseline's include/ (git archive)
# and the working tree's are compiled into one program, the library's namespace renamed in each
# (-Dattnscope=attnscope_base / attnscope_tree), and bench/paired/main.cpp times both alternately on the same logits:
# softmax_into and the exact Jacobian norm from logits, one thread, 16384×512 and 4096×4096 float32. Prints a
# Markdown table of the medians and quartiles of the per-round ratios. On a shared VM, whose memory bandwidth moves
# from minute to minute, this is how docs/performance.md compares versions.
# Usage: scripts/bench_paired.sh BASE_COMMIT [ROUNDS]   (default 21 rounds)
# Environment: CXX (default g++), ATTNSCOPE_PAIRED_FLAGS (default -march=native; -march=x86-64 for a generic build),
# ATTNSCOPE_PAIRED_DIR (default build-paired).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: scripts/bench_paired.sh BASE_COMMIT [ROUNDS]}
rounds=${2:-21}
work=${ATTNSCOPE_PAIRED_DIR:-build-paired}
cxx=${CXX:-g++}
git rev-parse --verify --quiet "$base^{commit}" > /dev/null || { echo "bench_paired: no commit '$base'" >&2; exit 2; }
rm -rf "$work/base" && mkdir -p "$work/base"
git archive "$base" include | tar -x -C "$work/base"
read -r -a flags <<< "-O3 -DNDEBUG -std=c++17 ${ATTNSCOPE_PAIRED_FLAGS:--march=native} $(pkg-config --cflags eigen3)"
"$cxx" "${flags[@]}" -Dattnscope=attnscope_base -DATTNSCOPE_PAIRED_SIDE=base -I"$work/base/include" \
       -c bench/paired/variant.cpp -o "$work/base.o" &
base_job=$!
"$cxx" "${flags[@]}" -Dattnscope=attnscope_tree -DATTNSCOPE_PAIRED_SIDE=tree -Iinclude \
       -c bench/paired/variant.cpp -o "$work/tree.o"
wait "$base_job"
"$cxx" "${flags[@]}" -c bench/paired/main.cpp -o "$work/main.o"
"$cxx" "$work/main.o" "$work/base.o" "$work/tree.o" -o "$work/paired"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs; date: $(date -u +%Y-%m-%dT%H:%MZ);" \
     "load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "base: $(git log -1 --format='%h %s' "$base" | cut -c1-80); tree: $(git describe --always --dirty)" \
     "with flags ${ATTNSCOPE_PAIRED_FLAGS:--march=native}; $rounds rounds"
"$work/paired" "$rounds"
