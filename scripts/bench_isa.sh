#!/usr/bin/env bash
# The row kernels built four ways: generic x86-64 (what a header-only library gets without any -march:
# SSE2 packets of 4 floats) with and without the run-time AVX2 dispatch of the exponential loops, -march=x86-64-v3
# (AVX2 + FMA, 8 floats; any x86 CPU since Haswell / Zen 1) and -march=native. Builds bench_row_kernels in four build
# directories and runs each with repetitions; prints one table
# of median CPU times and the ratio to the same build's copy of the same bytes (copy_memcpy of that run).
# Usage: scripts/bench_isa.sh [extra benchmark arguments]; ATTNSCOPE_ISA_BUILD_ROOT sets where the builds go
# (default build-isa), ATTNSCOPE_JOBS the build parallelism (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
root=${ATTNSCOPE_ISA_BUILD_ROOT:-build-isa}
jobs=${ATTNSCOPE_JOBS:-1}
# generic-no-dispatch: the generic build with the run-time AVX2 dispatch of kernels/runtime_dispatch.hpp switched off
declare -A flags=([generic-no-dispatch]="-DATTNSCOPE_NO_RUNTIME_DISPATCH" [generic]="" [x86-64-v3]="-march=x86-64-v3"
                  [native]="-march=native")
variants=(generic-no-dispatch generic x86-64-v3 native)
for variant in "${variants[@]}"; do
  cmake -S . -B "$root/$variant" -DCMAKE_BUILD_TYPE=Release -DATTNSCOPE_BUILD_BENCHMARKS=ON -DATTNSCOPE_BUILD_TESTS=OFF \
        -DATTNSCOPE_BUILD_EXAMPLES=OFF -DATTNSCOPE_BUILD_TOOLS=OFF -DATTNSCOPE_NATIVE=OFF \
        -DCMAKE_CXX_FLAGS="${flags[$variant]}" > /dev/null
  cmake --build "$root/$variant" -j "$jobs" --target bench_row_kernels > /dev/null
done
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs, flags: $(grep -o -w 'avx2\|fma\|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ); load: $(cut -d' ' -f1-3 /proc/loadavg)"
for variant in "${variants[@]}"; do
  "$root/$variant/bench/bench_row_kernels" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
      --benchmark_min_time=0.2 --benchmark_format=json "$@" > "$root/$variant.json"
done
/usr/bin/env python3 - "$root" <<'PYTHON'
import json, sys
root = sys.argv[1]
variants = ["generic-no-dispatch", "generic", "x86-64-v3", "native"]
medians = {}
for variant in variants:
    for entry in json.load(open(f"{root}/{variant}.json"))["benchmarks"]:
        if entry.get("aggregate_name") == "median":
            medians.setdefault(entry["run_name"], {})[variant] = entry["cpu_time"]
def copy_of(name, variant):
    shape = name.split("/", 1)[1]
    return medians.get("copy_memcpy/" + shape, {}).get(variant)
print("| kernel | " + " | ".join(f"{v}: ms (÷ copy)" for v in variants) + " | no dispatch ÷ generic | generic ÷ x86-64-v3 |")
print("|---|" + "---|" * (len(variants) + 1))
for name, times in medians.items():
    cells = []
    for variant in variants:
        copy = copy_of(name, variant)
        cells.append(f"{times[variant]:.2f} ({times[variant] / copy:.2f})" if copy else f"{times[variant]:.2f}")
    print(f"| `{name}` | " + " | ".join(cells) + f" | {times['generic-no-dispatch'] / times['generic']:.2f}× | "
          f"{times['generic'] / times['x86-64-v3']:.2f}× |")
PYTHON
