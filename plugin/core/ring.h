// A single-producer single-consumer ring of Rec, one per thread that calls
// the plugin. The owning thread pushes (hot path: one copy, one release
// store, never blocks; when full it returns false and the caller counts a
// drop). The writer thread pops in batches.
//
// The memory is given by the owner (preallocated at init) and never grows.
// Must not be used with more than one producer or one consumer at a time.

#ifndef PLUGIN_CORE_RING_H_
#define PLUGIN_CORE_RING_H_

#include <stddef.h>
#include <stdint.h>

#include <atomic>

#include "plugin/core/record.h"

namespace ncclwatch::plugin {

class Ring {
 public:
  Ring() = default;
  // `capacity` must be a power of two.
  void Init(Rec* storage, uint32_t capacity) {
    recs_ = storage;
    mask_ = capacity - 1;
    head_.store(0, std::memory_order_relaxed);
    tail_.store(0, std::memory_order_relaxed);
    cached_tail_ = 0;
  }

  // Producer side. Returns a slot to fill, or null when `max_fill` records
  // (at most the capacity) are already waiting for the consumer.
  Rec* Reserve(uint64_t max_fill) {
    uint64_t h = head_.load(std::memory_order_relaxed);
    if (h - cached_tail_ >= max_fill) {
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (h - cached_tail_ >= max_fill) return nullptr;
    }
    return &recs_[h & mask_];
  }
  Rec* Reserve() { return Reserve(mask_ + 1); }
  void Commit() {
    const uint64_t h = head_.load(std::memory_order_relaxed) + 1;
    head_.store(h, std::memory_order_release);
    // A record kPrefetchAhead on was last read by the consumer, a ring ago:
    // ask for its lines now, so that its Reserve's copy does not wait for
    // them. Not the next one: in a burst one record's lead is shorter than a
    // miss to memory (BENCHMARKS.md, "The launching thread's cost").
    const char* ahead = reinterpret_cast<const char*>(&recs_[(h + kPrefetchAhead) & mask_]);
    __builtin_prefetch(ahead, 1, 3);
    __builtin_prefetch(ahead + 64, 1, 3);
  }

  // Consumer side: calls fn(const Rec&) for every published record, at most `max`.
  template <typename Fn>
  uint32_t Drain(uint32_t max, Fn&& fn) {
    uint64_t t = tail_.load(std::memory_order_relaxed);
    uint64_t h = head_.load(std::memory_order_acquire);
    uint32_t n = 0;
    while (t != h && n < max) {
      fn(recs_[t & mask_]);
      ++t;
      ++n;
    }
    tail_.store(t, std::memory_order_release);
    return n;
  }
  bool Empty() const {
    return tail_.load(std::memory_order_acquire) == head_.load(std::memory_order_acquire);
  }
  uint32_t capacity() const { return mask_ + 1; }
  Rec* storage() const { return recs_; }

 private:
  static constexpr uint64_t kPrefetchAhead = 8;  // records: 1 KiB (tried 1, 4, 8, 16)
  Rec* recs_ = nullptr;
  uint64_t mask_ = 0;
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t cached_tail_ = 0;  // producer's copy of tail_
  alignas(64) std::atomic<uint64_t> tail_{0};
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CORE_RING_H_
