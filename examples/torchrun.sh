#!/usr/bin/env bash
# A torchrun job on one node with ncclwatch: the plugin records every rank,
# `ncclwatch watch` follows the files while the job runs (its verdict lands
# as soon as a hang holds, before the watchdog kills the job), and
# `ncclwatch diagnose` judges the whole run after it. After a failure (the
# launcher exits non-zero) the node's traces are first summarized
# (`ncclwatch summarize`), and diagnose reads the summary, as a job of many
# nodes is diagnosed (README, "Large jobs: summarize per node").
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
#   NCCLWATCH_SUMMARIES $NCCLWATCH_TRACES/summaries/$NCCLWATCH_JOB_ID: where a
#                                 failed job's summaries go, <host>.ncclsummary
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

if (($# == 0)); then
  set -- torchrun --standalone --nproc-per-node="${NPROC:-8}" train.py
fi

"$ncclwatch" watch "$traces" > "$traces/verdict.txt" 2> "$traces/watch.log" &
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
  summaries=${NCCLWATCH_SUMMARIES:-$traces/summaries/$NCCLWATCH_JOB_ID}
  mkdir -p "$summaries" &&
    "$ncclwatch" summarize --job="$NCCLWATCH_JOB_ID" -o "$summaries/$(hostname).ncclsummary" "$NCCLWATCH_DIR" \
      > "$traces/summarize.log" 2>&1
  summarized=$?
  line=$(tail -1 "$traces/summarize.log")
  echo "ncclwatch summarize (exit $summarized): ${line#ncclwatch summarize: }"
  "$ncclwatch" diagnose "$summaries" > "$traces/diagnosis.txt" 2>&1
  echo "ncclwatch diagnose of the summaries (exit $?): $(head -1 "$traces/diagnosis.txt")"
else
  "$ncclwatch" diagnose "$traces" > "$traces/diagnosis.txt" 2>&1
  echo "ncclwatch diagnose (exit $?): $(head -1 "$traces/diagnosis.txt")"
fi
echo "ncclwatch: traces, verdict.txt and diagnosis.txt in $traces"
exit "$status"
