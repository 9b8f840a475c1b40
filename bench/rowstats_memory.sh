#!/usr/bin/env bash
# `attnscope rowstats --model` on a model folder with its peak anonymous memory: RssAnon of /proc/PID/status sampled
# every 0.2 s (the page cache of the memory-mapped weights is RssFile and not counted), the wall time, and the
# per-layer progress line (layers, tokens/s). Token ids are (7919 · p) mod vocab for p < TOKENS.
# Usage: bench/rowstats_memory.sh FOLDER|FILE.gguf TOKENS [extra rowstats options, e.g. --layers 0,1 --threads 2]
# (for a GGUF file, VOCAB=<vocabulary size> in the environment)
# Needs the attnscope tool in $ATTNSCOPE_BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
folder=$1
tokens=$2
shift 2
build=${ATTNSCOPE_BUILD_DIR:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -d "$folder" ]; then
  vocab=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]+'/config.json'))['vocab_size'])" "$folder")
else  # a GGUF file: give its vocabulary size
  vocab=${VOCAB:?"set VOCAB to the vocabulary size of the GGUF file $folder"}
fi
/usr/bin/python3 -c "import sys; n,v=int(sys.argv[1]),int(sys.argv[2]); print(','.join(str(7919*p%v) for p in range(n)))" \
  "$tokens" "$vocab" > "$work/tokens.txt"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs," \
     "$(grep -o -m1 -w 'avx512f' /proc/cpuinfo || grep -o -m1 -w 'avx2' /proc/cpuinfo);" \
     "date: $(date -u +%Y-%m-%dT%H:%MZ); load: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s.%N)
ATTNSCOPE_PROGRESS=1 "$build/tools/attnscope" rowstats --model "$folder" --tokens-file "$work/tokens.txt" \
  --beyond-trained-length --out "$work/rows.npz" "$@" >"$work/stdout" 2>"$work/stderr" &
pid=$!
peak_anon=0
peak_file=0
while kill -0 "$pid" 2>/dev/null; do
  if [ -r "/proc/$pid/status" ]; then
    anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    file=$(awk '/^RssFile:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    [ -n "$anon" ] && [ "$anon" -gt "$peak_anon" ] && peak_anon=$anon
    [ -n "$file" ] && [ "$file" -gt "$peak_file" ] && peak_file=$file
  fi
  sleep 0.2
done
status=0
wait "$pid" || status=$?
end=$(date +%s.%N)
tr '\r' '\n' <"$work/stderr" | grep -v '^$' | tail -n 4
echo "exit status $status; wall $(echo "$end - $start" | bc) s; peak RssAnon $((peak_anon / 1024)) MB;" \
     "peak RssFile $((peak_file / 1024)) MB"
if [ "$status" -eq 0 ]; then
  /usr/bin/python3 - "$work/rows.npz" <<'PY'
import sys
import numpy as np
arrays = np.load(sys.argv[1])
finite = all(np.isfinite(arrays[name]).all() for name in arrays.files)
print("%d arrays, all finite: %s" % (len(arrays.files), finite))
PY
fi
