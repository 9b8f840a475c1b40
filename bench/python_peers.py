#!/usr/bin/env python3
"""Side-by-side speed of the attnscope Python module and its Python peers, in one process on the same arrays.

  1. attnscope.softmax vs torch.softmax, 4096 x 4096 float32, one thread;
  2. attnscope.sparsemax and attnscope.entmax15 vs the sort-based reference algorithms of the `entmax` package
     (Martins & Astudillo 2016 Alg. 1; Peters et al. 2019), written in vectorized numpy below;
  3. attnscope.jacobian_spectral_norm (exact, O(n) per row) vs numpy.linalg.eigvalsh of the dense softmax Jacobian
     diag(p) - p p^T at L = 256 and 1024 (per row).

Every timing is the best of `--repeats` runs (time.perf_counter); ratios compare timings of the same run, on the same
inputs, so a shared noisy machine affects both sides alike. Threads are pinned to one (OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS, torch.set_num_threads) before anything is imported.

Run from a build:  PYTHONPATH=build/python /usr/bin/python3 bench/python_peers.py [--quick]
"""
import os

for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import attnscope  # noqa: E402


def best_time(function, repeats):
    """Best wall time of `repeats` calls (one warm-up call first)."""
    function()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def sparsemax_sort(z):
    """Sort-based sparsemax over the last axis (entmax package `SparsemaxFunction`, Martins & Astudillo Alg. 1)."""
    z = z - z.max(axis=-1, keepdims=True)
    s = -np.sort(-z, axis=-1)
    cumulative = np.cumsum(s, axis=-1) - 1
    k = np.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    support = (k * s > cumulative).sum(axis=-1, keepdims=True)
    tau = np.take_along_axis(cumulative, support - 1, axis=-1) / support.astype(z.dtype)
    return np.maximum(z - tau, 0)


def entmax15_sort(z):
    """Sort-based exact 1.5-entmax over the last axis (entmax package `Entmax15Function`, Peters et al. 2019)."""
    x = z / 2
    x = x - x.max(axis=-1, keepdims=True)
    s = -np.sort(-x, axis=-1)
    k = np.arange(1, x.shape[-1] + 1, dtype=x.dtype)
    mean = np.cumsum(s, axis=-1) / k
    mean_sq = np.cumsum(s * s, axis=-1) / k
    ss = k * (mean_sq - mean * mean)
    delta = np.maximum((1 - ss) / k, 0)
    tau = mean - np.sqrt(delta)
    support = (tau <= s).sum(axis=-1, keepdims=True)
    tau_star = np.take_along_axis(tau, support - 1, axis=-1)
    return np.maximum(x - tau_star, 0) ** 2


def eigvalsh_norms(logits):
    """||diag p - p p^T||_2 of each row by numpy.linalg.eigvalsh of the dense Jacobian."""
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    out = np.empty(len(p))
    for i, row in enumerate(p):
        out[i] = np.abs(np.linalg.eigvalsh(np.diag(row) - np.outer(row, row))).max()
    return out


def cpu_description():
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor(), ""
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    flags = fields.get("Flags", "").split()
    wanted = [flag for flag in ("avx", "avx2", "fma", "avx512f") if flag in flags]
    return fields.get("Model name", "").strip(), " ".join(wanted)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="smaller arrays and fewer repeats (a smoke test)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    repeats = 2 if args.quick else args.repeats
    rng = np.random.default_rng(0)
    results = []

    def record(name, ours, peer, peer_name):
        results.append({"benchmark": name, "attnscope_s": ours, "peer": peer_name, "peer_s": peer,
                        "speedup": peer / ours})
        print(f"{name:44s} attnscope {ours * 1e3:10.3f} ms   {peer_name:28s} {peer * 1e3:10.3f} ms   "
              f"speed-up {peer / ours:9.1f}x", flush=True)

    model, flags = cpu_description()
    print(f"CPU: {model} ({flags}); {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; numpy {np.__version__}")

    # 1. softmax against torch.softmax, one thread
    try:
        import torch

        torch.set_num_threads(1)
        size = 1024 if args.quick else 4096
        z = rng.standard_normal((size, size), dtype=np.float32) * 3
        tensor = torch.from_numpy(z)
        np.testing.assert_allclose(attnscope.softmax(z), torch.softmax(tensor, dim=-1).numpy(), rtol=1e-5, atol=1e-7)
        ours = best_time(lambda: attnscope.softmax(z), repeats)
        peer = best_time(lambda: torch.softmax(tensor, dim=-1), repeats)
        record(f"softmax {size}x{size} float32", ours, peer, f"torch {torch.__version__} softmax")
    except ImportError:
        print("torch not importable: softmax comparison skipped")

    # 2. sparsemax and 1.5-entmax against the sort-based references
    rows, cols = (256, 1024) if args.quick else (2048, 2048)
    z = rng.standard_normal((rows, cols), dtype=np.float32) * 3
    np.testing.assert_allclose(attnscope.sparsemax(z), sparsemax_sort(z), atol=1e-5)
    np.testing.assert_allclose(attnscope.entmax15(z), entmax15_sort(z), atol=1e-5)
    record(f"sparsemax {rows}x{cols} float32", best_time(lambda: attnscope.sparsemax(z), repeats),
           best_time(lambda: sparsemax_sort(z), repeats), "numpy sort-based sparsemax")
    record(f"entmax15 {rows}x{cols} float32", best_time(lambda: attnscope.entmax15(z), repeats),
           best_time(lambda: entmax15_sort(z), repeats), "numpy sort-based entmax15")

    # 3. exact spectral norm against eigvalsh of the dense Jacobian, per row
    for length, eig_rows in ((256, 64), (1024, 8)):
        ours_rows = 4096 if not args.quick else 256
        logits = rng.standard_normal((ours_rows, length)) * 2
        np.testing.assert_allclose(attnscope.jacobian_spectral_norm(logits[:eig_rows]), eigvalsh_norms(logits[:eig_rows]),
                                   rtol=1e-9)
        ours = best_time(lambda: attnscope.jacobian_spectral_norm(logits), repeats) / ours_rows
        peer = best_time(lambda: eigvalsh_norms(logits[:eig_rows]), max(1, repeats // 2)) / eig_rows
        record(f"exact ||J||_2 per row, L = {length} float64", ours, peer, "numpy.linalg.eigvalsh (dense J)")

    if args.json:
        with open(args.json, "w") as file:
            json.dump({"cpu": model, "flags": flags, "results": results}, file, indent=2)


if __name__ == "__main__":
    main()
