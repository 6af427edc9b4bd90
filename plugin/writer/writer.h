// The writer thread: the only place that encodes trace.proto and touches the
// file.
//
// Every few milliseconds it drains every thread's ring, the shared lane and
// the completions waiting in their ops' slots (ThreadBuf::done_in_slot) into
// a staging array, folds an Op and its OpDone into one record when both are
// in the same drain, and encodes. It calls write(2) every NCCLWATCH_FLUSH_MS (each write
// opens with a Batch record), at once for a stuck report, and whenever
// FlushNow() asks. The page cache keeps what was written when the process is
// aborted or killed. A Heartbeat goes out every NCCLWATCH_HEARTBEAT_MS.
//
// It keeps its own table of operations in flight (from the Op and OpDone
// records it encoded) and writes a StuckReport when one of them is older
// than NCCLWATCH_STUCK_SEC, with live progress read from the slots' atomics.
//
// Failures never reach the host: a failed write(2) (disk full, file size
// limit) counts the records lost, says so once through NCCL's logger, and
// retries at the next flush. SIGXFSZ and every other signal are blocked in
// this thread.
//
// Where it is: writer.cc (the loop, draining the rings, writing batches),
// writer_records.cc (records from what NCCL reported, for TraceEncoder,
// encoder.h), writer_report.cc (drops
// and their warnings, the closing summary, lost completions, stuck reports),
// trace_file.h (the file) and in_flight.h (what is in flight). How often a
// cycle runs and the order of what it writes are cycle.h's.
//
// Thread safety: Notify* and FlushNow may be called from any thread; the
// rest is the writer thread's (and StopAndClose from the last finalize).

#ifndef PLUGIN_WRITER_WRITER_H_
#define PLUGIN_WRITER_WRITER_H_

#include <stdint.h>

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "plugin/core/clock.h"
#include "plugin/core/core_view.h"
#include "plugin/core/monotonic_cv.h"
#include "plugin/writer/cycle.h"
#include "plugin/writer/encoder.h"
#include "plugin/writer/in_flight.h"
#include "plugin/writer/launches.h"
#include "plugin/writer/mask_watch.h"
#include "plugin/writer/on_stuck.h"
#include "plugin/core/process_info.h"
#include "plugin/core/record.h"
#include "plugin/writer/trace_file.h"
#include "plugin/writer/wire.h"

namespace ncclwatch::plugin {

class Writer final : private RecordSink {
 public:
  // `core`: what the writer reads of the Profiler (core_view.h).
  Writer(std::unique_ptr<CoreView> core, std::string file_name_override);
  ~Writer();

  // Creates the file (own_file.h: O_EXCL|O_NOFOLLOW, NCCLWATCH_FILE_MODE
  // whatever the umask) and writes the process header; with
  // NCCLWATCH_ON_STUCK, creates the command's output file beside it too.
  // False with `error` when the trace file cannot be made.
  bool Open(std::string* error);
  void Start();
  void StopAndClose();

  void NotifyCommInit(Context* ctx);
  void NotifyCommFinalize(Context* ctx, uint64_t time_ns);
  // Runs one drain-and-write cycle and waits for it (bounded wait).
  void FlushNow();
  void PauseDrainForTesting(bool paused) { drain_paused_.store(paused); }

  const std::string& path() const { return file_.path(); }
  const std::string& clock_source() const { return ticks_.why(); }
  const ClockFacts& clock_facts() const { return ticks_.facts(); }

 private:
  // A drained record with its times in CLOCK_MONOTONIC ns: what the
  // encoders read. Rec's own times stay ticks.
  struct StagedRec : Rec {
    uint64_t t0_ns;
    uint64_t t1_ns;  // Op: enqueue end (ns); else unused (Rec::t1 keeps an EvStart's thread id)
  };
  struct Cold {
    enum Kind { kInit, kFinalize } kind;
    Context* ctx;
    uint64_t time_ns;
  };

  void Loop();
  // The notices of one kind, in the order they came, taken from cold_.
  std::vector<Cold> TakeCold(Cold::Kind kind);
  void Cycle(uint64_t now, bool force_write);
  // The cycle's next step (cycle.h): one out of CycleStep's order stops a
  // debug build, so Cycle and the policy cannot part.
  void Enter(CycleStep step);
  void DrainRings();
  void EncodeStaged();
  void ReclaimThreads();
  void WriteOut();
  void Emit(const StagedRec& r, const StagedRec* done);

  // Records (through enc_, into wire_).
  void EncodeHeader();
  void EncodeCommInit(const Context* ctx, bool from_event, uint64_t hash);
  void EncodeCommFinalize(const Context* ctx, uint64_t time_ns);
  void EncodeOp(const StagedRec& r, const StagedRec* done);
  void EncodeOpDone(const StagedRec& r);
  void EncodeEvStart(const StagedRec& r);
  DoneFields DoneOf(const StagedRec& d) const;
  HeartbeatFields HeartbeatOf(uint64_t now) const;
  DropFields DropsOf(uint64_t now) const;
  void MaybeEncodeDrops(uint64_t now, bool force);
  // Once, on the first operation dropped for want of an event handle: what
  // holds the handles (a backlog, or operations that never complete).
  void LogHandleExhaustion(uint64_t now);
  // Completions from CUDA events: a launch record, and the events' queries
  // (launches.h), once per cycle.
  void NoteLaunch(const StagedRec& r);
  void PollLaunches(uint64_t now);
  // Ends the watch of operations a later completion proves complete, and
  // frees their handles (InFlightTable::ReclaimLost).
  void ReclaimLost(uint64_t now);
  // Reads NCCL's event mask; on a change, writes a MaskChange, says so
  // through NCCL's logger (a warning the first time) and, when it took the
  // completion source away, stops waiting for the operations that may have
  // lost it (mask_watch.h).
  void CheckMask(uint64_t now);
  // Lets go of the operations MaskWatch made unsure once they had their
  // grace (InFlightTable::ReleaseUnsure), freeing their handles.
  void ReleaseUnsure(uint64_t now);
  // Frees the handle of operation `id` still waiting for its completion;
  // false when its completion is being delivered right now.
  bool ReleaseHandle(uint64_t id);
  // The slot holding operation `id` in its thread's region, if it still does.
  Slot* SlotOf(uint64_t id);
  void LogSummary();  // at close: records, bytes and drops, through NCCL's logger
  void DropCounts(uint64_t* ring_full, uint64_t* pool, uint64_t* no_slot, uint64_t* foreign, uint64_t* bad) const;
  uint64_t UntrackedOps() const;  // ThreadCounters::untracked_ops, summed
  void MaybeStuckReport(uint64_t now);
  // NCCLWATCH_ON_STUCK: started at the first stuck report, looked at each cycle.
  void StartOnStuck(uint16_t comm);
  void LogOnStuck(const OnStuckRunner::Event& e);
  // An NCCL string's id, cached by its address.
  uint32_t Intern(const char* s);
  uint64_t Rel(uint64_t t) const { return t > mono_base_ ? t - mono_base_ : 0; }
  // RecordSink: makes room (by writing out) when the buffer is nearly full,
  // and opens a batch when it is empty.
  Wire* NextRecord() override;
  // After a record overflowed the encode buffer: removes it, counts it.
  void DropOversizeRecord();
  // Records that never reached the file: failed writes and oversize records.
  uint64_t RecordsLost() const { return file_.records_lost() + oversize_; }

  std::unique_ptr<CoreView> core_;
  std::string override_;
  TraceFile file_;
  ProcessInfo info_;
  OnStuckRunner on_stuck_;
  TickConverter ticks_;
  uint64_t mono_base_ = 0;
  uint64_t realtime_base_ = 0;
  uint64_t clock_error_ = 0;

  std::vector<uint8_t> buf_;
  Wire wire_;
  TraceEncoder enc_{this};
  size_t record_mark_ = 0;       // where the record being encoded began in wire_
  uint64_t oversize_ = 0;        // records dropped for not fitting the encode buffer
  bool oversize_logged_ = false;
  uint8_t head_buf_[256];    // the Batch record opening each write
  bool reannounce_ = false;  // a write was lost: define communicators again
  uint64_t records_ = 0;           // encoded into buf_ since the last write
  uint64_t completions_ = 0;       // ... of them, those carrying a completion
  // Completions the file may lack besides those of lost batches: ops of
  // launches whose CUDA context went away (Drops.completions_lost).
  uint64_t launches_gone_ = 0;
  uint64_t batch_seq_ = 0;
  uint64_t batch_base_ = 0;  // Batch.time_ns of the batch being encoded
  bool write_error_logged_ = false;

  std::vector<StagedRec> staged_;
  std::vector<Rec> from_lane_, from_slots_;  // DrainRings: taken before the rings, staged after
  std::unordered_map<uint64_t, size_t> staged_done_;  // OpDone id -> index in staged_
  std::vector<bool> consumed_;

  std::unordered_map<const char*, uint32_t> string_ptr_ids_;
  std::unordered_map<uint16_t, bool> comm_announced_;  // comm -> hash known to the file

  InFlightTable in_flight_;
  MaskWatch mask_watch_{0, 0, 0};  // set in Open
  bool warned_mask_ = false;
  uint64_t cycle_now_ = 0;           // the current cycle's time (CLOCK_MONOTONIC ns)
  CycleStep cycle_step_ = CycleStep::kMaskChange;  // the current cycle's step (Enter)
  uint64_t unsure_released_ = 0;     // operations let go for want of a completion source
  LaunchTable launches_;
  bool capture_mode_set_ = false;  // the writer thread's CUDA capture mode is relaxed
  bool warned_context_gone_ = false;
  uint64_t last_drops_sum_ = 0;
  bool warned_drops_ = false;
  bool warned_pool_ = false;
  bool burst_ = false;  // the last drain found a ring an eighth full: drain every 1 ms
  std::atomic<bool> drain_paused_{false};  // tests
  uint64_t next_heartbeat_ = 0;
  uint64_t next_flush_ = 0;

  std::mutex mu_;
  MonotonicCondVar cv_;       // no pthread_cond_clockwait: loads on glibc 2.17
  MonotonicCondVar done_cv_;
  std::vector<Cold> cold_;     // guarded by mu_
  bool stop_ = false;          // guarded by mu_
  uint64_t flush_req_ = 0;     // guarded by mu_
  uint64_t flush_done_ = 0;    // guarded by mu_
  std::thread thread_;
  bool running_ = false;
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_WRITER_WRITER_H_
