#!/usr/bin/env bash
# The main job: build every example program, run each one (writing CSV, JSON and gnuplot scripts under results/),
# render the figures with gnuplot and assemble results/REPORT.md.
# `./scripts/reproduce.sh --report-only` only reassembles results/REPORT.md from the fragments already in results/
# (e.g. after running a few programs by hand).
set -euo pipefail
cd "$(dirname "$0")/.."
# Idle OpenMP threads sleep instead of spinning (row loops are short; spinning starves the other core).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
root=$(pwd)
build=${ATTNSCOPE_BUILD_DIR:-build}
jobs=${ATTNSCOPE_JOBS:-$(nproc)}
# The shared data: $ATTNSCOPE_DATA when set, else the build's cache variable ATTNSCOPE_DATA, else ../shared/data.
cached_data=$(sed -n 's/^ATTNSCOPE_DATA:PATH=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
data=${ATTNSCOPE_DATA:-${cached_data:-$root/../shared/data}}
out=$root/results
report_only=0
[ "${1:-}" = "--report-only" ] && report_only=1
# Sections of the report, in this order; examples.txt lists "<module> <name> <executable>".
modules=(normalize model capacity logits composition stream)
titles=("Normalization maps" "Real attention: stories260K" "Normalization limits (arXiv:2508.17821)"
        "Logit explosion (arXiv:2505.15548)" "Attention rows as compositional data (arXiv:2608.14712)"
        "Long contexts: streamed row statistics (normalization limits at L up to 32k)")
# The real-model reproductions that also run on Hugging Face model folders (--model DIR), on War and Peace: GPT-2 when
# ATTNSCOPE_GPT2 names a GPT-2 folder (we cannot ship its weights), and always the shared gpt2-wp-mini (GPT-2 layout,
# trained on War and Peace). Outputs go to results/<run>/<module>/; the report joins each program's runs into one
# verdict table with a column per model. The composition programs read 4 + 3 passages of 256 tokens on a folder
# (stories260K's sequence length), not the folder's full context, to keep the runtime down.
model_examples=" vanishing_attention representation_distance critical_top_n geometric_separability jacobian_temperature
                 composition_identities composition_flips composition_clustering composition_entropy composition_pruning "
model_runs=()
if [ -n "${ATTNSCOPE_GPT2:-}" ]; then model_runs+=("gpt2=$ATTNSCOPE_GPT2"); fi
if [ -d "$data/gpt2-wp-mini" ]; then model_runs+=("gpt2-wp-mini=$data/gpt2-wp-mini"); fi
run_label() {  # column title of a run
  case "$1" in gpt2) echo "GPT-2" ;; *) echo "$1" ;; esac
}

if [ "$report_only" = 0 ]; then
  ./scripts/install-deps.sh
  # The same build folder as ./scripts/test.sh: after a test run only the example programs are compiled. Ninja when
  # installed (a fresh build folder only: an existing one keeps the generator it was made with).
  generator=()
  if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DATTNSCOPE_BUILD_EXAMPLES=ON \
        -DATTNSCOPE_EXAMPLES_COMPILE_CHECK=OFF
  # Only the programs this script runs (attnscope_examples), not the test suite or the tools.
  cmake --build "$build" -j "$jobs" --target attnscope_examples
  rm -rf "$out"
  mkdir -p "$out"
  start=$(date +%s)
  while read -r module name exe; do
    echo "== $module/$name" >&2
    ( cd "$root" && /usr/bin/time -f "%e s, %M KB" "$exe" --data "$data" --out "$out" ) 2>&1 | tee "$out/.$name.log"
  done < "$build/examples.txt"
  for run in "${model_runs[@]}"; do
    run_name=${run%%=*}
    folder=${run#*=}
    while read -r module name exe; do
      case "$model_examples" in *" $name "*) ;; *) continue ;; esac
      echo "== $run_name: $module/$name" >&2
      ( cd "$root" && /usr/bin/time -f "%e s, %M KB" "$exe" --data "$data" --out "$out/$run_name" --model "$folder" ) \
        2>&1 | tee "$out/.$run_name.$name.log"
    done < "$build/examples.txt"
  done
  # Figures: every gnuplot script, run in its own folder.
  find "$out" -name '*.gp' | sort | while read -r gp; do
    ( cd "$(dirname "$gp")" && gnuplot "$(basename "$gp")" ) || echo "gnuplot failed on $gp" >&2
  done
  end=$(date +%s)
  echo "$((end - start))" > "$out/.seconds"
fi
seconds=$(cat "$out/.seconds" 2>/dev/null || echo "?")

# A fragment <name>.md is "### title", the claims table, then the body (text and figures). fragment_body prints the
# body only; merged_claims joins the <name>.claims.tsv of several runs (claim, paper, measured, verdict per line) into
# one table: a row per claim, a column per run, "same" where a run measured exactly what the first one did.
fragment_body() {  # <fragment.md>
  awk 'NR == 1 { next }
       state == 0 && /^\|/ { state = 1; next }
       state == 1 && /^\|/ { next }
       state == 1 { state = 2; next }
       state == 0 && /^$/ { next }
       { state = 2; print }' "$1"
}
merged_claims() {  # <labels separated by ';'> <tsv 1> <tsv 2> ... (a missing file is a run without this program)
  local labels=$1 i=0
  shift
  for f in "$@"; do
    i=$((i + 1))
    [ -f "$f" ] && awk -v run="$i" -F '\t' '{ print run "\t" $0 }' "$f"
  done | awk -F '\t' -v labels="$labels" -v paper_header="paper's value" '
    { key = $2
      if (!(key in seen)) { seen[key] = 1; order[++n] = key; paper[key] = $3 }
      measured[key, $1] = $4; verdict[key, $1] = $5 }
    END {
      runs = split(labels, label, ";")
      line = "| claim | " paper_header " |"; rule = "|---|---|"
      for (r = 1; r <= runs; r++) { line = line " " label[r] " |"; rule = rule "---|" }
      print line " verdict |"; print rule "---|"
      for (k = 1; k <= n; k++) {
        key = order[k]; line = "| " key " | " paper[key] " |"
        for (r = 1; r <= runs; r++) {
          if (!((key, r) in measured)) cell = "—"
          else if (r > 1 && ((key, 1) in measured) && measured[key, r] == measured[key, 1]) cell = "same"
          else cell = measured[key, r]
          line = line " " cell " |"
        }
        verdicts = ""; first = ""; differ = 0
        for (r = 1; r <= runs; r++) {
          if (!((key, r) in verdict)) continue
          if (first == "") first = verdict[key, r]; else if (verdict[key, r] != first) differ = 1
        }
        if (!differ) verdicts = first
        else for (r = 1; r <= runs; r++)
          if ((key, r) in verdict) verdicts = verdicts (verdicts == "" ? "" : "; ") "**" label[r] "**: " verdict[key, r]
        print line " " verdicts " |"
      }
      print "" }'
}
program_fragment() {  # <module> <name>: the program's section, joined over the runs that produced it
  local m=$1 name=$2 base="$out/$1/$2.md" runs=() labels="stories260K" files=("$out/$1/$2.claims.tsv")
  for run in "${model_runs[@]}"; do
    local run_name=${run%%=*}
    if [ -f "$out/$run_name/$m/$name.md" ]; then
      runs+=("$run_name")
      labels="$labels;$(run_label "$run_name")"
      files+=("$out/$run_name/$m/$name.claims.tsv")
    fi
  done
  if [ "${#runs[@]}" = 0 ]; then cat "$base"; echo; return; fi
  head -n 1 "$base"
  echo
  merged_claims "$labels" "${files[@]}"
  fragment_body "$base"
  for run_name in "${runs[@]}"; do
    echo "#### $(head -n 1 "$base" | sed 's/^### //') — $(run_label "$run_name")"
    echo
    fragment_body "$out/$run_name/$m/$name.md" | sed "s|](\\($m\\)/|]($run_name/\\1/|g"
  done
}

{
  echo "# attnscope — reproduction report"
  echo
  echo "Generated by \`./scripts/reproduce.sh\` on $(date -u +%Y-%m-%d) ($(uname -m), $(nproc) cores,"
  echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $seconds s for all programs."
  echo "Every section opens with a verdict table: the claim, the paper's value, our value (one column per model that"
  echo "was run: stories260K always, gpt2-wp-mini and GPT-2 where the program accepts \`--model DIR\`) and the verdict;"
  echo "figures are PNG files next to this report. On a model folder the composition programs use shorter settings to"
  echo "bound the runtime (4 analysed and 3 held-out War and Peace passages of 256 tokens, 8 random pruning rankings"
  echo "instead of 20; each program's text states its settings)."
  echo
  if [ -n "${ATTNSCOPE_GPT2:-}" ]; then
    echo "GPT-2: \`ATTNSCOPE_GPT2\` = $ATTNSCOPE_GPT2."
  else
    echo "GPT-2 was not run: we cannot ship its weights. To enable it, point \`ATTNSCOPE_GPT2\` at a GPT-2 Hugging Face"
    echo "folder (config.json, model.safetensors, vocab.json and merges.txt, e.g. a download of openai-community/gpt2)"
    echo "and run \`ATTNSCOPE_GPT2=/path/to/gpt2 ./scripts/reproduce.sh\`; the programs that accept \`--model\` then"
    echo "also run on passages of War and Peace and gain a GPT-2 column."
  fi
  echo
  for i in "${!modules[@]}"; do
    m=${modules[$i]}
    if [ -d "$out/$m" ] && ls "$out/$m"/*.md >/dev/null 2>&1; then
      echo "## ${titles[$i]}"
      echo
      # Fragments in the order of examples/<module>/order.txt (one program name per line), then the rest by name.
      order=()
      [ -f "examples/$m/order.txt" ] && mapfile -t order < "examples/$m/order.txt"
      for name in "${order[@]}"; do [ -f "$out/$m/$name.md" ] && program_fragment "$m" "$name"; done
      for f in "$out/$m"/*.md; do
        name=$(basename "$f" .md)
        printf '%s\n' "${order[@]}" | grep -qx "$name" || program_fragment "$m" "$name"
      done
    fi
  done
} > "$out/REPORT.md"
echo "wrote $out/REPORT.md" >&2
