// The writer's kernel launches in flight (NCCLWATCH_COMPLETIONS=events):
// each launch's two CUDA events (one recorded before the kernel, one after,
// from its stream's ring), the operations of its plan, and what the GPU has
// done with it.
//
// NCCL starts a plan's Coll/P2p events after its kernel launch, on the same
// thread (docs/nccl_call_order.md), so the hot path binds each operation to
// the launch before it on that thread and communicator. Here, per stream,
// launches are kept in launch order. A stream runs in order: once a launch's
// "after" event is complete, every earlier launch on that stream has
// finished, and once its "before" event is, every earlier one has started.
// So each cycle queries the newest launch of a stream and, only when it is
// not done, searches for the boundary (a few queries, never one per
// launch: polling every event contends in the driver, BENCHMARKS.md).
// A launch whose ring pair a later launch took over (StreamEvents::kRing
// launches later) can be proven complete by a later one, never shown
// incomplete: its progress is unknown until then.
//
// Times are the writer's: when it saw the event complete (every few ms),
// not the kernel's end.
//
// Allocates as launches come and go (the writer thread, off the hot path).
// Thread safety: one thread (the writer's).

#ifndef PLUGIN_WRITER_LAUNCHES_H_
#define PLUGIN_WRITER_LAUNCHES_H_

#include <stddef.h>
#include <stdint.h>

#include <deque>
#include <functional>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "plugin/core/launch_events.h"

namespace ncclwatch::plugin {

enum class GpuProgress : uint8_t { kUnknown = 0, kNotStarted = 1, kStarted = 2 };

class LaunchTable {
 public:
  // A launch record: launch number `n` on the stream whose events are
  // `events` (null: none), recorded by OS thread `tid`.
  void Launched(uint64_t id, StreamEvents* events, uint64_t n, uint32_t tid, bool start_event = true);
  enum class Bound { kWatched, kDone, kUnknown };
  // An operation of launch `launch_id`: watched until the launch is done,
  // or already done (`done_ns` set), or unknown (the launch record was lost).
  Bound Bind(uint64_t launch_id, uint64_t op_id, uint64_t* done_ns, uint64_t* started_ns = nullptr);

  struct Stats {
    uint64_t queries = 0;       // cuEventQuery calls
    uint64_t done = 0;          // launches seen complete
    uint64_t context_gone = 0;  // launches given up: their CUDA context was destroyed
  };
  // Queries the streams. `done(op_id, done_ns, started_ns)` for each
  // operation whose launch completed (started_ns 0: not seen started first); `gone(op_id)` for each whose context was destroyed
  // (its completion is unknown).
  // Times come from `clock`, read after the queries that found them: a
  // launch is never said done before the query that saw it done.
  void Poll(const std::function<uint64_t()>& clock, const std::function<void(uint64_t, uint64_t, uint64_t)>& done,
            const std::function<void(uint64_t)>& gone);
  GpuProgress ProgressOf(uint64_t op_id) const;
  size_t pending() const { return pending_; }
  const Stats& stats() const { return stats_; }

 private:
  struct Launch {
    StreamEvents* events = nullptr;
    uint64_t n = 0;
    uint32_t tid = 0;
    bool start_event = true;  // an event was recorded before its kernel
    bool started = false;
    uint64_t started_ns = 0;  // when a query first showed it started (0: not before it was done)
    bool done = false;
    uint64_t done_ns = 0;
    bool sealed = false;  // a later launch of its thread was drained: no more ops will bind
    std::vector<uint64_t> ops;
  };
  // Finished launches are kept until sealed (late binds), then erased.
  void Finish(uint64_t id, Launch* l);
  void MaybeErase(uint64_t id);
  // The driver's answer for one event; a launch whose pair was taken over
  // reads "not ready" as "unknown".
  int Query(StreamEvents* s, void* event);
  static bool TakenOver(const Launch& l) { return l.events->issued() > l.n + StreamEvents::kRing; }

  std::unordered_map<uint64_t, Launch> launches_;
  std::map<StreamEvents*, std::deque<uint64_t>> streams_;  // unfinished launches, in launch order
  std::unordered_map<uint32_t, uint64_t> last_of_thread_;
  std::unordered_map<uint64_t, uint64_t> op_launch_;  // watched op -> its launch
  size_t pending_ = 0;
  Stats stats_;
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_WRITER_LAUNCHES_H_
