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
// finished, and once its "before" event is, it has started and every
// earlier one has finished.
// So each cycle queries the newest launch of a stream and, only when it is
// not done, searches for the boundary (a few queries, never one per
// launch: polling every event contends in the driver, BENCHMARKS.md).
// A launch whose ring pair a later launch took over (StreamEvents::kRing
// launches later) can be proven complete by a later one, never shown
// incomplete: its progress is unknown until then.
//
// Sampled (NCCLWATCH_EVENT_INTERVAL_US): a launch without events of its own
// (StreamEvents::Due said no) is placed in stream order before the next
// launch that records, and is never queried. It is done when a later
// launch's event says so: that one's "after", or its "before" (a stream
// reaches a launch only once every earlier one finished). Until then its
// progress is a window: from the stream's first launch not proven done to
// the end of the run of such launches that holds it; the GPU is in it, or
// past it when no launch with events follows (the tail of a burst waits for
// the stream's next launch). Launches with events keep their exact progress.
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

// trace::GpuProgress.
enum class GpuProgress : uint8_t { kUnknown = 0, kNotStarted = 1, kStarted = 2, kInWindow = 3 };

class LaunchTable {
 public:
  // A launch record: launch number `n` on the stream whose events are
  // `events` (null: none), recorded by OS thread `tid`. `own_events` false:
  // sampled, it recorded none, and `n` is the number the stream's next
  // recording launch takes.
  void Launched(uint64_t id, StreamEvents* events, uint64_t n, uint32_t tid, bool start_event = true,
                bool own_events = true);
  enum class Bound { kWatched, kDone, kUnknown };
  // An operation of launch `launch_id`: watched until the launch is done,
  // or already done (`done_ns` set), or unknown (the launch record was lost).
  // `without_event` (optional): the launch recorded no event of its own.
  Bound Bind(uint64_t launch_id, uint64_t op_id, uint64_t* done_ns, uint64_t* started_ns = nullptr,
             bool* without_event = nullptr);

  struct Stats {
    uint64_t queries = 0;       // cuEventQuery calls
    uint64_t done = 0;          // launches seen complete
    uint64_t context_gone = 0;  // launches given up: their CUDA context was destroyed
    uint64_t launches = 0;        // launches with a stream's ring, with events or not
    uint64_t without_events = 0;  // of those, sampled out (NCCLWATCH_EVENT_INTERVAL_US)
  };
  // Queries the streams. `done(op_id, done_ns, started_ns, from_later)` for
  // each operation whose launch completed (started_ns 0: not seen started
  // first; from_later: its launch had no event of its own, a later one's
  // proved it); `gone(op_id)` for each whose context was destroyed (its
  // completion is unknown).
  // Times come from `clock`, read after the queries that found them: a
  // launch is never said done before the query that saw it done.
  using DoneFn = std::function<void(uint64_t, uint64_t, uint64_t, bool)>;
  void Poll(const std::function<uint64_t()>& clock, const DoneFn& done, const std::function<void(uint64_t)>& gone);
  GpuProgress ProgressOf(uint64_t op_id) const;
  // kInWindow: the window the GPU is in, as operations in stream order: from
  // the first one of the stream not proven complete (every earlier one is)
  // to the last one of the run of launches without events that holds
  // op_id's (the next launch with events was not reached, or, with none
  // after, the GPU may be past the window). 0 where no operation is bound
  // yet. False when op_id is not in a window.
  bool WindowOf(uint64_t op_id, uint64_t* first_op, uint64_t* last_op) const;
  size_t pending() const { return pending_; }
  const Stats& stats() const { return stats_; }

 private:
  struct Launch {
    StreamEvents* events = nullptr;
    uint64_t n = 0;
    uint32_t tid = 0;
    bool start_event = true;  // an event was recorded before its kernel
    bool own = true;          // it recorded events (false: sampled out)
    uint64_t key = 0;         // stream order: 2n + 1 with events, 2n without (before launch n)
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
  // Launches of queue `q` done: finished with `now` (from_later for those
  // without events), popped from its front.
  void FinishFront(std::deque<uint64_t>* q, size_t count, uint64_t now, const DoneFn& done);

  std::unordered_map<uint64_t, Launch> launches_;
  std::map<StreamEvents*, std::deque<uint64_t>> streams_;  // unfinished launches, in launch order
  std::unordered_map<uint32_t, uint64_t> last_of_thread_;
  std::unordered_map<uint64_t, uint64_t> op_launch_;  // watched op -> its launch
  size_t pending_ = 0;
  Stats stats_;
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_WRITER_LAUNCHES_H_
