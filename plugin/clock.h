// Clocks of the plugin.
//
// The hot path stamps events with Ticks(): the CPU's time-stamp counter
// (rdtsc, ~10 ns in a VM where clock_gettime costs ~25 ns) when the kernel
// itself uses the TSC as its clocksource (so it is invariant and synchronized
// across cores), else CLOCK_MONOTONIC in nanoseconds. The writer thread turns
// ticks into CLOCK_MONOTONIC nanoseconds with TickConverter, off the hot path.
//
// NowNs() is CLOCK_MONOTONIC through the vDSO; ClockPair reads CLOCK_REALTIME
// between two monotonic reads so files of many hosts can be aligned.
//
// Thread safety: every function may be called from any thread; a
// TickConverter belongs to one thread (the writer).

#ifndef PLUGIN_CLOCK_H_
#define PLUGIN_CLOCK_H_

#include <stdint.h>
#include <time.h>

#include <atomic>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace ncclwatch::plugin {

inline uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Set once by the first Profiler (TickConverter::Init), before any event.
inline std::atomic<bool> g_ticks_are_tsc{false};

inline uint64_t Ticks() {
#if defined(__x86_64__)
  if (g_ticks_are_tsc.load(std::memory_order_relaxed)) return __rdtsc();
#endif
  return NowNs();
}

// Maps ticks to CLOCK_MONOTONIC ns: ns = ns0 + (ticks - tick0) * scale, with
// the scale measured over an ever longer baseline as the writer runs.
class TickConverter {
 public:
  // Decides the tick source (reads the kernel's clocksource; `allow_tsc`
  // false forces CLOCK_MONOTONIC) and takes the first (tick, ns) pair. Cheap:
  // it runs on the host's thread.
  void Init(bool allow_tsc);
  // Measures the scale (the first call waits until 2 ms have passed since
  // Init) and refines it later; call it before ToNs, from the writer thread.
  void Refine();
  uint64_t ToNs(uint64_t ticks) const {
    if (!tsc_) return ticks;
    int64_t d = static_cast<int64_t>(ticks - tick0_);
    return ns0_ + static_cast<uint64_t>(static_cast<double>(d) * scale_);
  }
  bool tsc() const { return tsc_; }

 private:
  bool tsc_ = false;
  uint64_t tick0_ = 0;
  uint64_t ns0_ = 0;
  double scale_ = 1.0;
  uint64_t last_refine_ns_ = 0;
};

struct ClockPair {
  uint64_t mono_ns;      // midpoint of the two monotonic reads
  uint64_t realtime_ns;  // read between them
  uint64_t error_ns;     // the gap between the two monotonic reads
};

// Takes the tightest of a few tries.
inline ClockPair ReadClockPair() {
  ClockPair best{0, 0, ~0ull};
  for (int i = 0; i < 5; ++i) {
    uint64_t a = NowNs();
    uint64_t r = RealtimeNs();
    uint64_t b = NowNs();
    if (b - a < best.error_ns) best = {a + (b - a) / 2, r, b - a};
  }
  return best;
}

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CLOCK_H_
