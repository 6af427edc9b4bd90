// The writer's view of what is in flight: every operation whose Op record
// it wrote with completion tracking and whose completion it has not seen,
// with per-communicator counts of operations enqueued and completed. It
// decides two things from them:
//  - which operations a later completion proves complete (ReclaimLost):
//    NCCL runs a communicator's kernels in issue order, so an operation
//    enqueued before one that completed has completed too, even where NCCL
//    did not deliver all its kernel-channel events (seen on H200s, NCCL 2.28:
//    ~1 operation in 5,000 under load). The proof waits kLostGraceNs for
//    late events, since NCCL's proxy thread was seen ~80 ms behind.
//  - which operation triggers a stuck report (StuckTrigger): the oldest past
//    the threshold not yet reported.
// The tools draw the same conclusions from the file (tools/model/model.h).
//
// Allocates as operations come and go (the writer thread, off the hot path).
// Thread safety: one thread (the writer's).

#ifndef PLUGIN_WRITER_IN_FLIGHT_H_
#define PLUGIN_WRITER_IN_FLIGHT_H_

#include <stddef.h>
#include <stdint.h>

#include <deque>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace ncclwatch::plugin {

// A completion proves its predecessors only once their own late events
// would have arrived.
inline constexpr uint64_t kLostGraceNs = 1'000'000'000;

// NCCLWATCH_STUCK_SEC as the stuck trigger's threshold.
inline uint64_t StuckThresholdNs(double stuck_sec) { return static_cast<uint64_t>(stuck_sec * 1e9); }

// The stuck trigger's test of one operation (StuckTrigger): in flight at
// `now` for `threshold_ns` or longer. Of the operations it holds for, not
// named by a report yet, the oldest triggers one. The tools' test trace
// builder asks the same.
inline bool PastStuckThreshold(uint64_t now, uint64_t start_ns, uint64_t threshold_ns) {
  return now > start_ns && now - start_ns >= threshold_ns;
}

class InFlightTable {
 public:
  struct Op {
    uint32_t comm;
    uint32_t kind;  // EventKind: kEvColl or kEvP2p
    uint64_t seq;
    const char* func;
    uint64_t count;
    int32_t peer;
    uint64_t start_ns;
    uint32_t nchannels;
    bool reported;     // named by a stuck report already
    uint64_t stop_ns;  // enqueue ended (the Op record's t1)
    // NCCL's mask may have lacked the completion source when it was
    // enqueued (MarkUnsure): since when the writer knows.
    bool unsure = false;
    uint64_t unsure_at = 0;
  };

  // An Op record was written: with its completion folded in (`done_ns`), or
  // without (`tracked`: its completion will come, so it is watched).
  void Enqueued(uint64_t id, const Op& op, bool tracked);
  void EnqueuedCompleted(uint16_t comm, uint64_t start_ns, uint64_t done_ns);
  // An OpDone record was written (it may come before its Op's, across drains).
  void Completed(uint64_t id, uint16_t comm, uint64_t done_ns);
  // Its completion can no longer be known (its CUDA context was destroyed):
  // no longer watched, no completion counted.
  void Forget(uint64_t id) { ops_.erase(id); }
  // NCCL's activation mask lost the completion source (mask_watch.h):
  // operations started at or after `from` may never complete. Such an
  // operation (and any Enqueued later with `unsure` set) stays in the table,
  // since a completion that comes is real, but it never triggers a stuck
  // report nor appears in one: its completion not coming proves no hang.
  // ReleaseUnsure lets it go kLostGraceNs after it was marked.
  void MarkUnsure(uint64_t from, uint64_t now);
  // Operations started at or after `from` are no longer watched, and no
  // completion will be counted for them (completions from CUDA events: an
  // operation NCCL started without its kernel launch takes an earlier
  // launch's completion, which is not its own). Returns how many.
  uint64_t ForgetFrom(uint64_t from);
  // Removes the unsure operations marked kLostGraceNs or more before `now`
  // for which `release(id)` is true (the writer freed its handle; false: its
  // completion is being delivered). Returns how many.
  uint64_t ReleaseUnsure(uint64_t now, const std::function<bool(uint64_t id)>& release);
  // The communicator was finalized: its operations that never completed stay
  // in the file, no longer watched, and its counts are forgotten (its id may
  // be given to a new communicator; read enqueued() and completed() first).
  void CommFinalized(uint32_t comm);

  uint64_t enqueued(uint16_t comm) { return counts_[comm].enqueued; }
  uint64_t completed(uint16_t comm) { return counts_[comm].completed; }

  // Removes the operations a later completion on their communicator proves
  // complete, calling `release(id)` for each (the writer frees its handle);
  // at most every 100 ms. Returns how many.
  uint64_t ReclaimLost(uint64_t now, const std::function<void(uint64_t id)>& release);
  uint64_t lost_completions() const { return lost_completions_; }

  // The oldest operation in flight for `threshold_ns` or more and not yet
  // reported, or 0.
  uint64_t StuckTrigger(uint64_t now, uint64_t threshold_ns) const;
  // Up to `max` operations, oldest first.
  std::vector<std::pair<uint64_t, Op*>> OldestFirst(size_t max);

  const Op* Find(uint64_t id) const;
  bool Has(uint64_t id) const { return ops_.count(id) != 0; }
  size_t size() const { return ops_.size(); }
  bool empty() const { return ops_.empty(); }

 private:
  void NoteCompletion(uint16_t comm, uint64_t op_start_ns, uint64_t now);

  struct CommCounts {
    uint64_t enqueued = 0;
    uint64_t completed = 0;
    // Completions not yet kLostGraceNs old: (seen at, the op's start).
    std::deque<std::pair<uint64_t, uint64_t>> recent;
    // The latest start of an operation whose completion is that old: every
    // operation enqueued before it completed too.
    uint64_t proven_start = 0;
  };
  std::unordered_map<uint16_t, CommCounts> counts_;
  std::unordered_map<uint64_t, Op> ops_;
  std::unordered_set<uint64_t> early_done_;  // OpDone seen before its Op
  uint64_t lost_completions_ = 0;
  uint64_t next_reclaim_ = 0;
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_WRITER_IN_FLIGHT_H_
