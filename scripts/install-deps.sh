#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages attnscope needs to build, test and reproduce, when they are missing.
# Uses sudo when not root; does nothing when everything is already present.
set -euo pipefail
packages=(cmake g++ make ninja-build libeigen3-dev catch2 libbenchmark-dev gnuplot-nox nlohmann-json3-dev zlib1g-dev libomp-dev
          libpcre2-dev clang libclang-rt-14-dev
          python3 python3-dev python3-numpy python3-scipy python3-pytest pybind11-dev python3-pybind11 chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "attnscope: installing missing packages: ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# clang + libclang-rt-14-dev (fuzzing) and chromium (the HTML report's browser test) are optional: retry without them
# where the distribution lacks them.
if ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  filtered=()
  for p in "${missing[@]}"; do
    case "$p" in libclang-rt-14-dev|clang|chromium) ;; *) filtered+=("$p") ;; esac
  done
  $sudo apt-get install -y -qq --no-install-recommends "${filtered[@]}"
fi
