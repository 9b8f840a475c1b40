#!/usr/bin/env bash
# bench/llamacpp_side_by_side.sh — prompt processing of TOKENS tokens on Llama-3.2-1B-shaped GGUF models of random
# weights (Q8_0 and Q4_K_M, bench/make_gguf_model.py --shape 1b), CPU only, in one run, alternating:
#   llama.cpp   one llama_decode of the whole prompt, flash attention off and on (bench/llamacpp_peer, linked to
#               node-llama-cpp's prebuilt CPU libraries), logits of the last token only;
#   attnscope   `attnscope rowstats --model FILE.gguf --no-jacobian` with --matmul exact and --matmul llama.cpp: the
#               streaming forward's time as its progress line reports it (ATTNSCOPE_PROGRESS=1; from the start of the
#               forward to the last layer; no output head; its last layer computes the statistics only, no feed-forward).
# Each configuration is timed REPEATS times, the four engines one after another per round (so that a change of load
# hits them alike); the table gives medians and the ratio to llama.cpp with flash attention on.
#
# One-time setup (no build of llama.cpp: its release's prebuilt CPU libraries and headers):
#   cd /work/tools-npm && npm install node-llama-cpp@3.21.1
#   git clone node_modules/node-llama-cpp/llama/gitRelease.bundle llama.cpp     # the headers of the same release
# (llama.cpp.info.json in node_modules/node-llama-cpp/llama names the release tag; the libraries' LLAMA_BUILD_NUMBER
# is printed below). The peer is compiled here with g++ (-I llama.cpp/include -I llama.cpp/ggml/include, linked to
# libllama, libggml, libggml-base; it loads the CPU variant fitting this CPU with ggml_backend_load_all_from_path).
#
# Usage: bench/llamacpp_side_by_side.sh [ATTNSCOPE_BINARY]        (default build/tools/attnscope)
#   environment: NPM_DIR (/work/tools-npm), LLAMA_CPP_DIR ($NPM_DIR/llama.cpp), WORK_DIR (/tmp/attnscope_llamacpp),
#   TOKENS (512), REPEATS (3), THREADS_LIST ("1 2"), MODELS ("q8_0 q4km")
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ATTNSCOPE=${1:-$ROOT/build/tools/attnscope}
NPM_DIR=${NPM_DIR:-/work/tools-npm}
BINS=$NPM_DIR/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
LLAMA_CPP_DIR=${LLAMA_CPP_DIR:-$NPM_DIR/llama.cpp}
WORK=${WORK_DIR:-/tmp/attnscope_llamacpp}
TOKENS=${TOKENS:-512}
REPEATS=${REPEATS:-3}
THREADS_LIST=${THREADS_LIST:-"1 2"}
MODELS=${MODELS:-"q8_0 q4km"}
mkdir -p "$WORK"

# the peer
PEER=$WORK/llamacpp_peer
g++ -std=c++17 -O2 "$ROOT/bench/llamacpp_peer/llamacpp_peer.cpp" -I"$LLAMA_CPP_DIR/include" \
  -I"$LLAMA_CPP_DIR/ggml/include" -L"$BINS" -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so \
  -Wl,-rpath,"$BINS" -o "$PEER"

# the models
for m in $MODELS; do
  if [ ! -f "$WORK/llama1b_$m.gguf" ]; then
    type=$([ "$m" = q8_0 ] && echo Q8_0 || echo Q4_K_M)
    /usr/bin/python3 "$ROOT/bench/make_gguf_model.py" "$WORK/llama1b_$m.gguf" --shape 1b --layers 16 --type "$type"
  fi
done
seq 1 "$TOKENS" | tr '\n' ' ' > "$WORK/tokens.txt"  # the peer's ids: 1..TOKENS

TIMES=$WORK/times.txt
: > "$TIMES"
attnscope_seconds() {  # the forward's seconds from the last progress line of rowstats
  tr '\r' '\n' < "$1" | grep -E '^forward .* ([0-9]+)/\1 ' | tail -1 | sed -E 's/.* ([0-9.]+)s.*/\1/'
}
for round in $(seq 1 "$REPEATS"); do
  for threads in $THREADS_LIST; do
    for m in $MODELS; do
      model=$WORK/llama1b_$m.gguf
      for flash in 0 1; do
        seconds=$("$PEER" "$model" "$BINS" "$TOKENS" "$threads" "$flash" 1 "$WORK/logits_$m.f32" | awk '/^seconds/ {print $2}')
        echo "$m $threads llama.cpp-fa$flash $seconds" | tee -a "$TIMES"
      done
      for mode in exact llama.cpp; do
        ATTNSCOPE_PROGRESS=1 "$ATTNSCOPE" rowstats --model "$model" --tokens-file "$WORK/tokens.txt" \
          --out "$WORK/rows.npz" --no-jacobian --threads "$threads" --matmul "$mode" > /dev/null 2> "$WORK/err.txt"
        echo "$m $threads attnscope-$mode $(attnscope_seconds "$WORK/err.txt")" | tee -a "$TIMES"
      done
    done
  done
done

echo
build=$(cd "$BINS" && LD_LIBRARY_PATH=. /usr/bin/python3 -c "import ctypes; lib = ctypes.CDLL('./libllama-common.so'); \
print('LLAMA_BUILD_NUMBER %d, LLAMA_COMMIT %s' % (ctypes.c_int.in_dll(lib, 'LLAMA_BUILD_NUMBER').value, \
ctypes.c_char_p.in_dll(lib, 'LLAMA_COMMIT').value.decode()))" 2>/dev/null || echo "build number unknown")
echo "$(date -u +%Y-%m-%d), $(lscpu | grep 'Model name' | sed 's/Model name: *//'), llama.cpp $(
  sed -n 's/.*"tag": "\(.*\)".*/\1/p' "$NPM_DIR/node_modules/node-llama-cpp/llama/llama.cpp.info.json") ($build; \
node-llama-cpp $(sed -n 's/.*"version": "\(.*\)".*/\1/p' "$NPM_DIR/node_modules/node-llama-cpp/package.json" | head -1)), \
$TOKENS tokens"
/usr/bin/python3 - "$TIMES" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if len(line.split()) == 4]
times = {}
for model, threads, engine, seconds in rows:
    times.setdefault((model, int(threads), engine), []).append(float(seconds))
engines = ["llama.cpp-fa0", "llama.cpp-fa1", "attnscope-exact", "attnscope-llama.cpp"]
print("| model | threads | " + " | ".join(engines) + " | exact / FA on | llama.cpp mode / FA on |")
print("|---|---|" + "---|" * (len(engines) + 2))
for model, threads in sorted({(m, t) for m, t, _ in times}):
    med = {e: statistics.median(times[(model, threads, e)]) for e in engines if (model, threads, e) in times}
    cells = ["%.2f s" % med[e] if e in med else "–" for e in engines]
    base = med.get("llama.cpp-fa1")
    ratios = ["%.2f×" % (med[e] / base) if base and e in med else "–" for e in ("attnscope-exact", "attnscope-llama.cpp")]
    print("| %s | %d | %s | %s |" % (model, threads, " | ".join(cells), " | ".join(ratios)))
print("(medians of %d runs each)" % min(len(v) for v in times.values()))
EOF
