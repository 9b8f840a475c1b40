#!/usr/bin/env bash
# Runs the Slurm recipes of docs/cli.md on a real single-node Slurm cluster and checks that what the jobs write is
# byte-identical to the same study run without Slurm.
#
# The recipes are the ```sh blocks of docs/cli.md marked `<!-- slurm-test: NAME -->`, written to files NAME and run
# as they stand (the doc and the test cannot drift). The cluster lives in a temporary folder: munged with its own key
# and socket, slurmctld and slurmd on 127.0.0.1 on free ports, no cgroups (proctrack/linuxproc, task/none), no
# accounting. Every daemon is stopped on exit, error or signal, and the script fails if any of its processes remain.
#
# Usage: scripts/slurm-test.sh [FOLDER]   FOLDER holds the `attnscope` binary (default build/tools)
# Needs the Debian packages slurm-wlm and munge (scripts/install-deps.sh), root (or password-less sudo), python3, and
# the shared data (ATTNSCOPE_DATA, else the build's, else ../shared/data). ATTNSCOPE_SLURM_KEEP=1 keeps the temporary
# folder.
set -euo pipefail
say() { echo "slurm-test: $*" >&2; }
for tool in munged mungekey munge unmunge slurmctld slurmd sbatch scontrol squeue sinfo scancel python3 setpriv; do
  command -v "$tool" >/dev/null || { say "skipped: $tool is not installed (needs the Debian packages slurm-wlm and munge, and python3)"; exit 0; }
done
if [ "$(id -u)" -ne 0 ]; then
  # slurmd starts the jobs' steps as their user, which needs root.
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then exec sudo -n -E "$0" "$@"; fi
  say "skipped: slurmd needs root, and this user is not root and has no password-less sudo"
  exit 0
fi
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$root/build/tools}" && pwd)
[ -x "$bin/attnscope" ] || { say "error: no attnscope binary in $bin"; exit 1; }
# The shared data as the tests find it: $ATTNSCOPE_DATA, else the build's ATTNSCOPE_DATA, else ../shared/data.
data=${ATTNSCOPE_DATA:-$(sed -n 's/^ATTNSCOPE_DATA:PATH=//p' "$bin/../CMakeCache.txt" 2>/dev/null || true)}
data=${data:-$root/../shared/data}
for file in gpt2-wp-mini/model.safetensors war_and_peace.txt; do
  [ -f "$data/$file" ] || { say "error: no $file in $data (the shared data folder; set ATTNSCOPE_DATA)"; exit 1; }
done
data=$(cd "$data" && pwd)
recipes=$root/docs/cli.md
start_time=$SECONDS

tmp=$(mktemp -d "${TMPDIR:-/tmp}/attnscope-slurm.XXXXXX")
# Every process started for the cluster (daemons, job steps, job scripts) carries this variable; the clean-up stops
# whatever still carries it. This shell does not, so it never matches itself.
marker="ATTNSCOPE_SLURM_TEST=$tmp"
daemon_pids=()
processes_of_this_test() {
  grep --files-with-matches --null-data --line-regexp --fixed-strings "$marker" /proc/[0-9]*/environ 2>/dev/null |
    sed 's|^/proc/\([0-9]*\)/environ$|\1|' || true
}
running() { [ -d "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
stop() {  # stop PID: SIGTERM, up to 10 s to exit, then SIGKILL
  local pid=$1 tries=0
  kill -TERM "$pid" 2>/dev/null || return 0
  while running "$pid" && [ $tries -lt 100 ]; do sleep 0.1; tries=$((tries + 1)); done
  if running "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local status=$? pid left
  trap - EXIT INT TERM
  if [ -n "${SLURM_CONF:-}" ] && [ ${#daemon_pids[@]} -ge 2 ]; then scancel --quiet --user=root 2>/dev/null || true; fi
  # slurmd, slurmctld, munged: the reverse of their start.
  for ((i = ${#daemon_pids[@]} - 1; i >= 0; i--)); do stop "${daemon_pids[i]}"; done
  for pid in $(processes_of_this_test); do kill -KILL "$pid" 2>/dev/null || true; done
  sleep 0.2
  left=$(processes_of_this_test | tr '\n' ' ')
  if [ -n "$left" ]; then
    say "error: processes of the test cluster still running after the clean-up: $left"
    status=1
  fi
  if [ "$status" -ne 0 ] && [ -d "$tmp/log" ]; then
    for log in "$tmp"/log/* "$tmp"/work/slurm-*.out; do
      [ -f "$log" ] && { echo "---- ${log#"$tmp"/}" >&2; tail -n 20 "$log" >&2; }
    done
  fi
  if [ "${ATTNSCOPE_SLURM_KEEP:-0}" = 1 ]; then say "kept $tmp"; else rm -rf "$tmp"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# start NAME COMMAND...: a daemon in the foreground of a background job, so that its pid is known before it runs;
# killed by the kernel should this script die without its clean-up (SIGKILL).
start() { setpriv --pdeathsig KILL env "$marker" "${@:2}" > "$tmp/log/$1.out" 2>&1 & daemon_pids+=($!); }
wait_for() {  # wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds, or fail naming WHAT
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { say "error: $what did not happen within the time allowed"; return 1; }
    sleep 0.2
  done
}

mkdir -p "$tmp"/{munge,state,spool,run,log,work,local,shared}
# munged wants its socket's folders open to every user (to connect), and none of them writable by others.
chmod 755 "$tmp" "$tmp/munge"

# ---- the recipes of docs/cli.md ----------------------------------------------------------------------------------
extract() {  # extract NAME: the ```sh block after `<!-- slurm-test: NAME -->` in docs/cli.md, as the file NAME
  awk -v name="$1" '
    $0 == "<!-- slurm-test: " name " -->" { marked = 1; next }
    marked && /^```sh$/ { inside = 1; marked = 0; found = 1; next }
    inside && /^```$/ { inside = 0; next }
    inside { print }
    END { exit !found }' "$recipes" > "$tmp/work/$1" ||
    { say "error: docs/cli.md has no \`\`\`sh block marked <!-- slurm-test: $1 -->"; exit 1; }
}
for name in rowstats-input.sh rowstats-array.sh rowstats-submit.sh report-input.sh report-array.sh report-submit.sh; do
  extract "$name"
done

# ---- munged: its own key, socket, pid, seed and log files ----------------------------------------------------------
socket=$tmp/munge/socket
mungekey --create --keyfile="$tmp/munge/key"
start munged munged --foreground --socket="$socket" --key-file="$tmp/munge/key" --pid-file="$tmp/run/munged.pid" \
  --seed-file="$tmp/munge/seed" --log-file="$tmp/log/munged.log"
munge_round_trip() { munge --socket="$socket" --no-input | unmunge --socket="$socket"; }
wait_for 20 "munged answering on $socket" munge_round_trip

# ---- slurm.conf -----------------------------------------------------------------------------------------------------
read -r controller_port node_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
host=$(hostname -s)
# The node as slurmd finds it (CPUs, sockets, memory), reached on the loopback address.
node=$(slurmd -C | sed -n 1p)
node_name=$(sed 's/^NodeName=\([^ ]*\).*/\1/' <<< "$node")
export SLURM_CONF=$tmp/slurm.conf
cat > "$SLURM_CONF" <<EOF
ClusterName=attnscope-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$controller_port
SlurmdPort=$node_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
PlugStackConfig=$tmp/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=5
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
: > "$tmp/plugstack.conf"

# ---- slurmctld and slurmd -------------------------------------------------------------------------------------------
start slurmctld slurmctld -D -f "$SLURM_CONF"
controller_up() { scontrol ping | grep -q 'is UP'; }
wait_for 30 "slurmctld answering on port $controller_port" controller_up
start slurmd slurmd -D -f "$SLURM_CONF" -N "$node_name"
node_idle() { [ "$(sinfo --noheader --Node --format=%T)" = idle ]; }
wait_for 30 "the node coming up idle (port $node_port)" node_idle
for pid in "${daemon_pids[@]}"; do running "$pid" || { say "error: a daemon exited at start"; exit 1; }; done
say "cluster up in $((SECONDS - start_time)) s: slurmctld on port $controller_port, slurmd on $node_port, folder $tmp"

# ---- the recipes, submitted ---------------------------------------------------------------------------------------
# The work folder sees the data as ../shared/data, as the project root does.
ln -s "$data" "$tmp/shared/data"
export PATH="$bin:$PATH"
cd "$tmp/work"
bash -e rowstats-input.sh
bash -e report-input.sh
# Submitted with the marker in the environment, which sbatch passes on to the jobs.
env "$marker" bash -e rowstats-submit.sh > rowstats-submit.out
env "$marker" bash -e report-submit.sh > report-submit.out
# Settled: nothing runs or waits, except jobs that wait for a dependency that failed.
jobs_settled() { ! squeue --noheader --format='%T %r' | grep -qvx 'PENDING DependencyNeverSatisfied'; }
wait_for 600 "the submitted jobs finishing" jobs_settled
# Every job and array task the recipes submitted must have completed.
jobs=$(scontrol --oneliner show jobs)
[ -n "$jobs" ] || { say "error: the recipes submitted no job"; exit 1; }
if grep -v 'JobState=COMPLETED' <<< "$jobs" | grep -q .; then
  say "error: jobs that did not complete:"
  grep -v 'JobState=COMPLETED' <<< "$jobs" |
    awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^(JobId|ArrayJobId|ArrayTaskId|JobName|JobState|Reason)=/) printf " %s", $i; print "" }' >&2
  exit 1
fi
say "$(wc -l <<< "$jobs") jobs completed on Slurm after $((SECONDS - start_time)) s"

# ---- the same study without Slurm ------------------------------------------------------------------------------------
# rowstats: one run over all layers, with the options of rowstats-array.sh.
check_identical() {  # check_identical SLURM_OUTPUT LOCAL_OUTPUT
  cmp "$1" "$2" || { say "error: $1 (Slurm) differs from $2 (a run without Slurm)"; exit 1; }
}
attnscope rowstats qk.npz --threads 1 --out "$tmp/local/rows.npz" > /dev/null
check_identical rows.npz "$tmp/local/rows.npz"
# Each shard holds its own layer only: the array split the work.
python3 - shards/layer*.npz <<'EOF'
import re, sys, zipfile
for shard in sys.argv[1:]:
    layer = re.fullmatch(r"shards/layer(\d+)\.npz", shard).group(1)
    others = [n for n in zipfile.ZipFile(shard).namelist() if not n.startswith(f"layer{layer}.") and n != "run_options.npy"]
    assert not others, f"{shard} holds arrays of other layers: {others}"
EOF
# report: the array script run here once per document, then merged, in a folder with the same relative paths.
cd "$tmp/local"
ln -s ../work/texts texts
mkdir reports
documents=$(ls texts | wc -l)
for ((task = 0; task < documents; task++)); do SLURM_ARRAY_TASK_ID=$task bash -e ../work/report-array.sh > /dev/null; done
attnscope merge --out all.json reports/*.json
for report in reports/*.json all.json; do check_identical "$tmp/work/$report" "$report"; done
# all.json says which document each row came from: row["run"] indexes "runs", whose record names the document
# (text_file) whose own report holds exactly those rows.
python3 - "$documents" all.json reports/*.json <<'EOF'
import json, sys
documents, merged = int(sys.argv[1]), json.load(open(sys.argv[2]))
reports = [json.load(open(path)) for path in sys.argv[3:]]
assert len(merged["runs"]) == documents, f"all.json: {len(merged['runs'])} runs for {documents} documents"
canonical = lambda rows: sorted(json.dumps(row, sort_keys=True) for row in rows)
assert all("run" in row for row in merged["heads"]), "all.json: rows that do not say their run"
for index, record in enumerate(merged["runs"]):
    assert "text_file" in record, f"all.json: runs[{index}] does not name its document (no text_file): {record}"
    [report] = [r for r in reports if r["runs"][0]["text_file"] == record["text_file"]]
    assert record == report["runs"][0], f"all.json: runs[{index}] is not the record of {record['text_file']}'s report"
    rows = [{k: v for k, v in row.items() if k != "run"} for row in merged["heads"] if row["run"] == index]
    assert canonical(rows) == canonical(report["heads"]), f"all.json: the rows of run {index} are not those of {record['text_file']}"
assert len(merged["heads"]) == sum(len(r["heads"]) for r in reports), "all.json: rows that belong to no run"
EOF
say "passed in $((SECONDS - start_time)) s: rows.npz and all.json (and $documents reports) byte-identical to runs without Slurm"
