// The tools' in-memory picture of a job, built from every rank's trace file:
// processes, communicators (linked across processes by their hash), every
// rank's operations in program order, the same operation matched across the
// ranks of its communicator, and clocks aligned onto one timeline.
//
// Pipeline: LoadModel (reader -> ModelLoader, loader.h) -> MatchOps (match.cc) ->
// AlignClocks (align.cc) -> liveness.h, then the analyses (order.h,
// diagnose.h, stats.h, export.h) read it.
//
// Memory: an Op is 96 bytes and holds ids, not strings, so 1,024 ranks with
// 10,000 collectives each fit in about 1 GB. Trace files are streamed: no
// file is held whole in memory.
//
// Thread safety: build on one thread; afterwards read-only and shareable.

#ifndef TOOLS_MODEL_MODEL_H_
#define TOOLS_MODEL_MODEL_H_

#include <stdint.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tools/model/semantics.h"
#include "tools/model/sketch.h"

namespace ncclwatch::tools {

inline constexpr uint32_t kNone = 0xffffffffu;
inline constexpr int64_t kNoTime = INT64_MIN;
// a + b, saturated, never kNoTime: time arithmetic on values a corrupt file
// may have made extreme.
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN + 1;
  return r == kNoTime ? INT64_MIN + 1 : r;
}
inline constexpr double kAbortMinWaitSec = 1.0;
inline constexpr double kAbortWindowSec = 3.0;
// The least time in flight of a completion taken for an abort's, on a
// process whose header's stuck limit is `stuck_sec` (finish_load.cc).
double AbortMinWaitSec(double stuck_sec);
// The most ranks a communicator may have (NCCL's largest jobs are well below):
// a CommInit claiming more, or a rank at or beyond it, is corrupt and skipped,
// so a corrupt file cannot make the analyses loop or allocate per claimed rank.
inline constexpr int32_t kMaxCommRanks = 1 << 17;

enum class OpKind : uint8_t { kColl = 0, kP2p = 1 };

enum class OpState : uint8_t {
  kCompleted = 0,  // the plugin saw it complete (kernel channels and proxy ops done)
  kInFlight = 1,   // enqueued, completion tracked, never completed in the file
  kUntracked = 2,  // enqueued; the capture could not see completion (no KernelCh, API < v4)
};

// One rank's view of one operation. Times are ns on the job's aligned
// timeline (see AlignClocks); before alignment, on the process's own
// CLOCK_MONOTONIC.
struct Op {
  uint32_t proc = kNone;   // Model::procs index
  uint32_t comm = kNone;   // Model::comms index
  int32_t rank = -1;       // the process's rank in `comm`
  OpKind kind = OpKind::kColl;
  OpState state = OpState::kUntracked;
  uint8_t nchannels = 0;
  bool has_gpu = false;
  // The kernels stopped because the communicator was aborted, not because
  // the operation completed (state is then kInFlight). See LoadModel.
  bool ended_by_abort = false;
  // Completed, as a later operation on the same communicator shows, though
  // its own completion never reached the file (state kCompleted, done_ns
  // kNoTime): NCCL did not deliver one of its kernel-channel events (seen on
  // GPU, NCCL 2.28: about 1 operation in 5,000 under load). See LoadModel.
  bool completion_lost = false;
  // Recorded before its file counted completions it may lack (Drops): with
  // no completion in the file, it may have completed all the same.
  bool completion_maybe_lost = false;
  // A value of its record failed a consistency check at load (a string the
  // file never defined, a function or datatype NCCL does not have, count 0
  // on a collective, a root or peer beyond the communicator, a sequence
  // number out of line with the rank's others, a time outside its write):
  // its file is damaged there (Proc::damaged_at). What it was called with
  // is unknown, so it can disagree with nothing.
  bool suspect = false;
  // NCCL's event mask may have lacked its process's completion source when
  // it was enqueued (a MaskChange took it away, or its record says
  // NO_COMPLETION_MASK): a missing completion proves nothing of it, and a
  // completion from a CUDA event, which may be an earlier launch's, is not
  // taken. See LoadModel.
  bool mask_unseen = false;
  // Its completion came from a CUDA event the plugin's writer polled
  // (OpDone.from_event): done_ns is when the writer saw it, within ~10 ms
  // and later than the kernel's end; no GPU execution time.
  bool polled = false;
  // Its kernel launch recorded no CUDA event of its own
  // (Op.launch_without_event, NCCLWATCH_EVENT_INTERVAL_US): a later
  // launch's event on its stream proves it complete. Still in flight in the
  // file, its state is unknown (the tail of a burst waits for the stream's
  // next launch with events): liveness calls it unknown, never hung on its
  // own, unless the structure says it cannot have finished.
  bool without_event = false;
  Func fn = Func::kOther;  // `func` resolved once at load (tools/semantics.h)
  uint16_t func = 0;       // Model::strings ids (0: none)
  uint16_t datatype = 0;
  uint16_t algo = 0;
  uint16_t proto = 0;
  int32_t peer_or_root = 0;  // collectives: root; p2p: the peer's rank in `comm`
  // Polled completions (`polled`): how long before done_ns the writer had
  // seen the stream reach the kernel (the event before it complete); 0 when
  // it saw both at one look. done_ns - polled_held_ns is when the GPU got to
  // the operation, within one polling interval: a rank whose GPU gets there
  // last, while its host enqueued in time, was held by earlier GPU work.
  uint32_t polled_held_ns = 0;  // in the padding before `seq`
  // Collectives: NCCL's seqNumber, which NCCL counts per communicator AND
  // function (AllReduce #0, #1, ... and Broadcast #0, ... on one comm).
  // P2p: order of this rank's sends to (or receives from) that peer, 1-based.
  uint64_t seq = 0;
  uint64_t count = 0;
  int64_t start_ns = kNoTime;   // enqueue began
  int64_t done_ns = kNoTime;    // completion seen by the plugin (kCompleted)
  int64_t gpu_start_ns = kNoTime;  // first kernel channel start, carried into the CPU clock
  uint32_t enqueue_ns = 0;      // enqueue duration
  uint32_t gpu_duration_ns = 0; // first channel start to last channel stop
  uint32_t match = kNone;       // Model::matches index
  uint32_t index = 0;           // position in its process's program order

  int64_t gpu_end_ns() const { return has_gpu ? gpu_start_ns + gpu_duration_ns : kNoTime; }
};
static_assert(sizeof(Op) <= 96, "Op must stay small: 10 M of them must fit in 1 GB");

struct ProxyState {  // trace::ProxyProgress, kept from stuck reports
  uint32_t channel = 0;
  int32_t peer = 0;
  bool is_send = false;
  int32_t nsteps = 0;
  int32_t last_step = 0;
  uint32_t last_state = 0;
  int64_t last_update_ns = kNoTime;
  bool stopped = false;
};

struct StuckOp {  // trace::InFlightOp
  uint32_t op = kNone;  // Model::ops index when the file has that op
  uint32_t comm = kNone;
  uint64_t seq = 0;
  uint16_t func = 0;
  int64_t age_ns = 0;
  uint32_t nchannels = 0;
  uint32_t kernel_started = 0, kernel_stopped = 0;
  uint32_t proxy_started = 0, proxy_stopped = 0;
  // Completions from CUDA events: whether the GPU reached its kernel
  // (trace::GpuProgress: 0 unknown, 1 not started, 2 started, 3 in a window).
  uint8_t gpu = 0;
  // gpu 3 (sampled events): the window's first and last operation, ops
  // indices (kNone where the file lacks it). The GPU is somewhere in it, or
  // past its end: never a claim about one operation.
  uint32_t window_first = kNone;
  uint32_t window_last = kNone;
  std::vector<ProxyState> proxy;
};

// One phase of one kernel channel's work (profiler API v7, NCCL 2.31, with
// NCCLWATCH_EVENTS naming kernelphase: trace::KernelPhaseDetail), read only
// when LoadOptions::kernel_phases asks (export draws them): an operation
// can carry three per channel. NCCL reports a channel's phases only once
// the channel has completed, so they time channels that finished; a
// channel in flight, hung or not, has none, and no verdict reads them.
struct KernelPhaseSpan {
  uint32_t op = kNone;         // Model::ops index
  uint32_t channel = 0;
  uint8_t phase = 0;           // trace::KernelPhase: 0 initial sync, 1 compute, 2 final sync
  // GPU times carried into the CPU clock, as Op::gpu_start_ns; the stop is
  // its KernelPhaseStop state's. Both known, in order, within the file's span.
  int64_t start_ns = kNoTime;
  int64_t stop_ns = kNoTime;
};

struct StuckReport {
  int64_t time_ns = kNoTime;
  double threshold_sec = 0;
  std::vector<StuckOp> ops;
};

struct Drops {
  uint64_t ring_full = 0, pool_exhausted = 0, no_thread_slot = 0, write_failed = 0;
  uint64_t foreign_parent = 0, bad_parent = 0;
  // Operations recorded without completion tracking (not lost): every event
  // handle was waiting for a completion.
  uint64_t completion_untracked = 0;
  std::string last_write_error;
  // Completions the file may lack (Drops.completions_lost; in files that do
  // not count them, the drops that may hide one), and how many of the
  // file's operations, in file order, came before the count last grew:
  // those lacking a completion get Op::completion_maybe_lost.
  uint64_t completions_lost = 0;
  uint64_t ops_before_completion_loss = 0;
  uint64_t lost() const { return ring_full + pool_exhausted + no_thread_slot + write_failed; }
};

// NCCL's event activation mask changed after the plugin's init
// (trace::MaskChange: NCCL 2.31's RAS sets it for the whole job).
struct MaskChange {
  int64_t time_ns = kNoTime;   // when the plugin read new_mask
  int64_t since_ns = kNoTime;  // its last read of old_mask: the change came after it
  uint64_t old_mask = 0, new_mask = 0;
  // The bits the process's completions need (kMaskKernelCh, or
  // kMaskKernelLaunch for completions from CUDA events; 0: none tracked).
  uint64_t completion_source = 0;
  // Its values fail a check (a mask past 32 bits, a source that is neither,
  // since after time): its file is damaged, and it is read as taking away
  // everything.
  bool damaged = false;
  bool Lost(uint64_t bits) const { return damaged || ((old_mask & bits) != 0 && (new_mask & bits) == 0); }
  bool LostSource() const { return completion_source != 0 && Lost(completion_source); }
  bool LostColl() const { return Lost(kMaskColl); }
  bool LostP2p() const { return Lost(kMaskP2p); }
  // What a verdict needs: collectives, point-to-point operations, completions.
  bool TakesAwayEvidence() const { return LostSource() || LostColl() || LostP2p(); }
};

// One process's operations of one `stats` row (tools/stats/stats.h: a
// communicator key, function and size bucket), every one of the file, as a
// per-node summary carries them: what stats and check read where
// the operations themselves are gone. Made by DigestProcess (stats.h).
struct RowDigest {
  std::string comm;  // CommKey
  int32_t nranks = 0;
  std::string func;
  int32_t bucket = -2;
  double bytes_sum = 0;
  uint64_t bytes_n = 0;
  uint64_t ops = 0, incomplete = 0, warmup = 0;
  // Distinct calls, where every rank of the communicator was on the node:
  // matches whose first op of the row is this process's, and its unmatched
  // ops (else stats takes the busiest rank's `ops`).
  uint64_t calls = 0;
  Sketch gpu, cpu, polled, delay;  // ns, as stats samples them
  // Arrival skew of the row's collectives whose every rank is on this node,
  // held by the digest of the lowest rank (so each is counted once).
  Sketch skew;
};

// One rank's lateness (stats RankRow) on a communicator whose every rank
// was on the summarized node.
struct RankDigest {
  std::string comm;  // CommKey
  int32_t nranks = 0;
  int32_t rank = -1;
  Sketch lateness;   // ns
};

// One process's arrivals at every collective of its communicators, as the
// straggler finder (diagnose's find_stragglers.cc) counts them, where the
// summarized node held every rank of each of its communicators: exact
// counts and lags, judged with `threshold_s` and `fraction` (the finder
// reads them only when it would judge with the same). Made by
// DigestArrivals (tools/arrivals/digest.h). The held_* counts are the GPU-held finder's
// (FindGpuHeld: a kernel waiting on its GPU behind other work), counted
// where `gpu_held` (completions from CUDA events show it).
struct ArrivalRow {
  uint64_t comm_hash = 0;
  std::string func;
  uint32_t total = 0, late = 0;
  double median_lag_s = 0, max_lag_s = 0;
  uint32_t held_total = 0, held_late = 0;
  double held_median_lag_s = 0, held_max_lag_s = 0, held_host_lag_s = 0;
};
struct ArrivalDigest {
  bool valid = false;
  bool gpu_held = false;
  double threshold_s = 0, fraction = 0;
  uint32_t total = 0, late = 0;
  double median_lag_s = 0, max_lag_s = 0;
  std::vector<ArrivalRow> rows;  // per communicator and function
};

// Arrivals sampled over the whole job by per-node summaries (tools/summary/,
// summary.proto ArrivalSamples) on a communicator no node held every rank
// of: the positions (chain positions, every `stride`-th collective) that
// every member sampled, with each member's start and duration there, which
// the straggler finder judges as it judges whole arrivals. Set by the merge
// of summaries (tools/model/merge_samples.cc).
//
// Starts are on each member's own CLOCK_MONOTONIC, not aligned: add its
// Proc::offset_ns (what AlignClocks shifted its operations by). Not shifted
// with the operations so that alignment need not visit a process's slots
// in every communicator's table.
struct SampledComm {
  uint32_t comm = kNone;  // Model::comms
  uint64_t stride = 0;
  // The positions stand for the communicator's collectives: at least
  // kMinSampledCollectives of them, or every collective (stride 1, none
  // missing). A finder judges a rank from samples only where every one of
  // its communicators is covered.
  bool covered = false;
  std::vector<uint32_t> procs;      // Model::procs, one per member
  std::vector<uint64_t> positions;  // ascending
  std::vector<uint16_t> funcs;      // per position: the function's string id
  // [position index * procs.size() + member]
  std::vector<int64_t> local_starts_ns, durations_ns;
  // The same, how long the member's kernel waited on its GPU behind other
  // work (gpu_held.h), kNoTime where not known; empty where no member's
  // summary carried it (no completion from CUDA events).
  std::vector<int64_t> held_ns;
  // Per position: its size bucket (StatRow.bucket_log2), and whether it is
  // its function's first collective on the communicator (warm-up, left out
  // of stats' lateness). Empty where some member's summary carried none
  // (made before them): stats then takes the windows.
  std::vector<int32_t> buckets;
  std::vector<bool> warmup;
};
// Fewer sampled collectives than this judge nothing: a rank late at half of
// a handful is chance.
inline constexpr size_t kMinSampledCollectives = 16;

// A send or receive PyTorch's Flight Recorder saw a rank call after its
// last collective that the rank's NCCL records hold (tools/fr joins them).
// NCCL connects a pair at its first call, inside the group launch, before
// any operation reaches the profiler: a call whose peer never answers
// leaves no NCCL record, and this is the only trace of it.
struct FrP2pCall {
  uint32_t comm = kNone;  // Model::comms index: the dump's process group's
  int32_t peer = -1;      // comm rank (PyTorch's group rank)
  bool recv = false;
  std::string text;       // "nccl:send 0->1 #24 of group 'default_pg' (completed) from main() at f.py:188"
};

struct Proc {
  std::string path;
  std::string host;
  int64_t pid = 0;
  int32_t launcher_rank = -1;
  int32_t launcher_world_size = -1;
  uint32_t api_version = 0;
  // Its completions came from CUDA events (ProcessHeader.completions
  // "events"): its stuck reports say what the GPU did in InFlightOp.gpu and
  // never carry kernel-channel counts, so a report without gpu says nothing
  // of the GPU.
  bool event_completions = false;
  // The activation mask it handed NCCL (ProcessHeader.event_mask): which
  // events, proxy steps among them, its file can hold, so that advice names
  // only what was off.
  uint64_t event_mask = 0;
  uint64_t mono_base_ns = 0;      // header: CLOCK_MONOTONIC at plugin start
  uint64_t realtime_base_ns = 0;  // header: CLOCK_REALTIME read with it
  // What puts its own CLOCK_MONOTONIC times on CLOCK_REALTIME, from the
  // header's clock pair (to the host's clock error).
  int64_t RealtimeMinusMono() const {
    return static_cast<int64_t>(realtime_base_ns) - static_cast<int64_t>(mono_base_ns);
  }
  uint32_t heartbeat_ms = 0;
  uint32_t flush_ms = 0;  // a killed process's file ends up to this long before its death
  double stuck_sec = 0;
  std::string nccl_version;        // header: the NCCL that loaded the plugin ("" unknown)
  int32_t cuda_driver_version = 0;  // header: cuDriverGetVersion (0 unknown)
  // Aligned time = own CLOCK_MONOTONIC + offset_ns (AlignClocks).
  int64_t offset_ns = 0;
  int64_t first_ns = kNoTime;           // first record time
  int64_t last_ns = kNoTime;            // last sign of life: the latest time in any record
  int64_t last_heartbeat_ns = kNoTime;
  uint32_t heartbeats = 0;
  bool finalized = false;  // a Finalize record
  bool clean = false;      // ... saying every communicator was finalized
  bool cut_tail = false;
  // The file is not all the plugin wrote: corrupt or unparsable records, or
  // values that fail a consistency check (LoadModel: a suspect Op, a write
  // whose record count or time is out of line, a communicator its peers
  // know otherwise). `damaged_end`: the damage
  // ended the read, so nothing is known of the process after it (it is not
  // dead for that: its file is).
  bool damaged = false;
  bool damaged_end = false;
  uint64_t damaged_at = 0;  // the first damaged byte offset
  // Its operations whose records say NCCL captured them into a CUDA graph
  // (trace.Op.graph, NO_COMPLETION_GRAPH) or ran them without a kernel launch of their own
  // on their thread (NO_COMPLETION_NO_LAUNCH: from CUDA's host-callback
  // thread, as a graph's replays run): Model::ops indices, ascending. Rare,
  // so a list rather than a flag in Op.
  std::vector<uint32_t> graph_like_ops;
  // Of those, the ones whose record says NCCL started them for a plan
  // captured into a CUDA graph (trace.Op.graph), at capture or at a replay.
  std::vector<uint32_t> graph_ops;
  // Operations numbered again where they or the number's first holder are
  // graph-like: without kernel channels in its mask, NCCL (2.26 and later)
  // does not count captured calls, so the next call takes the same number,
  // and so does each replay (docs/nccl_call_order.md). Not damage, but the
  // number no longer names one operation: MatchOps leaves them unmatched,
  // and with them, on every rank, the graph-like holders of a number some
  // rank repeated so (the call NCCL counted keeps it), counts them here,
  // and a verdict says so. `graph_repeat_op`: the first (Model::ops index).
  uint64_t graph_repeats = 0;
  uint32_t graph_repeat_op = kNone;
  uint64_t header_offset = 0;
  std::vector<std::string> issues;  // read issues, "FILE: offset N: ..."
  Drops drops;
  // Operations of the file that a reader keeping a recent window of it
  // (ncclwatch watch, tools/watch/) let go: `settled_ops` once every rank
  // of their communicator had finished them, which changes no verdict
  // (`settled_completed` of them had completed; the others had no
  // completion tracking), and `cut_ops` before that, for want of room: the
  // evidence before the window is then partial. Counted in the job's totals.
  uint64_t settled_ops = 0, settled_completed = 0, cut_ops = 0;
  // Read from a per-node summary (tools/summary/) whose window cannot settle
  // what another rank let go: why, and how to get a summary that can ("" when
  // none). The verdict then says its evidence is incomplete.
  std::string window_gap;
  // Read from a per-node summary: every operation of the file as `stats`
  // rows (`ops` holds only the window). `whole_comms`: the communicators
  // (CommKey) whose every rank the summary held, whose skew and lateness
  // are in the digests.
  bool digested = false;
  std::vector<RowDigest> row_digests;
  std::vector<RankDigest> rank_digests;
  std::vector<std::string> whole_comms;
  ArrivalDigest arrivals;
  // Its summary's arrival samples carry GPU-held times (ArrivalSamples.held,
  // SampledComm::held_ns): with completions from CUDA events, what lets
  // them stand for the whole job in that respect too.
  bool samples_held = false;
  std::vector<StuckReport> stucks;
  std::vector<MaskChange> mask_changes;  // in file order
  std::vector<KernelPhaseSpan> phases;   // LoadOptions::kernel_phases: by op, channel, start
  std::vector<uint32_t> ops;  // Model::ops indices in program order (enqueue start)
  // Flight Recorder dumps (tools/fr): one of this process was joined, and
  // the sends and receives it shows after its last recorded collective.
  bool fr_joined = false;
  std::vector<FrP2pCall> fr_p2p;
};

struct CommMember {
  uint32_t proc = kNone;
  int32_t rank = -1;
  int64_t init_ns = kNoTime;
  int64_t finalize_ns = kNoTime;  // CommFinalize seen
  // What its CommInit said (file offset, name, size): the members of one
  // communicator must agree, or a file is damaged (LoadModel).
  uint64_t init_offset = 0;
  std::string name;
  int32_t nranks = 0;
  // NCCL gave this member's init values no communicator can have
  // (CommInit.nccl_impossible): rank is then -1 and nranks 0, and these
  // hold what NCCL gave.
  bool nccl_impossible = false;
  int32_t nccl_nranks = 0, nccl_rank = 0;
};

struct Comm {
  uint64_t hash = 0;
  std::string name;
  int32_t nranks = 0;
  std::vector<CommMember> members;  // one per process that has it
  std::vector<uint32_t> proc_of_rank;  // rank -> Model::procs index (kNone: no file has that rank)
  // Tells apart communicators of one name (e.g. the 'tp' groups): " {0,1}",
  // the members' process names, or " [0x1234]" for large ones. Set by LoadModel.
  std::string tag;
  // PyTorch's process group, from Flight Recorder dumps (tools/fr): named in
  // the label of a communicator without a name of its own.
  std::string process_group;
  // Profiler API v1 to v3 tell neither the size nor our rank: `nranks` is
  // then a guess from the members given (size_guessed), and where no
  // launcher rank stood in either, the members were numbered by host and pid
  // (ranks_by_order): collectives still match (any numbering does), sends
  // and receives cannot (their peers are NCCL's ranks), so they are not matched.
  bool size_guessed = false;
  bool ranks_by_order = false;
  // Collectives completed on every rank that a windowed reader let go (see
  // Proc::settled_ops): counted in what completed everywhere.
  uint64_t settled_colls = 0;
  // The slots of this communicator's collective Matches (MatchOps). Empty
  // where the ranks present (with a file or an operation) are 0 to n - 1,
  // as in a whole job's traces: slot r is then rank r. Else the ranks
  // present, ascending, one slot each: a node's summary of ranks 16,376 to
  // 16,383 of 16,384 keeps 8 slots per collective, not 16,384. Read
  // through OpOfRank and SlotsAreRanks, never by indexing Match::ops.
  std::vector<int32_t> slot_rank;
  // "'world' (4 ranks)", "'tp' {2,3} (2 ranks)", "0x1234abcd (4 ranks)" or
  // "0x1234abcd (process group 'default_pg', 4 ranks)".
  std::string Label() const;
};

// One operation matched across ranks: a collective (comm, function, seq) or a
// point-to-point pair (comm, src rank -> dst rank, n-th between them).
struct Match {
  uint32_t comm = kNone;
  OpKind kind = OpKind::kColl;
  uint64_t seq = 0;
  int32_t src = -1, dst = -1;  // p2p only
  // Collectives: one slot per rank present (Comm::slot_rank), ascending by
  // rank, kNone where that rank has no such op; p2p: {send, recv}.
  // Iterate it for the operations; look a rank up with OpOfRank.
  std::vector<uint32_t> ops;
};


struct LoadOptions {
  // Files that cannot be read at all are errors; with `keep_going` they are
  // skipped (and named in Model::errors) instead of failing the load.
  bool keep_going = true;
  // Read only the files of this job (the plugin's job id); empty: the files
  // must hold one job (see ScreenTraceInputs).
  std::string job;
  // The bytes are windows of files (ncclwatch watch, tools/watch/), not
  // whole files: the checks only a whole file can pass (each write's record
  // count and times, each communicator's sequence numbers without a gap)
  // are not made. Those of each record are.
  bool windows = false;
  // Keep the kernel channels' phases (Proc::phases) of whole files; windows
  // never keep them.
  bool kernel_phases = false;
  // Keep summaries' stats rows (Proc::row_digests, rank_digests), which
  // only stats and check read: at 16,384 ranks they were a seventh of
  // diagnose's memory. Each is still checked, and a damaged one named
  // (Model::undigested) either way.
  bool stats_rows = true;
};

// Per-node summaries' signature chains of one communicator that differ
// where no window holds the collectives any more (tools/model/merge_chains.cc): a
// MISMATCH among its collectives #from to #to (1-based, counted over its
// functions). `odd` issued what `rest`, the majority, did not; without a
// majority `rest` is empty and `odd` holds every side.
struct ChainMismatch {
  uint32_t comm = kNone;
  uint64_t from = 0, to = 0;
  std::vector<uint32_t> odd, rest;  // Model::procs
  // Every member's collectives #from to #to are in the model, put back
  // from summaries asked for them (summarize --collectives): diagnose's
  // finders name the operation where one can, and this range is not asked
  // again.
  bool asked = false;
};

struct Model {
  std::vector<Proc> procs;
  std::vector<Comm> comms;
  std::vector<Op> ops;
  std::vector<Match> matches;
  std::vector<std::string> strings{""};  // id 0: none
  std::vector<std::string> errors;       // files that could not be used, with why
  std::vector<std::string> notes;        // about the input, not errors: a file named twice, read once
  // Clock alignment (AlignClocks).
  std::string alignment_method;          // e.g. "header clock pairs, refined by 1234 collective completions"
  double alignment_error_ns = 0;         // median residual of collective end times after alignment
  std::vector<std::string> hosts;        // distinct host names
  // Operations per-node summaries let go (tools/summary/; also counted in
  // their Proc::settled_ops): completed, but their times are gone, so no
  // straggler or late rank among them can be judged.
  uint64_t summary_let_go = 0;
  // Processes read from summaries without their operations' stats rows
  // (Proc::digested): what and why. stats and check refuse them.
  std::vector<std::string> undigested;
  std::vector<ChainMismatch> chain_mismatches;
  // Operations older than the windows that summaries kept because they were
  // asked for (summarize --collectives; tools/model/merge_feed.cc), sorted
  // Model::ops indices: completed on every rank, put back so that a
  // mismatch among them is named; no hang or unfinished operation rests on
  // them, and the straggler counts skip them (AskedOp).
  std::vector<uint32_t> asked_ops;
  // Arrivals summaries sampled across the whole job (SampledComm), one per
  // communicator that has them.
  std::vector<SampledComm> sampled;
  // The caller's tag of each operation that has one (NCCL 2.31's userTag,
  // a framework's step, layer or phase), by Model::ops index. Few jobs tag
  // their calls, so a map rather than a field of every Op.
  std::unordered_map<uint32_t, uint64_t> user_tags;

  const std::string& Str(uint16_t id) const { return strings[id]; }
  uint16_t Intern(const std::string& s);
  // Names an operation's function: its string id and Op::fn together, so the
  // two cannot disagree (LoadModel, and tests that build a Model by hand).
  void SetFunc(Op* op, uint16_t name_id) {
    op->func = name_id;
    op->fn = FuncFromName(Str(name_id));
  }
  void SetFunc(Op* op, const std::string& name) { SetFunc(op, Intern(name)); }
  std::unordered_map<std::string, uint16_t> string_ids;
  // Loading: the communicator of each nonzero hash (CommInits join it).
  std::unordered_map<uint64_t, uint32_t> comm_of_hash;
};

// The caller's tag of ops[oi] (Model::user_tags); 0: none.
inline uint64_t UserTag(const Model& m, uint32_t oi) {
  if (m.user_tags.empty()) return 0;
  auto it = m.user_tags.find(oi);
  return it == m.user_tags.end() ? 0 : it->second;
}

// Whether ops[oi] is one of Model::asked_ops: a finder that judges
// arrivals leaves it out (its rank's neighbours in time are gone); the
// mismatch and order finders read it.
inline bool AskedOp(const Model& m, uint32_t oi) {
  return !m.asked_ops.empty() && std::binary_search(m.asked_ops.begin(), m.asked_ops.end(), oi);
}

// Reads every file (paths of files, or folders: every *.ncclwatch in them,
// recursively; see inputs.h).
// False with `error` when nothing usable was found.
//
// An abort (ncclCommAbort, what a framework's watchdog calls) makes hung
// kernels exit, and the plugin then sees their channels stop as if they had
// completed; NCCL calls the profiler's finalize at the end of the abort. An
// operation "completed" after more than kAbortMinWaitSec in flight and less
// than kAbortWindowSec before its communicator's finalize on that process, or
// before the end of that process's file (PyTorch aborts, then SIGABRTs), is
// taken as ended by the abort: kInFlight, ended_by_abort, no GPU timing.
//
// Then the completions the file lacks but its own stuck report proves (every
// kernel channel and proxy operation stopped: the record was lost on the
// way), and those a later operation proves: NCCL runs
// one communicator's kernels in issue order, so an operation in flight on a
// process whose later operation on that communicator (enqueued after its own
// enqueue ended) completed has completed too: kCompleted, completion_lost,
// no time. Only a later completion that was not the abort's doing counts:
// one less than kAbortMinWaitSec after the operation's start (no watchdog
// fires that soon), or more than kAbortWindowSec before the end.
//
// A MaskChange record (NCCL 2.31's RAS changed the event mask) that took
// the process's completion source away makes the operations started from
// the plugin's last read of the old mask to its read of the new one
// Op::mask_unseen (later ones the plugin wrote NO_COMPLETION_MASK, also
// mask_unseen): liveness calls them unknown, and a completion from a CUDA
// event there, which may be an earlier launch's, is dropped. A change whose
// values fail the checks damages the file and counts as taking everything
// away, from its time to the end of the file.
bool LoadModel(const std::vector<std::string>& inputs, const LoadOptions& opts, Model* model, std::string* error);

// LoadModel on in-memory files, {name, bytes} each (tests, fuzzing): the same
// code path per file, through TraceReader::OpenBytes; `name` is the file's
// path in the model and in messages.
bool LoadModelFromBytes(const std::vector<std::pair<std::string, std::string>>& named_files, const LoadOptions& opts,
                        Model* model, std::string* error);

// Matches collectives by (comm, function, seq) and p2p operations by (comm,
// src, dst, n). A function mismatch therefore shows as partial matches
// (diagnose's FindMismatches compares what each rank issued in order).
void MatchOps(Model* model);

// Whether the collective `mt`'s slot i is rank i (Comm::slot_rank empty).
// Where not, a rank below the highest present one has no slot, and counts
// as absent: "every slot holds an operation" does not mean "every rank up
// to the highest present one issued it".
inline bool SlotsAreRanks(const Model& m, const Match& mt) {
  return mt.comm >= m.comms.size() || m.comms[mt.comm].slot_rank.empty();
}
// The operation of `rank` in the collective `mt`: kNone where that rank has
// none (or is not present on its communicator at all). Inline where slot r
// is rank r: the finders ask it for every rank of every collective.
uint32_t OpOfRankInSlots(const Model& m, const Match& mt, int32_t rank);
// The rank of the collective `mt`'s slot `slot` (< mt.ops.size()), without
// reading the operation there (Model::ops is large; its slots are not).
inline int32_t RankOfSlot(const Model& m, const Match& mt, size_t slot) {
  return SlotsAreRanks(m, mt) ? static_cast<int32_t>(slot) : m.comms[mt.comm].slot_rank[slot];
}
inline uint32_t OpOfRank(const Model& m, const Match& mt, int32_t rank) {
  if (!SlotsAreRanks(m, mt)) return OpOfRankInSlots(m, mt, rank);
  return rank >= 0 && static_cast<size_t>(rank) < mt.ops.size() ? mt.ops[static_cast<size_t>(rank)] : kNone;
}

// The operations of the match `mt`, with their ranks (a collective's comm
// rank, a point-to-point pair's side), only where a rank has one.
std::vector<std::pair<int32_t, uint32_t>> Present(const Model& m, const Match& mt);

// Aligns every process onto one timeline: the header's realtime/monotonic
// pair, then per-host offsets refined with the end times of collectives
// (every rank of a collective finishes it at nearly the same moment).
void AlignClocks(Model* model);

// LoadModel + MatchOps + AlignClocks.
bool BuildModel(const std::vector<std::string>& inputs, const LoadOptions& opts, Model* model, std::string* error);

// Whether `op`'s completion came less than kAbortWindowSec before the end
// of its process's file or its communicator's finalize there: where an
// abort's "completions" fall (see LoadModel).
bool InAbortWindowOf(const Model& m, const Op& op);

// Whether `op`'s completion came after, or less than kAbortWindowSec
// before, another member of its communicator ended there (its finalize or
// the end of its file): a peer's abort tears the connections down, and a
// kernel waiting on them may then exit as if done.
bool AfterAPeerEnded(const Model& m, const Op& op);

// "rank 3" (launcher rank) or "pid 1234@host" when the launcher said nothing.
std::string ProcName(const Model& m, uint32_t proc);

// Whether operation `oi` is in one of its process's ascending lists of
// rare operations (`list`: Proc::graph_like_ops or Proc::graph_ops).
inline bool InProcList(const Model& m, uint32_t oi, std::vector<uint32_t> Proc::*list) {
  const std::vector<uint32_t>& v = m.procs[m.ops[oi].proc].*list;
  return !v.empty() && std::binary_search(v.begin(), v.end(), oi);
}
inline bool GraphLike(const Model& m, uint32_t oi) { return InProcList(m, oi, &Proc::graph_like_ops); }
inline bool FromGraph(const Model& m, uint32_t oi) { return InProcList(m, oi, &Proc::graph_ops); }

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_MODEL_H_
