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
# its command here as the one task of node 0, or with --ntasks=N as N tasks
# one after the other.
bin=$tmp/bin
mkdir "$bin"
cat > "$bin/torchrun" << 'STUB'
#!/usr/bin/env bash
echo "torchrun $*" > "$STUB_LOG"
STUB
cat > "$bin/python" << 'STUB'
#!/usr/bin/env bash
echo "python $* NCCLWATCH_DIR=$NCCLWATCH_DIR MASTER=$MASTER_ADDR:$MASTER_PORT FR=$TORCH_FR_DUMP_TEMP_FILE,$TORCH_FR_BUFFER_SIZE,$TORCH_NCCL_DUMP_ON_TIMEOUT" > "$STUB_LOG"
STUB
cat > "$bin/srun" << 'STUB'
#!/usr/bin/env bash
n=1
while [[ $# -gt 0 && "$1" == -* ]]; do
  [[ "$1" == --ntasks=* ]] && n=${1#--ntasks=}
  shift
done
((n > 1)) || SLURM_PROCID=0 SLURM_NODEID=0 SLURM_LOCALID=0 SLURM_NTASKS=1 exec "$@"
s=0
for ((i = 0; i < n; i++)); do SLURM_PROCID=$i SLURM_NODEID=$i SLURM_LOCALID=0 SLURM_NTASKS=$n "$@" || s=$?; done
exit $s
STUB
chmod +x "$bin"/*
export PATH=$bin:$PATH

# diagnose's whole first line on the demo's trace: its one rank of four
# waited in the hung all_reduce, NCCL's fourth of 'world' (#3: from 0); the
# wait is as long as the demo's pause, about 1.5 s. The waiting rank is
# named by the launcher's rank where there is one (SLURM_PROCID=0 from the
# srun stand-in), else by its rank in 'world', 2.
demo_verdict() {
  echo "^INCOMPLETE EVIDENCE \\(no file for ranks 0,1,3 of comm 'world' \\(4 ranks\\) \\(1 of 4 given\\)\\): HANG: AllReduce #3 on comm 'world' \\(4 ranks\\) never completed; rank $1 waited [0-9]+\\.[0-9] s; the missing comm rank 0, comm rank 1, comm rank 3 gave no trace file \\[cause: cannot tell\\]\$"
}
demo_rank=2

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
  [[ "$first" =~ $(demo_verdict "$demo_rank") ]] || fail "diagnosis: $first"
  grep -qF "ncclwatch diagnose (exit " <<< "$out" || fail "the script did not print the diagnosis: $out"
  grep -qF "$first" <<< "$out" || fail "the script did not print the diagnosis: $out"
  # The same folder diagnosed by the job id, as a reused folder would need.
  "$NCCLWATCH_PREFIX/bin/ncclwatch" diagnose --job="$job" "$traces" > /dev/null || [[ $? -le 3 ]] ||
    fail "diagnose --job=$job"
}

# check_summaries TRACES JOB_ID OUTPUT: after a failed job, this node's
# summary of job JOB_ID in TRACES/summaries/, and the diagnosis the
# script wrote and printed is diagnose's of the summaries, whose first line
# is the one the traces themselves give.
check_summaries() {
  local traces=$1 job=$2 out=$3
  local summary=$traces/summaries/$host.ncclsummary
  [[ -s "$summary" ]] || fail "no summary $summary: $(ls -laR "$traces")"
  # torchrun.sh prints summarize's line; slurm.sbatch counts the nodes.
  grep -qE "^ncclwatch summarize \(exit 0\): (1 process, [0-9]+ operations let go, [0-9]+ KB to $summary|1 of 1 nodes summarized in $traces/summaries )" <<< "$out" ||
    fail "the script did not print the summarize step: $out"
  local from_traces first status=0
  from_traces=$("$NCCLWATCH_PREFIX/bin/ncclwatch" diagnose --job="$job" "$traces/$host" | head -1) || :
  "$NCCLWATCH_PREFIX/bin/ncclwatch" diagnose "$traces/summaries" > "$tmp/of-summaries.txt" || status=$?
  first=$(head -1 "$tmp/of-summaries.txt")
  # The demo's all_reduce on 'world' hangs; its other ranks have no file.
  [[ "$first" =~ $(demo_verdict "$demo_rank") ]] ||
    fail "diagnose of the summaries: $first"
  [[ $status -eq 3 ]] || fail "diagnose of the summaries: exit $status"
  [[ "$first" == "$from_traces" ]] || fail "the summaries say '$first', the traces '$from_traces'"
  [[ "$(head -1 "$traces/diagnosis.txt")" == "$first" ]] || fail "diagnosis.txt is not of the summaries: $(head -1 "$traces/diagnosis.txt")"
  grep -qF "ncclwatch diagnose of the summaries (exit 3): $first" <<< "$out" ||
    fail "the script did not print the diagnosis of the summaries: $out"
}
# A job that fails: the demo, then a non-zero exit.
failing_job=("bash" "-c" '"$0"; exit 1' "$demo_job")
# One whose summary lets its mismatch go: the summary benchmark's synthetic
# job at 8 ranks and 300 collectives (rank 5's 11th has another count), its
# files written for the script's job id into the rank folder, then a
# non-zero exit.
summary_benchmark=$src/tools/summary/summary_benchmark
refine_job=("bash" "-c" 'rm -rf "$1" && "$0" "$1" 8 300 "$NCCLWATCH_JOB_ID" && mv "$1"/node0/*.ncclwatch "$NCCLWATCH_DIR"/; exit 1'
  "$summary_benchmark" "$tmp/generated")

# check_refined TRACES OUTPUT: the first round of the summaries placed the
# mismatch between two collectives and asked for them (its first line says
# the --collectives argument), the second round ran with it, and its
# diagnosis, written and printed, has the traces' first line.
check_refined() {
  local traces=$1 out=$2 from_traces ask
  from_traces=$("$NCCLWATCH_PREFIX/bin/ncclwatch" diagnose "$traces/$host" | head -1) || true
  [[ "$from_traces" == "MISMATCH: ReduceScatter #2 on comm 'world' (8 ranks): rank 5 called count "* ]] ||
    fail "the traces of the refine job: $from_traces"
  grep -qE "^ncclwatch diagnose of the summaries \(exit 1\): MISMATCH: rank 5 issued collectives on comm 'world' \(8 ranks\) .* summarize the nodes again adding --collectives=0x[0-9a-f]{16}:1-64 " <<< "$out" ||
    fail "the first round did not place the mismatch: $out"
  grep -qE "^ncclwatch summarize, second round \(exit 0\): --collectives=0x[0-9a-f]{16}:1-64$" <<< "$out" ||
    fail "no second round: $out"
  [[ "$(head -1 "$traces/diagnosis.txt")" == "$from_traces" ]] ||
    fail "the second round says '$(head -1 "$traces/diagnosis.txt")', the traces '$from_traces'"
  grep -qF "ncclwatch diagnose of the summaries, second round (exit 1): $from_traces" <<< "$out" ||
    fail "the script did not print the second round's diagnosis: $out"
}

# A job of two nodes, more than NCCLWATCH_GROUP_NODES=1: the benchmark's
# job at 16 ranks, this host's ranks node0's; node1's summary (already with
# the collectives the second round asks for) written into the shared
# summaries as another node's would be.
two_nodes_job=("bash" "-c" 'rm -rf "$1" && "$0" "$1" 16 300 "$NCCLWATCH_JOB_ID" && mv "$1"/node0/*.ncclwatch "$NCCLWATCH_DIR"/ &&
  mkdir -p "$NCCLWATCH_SUMMARIES" && "$2" summarize --job="$NCCLWATCH_JOB_ID" --collectives=0x0000000000005000:1-64 \
    -o "$NCCLWATCH_SUMMARIES/other-node.ncclsummary" "$1"/node1 > /dev/null; exit 1'
  "$summary_benchmark" "$tmp/generated2" "$NCCLWATCH_PREFIX/bin/ncclwatch")
# check_grouped TRACES OUTPUT: the two node summaries were gathered into two
# groups (each round), the first round's diagnosis of the groups placed the
# mismatch between two collectives, and the second round's, written and
# printed, is the two nodes' traces' first line.
check_grouped() {
  local traces=$1 out=$2 from_traces
  from_traces=$("$NCCLWATCH_PREFIX/bin/ncclwatch" diagnose "$traces/$host" "$tmp/generated2/node1" | head -1) || true
  [[ "$from_traces" == "MISMATCH: ReduceScatter #2 on comm 'world' (16 ranks): rank 5 called count "* ]] ||
    fail "the traces of the two-node job: $from_traces"
  [[ $(grep -cE "^ncclwatch summarize, group step \(exit 0\): 2 nodes in 2 groups of up to 1 in $traces/groups$" <<< "$out") -eq 2 ]] ||
    fail "no group step in each round: $out"
  [[ -s "$traces/groups/group0.ncclsummary" && -s "$traces/groups/group1.ncclsummary" ]] ||
    fail "no group summaries: $(ls -laR "$traces")"
  grep -qE "^ncclwatch diagnose of the summaries \(exit 1\): MISMATCH: rank 5 issued collectives on comm 'world' \(16 ranks\) " <<< "$out" ||
    fail "the first round of the groups did not place the mismatch: $out"
  [[ "$(head -1 "$traces/diagnosis.txt")" == "$from_traces" ]] ||
    fail "the groups' second round says '$(head -1 "$traces/diagnosis.txt")', the traces '$from_traces'"
  grep -qF "ncclwatch diagnose of the summaries, second round (exit 1): $from_traces" <<< "$out" ||
    fail "the script did not print the groups' second round: $out"
}
# --- torchrun.sh
out=$(cd "$tmp" && NCCLWATCH_JOB_ID=tr-1 bash "$src/examples/torchrun.sh" "$demo_job" 2>&1) ||
  fail "torchrun.sh with the demo job: exit $?: $out"
check_traces "$tmp/ncclwatch-traces/tr-1" tr-1 "$out"
echo "torchrun.sh printed:"
echo "$out" | grep "^ncclwatch"
# After a failure the node's summary is diagnosed.
status=0
out=$(cd "$tmp" && NCCLWATCH_JOB_ID=tr-2 bash "$src/examples/torchrun.sh" "${failing_job[@]}" 2>&1) || status=$?
[[ $status -eq 1 ]] || fail "torchrun.sh with a failing job: exit $status: $out"
check_summaries "$tmp/ncclwatch-traces/tr-2" tr-2 "$out"
echo "torchrun.sh after a failure printed:"
echo "$out" | grep "^ncclwatch"
# A mismatch the summary let go: named by the second round; with
# NCCLWATCH_REFINE=0 the first round's range stays.
status=0
out=$(cd "$tmp" && NCCLWATCH_JOB_ID=tr-3 bash "$src/examples/torchrun.sh" "${refine_job[@]}" 2>&1) || status=$?
[[ $status -eq 1 ]] || fail "torchrun.sh with the refine job: exit $status: $out"
check_refined "$tmp/ncclwatch-traces/tr-3" "$out"
echo "torchrun.sh after a failure with a mismatch let go printed:"
echo "$out" | grep "^ncclwatch"
status=0
out=$(cd "$tmp" && NCCLWATCH_REFINE=0 NCCLWATCH_JOB_ID=tr-4 bash "$src/examples/torchrun.sh" "${refine_job[@]}" 2>&1) ||
  status=$?
[[ $status -eq 1 && "$out" != *"second round"* && "$(head -1 "$tmp/ncclwatch-traces/tr-4/diagnosis.txt")" == "MISMATCH: rank 5 issued collectives"* ]] ||
  fail "torchrun.sh with NCCLWATCH_REFINE=0: exit $status: $out"
# Node summaries beyond NCCLWATCH_GROUP_NODES in the shared folder: the
# group step, and its verdict is the traces'.
status=0
out=$(cd "$tmp" && NCCLWATCH_GROUP_NODES=1 NCCLWATCH_JOB_ID=tr-5 NCCLWATCH_SUMMARIES="$tmp/ncclwatch-traces/tr-5/summaries" \
  bash "$src/examples/torchrun.sh" "${two_nodes_job[@]}" 2>&1) || status=$?
[[ $status -eq 1 ]] || fail "torchrun.sh with two nodes' summaries: exit $status: $out"
check_grouped "$tmp/ncclwatch-traces/tr-5" "$out"
echo "torchrun.sh with more node summaries than NCCLWATCH_GROUP_NODES printed:"
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

# Flight Recorder: a PyTorch job's traces and the dumps its ranks wrote
# where the script's TORCH_FR_DUMP_TEMP_FILE says (a recording's), then a
# failure: the diagnosis of the summaries names the process group.
fr_rec=$src/testdata/gpu/torch_skip
fr_job=("bash" "-c" 'cp "$0"/*.ncclwatch "$NCCLWATCH_DIR"/ && for f in "$0"/fr/nccl_trace_rank_*; do cp "$f" "$TORCH_FR_DUMP_TEMP_FILE${f##*_}"; done; exit 1' "$fr_rec")
status=0
out=$(cd "$tmp" && NCCLWATCH_JOB_ID=7d9ccbd4-72f1-4268-be58-cb9c5409a62f bash "$src/examples/torchrun.sh" "${fr_job[@]}" 2>&1) ||
  status=$?
[[ $status -eq 1 ]] || fail "torchrun.sh with Flight Recorder dumps: exit $status: $out"
[[ -s "$tmp/ncclwatch-traces/7d9ccbd4-72f1-4268-be58-cb9c5409a62f/$host/flight_recorder_3" ]] || fail "no dump in the node's folder: $(ls -lR "$tmp/ncclwatch-traces/7d9ccbd4-72f1-4268-be58-cb9c5409a62f"): $out"
grep -qF "ncclwatch diagnose of the summaries (exit 1): HANG: rank 3 never joined AllReduce #4 on comm 0x4b4755f15b9950a8 (process group 'default_pg', 4 ranks); " <<< "$out" ||
  fail "Flight Recorder's process group not in the diagnosis: $out"

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
demo_rank=0
mkdir "$tmp/submit"
out=$(cd "$tmp/submit" && SLURM_JOB_ID=4242 SLURM_SUBMIT_DIR="$tmp/submit" bash "$src/examples/slurm.sbatch" "$demo_job" 2>&1) ||
  fail "slurm.sbatch with the demo job: exit $?: $out"
check_traces "$tmp/submit/ncclwatch-traces/4242" 4242 "$out"
# Node-local folders, gathered after the job.
out=$(SLURM_JOB_ID=4243 SLURM_SUBMIT_DIR="$tmp/submit" NCCLWATCH_NODE_DIR="$tmp/local" NCCLWATCH_CLEAN_NODE_DIR=0 \
  bash examples/slurm.sbatch "$demo_job" 2>&1) || fail "slurm.sbatch with NCCLWATCH_NODE_DIR: exit $?: $out"
[[ -n "$(ls "$tmp/local/4243"/*.ncclwatch)" ]] || fail "nothing written in the node-local folder"
check_traces "$tmp/submit/ncclwatch-traces/4243" 4243 "$out" nowatch
# After a failure each node's summary is diagnosed, from the shared folders
# and from node-local ones.
status=0
out=$(cd "$tmp/submit" && SLURM_JOB_NUM_NODES=1 SLURM_JOB_ID=4245 SLURM_SUBMIT_DIR="$tmp/submit" bash "$src/examples/slurm.sbatch" \
  "${failing_job[@]}" 2>&1) || status=$?
[[ $status -eq 1 ]] || fail "slurm.sbatch with a failing job: exit $status: $out"
check_summaries "$tmp/submit/ncclwatch-traces/4245" 4245 "$out"
grep -qF "ncclwatch watch: " <<< "$out" || fail "slurm.sbatch after a failure: no watch verdict: $out"
status=0
out=$(SLURM_JOB_NUM_NODES=1 SLURM_JOB_ID=4246 SLURM_SUBMIT_DIR="$tmp/submit" NCCLWATCH_NODE_DIR="$tmp/local" \
  bash examples/slurm.sbatch "${failing_job[@]}" 2>&1) || status=$?
[[ $status -eq 1 ]] || fail "slurm.sbatch with NCCLWATCH_NODE_DIR and a failing job: exit $status: $out"
check_summaries "$tmp/submit/ncclwatch-traces/4246" 4246 "$out"
# Gathered and summarized, the node-local folder is removed.
[[ ! -e "$tmp/local/4246" && -d "$tmp/local/4243" ]] || fail "node-local folders: $(ls "$tmp/local")"
echo "slurm.sbatch after a failure printed:"
echo "$out" | grep "^ncclwatch"
status=0
out=$(cd "$tmp/submit" && SLURM_JOB_NUM_NODES=1 SLURM_JOB_ID=4247 SLURM_SUBMIT_DIR="$tmp/submit" \
  bash "$src/examples/slurm.sbatch" "${refine_job[@]}" 2>&1) || status=$?
[[ $status -eq 1 ]] || fail "slurm.sbatch with the refine job: exit $status: $out"
check_refined "$tmp/submit/ncclwatch-traces/4247" "$out"
echo "slurm.sbatch after a failure with a mismatch let go printed:"
echo "$out" | grep "^ncclwatch"
# More nodes than NCCLWATCH_GROUP_NODES: the group step, one task a group.
status=0
out=$(cd "$tmp/submit" && NCCLWATCH_GROUP_NODES=1 SLURM_JOB_NUM_NODES=2 SLURM_JOB_ID=4250 SLURM_SUBMIT_DIR="$tmp/submit" \
  bash "$src/examples/slurm.sbatch" "${two_nodes_job[@]}" 2>&1) || status=$?
[[ $status -eq 1 ]] || fail "slurm.sbatch with two nodes: exit $status: $out"
check_grouped "$tmp/submit/ncclwatch-traces/4250" "$out"
echo "slurm.sbatch with more nodes than NCCLWATCH_GROUP_NODES printed:"
echo "$out" | grep "^ncclwatch"
# The default command runs once per task with its node's folder.
STUB_LOG=$tmp/python.log SLURM_JOB_ID=4244 SLURM_SUBMIT_DIR="$tmp/submit" bash examples/slurm.sbatch > /dev/null 2>&1 ||
  fail "slurm.sbatch with the default command: exit $?"
# MASTER_ADDR: the first node (here, with no scontrol, this host); the
# port from the job id; Flight Recorder dumping into the node's folder.
[[ "$(cat "$tmp/python.log")" == "python train.py NCCLWATCH_DIR=$tmp/submit/ncclwatch-traces/4244/$host MASTER=$host:24244 FR=$tmp/submit/ncclwatch-traces/4244/$host/flight_recorder_,2000,1" ]] ||
  fail "default command: $(cat "$tmp/python.log")"
# The time limit near (USR1, --signal=B:USR1@120): the step, hung after the
# demo, is ended and the failure path runs; the step's status comes back.
status=0
out=$(cd "$tmp/submit" && SLURM_JOB_NUM_NODES=1 SLURM_JOB_ID=4248 SLURM_SUBMIT_DIR="$tmp/submit" bash "$src/examples/slurm.sbatch" \
  bash -c '"$0" && kill -USR1 $PPID && exec sleep infinity' "$demo_job" 2>&1) || status=$?
[[ $status -eq 143 ]] || fail "slurm.sbatch at the time limit: exit $status: $out"
grep -qF "ncclwatch: the job step was ended by SIGUSR1 (exit 143)" <<< "$out" || fail "no word of USR1: $out"
check_summaries "$tmp/submit/ncclwatch-traces/4248" 4248 "$out"
# scancel (TERM): no new step; watch's verdict and diagnose of the traces.
status=0
out=$(cd "$tmp/submit" && SLURM_JOB_ID=4249 SLURM_SUBMIT_DIR="$tmp/submit" bash "$src/examples/slurm.sbatch" \
  bash -c '"$0" && kill -TERM $PPID && exec sleep infinity' "$demo_job" 2>&1) || status=$?
[[ $status -eq 143 ]] || fail "slurm.sbatch after scancel: exit $status: $out"
grep -qF "ncclwatch: the job step was ended by SIGTERM (exit 143)" <<< "$out" || fail "no word of TERM: $out"
[[ ! -e "$tmp/submit/ncclwatch-traces/4249/summaries" ]] || fail "summarized after scancel: $out"
check_traces "$tmp/submit/ncclwatch-traces/4249" 4249 "$out"

# Outside Slurm it says so.
status=0
out=$(bash examples/slurm.sbatch true 2>&1) || status=$?
[[ $status -eq 2 && "$out" == *"not in a Slurm job"* ]] || fail "outside Slurm: exit $status: $out"

echo "PASS: torchrun.sh and slurm.sbatch"
