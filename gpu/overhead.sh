#!/usr/bin/env bash
# GPU overhead benchmark of the ncclwatch plugin (BENCHMARKS.md, "GPU overhead").
#
#   gpu/overhead.sh [OUTDIR] [ROUNDS]     (defaults: out/overhead/<time>, 5)
#
# Builds out/nccl_overhead and out/libnccl-profiler-noop.so with g++ (NCCL
# found as gpu/build.sh finds it: NCCL_HOME, else the system, else
# $CUDA), then, round after round, runs nccl_overhead once per (nranks,
# configuration), the configurations in a shuffled order each round (fixed
# seed), into OUTDIR/results.csv:
#
#   none      no profiler plugin (NCCL_PROFILER_PLUGIN=none)
#   noop      the do-nothing plugin asking for ncclwatch's default events
#             (0x806: Coll, P2p and KernelLaunch, for completions from CUDA
#             events, the default from profiler API v5)
#   noop_channels  the do-nothing plugin asking for kernel channels' events (0x46)
#   default   ncclwatch, default capture
#   noop_all  the do-nothing plugin asking for every event type (0x7fff)
#   all       ncclwatch, NCCLWATCH_EVENTS=all
#   noop_ops  the do-nothing plugin asking for operations only (Coll|P2p, 0x06)
#   ops       ncclwatch, NCCLWATCH_EVENTS=coll,p2p: operations without kernel
#             channels, so without completions (what NCCL's kernel-channel
#             instrumentation costs, and what the lightest capture does)
#   events    ncclwatch, NCCLWATCH_COMPLETIONS=events: completions from CUDA
#             events at each kernel launch instead of kernel channels
#   noop_events  the do-nothing plugin asking for what events mode asks
#             for (Coll|P2p|KernelLaunch, 0x806)
#   channels     ncclwatch, NCCLWATCH_COMPLETIONS=channels (completions from
#                kernel channels; CUDA events are the default from API v5)
#   default_x    ncclwatch ($PLUGIN_B when set) at the default capture with
#                the settings in $EXTRA_ENV ("NAME=VALUE ...")
#   sampled   ncclwatch, events with NCCLWATCH_EVENT_INTERVAL_US=$EVENT_INTERVAL_US
#             (default 50): events at most once per stream and interval
#   default_b    another build of ncclwatch ($PLUGIN_B), default capture (A/B)
#   default_c    a third build ($PLUGIN_C), default capture
#   default_tsc  ncclwatch, default capture, NCCLWATCH_CLOCK=tsc
#   default_mono ncclwatch, default capture, NCCLWATCH_CLOCK=monotonic
#   timed_noop, timed_default, timed_default_b, timed_default_c
#                noop and the builds of ncclwatch under gpu/timing_shim.cc: the
#                time each of NCCL's threads spends in the plugin (OUTDIR/timing.txt)
#
# Every process runs with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT, so ncclwatch's
# init line (its clock) and closing lines (events dropped) are in its log;
# OUTDIR/drops.csv has them per run.
#
# Then gpu/overhead_report.py writes OUTDIR/report.md (tables, ratios,
# PASS/MISS against the targets) and prints it. Each process's log is in
# OUTDIR/logs/, the machine description in OUTDIR/machine.txt. Run it from
# anywhere; paths are relative to the repository.
#
# Environment:
#   PLUGIN       the ncclwatch plugin (default out/libnccl-profiler-ncclwatch.so,
#                else bazel-bin/plugin/libnccl-profiler-ncclwatch.so)
#   NRANKS       rank counts, each a run per configuration and round (default "4 2")
#   CONFIGS      configurations (default "none noop default noop_all all")
#   OPS, SIZES, MODES, TARGET_MS, BATCHES
#                passed to nccl_overhead (--op, --sizes, --mode, --target-ms,
#                --batches); defaults all; 8,1K,64K,1M,16M,256M; both; 20; 5
#   CPUS_PER_RANK  pin rank r to CPUs [r*K, r*K+K) (nccl_overhead --cpus-per-rank;
#                default 0: no pinning)
#   EVENT_INTERVAL_US  NCCLWATCH_EVENT_INTERVAL_US of the sampled configuration (default 50)
#   KEEP_TRACES=1  keep ncclwatch's trace files of every run in OUTDIR/traces/
#                (e.g. to read completion lag with `ncclwatch stats`)
#   QUICK=1      a smoke test: sizes 8,1M,256M, target 5 ms, 2 rounds unless given
#   BUDGET_SEC   no new round starts when the rounds so far say it would end
#                after this many seconds from the start, build included (default 200)
#   HARD_SEC     no new process starts after this many seconds (default 225): a
#                round cut short leaves some configurations with one round less
#   PROC_TIMEOUT_SEC  limit for one nccl_overhead process (default 60)
#   SKIP_BUILD=1 use the binaries already in out/
#   CUDA, NCCL_HOME, CXX  as for gpu/build.sh
#
# NCCL_NVLS_ENABLE=0 is exported (and nccl_overhead forces it too).
# Exit status: 0 when every run succeeded and loaded the expected plugin, else 1.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
t_start=$SECONDS

QUICK="${QUICK:-0}"
OUTDIR="${1:-$repo/out/overhead/$(date +%Y%m%d-%H%M%S)}"
if [[ "$QUICK" == 1 ]]; then
  ROUNDS="${2:-2}"
  SIZES="${SIZES:-8,1M,256M}"
  TARGET_MS="${TARGET_MS:-5}"
else
  ROUNDS="${2:-5}"
  SIZES="${SIZES:-8,1K,64K,1M,16M,256M}"
  TARGET_MS="${TARGET_MS:-20}"
fi
OPS="${OPS:-all}"
CPUS_PER_RANK="${CPUS_PER_RANK:-0}"
KEEP_TRACES="${KEEP_TRACES:-0}"
BATCHES="${BATCHES:-$([[ "$QUICK" == 1 ]] && echo 1 || echo 5)}"
MODES="${MODES:-both}"
NRANKS="${NRANKS:-4 2}"
CONFIGS="${CONFIGS:-none noop default noop_all all}"
BUDGET_SEC="${BUDGET_SEC:-200}"
HARD_SEC="${HARD_SEC:-225}"
PROC_TIMEOUT_SEC="${PROC_TIMEOUT_SEC:-60}"
CUDA="${CUDA:-/usr/local/cuda}"
CXX="${CXX:-g++}"

die() { echo "overhead.sh: $*" >&2; exit 1; }
now() { if [[ -n "${EPOCHREALTIME:-}" ]]; then echo "${EPOCHREALTIME/,/.}"; else date +%s.%N; fi; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "overhead.sh: $*" >&2; }

export NCCL_NVLS_ENABLE=0
# Nothing from the caller's environment may change what a configuration means.
unset NCCL_PROFILER_PLUGIN NCCLWATCH_EVENTS NCCLWATCH_COMPLETIONS NCCLWATCH_START_EVENTS NCCLWATCH_ENABLE NOOP_PROFILER_MASK NOOP_PROFILER_NULL_HANDLE \
      OVERHEAD_LABEL OVERHEAD_ROUND NCCLWATCH_CLOCK TIMING_SHIM_INNER

if [[ -z "${PLUGIN:-}" ]]; then
  for p in "$repo/out/libnccl-profiler-ncclwatch.so" "$repo/bazel-bin/plugin/libnccl-profiler-ncclwatch.so"; do
    if [[ -f "$p" ]]; then PLUGIN="$p"; break; fi
  done
fi
[[ -n "${PLUGIN:-}" && -f "$PLUGIN" ]] || die "ncclwatch plugin not found (out/libnccl-profiler-ncclwatch.so); set PLUGIN"
abspath() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }  # NCCL wants absolute paths
PLUGIN="$(abspath "$PLUGIN")"
PLUGIN_B="${PLUGIN_B:-$repo/out/libnccl-profiler-ncclwatch-b.so}"
PLUGIN_C="${PLUGIN_C:-$repo/out/libnccl-profiler-ncclwatch-c.so}"
need_plugin() {  # need_plugin VAR CONFIG: VAR names the build CONFIG (and timed_CONFIG) runs
  [[ " $CONFIGS " == *" $2 "* || " $CONFIGS " == *" timed_$2 "* ]] || return 0
  [[ -f "${!1}" ]] || die "no plugin at ${!1} ($1) for configuration $2"
  printf -v "$1" %s "$(abspath "${!1}")"
}
need_plugin PLUGIN_B default_b
need_plugin PLUGIN_C default_c

BIN="$repo/out/nccl_overhead"
NOOP="$repo/out/libnccl-profiler-noop.so"
SHIM="$repo/out/libnccl-profiler-timing.so"

# ------------------------------------------------------------------ build
build() {
  # shellcheck source=gpu/find_cuda_nccl.sh
  source "$here/find_cuda_nccl.sh"
  say "CUDA $CUDA (libs $cuda_lib); NCCL headers $nccl_inc, libs $nccl_lib"
  mkdir -p "$repo/out"
  "$CXX" -std=c++17 -O2 -g -Wall -Wextra -o "$BIN" "$here/nccl_overhead.cc" \
    -I"$nccl_inc" -I"$CUDA/include" "${nccl_link[@]}" -L"$cuda_lib" -lcudart -lpthread \
    -Wl,-rpath,"$nccl_lib" -Wl,-rpath,"$cuda_lib"
  "$CXX" -std=c++17 -O2 -Wall -Wextra -shared -fPIC -fvisibility=hidden -I"$repo" \
    -o "$NOOP" "$here/noop_plugin.cc"
  "$CXX" -std=c++17 -O2 -Wall -Wextra -shared -fPIC -fvisibility=hidden -I"$repo" \
    -o "$SHIM" "$here/timing_shim.cc" -ldl -pthread
  "$CXX" -std=c++17 -O2 -Wall -Wextra -pthread -o "$repo/out/clock_probe" "$here/clock_probe.cc"
  say "built $BIN, $NOOP and out/clock_probe ($((SECONDS - t_start)) s)"
}

if [[ "${SKIP_BUILD:-0}" == 1 && -x "$BIN" && -f "$NOOP" && -x "$repo/out/clock_probe" && -f "$SHIM" ]]; then
  say "SKIP_BUILD=1: using $BIN and $NOOP"
else
  build
fi

# ------------------------------------------------------------------ setup
mkdir -p "$OUTDIR/logs"
OUTDIR="$(cd "$OUTDIR" && pwd)"
CSV="$OUTDIR/results.csv"
[[ ! -s "$CSV" ]] || die "$CSV exists already; give a new OUTDIR"
TRACES="$(mktemp -d "${TMPDIR:-/tmp}/ncclwatch-overhead.XXXXXX")"
trap 'rm -rf "$TRACES"' EXIT

ngpus=0
if command -v nvidia-smi >/dev/null; then ngpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"; fi
ranks_list=()
for n in $NRANKS; do
  if (( ngpus > 0 && n > ngpus )); then say "skipping nranks $n: only $ngpus GPUs"; continue; fi
  ranks_list+=("$n")
done
(( ${#ranks_list[@]} > 0 )) || die "no usable rank count in NRANKS='$NRANKS' ($ngpus GPUs)"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname)"
  echo "kernel: $(uname -srm)"
  # shellcheck disable=SC1091
  [[ -r /etc/os-release ]] && echo "os: $(. /etc/os-release; echo "$PRETTY_NAME")"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($(nproc) cores visible)"
  if command -v git >/dev/null && git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
    echo "git: $(git -C "$repo" rev-parse --short HEAD)$(git -C "$repo" diff --quiet || echo ' (modified)')"
  fi
  echo "plugin: $PLUGIN sha256 $(sha256sum "$PLUGIN" | cut -c1-16)"
  echo "args: rounds $ROUNDS, nranks ${ranks_list[*]}, configs $CONFIGS, ops $OPS, sizes $SIZES, modes $MODES, target ${TARGET_MS} ms, pipelined batches $BATCHES, cpus per rank $CPUS_PER_RANK"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm,persistence_mode --format=csv 2>&1 || true
    nvidia-smi topo -m 2>&1 || true
  fi
  # What the clocks cost here (the plugin stamps events on NCCL's threads).
  [[ -x "$repo/out/clock_probe" ]] && "$repo/out/clock_probe" 2>&1
} > "$OUTDIR/machine.txt"

# ------------------------------------------------------------------ runs
failures=0
skipped=0
run_one() {  # run_one CONFIG NRANKS ROUND [CSV]
  local cfg="$1" n="$2" round="$3" csv="${4:-$CSV}"
  local log="$OUTDIR/logs/r${round}-n${n}-${cfg}.log"
  local want="libnccl-profiler-ncclwatch.so" env=()
  rm -rf "$TRACES/run" && mkdir -p "$TRACES/run"
  case "$cfg" in
    none | noop | noop_channels | noop_all | noop_ops | noop_events | default | all | ops | events | channels | default_tsc | default_mono | default_b | default_c | default_x | sampled) ;;
    timed_noop | timed_default | timed_default_b | timed_default_c) ;;
    *) die "unknown configuration '$cfg'" ;;
  esac
  # The plugin and settings of the configuration without its timed_ prefix.
  local base="${cfg#timed_}" plugin ours="NCCLWATCH_DIR=$TRACES/run"
  case "$base" in
    none)         plugin=none; want="-" ;;
    # What ncclwatch's default asks NCCL for: from API v5, Coll|P2p|KernelLaunch
    # (completions from CUDA events); 0x46 with kernel channels (noop_channels).
    noop)         plugin="$NOOP"; env=(NOOP_PROFILER_MASK=0x806); want="libnccl-profiler-noop.so" ;;
    noop_channels) plugin="$NOOP"; env=(NOOP_PROFILER_MASK=0x46); want="libnccl-profiler-noop.so" ;;
    noop_all)     plugin="$NOOP"; env=(NOOP_PROFILER_MASK=0x7fff); want="libnccl-profiler-noop.so" ;;
    noop_ops)     plugin="$NOOP"; env=(NOOP_PROFILER_MASK=0x06); want="libnccl-profiler-noop.so" ;;
    default)      plugin="$PLUGIN"; env=("$ours") ;;
    all)          plugin="$PLUGIN"; env=("$ours" NCCLWATCH_EVENTS=all) ;;
    ops)          plugin="$PLUGIN"; env=("$ours" NCCLWATCH_EVENTS=coll,p2p) ;;
    events)       plugin="$PLUGIN"; env=("$ours" NCCLWATCH_COMPLETIONS=events) ;;
    sampled)      plugin="$PLUGIN"; env=("$ours" NCCLWATCH_COMPLETIONS=events NCCLWATCH_EVENT_INTERVAL_US="${EVENT_INTERVAL_US:-50}") ;;
    noop_events)  plugin="$NOOP"; env=(NOOP_PROFILER_MASK=0x806); want="libnccl-profiler-noop.so" ;;
    # The default capture with the clock forced (plugin/core/clock.h): what the
    # automatic choice of tick source is worth on this machine.
    default_tsc)  plugin="$PLUGIN"; env=("$ours" NCCLWATCH_CLOCK=tsc) ;;
    default_mono) plugin="$PLUGIN"; env=("$ours" NCCLWATCH_CLOCK=monotonic) ;;
    # Other builds of ncclwatch at the default capture, for A/B/C comparisons
    # of a change ($PLUGIN_B, $PLUGIN_C).
    default_b)    plugin="$PLUGIN_B"; env=("$ours"); want="$(basename "$PLUGIN_B")" ;;
    default_c)    plugin="$PLUGIN_C"; env=("$ours"); want="$(basename "$PLUGIN_C")" ;;
    # Completions from kernel channels (API v5+), instead of CUDA events.
    channels)     plugin="$PLUGIN"; env=("$ours" NCCLWATCH_COMPLETIONS=channels) ;;
    # The default capture with the settings in $EXTRA_ENV (space-separated
    # NAME=VALUE, e.g. a sampling interval), of $PLUGIN_B when set.
    default_x)    plugin="${PLUGIN_B:-$PLUGIN}"; read -r -a env <<<"$ours ${EXTRA_ENV:-}"; want="$(basename "$plugin")" ;;
  esac
  if [[ "$cfg" == timed_* ]]; then
    # Under gpu/timing_shim.cc, which times every callback on the
    # thread NCCL makes it from (lines in OUTDIR/timing.txt).
    env=(NCCL_PROFILER_PLUGIN="$SHIM" TIMING_SHIM_INNER="$plugin" "${env[@]}")
    want="libnccl-profiler-timing.so"
  else
    env=(NCCL_PROFILER_PLUGIN="$plugin" "${env[@]}")
  fi
  local t0 rc=0
  t0="$(now)"
  # NCCL prints INIT-subsystem info lines (the same for every configuration,
  # all before the timing): ncclwatch's own lines are among them, its clock at
  # init and its closing line with the events it dropped.
  env "${env[@]}" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT OVERHEAD_LABEL="$cfg" OVERHEAD_ROUND="$round" \
    timeout -k 5 "$PROC_TIMEOUT_SEC" "$BIN" --nranks "$n" --op "$OPS" --sizes "$SIZES" --mode "$MODES" \
    --target-ms "$TARGET_MS" --batches "$BATCHES" --cpus-per-rank "$CPUS_PER_RANK" --timeout-sec "$((PROC_TIMEOUT_SEC - 5))" --out "$csv" >"$log" 2>&1 || rc=$?
  local got traces
  got="$(sed -n 's/.*profiler plugin loaded: \([^,]*\),.*/\1/p' "$log" | head -n1)"
  traces="$(du -sk "$TRACES/run" 2>/dev/null | cut -f1)"
  if [[ "$KEEP_TRACES" == 1 ]] && compgen -G "$TRACES/run/*" >/dev/null; then
    mkdir -p "$OUTDIR/traces/r${round}-n${n}-${cfg}"
    cp "$TRACES/run/"* "$OUTDIR/traces/r${round}-n${n}-${cfg}/"
  fi
  # ncclwatch's closing lines, one per rank: events dropped, summed.
  local closed dropped untracked implied clock
  closed="$(grep -c 'ncclwatch: closed ' "$log" || true)"
  dropped="$(sed -n 's/.*ncclwatch: closed .*dropped \([0-9]*\) events.*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')"
  untracked="$(sed -n 's/.*ncclwatch: closed .*; \([0-9]*\) operations without completion tracking.*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')"
  implied="$(sed -n 's/.*ncclwatch: closed .*; \([0-9]*\) completions implied by a later one.*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')"
  clock="$(sed -n 's/.*ncclwatch: profiler API v[0-9]*, events [0-9a-fx]*, clock \(.*\), writing .*/\1/p' "$log" | head -n1)"
  [[ -s "$OUTDIR/drops.csv" ]] || echo "config,round,nranks,closed,dropped,untracked,implied,clock" > "$OUTDIR/drops.csv"
  echo "$cfg,$round,$n,$closed,$dropped,$untracked,$implied,\"${clock//\"/}\"" >> "$OUTDIR/drops.csv"
  sed -n "s/^timing_shim pid/$cfg round $round nranks $n: pid/p" "$log" >> "$OUTDIR/timing.txt"
  sed -n "s/^.*ncclwatch: closed [^ ]*: /$cfg round $round nranks $n: /p" "$log" >> "$OUTDIR/closing.txt"
  local msg
  msg="round $round  nranks $n  $(printf '%-8s' "$cfg") $(since "$t0") s  plugin ${got:-?}  traces ${traces} KiB"
  if [[ "$closed" != 0 ]]; then  # ncclwatch ran (directly, as default_b, or under the shim)
    msg+="  closed $closed  dropped $dropped"
  fi
  if (( rc != 0 )); then
    say "$msg  FAILED (exit $rc); last lines of $log:"
    tail -n 8 "$log" >&2
    failures=$((failures + 1))
  elif [[ "$got" != "$want" ]]; then
    say "$msg  WRONG PLUGIN (expected $want): see $log"
    failures=$((failures + 1))
  else
    say "$msg"
  fi
}

# A discarded warm-up process first (GPU clocks, page cache, driver state).
say "warm-up run (discarded)"
run_one none "${ranks_list[0]}" 0 "$OUTDIR/warmup.csv"

RANDOM=20240607  # fixed seed: the same shuffled orders every time
max_round_sec=0
done_rounds=0
for ((round = 1; round <= ROUNDS; round++)); do
  elapsed=$((SECONDS - t_start))
  if (( round > 1 && elapsed + max_round_sec > BUDGET_SEC )); then
    say "stopping after $done_rounds rounds: $elapsed s so far, a round takes up to $max_round_sec s, budget $BUDGET_SEC s"
    break
  fi
  r0=$SECONDS
  for n in "${ranks_list[@]}"; do
    read -r -a order <<< "$CONFIGS"
    for ((i = ${#order[@]} - 1; i > 0; i--)); do  # Fisher-Yates
      j=$((RANDOM % (i + 1)))
      tmp="${order[i]}"; order[i]="${order[j]}"; order[j]="$tmp"
    done
    for cfg in "${order[@]}"; do
      if (( SECONDS - t_start >= HARD_SEC )); then
        skipped=$((skipped + 1))
        continue
      fi
      run_one "$cfg" "$n" "$round"
    done
  done
  if (( skipped > 0 )); then
    say "round $round cut short: $skipped runs skipped, past HARD_SEC=$HARD_SEC s"
    break
  fi
  done_rounds=$round
  (( SECONDS - r0 > max_round_sec )) && max_round_sec=$((SECONDS - r0))
  say "round $round done in $((SECONDS - r0)) s ($((SECONDS - t_start)) s in all)"
done
echo "rounds: $done_rounds of $ROUNDS; total $((SECONDS - t_start)) s; failures $failures; runs skipped (HARD_SEC) $skipped" >> "$OUTDIR/machine.txt"

# ------------------------------------------------------------------ report
if [[ -s "$CSV" ]]; then
  python3 "$here/overhead_report.py" "$CSV" --out "$OUTDIR/report.md" || failures=$((failures + 1))
else
  say "no results in $CSV"
  failures=$((failures + 1))
fi
say "done in $((SECONDS - t_start)) s: $done_rounds rounds, $failures failures, $skipped runs skipped; results in $OUTDIR"
(( failures == 0 ))
