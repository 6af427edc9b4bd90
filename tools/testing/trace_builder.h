// Synthetic ncclwatch trace files for tests of the tools: what the plugin
// would write for one process (TraceBuilder), or for a whole job
// (BuildJob), without GPUs or NCCL.
//
// A TraceBuilder is a timeline: the test declares what happened and when
// (communicators, operations with their enqueue and completion times,
// heartbeats, drops, stuck reports, finalize, a kill), in any order, and
// Bytes() plays the plugin's writer thread over it, encoding with the
// plugin's own encoder (plugin/writer/encoder.h): records in the order the
// writer thread would encode them (it drains every 10 ms and calls write(2)
// every flush_ms), each write(2) opened by a Batch record, the header alone
// in the first batch, strings interned by StringDef, a GpuClock before the
// first GPU time, Op start times as a start_delta_ns chain, an Op and its
// completion folded into one record when the writer sees both in the same
// drain (or as Op + OpDone otherwise), heartbeats counting the operations in
// flight, a stuck report once an operation stays in flight longer than
// stuck_sec, CommFinalize with its counts. A killed process loses the records
// of its last, unwritten interval.
//
// All times given to a TraceBuilder are CPU ns relative to the file's
// ProcessHeader.mono_base_ns (what the file stores). GPU times are given as
// CPU times too; the kernel's globaltimer value is GpuTime(cpu_ns).
//
// Example:
//   TraceBuilder b({.host = "node0", .pid = 1234, .launcher_rank = 0});
//   int world = b.AddComm(0xabc, "world", 4, 0, 1 * kSec);
//   b.Coll(world, "AllReduce", 0, 1024, 2 * kSec, 2 * kSec + kMs);
//   b.Coll(world, "AllReduce", 1, 1024, 3 * kSec, kNever);   // hangs
//   b.Heartbeats(kSec, 70 * kSec);                             // stuck report at ~63 s
//   b.WriteTo(dir + "/" + b.FileName());
//
// Thread safety: none.

#ifndef TOOLS_TESTING_TRACE_BUILDER_H_
#define TOOLS_TESTING_TRACE_BUILDER_H_

#include <stdint.h>

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "plugin/writer/encoder.h"
#include "proto/trace.pb.h"

namespace ncclwatch::tools::testing {

inline constexpr uint64_t kUs = 1'000;
inline constexpr uint64_t kMs = 1'000'000;
inline constexpr uint64_t kSec = 1'000'000'000;
inline constexpr int64_t kNever = -1;  // a done time: never completed

// One process: what its ProcessHeader says, and how its writer behaves.
struct ProcSpec {
  std::string host = "node0";
  int64_t pid = 1000;
  int32_t launcher_rank = -1;
  int32_t launcher_world_size = -1;
  int32_t launcher_local_rank = -1;
  std::string launcher_rank_source;  // "" and launcher_rank >= 0: "RANK"
  int32_t cuda_device = -1;
  std::string job_id;
  uint64_t mono_base_ns = 1'000 * kSec;
  uint64_t realtime_base_ns = 1'700'000'000 * kSec;
  uint64_t clock_pair_error_ns = 150;
  uint32_t api = 5;                  // profiler_api_version; completion is tracked from v4
  std::string plugin_version = "0.1.0";
  uint64_t event_mask = 0x46;        // coll, p2p, kernelch
  std::string events_config = "default";
  uint32_t flush_ms = 100;
  uint32_t heartbeat_ms = 1000;
  double stuck_sec = 60;             // 0: no stuck reports
  bool auto_stuck = true;            // write stuck reports like the plugin (see Stuck())
  bool raw_capture = false;          // raw event capture on: folded Ops keep their event_id
  uint64_t open_ns = 20 * kUs;       // the header's batch time
  // Op.start_delta_ns chain like the plugin; false: plain Op.start_ns
  // (readers accept both; TraceReader takes start_ns == 0 with no delta as
  // "the chain's current value", so keep plain start times above 0).
  bool delta_starts = true;
  uint64_t gpu_clock_offset_ns = 5'000 * kSec;  // GPU globaltimer minus relative CPU time
  std::vector<std::string> argv = {"python", "train.py"};
  std::string nccl_version;          // ProcessHeader.nccl_version ("" not recorded)
  // ProcessHeader.completion_source (trace.proto CompletionSource; 0: not
  // written) and its words.
  uint32_t completion_source = 0;
  std::string completions;
  int32_t cuda_driver_version = 0;
};

// How an operation's completion is encoded.
enum class Completion {
  kAuto,      // like the plugin: folded into the Op when both fall in the same 10 ms drain
  kFolded,    // always folded (the Op record moves to the completion's drain)
  kSeparate,  // always an OpDone record
};

// One proxy operation's last known state, for stuck reports.
struct ProxySpec {
  uint32_t channel = 0;
  int32_t peer = 0;
  bool is_send = true;
  int32_t nsteps = 8;
  int32_t last_step = 0;
  uint32_t last_state = 0;
  uint64_t last_update_ns = 0;
  bool stopped = false;
};

// What a stuck report says about an operation in flight beyond the Op.
struct InFlightProgress {
  int32_t kernel_channels_started = -1;  // -1: nchannels
  int32_t kernel_channels_stopped = 0;
  uint32_t proxy_ops_started = 0;
  uint32_t proxy_ops_stopped = 0;
  std::vector<ProxySpec> proxy;
  // Completions from CUDA events: trace::GpuProgress (then no channel
  // counts are written, as the plugin does), and with GPU_IN_WINDOW the
  // window's first and last operation (event ids).
  uint32_t gpu = 0;
  uint64_t window_first_event_id = 0;
  uint64_t window_last_event_id = 0;
};

struct OpOpts {
  std::string datatype = "ncclFloat32";
  int32_t root = 0;                    // collectives
  std::optional<std::string> algo;     // unset: "RING" for collectives, none for p2p; "": none
  std::optional<std::string> proto;    // unset: "SIMPLE" for collectives, none for p2p
  uint32_t nchannels = 2;
  uint32_t nwarps = 8;
  uint32_t enqueue_ns = 20 * kUs;      // start to enqueued; the Op record is encoded after that
  uint64_t parent_id = 0;
  uint64_t p2p_seq = 0;                // 0: next for (comm, peer, Send or Recv), in call order
  std::optional<bool> completion_tracked;  // unset: api >= 4; false: no completion ever written
  uint32_t no_completion = 0;          // trace::NoCompletion written with an untracked op
  bool from_event = false;             // completed from a CUDA event (no GPU timing then)
  int64_t event_started_ns = -1;       // from_event: the stream seen at the kernel (-1: not seen)
  // NCCLWATCH_EVENT_INTERVAL_US: its launch recorded no event of its own
  // (Op.launch_without_event; a completion from_event then says
  // from_later_event).
  bool launch_without_event = false;
  Completion completion = Completion::kAuto;
  // GPU timing of a completed operation (CPU times, relative like done_ns).
  bool gpu_timing = true;
  int64_t gpu_start_ns = -1;           // -1: enqueued + 5 us
  int64_t gpu_stop_ns = -1;            // -1: done - 3 us (the proxy thread's polling delay)
  uint32_t kernel_channels = 0;        // 0: nchannels
  uint32_t proxy_ops = 0;
  uint64_t proxy_bytes = 0;
  InFlightProgress progress;           // while in flight (stuck reports)
};

// An entry of an explicit stuck report (Stuck() with a list).
struct StuckOp {
  uint64_t event_id = 0;               // an operation of this builder
  std::optional<InFlightProgress> progress;  // unset: the op's OpOpts.progress
  bool enqueued = true;
};

// Cumulative drop counters (Drops record).
struct DropCounts {
  uint64_t ring_full = 0;
  uint64_t pool_exhausted = 0;
  uint64_t no_thread_slot = 0;
  uint64_t write_failed = 0;
  uint64_t foreign_parent = 0;
  uint64_t bad_parent = 0;
  std::string last_write_error;
  uint64_t completions_lost = 0;
  // false: a file of a plugin that did not count its lost completions.
  bool completions_counted = true;
};

// One process's trace file.
class TraceBuilder {
 public:
  explicit TraceBuilder(const ProcSpec& spec = {});

  const ProcSpec& spec() const { return spec_; }
  // "<host>-<pid>-<realtime ms>.ncclwatch", as the plugin names its file.
  std::string FileName() const;
  // The GPU globaltimer value at relative CPU time `cpu_ns`: what a reader
  // decodes GPU times to (gpu = reference + (gpu_base - cpu) + delta).
  uint64_t GpuTime(uint64_t cpu_ns) const { return cpu_ns + spec_.gpu_clock_offset_ns; }

  // A communicator (CommInit at t_ns). Returns its file-local index (1, 2, ...).
  int AddComm(uint64_t hash, const std::string& name, int nranks, int rank, uint64_t t_ns, int nnodes = 1);
  // API v1..v3: a CommInit carrying only the hash, written with the first
  // operation's drain (from_event).
  int AddCommFromEvent(uint64_t hash, uint64_t t_ns);

  // Operations. `start_ns`: NCCL started the event (enqueue began);
  // `done_ns`: the plugin learned of completion, or kNever. Returns the
  // event_id (unique in the file).
  uint64_t Coll(int comm, const std::string& func, uint64_t seq, uint64_t count, uint64_t start_ns, int64_t done_ns,
                const OpOpts& opts = {});
  uint64_t Send(int comm, int peer, uint64_t count, uint64_t start_ns, int64_t done_ns, const OpOpts& opts = {});
  uint64_t Recv(int comm, int peer, uint64_t count, uint64_t start_ns, int64_t done_ns, const OpOpts& opts = {});

  void Heartbeat(uint64_t t_ns);
  // Heartbeats at from, from + every, ... up to `to` (every 0: heartbeat_ms).
  void Heartbeats(uint64_t from_ns, uint64_t to_ns, uint64_t every_ns = 0);

  // A stuck report at t_ns, written at once. No `ops`: every operation in
  // flight then (encoded, completion tracked and not yet encoded, its
  // communicator not finalized), oldest first. With auto_stuck (default) the
  // builder also writes one, like the plugin, at the first 10 ms drain where
  // an operation in flight not yet reported is stuck_sec old, as long as the
  // process lives (until its last record, Kill or Finalize).
  void Stuck(uint64_t t_ns, std::vector<StuckOp> ops = {}, uint64_t trigger_event_id = 0, double threshold_sec = -1);

  void Drops(uint64_t t_ns, const DropCounts& counts);
  // CommFinalize (with the counts of operations encoded and completed on it),
  // then a write, as at ncclCommDestroy.
  void FinalizeComm(int comm, uint64_t t_ns);
  // The process ends: pending records, then Drops (when any) and Finalize in
  // a last batch. Anything later is not written.
  void Finalize(uint64_t t_ns, bool clean = true);
  // SIGKILL at t_ns: nothing after it, and the records not yet written
  // (since the last flush) are lost. No Finalize.
  void Kill(uint64_t t_ns);
  // A write(2) at t_ns (FlushNow): records up to t_ns end the current batch.
  void Flush(uint64_t t_ns);
  // NCCL's event mask read at t_ns differed from the one read at since_ns
  // (trace::MaskChange, as the plugin's writer records it).
  void MaskChange(uint64_t t_ns, uint64_t old_mask, uint64_t new_mask, uint64_t since_ns,
                  uint64_t completion_source);
  // Any other record (raw events...), encoded at t_ns among the operations.
  void AddRecord(uint64_t t_ns, const trace::Record& record);
  // Profiler API v7 with kernelphase captured: one kernel channel's phases
  // under `parent_id`, the operation's id (what Coll, Send or Recv returned;
  // set raw_capture so that its record keeps it) or a raw KernelCh event's
  // (AddRecord), encoded at t_ns as the
  // plugin writes what NCCL 2.31 reports once the channel has completed:
  // for each phase i (trace::KernelPhase) with bounds[i] < bounds[i + 1], a
  // start at GPU time bounds[i], a KernelPhaseStop state at bounds[i + 1]
  // and a stop. Bounds are CPU times (see GpuTime).
  void KernelPhases(uint64_t parent_id, uint32_t channel, uint64_t t_ns, const std::array<uint64_t, 4>& bounds);

  // The file content.
  std::string Bytes() const;
  // Writes Bytes() to `path`; false on error.
  bool WriteTo(const std::string& path) const;

 private:
  friend class Player;
  struct Comm {
    uint64_t hash;
    std::string name;
    int nranks, nnodes, rank;
    uint64_t t_ns;
    bool from_event;
  };
  struct OpRec {
    uint64_t event_id;
    int comm;
    bool p2p;
    uint64_t seq;
    std::string func;
    uint64_t count;
    int peer;
    uint64_t start_ns;
    int64_t done_ns;
    uint64_t p2p_seq;
    bool tracked;
    OpOpts opts;
  };
  enum class Kind {
    kCommInit, kOp, kRecord, kCommFinalize, kDrops, kHeartbeat, kStuck, kFlush, kFinalize, kMask, kPhases
  };
  struct Item {
    Kind kind;
    uint64_t t_ns;
    size_t ref;  // index into comms_/ops_/records_/stucks_/drops_
    bool clean = false;
  };
  struct StuckItem {
    std::vector<StuckOp> ops;
    uint64_t trigger;
    double threshold;
  };
  uint64_t AddOp(int comm, bool p2p, const std::string& func, uint64_t seq, uint64_t count, int peer,
                 uint64_t start_ns, int64_t done_ns, const OpOpts& opts);

  ProcSpec spec_;
  std::vector<Comm> comms_;
  std::vector<OpRec> ops_;
  std::vector<trace::Record> records_;
  std::vector<StuckItem> stucks_;
  std::vector<DropCounts> drops_;
  std::vector<plugin::MaskChangeFields> masks_;
  struct PhasesItem {
    uint64_t parent_id;
    uint32_t channel;
    std::array<uint64_t, 4> bounds;
  };
  std::vector<PhasesItem> phases_;
  std::vector<Item> items_;
  std::vector<std::vector<uint64_t>> p2p_counters_;  // [comm][2 * peer + is_recv]
  std::optional<uint64_t> kill_ns_;
  uint64_t next_id_ = 1;
};

// ---------------------------------------------------------------- a whole job
//
// N ranks (one process each) on communicators, running a schedule of
// operations on a true timeline (ns since the job began); every rank's file
// in its own clocks. Every planned operation can be mutated per rank before
// completion times are worked out:
// - an operation completes when every participant issued it, at the latest
//   participant's ready time (its start, or its previous operation's
//   completion on that communicator: one stream per communicator) plus the
//   longest duration: a straggler delays everyone;
// - it never completes when a participant skipped it, died before, or is
//   blocked behind an earlier operation that never completed; `never_completes`
//   makes it never complete on that rank only (and blocks that rank's later
//   operations on the communicator);
// - NCCL's seq counts the collectives of each function a rank issued on a
//   communicator (AllReduce #0, #1, ... and Broadcast #0, ... apart), in issue
//   order (start time): a skipped or reordered collective shifts its function's.

struct CommSpec {
  std::string name;
  uint64_t hash = 0;      // 0: derived from the index
  std::vector<int> ranks;  // global ranks in comm-rank order; empty: all ranks
};

// One operation of the schedule. A collective is issued by every member of
// `comm`; "Send" makes a pair: comm rank `src` sends to `dst`, which receives.
struct JobOp {
  int comm = 0;  // index into JobSpec::comms
  std::string func = "AllReduce";
  uint64_t count = 1 << 20;
  int src = -1, dst = -1;  // p2p
  uint64_t start_ns = 0;
  uint64_t duration_ns = kMs;
  OpOpts opts;
};

// One rank's view of a JobOp; the op hook may change anything.
struct OpPlan {
  int index = 0;  // in the schedule
  int comm = 0;
  bool p2p = false;
  bool is_send = false;
  std::string func;
  uint64_t count = 0;
  int peer = -1;                // p2p: comm rank
  std::optional<uint64_t> seq;  // collectives; unset: NCCL's counter
  uint64_t start_ns = 0;        // true time this rank calls it (delay it for a straggler)
  uint64_t duration_ns = 0;
  bool skip = false;            // never called
  bool never_completes = false;
  // Its GPU gets to its kernel this long after it is ready on this rank
  // (issued, and its previous operation on the communicator done): work
  // ahead of it on the GPU. Every rank's completion waits for it.
  uint64_t gpu_held_ns = 0;
  OpOpts opts;                  // datatype, root, algo, completion encoding...
  // Worked out by BuildJob:
  bool issued = false;
  int64_t done_ns = kNever;     // true time
  // True time its GPU got to its kernel; with opts.from_event and
  // event_started_ns -1, what the completion says it saw (OpDone.started_ns).
  int64_t reached_ns = kNever;
  uint64_t event_id = 0;
};

enum class RankEnd {
  kAuto,         // clean finalize at end_ns if all its issued operations completed, else killed at end_ns
  kClean,        // CommFinalize of every communicator, then Finalize{clean}
  kUnclean,      // Finalize{clean = false}, communicators not finalized
  kKilled,       // killed at end_ns
  kNone,         // alive at end_ns: no finalize, everything written
};

struct RankPlan {
  ProcSpec proc;                 // filled in: host, pid, launcher fields, clock bases
  uint64_t start_ns = 0;         // true time the plugin opened (mono_base)
  int64_t realtime_error_ns = 0; // this process's CLOCK_REALTIME minus the truth
  double drift_ppm = 0;          // its monotonic clock runs fast by this much
  int64_t dies_at_ns = -1;       // killed then: heartbeats stop, later operations never issued
  int64_t idle_after_ns = -1;    // operations starting later are never issued; heartbeats go on
  RankEnd end = RankEnd::kAuto;
};

struct JobSpec {
  int nranks = 4;
  int ranks_per_host = 8;
  std::vector<CommSpec> comms;   // empty: one "world" of all ranks
  // The schedule; empty: `ncolls` collectives on comm 0, funcs in turn,
  // the k-th starting at first_op_ns + k * step_ns.
  std::vector<JobOp> ops;
  int ncolls = 10;
  std::vector<std::string> funcs = {"AllReduce"};
  uint64_t count = 1 << 20;
  uint64_t first_op_ns = 3 * kSec;
  uint64_t step_ns = 10 * kMs;
  uint64_t duration_ns = kMs;
  uint64_t init_ns = 2 * kSec;   // communicators initialized (all of them)
  int64_t end_ns = -1;           // -1: 1 s after the last event, and after the first stuck report if any op hangs
  uint32_t api = 5;
  uint32_t heartbeat_ms = 1000;
  double stuck_sec = 60;
  // Every completion from a CUDA event (OpOpts.from_event), the stream seen
  // at each kernel when its GPU got there (OpPlan::reached_ns).
  bool event_completions = false;
  std::function<void(int rank, RankPlan&)> rank_hook;
  std::function<void(int rank, int op_index, OpPlan&)> op_hook;
};

struct JobPlan {
  std::vector<RankPlan> ranks;
  std::vector<std::vector<OpPlan>> ops;  // [rank]: the ops it takes part in, in schedule order
  uint64_t end_ns = 0;
  // A rank's local (relative to its mono base) time for a true time.
  uint64_t Local(int rank, uint64_t true_ns) const;
};

std::vector<TraceBuilder> BuildJob(const JobSpec& spec, JobPlan* plan = nullptr);
// One file per rank in `dir`, named like the plugin's. Returns the paths.
std::vector<std::string> WriteJob(const std::vector<TraceBuilder>& files, const std::string& dir);

// A new folder for one test's files, under $TEST_TMPDIR (else /tmp), its
// name starting with `prefix`. Returns the base folder if none could be made.
std::string NewTestDir(const std::string& prefix);

}  // namespace ncclwatch::tools::testing

#endif  // TOOLS_TESTING_TRACE_BUILDER_H_
