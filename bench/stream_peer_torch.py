#!/usr/bin/python3
"""Side by side with bench_stream's stream_full_entropy_max: PyTorch computing softmax(QKᵀ/√d)
densely for one full-attention head (L = 16384, d = 64, float32), then the per-row entropy −Σ p log p and max weight.

Run with /usr/bin/python3 (torch 1.13, CPU, OpenBLAS). Prints the best wall time and process CPU time (all threads) of
a few runs on the given number of threads and the peak resident memory of the process (getrusage maxrss), before the computation (torch imported,
inputs built) and after, so the dense run's own footprint is the difference. Compare with

    bench_stream --benchmark_filter=stream_full_entropy_max

(run alone so its peak_rss_MB counter is the process peak). Usage: stream_peer_torch.py [L] [threads] [repeats]
"""
import resource
import sys
import time

import torch


def peak_rss_megabytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def dense_statistics(q, k):
    scale = 1.0 / q.shape[1] ** 0.5
    logits = (q @ k.T) * scale  # L × L
    p = torch.softmax(logits, dim=1)
    log_p = torch.log_softmax(logits, dim=1)
    entropy = -(p * log_p).sum(dim=1)
    max_weight = p.max(dim=1).values
    return entropy, max_weight


def main():
    length = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    torch.set_num_threads(threads)
    generator = torch.Generator().manual_seed(3)
    q = torch.randn(length, 64, generator=generator, dtype=torch.float32)
    k = torch.randn(length, 64, generator=generator, dtype=torch.float32)
    baseline = peak_rss_megabytes()
    best = best_cpu = float("inf")
    with torch.no_grad():
        for _ in range(repeats):
            start, start_cpu = time.perf_counter(), time.process_time()
            entropy, max_weight = dense_statistics(q, k)
            best = min(best, time.perf_counter() - start)
            best_cpu = min(best_cpu, time.process_time() - start_cpu)  # all threads of the process
    peak = peak_rss_megabytes()
    print(f"torch {torch.__version__}, config: {torch.__config__.parallel_info().splitlines()[0]}")
    print(f"L={length} d=64 threads={threads}: best of {repeats} = {best:.3f} s wall, {best_cpu:.3f} s CPU; "
          f"peak RSS {peak:.0f} MB (before the dense computation {baseline:.0f} MB, difference {peak - baseline:.0f} MB); "
          f"mean entropy {entropy.mean().item():.6f}, mean max weight {max_weight.mean().item():.6f}")


if __name__ == "__main__":
    main()
