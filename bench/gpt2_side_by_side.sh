#!/usr/bin/env bash
# GPT-2-small side by side, single-threaded, in one run: attnscope's forward with full capture (bench_hf_forward)
# against PyTorch's eager float32 forward of the same weights (gpt2_small_peer.py), on a random-weight GPT-2-small
# folder (12 layers, 12 heads, 768 wide, vocabulary 50257) made on first use, over 1024 tokens.
# Usage: bench/gpt2_side_by_side.sh [FOLDER]   (default /tmp/attnscope-gpt2-small; ~500 MB)
# Needs the benchmark build (./scripts/bench.sh or -DATTNSCOPE_BUILD_BENCHMARKS=ON in build-bench) and Debian's
# python3-torch with libopenblas0-pthread. PyTorch runs with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (they can pin
# slower kernels).
set -euo pipefail
cd "$(dirname "$0")/.."
folder=${1:-/tmp/attnscope-gpt2-small}
build=${ATTNSCOPE_BENCH_BUILD_DIR:-build-bench}
if [ ! -f "$folder/model.safetensors" ]; then
  echo "making a random-weight GPT-2-small folder in $folder" >&2
  /usr/bin/python3 bench/gpt2_small_peer.py make "$folder"
fi
if [ ! -x "$build/bench/bench_hf_forward" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DATTNSCOPE_BUILD_BENCHMARKS=ON -DATTNSCOPE_BUILD_TESTS=OFF \
        -DATTNSCOPE_BUILD_EXAMPLES=OFF -DATTNSCOPE_BUILD_TOOLS=OFF >/dev/null
  cmake --build "$build" --target bench_hf_forward
fi
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs; date: $(date -u +%Y-%m-%dT%H:%MZ); load: $(cut -d' ' -f1-3 /proc/loadavg)"
peer=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 /usr/bin/python3 bench/gpt2_small_peer.py time "$folder" --tokens 1024 --repetitions 3)
ours=$(OMP_NUM_THREADS=1 ATTNSCOPE_BENCH_MODEL="$folder" "$build/bench/bench_hf_forward" --benchmark_repetitions=3 \
       --benchmark_filter="BM_forward_(logits_only|full_capture)/" \
       --benchmark_format=json 2>/dev/null)
echo "$peer"
/usr/bin/python3 - "$peer" "$ours" <<'PY'
import json, statistics, sys
peer = json.loads(sys.argv[1])
ours = json.loads(sys.argv[2])
def runs(name):
    return [b for b in ours["benchmarks"] if b["name"].startswith(name) and b.get("run_type") == "iteration"]
full = runs("BM_forward_full_capture/1024")
logits = runs("BM_forward_logits_only/1024")
best = lambda rs: min(r["real_time"] for r in rs) / 1000.0  # ms -> s
print("attnscope forward, logits only : %.3f s (best of %d)" % (best(logits), len(logits)))
print("attnscope forward, full capture: %.3f s (best of %d), peak RSS %.0f MB" %
      (best(full), len(full), max(r["peak_rss_MB"] for r in full)))
print("pytorch eager, scores+attention: %.3f s (best of 3), peak RSS %.0f MB" % (peer["best_s"], peer["peak_rss_mb"]))
print("ratio attnscope / pytorch (full capture, best): %.2f  (target <= 0.8)" % (best(full) / peer["best_s"]))
PY
