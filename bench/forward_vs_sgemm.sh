#!/usr/bin/env bash
# The forward pass's achieved GFLOP/s against the machine's single-precision GEMM rate, in one run, on 1 and 2
# threads: numpy's a @ b with OpenBLAS (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset, since they can pin slower
# kernels) on the shapes of the forward's largest products, then bench_hf_forward (BM_forward_logits, BM_streaming_statistics) on a model folder.
# Usage: bench/forward_vs_sgemm.sh FOLDER [TOKENS] [LAYERS]
#   FOLDER  a Hugging Face folder (e.g. the GPT-2-small folder of bench/gpt2_side_by_side.sh, or the 8B folder of
#           bench/make_llama_folder.py); TOKENS default 1024; LAYERS: layers run by the streaming case (default all)
# Needs the benchmark build (-DATTNSCOPE_BUILD_BENCHMARKS=ON in $ATTNSCOPE_BENCH_BUILD_DIR, default build) and
# Debian's python3-numpy with libopenblas0-pthread.
set -euo pipefail
cd "$(dirname "$0")/.."
folder=$1
tokens=${2:-1024}
layers=${3:-}
build=${ATTNSCOPE_BENCH_BUILD_DIR:-build}
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs," \
     "$(grep -o -m1 -w 'avx512f' /proc/cpuinfo || grep -o -m1 -w 'avx2' /proc/cpuinfo);" \
     "date: $(date -u +%Y-%m-%dT%H:%MZ); load: $(cut -d' ' -f1-3 /proc/loadavg)"
hidden=$(/usr/bin/python3 -c "import json,sys; c=json.load(open(sys.argv[1]+'/config.json')); \
print(c.get('n_embd', c.get('hidden_size')), c.get('n_inner') or c.get('intermediate_size') or 4*c['n_embd'])" "$folder")
for threads in 1 2; do
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads \
    /usr/bin/python3 - "$tokens" $hidden "$threads" <<'PY'
import sys, time
import numpy as np
tokens, dim, ffn, threads = (int(v) for v in sys.argv[1:5])
config = np.__config__.blas_opt_info if hasattr(np.__config__, "blas_opt_info") else {}
rng = np.random.default_rng(0)
best = {}
for m, k, n in ((tokens, dim, ffn), (tokens, ffn, dim), (tokens, dim, dim)):
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    a @ b
    times = []
    for _ in range(5):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    best[(m, k, n)] = 2 * m * k * n / min(times) / 1e9
for shape, rate in best.items():
    print("sgemm numpy+openblas, %d thread(s), %dx%d @ %dx%d: %.1f GFLOP/s" % (threads, shape[0], shape[1], shape[1],
                                                                              shape[2], rate))
print("sgemm best, %d thread(s): %.1f GFLOP/s" % (threads, max(best.values())))
PY
done
env ATTNSCOPE_BENCH_MODEL="$folder" ATTNSCOPE_BENCH_TOKENS="$tokens" ${layers:+ATTNSCOPE_BENCH_LAYERS=$layers} \
  "$build/bench/bench_hf_forward" --benchmark_filter="BM_(forward_logits|streaming_statistics)/" --benchmark_repetitions=${ATTNSCOPE_BENCH_REPETITIONS:-2} \
  --benchmark_report_aggregates_only=false 2>/dev/null | grep -E "^BM_" | grep -v -E "_(mean|median|stddev|cv) "
