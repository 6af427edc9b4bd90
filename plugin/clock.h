// Clocks of the plugin. NowNs() is the hot-path clock: CLOCK_MONOTONIC through
// the vDSO (no system call), in nanoseconds. ClockPair reads CLOCK_REALTIME
// between two monotonic reads so files of many hosts can be aligned.
//
// Thread safety: every function may be called from any thread.

#ifndef PLUGIN_CLOCK_H_
#define PLUGIN_CLOCK_H_

#include <stdint.h>
#include <time.h>

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
