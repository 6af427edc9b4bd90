#!/usr/bin/env bash
# examples/torchrun.sh and examples/slurm.sbatch run as users run them, from
# the release tarball installed into a fresh prefix, with the fake NCCL
# host's demo job (one rank whose all_reduce hangs) standing in for the GPUs:
# the plugin records under the per-node folder with the job's id, watch and
# diagnose leave their verdicts, and the job's exit status comes back.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/examples_test.XXXXXX")
src=$PWD
demo_job=$src/plugin/testing/demo_job
host=$(hostname)
mkdir "$tmp/prefix"
tar -C "$tmp/prefix" --strip-components=1 -xzf release/ncclwatch.tar.gz
export NCCLWATCH_PREFIX=$tmp/prefix
unset NCCLWATCH_JOB_ID NCCLWATCH_TRACES NCCLWATCH_DIR NCCLWATCH_NODE_DIR SLURM_JOB_ID TORCHELASTIC_RUN_ID

# Stand-ins on PATH: torchrun and python say how they were called; srun runs
# its command here as the one task of node 0.
bin=$tmp/bin
mkdir "$bin"
cat > "$bin/torchrun" << 'STUB'
#!/usr/bin/env bash
echo "torchrun $*" > "$STUB_LOG"
STUB
cat > "$bin/python" << 'STUB'
#!/usr/bin/env bash
echo "python $* NCCLWATCH_DIR=$NCCLWATCH_DIR" > "$STUB_LOG"
STUB
cat > "$bin/srun" << 'STUB'
#!/usr/bin/env bash
while [[ $# -gt 0 && "$1" == -* ]]; do shift; done
SLURM_PROCID=0 SLURM_NODEID=0 SLURM_LOCALID=0 SLURM_NTASKS=1 exec "$@"
STUB
chmod +x "$bin"/*
export PATH=$bin:$PATH

# check_traces FOLDER JOB_ID OUTPUT [nowatch]: one trace of job JOB_ID in
# FOLDER/<host>/, watch's (unless nowatch) and diagnose's verdicts beside it,
# echoed by the script.
check_traces() {
  local traces=$1 job=$2 out=$3 watch=${4:-watch}
  local files=("$traces/$host"/*.ncclwatch)
  [[ ${#files[@]} -eq 1 && -s "${files[0]}" ]] || fail "no trace in $traces/$host: $(ls -laR "$traces")"
  "$NCCLWATCH_PREFIX/bin/ncclwatch" dump "${files[0]}" > "$tmp/dump.txt"
  grep -qF "job_id: \"$job\"" "$tmp/dump.txt" || fail "the header's job id is not '$job': $(grep -m1 job_id "$tmp/dump.txt")"
  if [[ $watch == watch ]]; then
    [[ -s "$traces/verdict.txt" ]] || fail "no verdict from watch in $traces"
    grep -qF "ncclwatch watch: $(head -1 "$traces/verdict.txt")" <<< "$out" || fail "the script did not print watch's verdict: $out"
  else
    [[ ! -e "$traces/verdict.txt" ]] || fail "watch ran on node-local folders"
  fi
  [[ -s "$traces/diagnosis.txt" ]] || fail "no diagnosis in $traces"
  local first
  first=$(head -1 "$traces/diagnosis.txt")
  # The demo's all_reduce on 'world' hangs.
  [[ "$first" == *"AllReduce"* ]] || fail "diagnosis: $first"
  grep -qF "ncclwatch diagnose (exit " <<< "$out" || fail "the script did not print the diagnosis: $out"
  grep -qF "$first" <<< "$out" || fail "the script did not print the diagnosis: $out"
  # The same folder diagnosed by the job id, as a reused folder would need.
  "$NCCLWATCH_PREFIX/bin/ncclwatch" diagnose --job="$job" "$traces" > /dev/null || [[ $? -le 3 ]] ||
    fail "diagnose --job=$job"
}

# --- torchrun.sh
out=$(cd "$tmp" && NCCLWATCH_JOB_ID=tr-1 bash "$src/examples/torchrun.sh" "$demo_job" 2>&1) ||
  fail "torchrun.sh with the demo job: exit $?: $out"
check_traces "$tmp/ncclwatch-traces/tr-1" tr-1 "$out"
echo "torchrun.sh printed:"
echo "$out" | grep "^ncclwatch"
# Without an id it makes one; the job's status is the script's.
status=0
out=$(cd "$tmp" && NCCLWATCH_TRACES="$tmp/tr-fail" bash "$src/examples/torchrun.sh" bash -c 'exit 7' 2>&1) || status=$?
[[ $status -eq 7 ]] || fail "torchrun.sh with a job that exits 7: exit $status: $out"
# The default command.
STUB_LOG=$tmp/torchrun.log NPROC=4 NCCLWATCH_TRACES="$tmp/tr-default" bash examples/torchrun.sh > /dev/null 2>&1 ||
  fail "torchrun.sh with the default command: exit $?"
[[ "$(cat "$tmp/torchrun.log")" == "torchrun --standalone --nproc-per-node=4 train.py" ]] ||
  fail "default command: $(cat "$tmp/torchrun.log")"

# A trace folder used again: the script's diagnose names both jobs by the flag
# that picks each, the older first.
NCCLWATCH_JOB_ID=again-1 NCCLWATCH_TRACES="$tmp/again" bash examples/torchrun.sh "$demo_job" > /dev/null 2>&1 ||
  fail "torchrun.sh, first run in $tmp/again"
out=$(NCCLWATCH_JOB_ID=again-2 NCCLWATCH_TRACES="$tmp/again" bash examples/torchrun.sh "$demo_job" 2>&1) ||
  fail "torchrun.sh, second run in $tmp/again: $out"
grep -qE "^ncclwatch diagnose \(exit 2\): ncclwatch diagnose: the files hold 2 jobs; read one with --job: --job=again-1 \(started [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8} UTC, 1 file, first $tmp/again/$host/[^)]*\.ncclwatch\); --job=again-2 \(started " <<< "$out" ||
  fail "a reused folder: $out"
"$NCCLWATCH_PREFIX/bin/ncclwatch" diagnose --job=again-2 "$tmp/again" > /dev/null || [[ $? -eq 3 ]] ||
  fail "diagnose --job=again-2"

# --- slurm.sbatch
mkdir "$tmp/submit"
out=$(cd "$tmp/submit" && SLURM_JOB_ID=4242 SLURM_SUBMIT_DIR="$tmp/submit" bash "$src/examples/slurm.sbatch" "$demo_job" 2>&1) ||
  fail "slurm.sbatch with the demo job: exit $?: $out"
check_traces "$tmp/submit/ncclwatch-traces/4242" 4242 "$out"
# Node-local folders, gathered after the job.
out=$(SLURM_JOB_ID=4243 SLURM_SUBMIT_DIR="$tmp/submit" NCCLWATCH_NODE_DIR="$tmp/local" \
  bash examples/slurm.sbatch "$demo_job" 2>&1) || fail "slurm.sbatch with NCCLWATCH_NODE_DIR: exit $?: $out"
[[ -n "$(ls "$tmp/local/4243"/*.ncclwatch)" ]] || fail "nothing written in the node-local folder"
check_traces "$tmp/submit/ncclwatch-traces/4243" 4243 "$out" nowatch
# The default command runs once per task with its node's folder.
STUB_LOG=$tmp/python.log SLURM_JOB_ID=4244 SLURM_SUBMIT_DIR="$tmp/submit" bash examples/slurm.sbatch > /dev/null 2>&1 ||
  fail "slurm.sbatch with the default command: exit $?"
[[ "$(cat "$tmp/python.log")" == "python train.py NCCLWATCH_DIR=$tmp/submit/ncclwatch-traces/4244/$host" ]] ||
  fail "default command: $(cat "$tmp/python.log")"
# Outside Slurm it says so.
status=0
out=$(bash examples/slurm.sbatch true 2>&1) || status=$?
[[ $status -eq 2 && "$out" == *"not in a Slurm job"* ]] || fail "outside Slurm: exit $status: $out"

echo "PASS: torchrun.sh and slurm.sbatch"
