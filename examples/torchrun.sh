#!/usr/bin/env bash
# A torchrun job on one node with ncclwatch: the plugin records every rank,
# `ncclwatch watch` follows the files while the job runs (its verdict lands
# as soon as a hang holds, before the watchdog kills the job), and
# `ncclwatch diagnose` judges the whole run after it. After a failure (the
# launcher exits non-zero) the node's traces are first summarized
# (`ncclwatch summarize`), and diagnose reads the summary, as a job of many
# nodes is diagnosed (docs/commands.md, "summarize"), with a
# second round where it places a mismatch only between two collectives.
#
#   examples/torchrun.sh                         # torchrun --standalone --nproc-per-node=$NPROC train.py
#   examples/torchrun.sh python my_launcher.py   # any command that starts the ranks
#
# Settings (environment), with their defaults:
#   NCCLWATCH_PREFIX  /usr        where ncclwatch is installed (scripts/install.sh PREFIX,
#                                 or the Debian package)
#   NPROC             8           ranks for the default command
#   NCCLWATCH_JOB_ID  torchrun-<date>-<pid>: the id every trace header carries
#                                 (`ncclwatch diagnose --job ID` picks it)
#   NCCLWATCH_TRACES  ./ncclwatch-traces/$NCCLWATCH_JOB_ID
#   NCCLWATCH_STUCK_SEC 60        below PyTorch's NCCL watchdog (10 min by default,
#                                 or the timeout= of init_process_group)
#   NCCLWATCH_SUMMARIES $NCCLWATCH_TRACES/summaries: where a failed job's
#                                 summaries go, <host>.ncclsummary
#   NCCLWATCH_FR      1           PyTorch's Flight Recorder on: each rank keeps its last
#                                 collectives and dumps them on a watchdog timeout into
#                                 its node's folder (flight_recorder_<rank>), and diagnose
#                                 names process groups and Python lines from them
#                                 (--fr); your TORCH_FR_* / TORCH_NCCL_* settings win;
#                                 0: leave PyTorch's settings alone
#   NCCLWATCH_SUMMARIZE_ARGS unset; more options for summarize (e.g. --window 16)
#   NCCLWATCH_GROUP_NODES 64      where NCCLWATCH_SUMMARIES holds more node summaries
#                                 than this (a folder the nodes of a multi-node job
#                                 share), they are gathered into group summaries of
#                                 this many in $NCCLWATCH_TRACES/groups, and diagnose
#                                 reads those
#   NCCLWATCH_REFINE  1           when diagnose of the summary asks a second round
#                                 (ranks diverged among collectives it let go:
#                                 `ncclwatch diagnose --refine-args` prints what to
#                                 keep), summarize again with it, and diagnose names
#                                 the operation; 0: one round only
# Results in $NCCLWATCH_TRACES: <host>/ (the trace files), verdict.txt (watch's),
# diagnosis.txt (of the summaries after a failure). Exits with the job's status.
set -uo pipefail

prefix=${NCCLWATCH_PREFIX:-/usr}
ncclwatch=$prefix/bin/ncclwatch
plugin=$prefix/lib/libnccl-profiler-ncclwatch.so
[[ -e "$plugin" ]] || plugin=$prefix/lib/x86_64-linux-gnu/libnccl-profiler-ncclwatch.so  # the .deb's
if [[ ! -x "$ncclwatch" || ! -e "$plugin" ]]; then
  echo "torchrun.sh: no ncclwatch under NCCLWATCH_PREFIX=$prefix (bin/ncclwatch, lib/libnccl-profiler-ncclwatch.so)" >&2
  exit 2
fi

export NCCL_PROFILER_PLUGIN=$plugin
export NCCLWATCH_JOB_ID=${NCCLWATCH_JOB_ID:-torchrun-$(date -u +%Y%m%d-%H%M%S)-$$}
export NCCLWATCH_STUCK_SEC=${NCCLWATCH_STUCK_SEC:-60}
traces=${NCCLWATCH_TRACES:-$PWD/ncclwatch-traces/$NCCLWATCH_JOB_ID}
# One folder per node, so that the folders of several nodes can be gathered
# side by side.
export NCCLWATCH_DIR=$traces/$(hostname)
mkdir -p "$NCCLWATCH_DIR" || exit 2
if [[ ${NCCLWATCH_FR:-1} != 0 ]]; then
  # Flight Recorder's variables, under both the names PyTorch 2.5 and later
  # read (TORCH_FR_*) and the older TORCH_NCCL_* ones.
  export TORCH_FR_BUFFER_SIZE=${TORCH_FR_BUFFER_SIZE:-${TORCH_NCCL_TRACE_BUFFER_SIZE:-2000}}
  export TORCH_NCCL_TRACE_BUFFER_SIZE=${TORCH_NCCL_TRACE_BUFFER_SIZE:-$TORCH_FR_BUFFER_SIZE}
  export TORCH_NCCL_DUMP_ON_TIMEOUT=${TORCH_NCCL_DUMP_ON_TIMEOUT:-1}
  export TORCH_FR_DUMP_TEMP_FILE=${TORCH_FR_DUMP_TEMP_FILE:-${TORCH_NCCL_DEBUG_INFO_TEMP_FILE:-$NCCLWATCH_DIR/flight_recorder_}}
  export TORCH_NCCL_DEBUG_INFO_TEMP_FILE=${TORCH_NCCL_DEBUG_INFO_TEMP_FILE:-$TORCH_FR_DUMP_TEMP_FILE}
fi
# The Flight Recorder dumps (wherever they were sent) for diagnose.
fr_args=()
if [[ -n "${TORCH_FR_DUMP_TEMP_FILE:-}" ]]; then
  fr_args=(--fr "$(dirname "$TORCH_FR_DUMP_TEMP_FILE")")
fi

if (($# == 0)); then
  set -- torchrun --standalone --nproc-per-node="${NPROC:-8}" train.py
fi

"$ncclwatch" watch "${fr_args[@]}" "$traces" > "$traces/verdict.txt" 2> "$traces/watch.log" &
watcher=$!
"$@"
status=$?
# A SIGKILLed rank leaves a file that never ends: tell watch the job is over.
kill -TERM "$watcher" 2> /dev/null
wait "$watcher"
echo "ncclwatch watch: $(head -1 "$traces/verdict.txt")"
if ((status != 0)); then
  # After a failure: the node's traces as one summary, as every node of a
  # large job does, and diagnose reads the summaries.
  summaries=${NCCLWATCH_SUMMARIES:-$traces/summaries}
  # $1: the second round's --collectives (or nothing).
  summarize_node() {
    "$ncclwatch" summarize --job="$NCCLWATCH_JOB_ID" ${NCCLWATCH_SUMMARIZE_ARGS:-} ${1:+"$1"} \
      -o "$summaries/$(hostname).ncclsummary" "$NCCLWATCH_DIR" >> "$traces/summarize.log" 2>&1
  }
  # The group step: more node summaries than NCCLWATCH_GROUP_NODES are
  # gathered, that many to a group summary (name order), and diagnose reads
  # the groups; its verdict is the nodes' (docs/commands.md, "summarize").
  group_size=${NCCLWATCH_GROUP_NODES:-64}
  summaries_in=$summaries
  group_nodes() {
    # A glob, not a process substitution: a node without /dev/fd (a bare
    # chroot or container) must still get its diagnosis.
    local all=() f g=0 s=0
    for f in "$summaries"/*.ncclsummary; do [[ -f $f ]] && all+=("${f##*/}"); done
    summaries_in=$summaries
    ((${#all[@]} > group_size)) || return 0
    mkdir -p "$traces/groups" && rm -f "$traces/groups"/*.ncclsummary || return 1
    for ((at = 0; at < ${#all[@]}; at += group_size, ++g)); do
      local mine=("${all[@]:at:group_size}")
      "$ncclwatch" summarize -o "$traces/groups/group$g.ncclsummary" "${mine[@]/#/$summaries/}" \
        >> "$traces/summarize.log" 2>&1 || s=$?
    done
    echo "ncclwatch summarize, group step (exit $s): ${#all[@]} nodes in $g groups of up to $group_size in $traces/groups"
    summaries_in=$traces/groups
  }
  : > "$traces/summarize.log"
  mkdir -p "$summaries" && summarize_node
  summarized=$?
  line=$(tail -1 "$traces/summarize.log")
  echo "ncclwatch summarize (exit $summarized): ${line#ncclwatch summarize: }"
  group_nodes
  "$ncclwatch" diagnose "${fr_args[@]}" "$summaries_in" > "$traces/diagnosis.txt" 2>&1
  echo "ncclwatch diagnose of the summaries (exit $?): $(head -1 "$traces/diagnosis.txt")"
  # The second round: the signature chains placed a divergence between two
  # collectives the summaries let go; the summary keeps those collectives
  # too, and diagnose names the operation (the summary is replaced).
  if [[ ${NCCLWATCH_REFINE:-1} != 0 ]]; then
    ask=$("$ncclwatch" diagnose --refine-args "$summaries_in" 2> /dev/null)
    if [[ -n "$ask" ]]; then
      summarize_node "$ask"
      echo "ncclwatch summarize, second round (exit $?): $ask"
      group_nodes
      "$ncclwatch" diagnose "${fr_args[@]}" "$summaries_in" > "$traces/diagnosis.txt" 2>&1
      echo "ncclwatch diagnose of the summaries, second round (exit $?): $(head -1 "$traces/diagnosis.txt")"
    fi
  fi
else
  "$ncclwatch" diagnose "${fr_args[@]}" "$traces" > "$traces/diagnosis.txt" 2>&1
  echo "ncclwatch diagnose (exit $?): $(head -1 "$traces/diagnosis.txt")"
fi
echo "ncclwatch: traces, verdict.txt and diagnosis.txt in $traces"
exit "$status"
