// SharedLane: where a thread with no buffer of its own puts the record of an
// operation it stops (started on a thread with a buffer: without one, it
// would have no handle) or of a kernel launch.
//
// Buffers are per thread and fixed in number (NCCLWATCH_BUFFER_MB); a
// process may run more threads than that. Completions never come here: NCCL's
// proxy thread delivers the kernel-channel stops of every operation, in
// bursts of thousands between two drains, and a thread past the buffers
// leaves each completion in its operation's slot instead
// (ThreadBuf::done_in_slot), which cannot fill. Only threads past the buffers
// take the lane's lock; the others never touch it.
//
// Push never allocates (the capacity is reserved at construction); a full
// lane drops the record and counts it. Drain swaps the records out under the
// lock (the writer thread). Not for records whose loss the diagnosis cannot
// tell from a hang: its capacity is fixed.
//
// Thread safety: Push from any thread; Drain and dropped() from the writer.

#ifndef PLUGIN_CORE_SHARED_LANE_H_
#define PLUGIN_CORE_SHARED_LANE_H_

#include <stddef.h>
#include <stdint.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "plugin/core/record.h"

namespace ncclwatch::plugin {

class SharedLane {
 public:
  explicit SharedLane(size_t capacity) : cap_(capacity) {
    recs_.reserve(capacity);
    spare_.reserve(capacity);
  }

  bool Push(const Rec& r) {
    std::lock_guard<std::mutex> lock(mu_);
    if (recs_.size() >= cap_) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    recs_.push_back(r);
    return true;
  }

  // Calls `f(rec)` for every record pushed since the last drain, in order.
  template <typename F>
  void Drain(F f) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      recs_.swap(spare_);  // both keep their capacity: no allocation
    }
    for (const Rec& r : spare_) f(r);
    spare_.clear();
  }

  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  const size_t cap_;
  std::mutex mu_;
  std::vector<Rec> recs_;   // guarded by mu_
  std::vector<Rec> spare_;  // the writer's
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CORE_SHARED_LANE_H_
