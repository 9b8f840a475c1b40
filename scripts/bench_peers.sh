#!/usr/bin/env bash
# attnscope and its peers on the same arrays in one run, one thread: writes the arrays (seeded N(0, 9)
# float32 logits 4096×4096 and 16384×512, softmax rows 256×256) as NPY, times attnscope (bench/bench_peers.cpp, Google
# Benchmark, median of 3) and the peers in Python (/usr/bin/python3: torch.softmax(out=), a numpy softmax into a
# reused output, the deep-spin sort algorithms of sparsemax and 1.5-entmax written in numpy, numpy eigvalsh of the
# dense softmax Jacobians; median of 5 after a warm-up), and writes one Markdown table with the CPU model between the
# bench_peers markers of docs/performance.md (and prints it).
# Usage: scripts/bench_peers.sh; ATTNSCOPE_BENCH_BUILD_DIR (default build-bench), ATTNSCOPE_JOBS (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ATTNSCOPE_BENCH_BUILD_DIR:-build-bench}
jobs=${ATTNSCOPE_JOBS:-1}
python=/usr/bin/python3
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DATTNSCOPE_BUILD_BENCHMARKS=ON -DATTNSCOPE_BUILD_TESTS=OFF \
      -DATTNSCOPE_BUILD_EXAMPLES=OFF -DATTNSCOPE_BUILD_TOOLS=OFF > /dev/null
cmake --build "$build" -j "$jobs" --target bench_peers > /dev/null
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 ATTNSCOPE_PEERS_DIR="$data"
"$python" - "$data" <<'PYTHON'
import sys
import numpy as np
data = sys.argv[1]
rng = np.random.default_rng(2024)
for rows, cols in [(4096, 4096), (16384, 512)]:
    np.save(f"{data}/logits_{rows}x{cols}.npy", (3 * rng.standard_normal((rows, cols))).astype(np.float32))
z = 3 * rng.standard_normal((256, 256))
p = np.exp(z - z.max(axis=1, keepdims=True))
np.save(f"{data}/probabilities_256x256.npy", (p / p.sum(axis=1, keepdims=True)).astype(np.float32))
PYTHON
"$build/bench/bench_peers" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=json \
    > "$data/attnscope.json"
"$python" - "$data" docs/performance.md <<'PYTHON'
import json, platform, re, subprocess, sys, time
import numpy as np
import torch
data, document = sys.argv[1], sys.argv[2]
torch.set_num_threads(1)

def median_ms(function, repetitions=5):
    function()  # warm-up (first touch of outputs, caches)
    times = []
    for _ in range(repetitions):
        start = time.process_time()
        function()
        times.append((time.process_time() - start) * 1e3)
    return float(np.median(times))

def numpy_softmax_into(z, out):
    np.subtract(z, z.max(axis=1, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=1, keepdims=True)

def numpy_sparsemax_sort(z):  # deep-spin _sparsemax_threshold_and_support, vectorized over rows
    x = z - z.max(axis=1, keepdims=True)
    sorted_desc = -np.sort(-x, axis=1)
    cumulative = np.cumsum(sorted_desc, axis=1) - 1
    k = np.arange(1, z.shape[1] + 1, dtype=z.dtype)
    support = (k * sorted_desc > cumulative).sum(axis=1, keepdims=True)
    tau = np.take_along_axis(cumulative, support - 1, axis=1) / support
    return np.maximum(x - tau, 0)

def numpy_entmax15_sort(z):  # deep-spin _entmax_threshold_and_support (α = 1.5), vectorized over rows
    x = (z - z.max(axis=1, keepdims=True)) / 2
    sorted_desc = -np.sort(-x, axis=1)
    k = np.arange(1, z.shape[1] + 1, dtype=z.dtype)
    mean = np.cumsum(sorted_desc, axis=1) / k
    mean_square = np.cumsum(sorted_desc ** 2, axis=1) / k
    delta = np.clip((1 - k * (mean_square - mean ** 2)) / k, 0, None)
    tau = mean - np.sqrt(delta)
    support = (tau <= sorted_desc).sum(axis=1, keepdims=True)
    return np.maximum(x - np.take_along_axis(tau, support - 1, axis=1), 0) ** 2

def numpy_eigvalsh_norms(p):  # ‖diag p − ppᵀ‖₂ of every row from the dense n×n Jacobians
    jacobians = -p[:, :, None] * p[:, None, :]
    jacobians[:, np.arange(p.shape[1]), np.arange(p.shape[1])] += p
    return np.linalg.eigvalsh(jacobians)[:, -1]

attnscope = {entry["run_name"]: entry["cpu_time"] for entry in json.load(open(f"{data}/attnscope.json"))["benchmarks"]
             if entry.get("aggregate_name") == "median"}
rows = []
for shape in ["4096x4096", "16384x512"]:
    z = np.load(f"{data}/logits_{shape}.npy")
    out = np.empty_like(z)
    zt, outt = torch.from_numpy(z), torch.empty(z.shape)
    key = shape.replace("x", "/")
    rows.append((f"softmax, {shape}", attnscope[f"attnscope_softmax_into/{key}"],
                 [("torch.softmax(out=)", median_ms(lambda: torch.softmax(zt, 1, out=outt))),
                  ("numpy, reused output", median_ms(lambda: numpy_softmax_into(z, out)))]))
    rows.append((f"exact ‖J‖₂ of every softmax row from logits, {shape}",
                 attnscope[f"attnscope_jacobian_norm_from_logits/{key}"], []))
    rows.append((f"sparsemax, {shape}", attnscope[f"attnscope_sparsemax_rows/{key}"],
                 [("numpy sort (deep-spin)", median_ms(lambda: numpy_sparsemax_sort(z), 3))]))
    rows.append((f"1.5-entmax (exact), {shape}", attnscope[f"attnscope_entmax15_rows/{key}"],
                 [("numpy sort (deep-spin)", median_ms(lambda: numpy_entmax15_sort(z), 3))]))
p = np.load(f"{data}/probabilities_256x256.npy")
rows.append(("exact ‖J‖₂ of 256 softmax rows of 256", attnscope["attnscope_secular_norms_256"],
             [("numpy eigvalsh (dense J, float32)", median_ms(lambda: numpy_eigvalsh_norms(p), 3))]))

cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
model = re.search(r"Model name:\s*(.*)", cpu).group(1).strip()
isa = " ".join(flag for flag in ["avx2", "fma", "avx512f"] if re.search(rf"\b{flag}\b", cpu))
load = open("/proc/loadavg").read().split()[:3]
lines = [f"Machine: {model} ({isa}), {platform.machine()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
         f"load average {' '.join(load)}; one thread (OMP/OpenBLAS/torch threads = 1); CPU time, median. "
         f"torch {torch.__version__}, numpy {np.__version__}.",
         "",
         "| task | attnscope (ms) | peer | peer (ms) | peer ÷ attnscope |",
         "|---|---|---|---|---|"]
for task, ours, peers in rows:
    if not peers:
        lines.append(f"| {task} | {ours:.2f} | — | — | — |")
    for name, theirs in peers:
        lines.append(f"| {task} | {ours:.2f} | {name} | {theirs:.2f} | {theirs / ours:.1f}× |")
table = "\n".join(lines)
print(table)
text = open(document).read()
begin, end = "<!-- bench_peers:begin -->", "<!-- bench_peers:end -->"
if begin in text and end in text:
    text = text[:text.index(begin) + len(begin)] + "\n" + table + "\n" + text[text.index(end):]
    open(document, "w").write(text)
PYTHON
