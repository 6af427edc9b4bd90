#include "plugin/clock.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>

namespace ncclwatch::plugin {
namespace {

bool KernelUsesTsc() {
  int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[32] = {0};
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  return n >= 3 && strncmp(buf, "tsc", 3) == 0 && (n == 3 || buf[3] == '\n');
}

// A (ticks, ns) pair read as close together as the clock allows.
void Pair(uint64_t* ticks, uint64_t* ns) {
  uint64_t best = ~0ull;
  for (int i = 0; i < 5; ++i) {
    uint64_t a = NowNs();
    uint64_t t = __rdtsc();
    uint64_t b = NowNs();
    if (b - a < best) {
      best = b - a;
      *ticks = t;
      *ns = a + (b - a) / 2;
    }
  }
}

}  // namespace

void TickConverter::Init(bool allow_tsc) {
#if defined(__x86_64__)
  tsc_ = allow_tsc && KernelUsesTsc();
#else
  tsc_ = false;
#endif
  if (!tsc_) {
    g_ticks_are_tsc.store(false, std::memory_order_relaxed);
    return;
  }
#if defined(__x86_64__)
  // Only the first pair here (the host's thread, inside its first
  // communicator's init); the scale is measured by the writer thread's first
  // Refine(), before it converts anything.
  Pair(&tick0_, &ns0_);
  scale_ = 0;
  last_refine_ns_ = ns0_;
  g_ticks_are_tsc.store(true, std::memory_order_relaxed);
#endif
}

void TickConverter::Refine() {
#if defined(__x86_64__)
  if (!tsc_) return;
  uint64_t now = NowNs();
  if (scale_ == 0) {
    // The first calibration needs a 2 ms baseline: wait out what is left of it.
    while (NowNs() - ns0_ < 2000000) {
    }
  } else if (now - last_refine_ns_ < std::min<uint64_t>(now - ns0_, 60000000000ull)) {
    // Double the baseline each time (2 ms, 4 ms, ... then every 60 s).
    return;
  }
  uint64_t t = 0, n = 0;
  Pair(&t, &n);
  if (t > tick0_ && n > ns0_) scale_ = static_cast<double>(n - ns0_) / static_cast<double>(t - tick0_);
  last_refine_ns_ = n;
#endif
}

}  // namespace ncclwatch::plugin
