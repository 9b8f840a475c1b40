#!/usr/bin/env bash
# Header cost: the syntax-only compile time of a translation unit that includes a single header, for <Eigen/Core>
# (the baseline), every public umbrella header include/attnscope/*.hpp and, for reference, <nlohmann/json.hpp>.
# The time is the compiler's CPU time (user + system, from /usr/bin/time), which a busy shared machine disturbs far
# less than wall time. All headers are measured in one run, interleaved (round r compiles every header once before round r+1 starts),
# so that a change in machine load affects all of them alike; each header's figure is the median of N rounds.
#
# Usage: scripts/header_cost.sh [N] [extra header ...]
#   N                number of rounds (default 5; env HEADER_COST_ROUNDS also works)
#   extra header     further headers to measure, as written inside #include <...>, e.g. attnscope/io/npz.hpp
# Env: CXX (default g++), CXXFLAGS_EXTRA (appended to the compile command).
# Prints a Markdown table: header, median seconds, ratio to <Eigen/Core>; then the CPU model, compiler and date.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-${HEADER_COST_ROUNDS:-5}}
[[ $# -gt 0 ]] && shift
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
  echo "header_cost.sh: N must be a positive integer, got '$rounds'" >&2
  exit 2
fi
cxx=${CXX:-g++}
flags=(-std=c++17 -fsyntax-only -I include -I /usr/include/eigen3)
# PCRE2 (text module) and nlohmann-json may live outside the default include path.
if command -v pkg-config >/dev/null 2>&1; then
  for package in libpcre2-8 nlohmann_json; do
    if pkg-config --exists "$package" 2>/dev/null; then
      read -r -a package_flags <<<"$(pkg-config --cflags-only-I "$package")"
      flags+=("${package_flags[@]}")
    fi
  done
fi
read -r -a extra_flags <<<"${CXXFLAGS_EXTRA:-}"
flags+=("${extra_flags[@]}")

headers=("Eigen/Core")
for file in include/attnscope/*.hpp; do headers+=("attnscope/$(basename "$file")"); done
headers+=("nlohmann/json.hpp" "$@")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One source file per header; a failure to compile is an error, not a fast time.
for index in "${!headers[@]}"; do
  printf '#include <%s>\n' "${headers[$index]}" >"$work/h$index.cpp"
  if ! "$cxx" "${flags[@]}" "$work/h$index.cpp" 2>"$work/h$index.err"; then
    echo "header_cost.sh: <${headers[$index]}> does not compile alone:" >&2
    cat "$work/h$index.err" >&2
    exit 1
  fi
done

if ! [[ -x /usr/bin/time ]]; then
  echo "header_cost.sh: needs /usr/bin/time (Debian/Ubuntu package 'time')" >&2
  exit 2
fi
for ((round = 0; round < rounds; ++round)); do
  for index in "${!headers[@]}"; do
    /usr/bin/time -f '%U %S' -o "$work/cpu" "$cxx" "${flags[@]}" "$work/h$index.cpp"
    awk '{ printf "%.4f\n", $1 + $2 }' "$work/cpu" >>"$work/t$index"
  done
done

median() { sort -g "$1" | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
baseline=$(median "$work/t0")

echo "| header | median CPU s | × <Eigen/Core> |"
echo "|---|---:|---:|"
for index in "${!headers[@]}"; do
  m=$(median "$work/t$index")
  awk -v h="${headers[$index]}" -v m="$m" -v b="$baseline" 'BEGIN { printf "| <%s> | %.3f | %.2f |\n", h, m, m / b }'
done
echo
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
echo "CPU: ${cpu:-unknown} ($(nproc) cores); compiler: $("$cxx" --version | head -n 1); rounds: $rounds;" \
     "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
