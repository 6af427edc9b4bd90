// Clocks of the plugin.
//
// The hot path stamps events with Ticks(): either the CPU's time-stamp counter
// (rdtsc, ~10 ns) or CLOCK_MONOTONIC in nanoseconds. The writer thread turns
// ticks into CLOCK_MONOTONIC nanoseconds with TickConverter, off the hot path.
//
// Which one (ChooseTicks, NCCLWATCH_CLOCK=auto): the TSC when the kernel
// itself uses it as its clocksource (so it is invariant and synchronized
// across cores); also when the CPU says its TSC is invariant, the kernel still
// lists `tsc` as a usable clocksource, and clock_gettime is slow here
// (>= kSlowClockNs: a VM whose paravirtual clock has no vDSO path makes every
// call a system call, ~0.5 us and more, paid several times per operation on
// NCCL's threads). Otherwise CLOCK_MONOTONIC. NCCLWATCH_CLOCK=tsc|monotonic
// forces one. The choice, its reason and the facts it rests on go into the
// file's header as separate fields: the reason is a sentence made only from
// the decision's path and the clocksource's name, never from the measured
// clock_gettime cost, so two processes on one machine state the same reason.
//
// NowNs() is CLOCK_MONOTONIC through the vDSO; ClockPair reads CLOCK_REALTIME
// between two monotonic reads so files of many hosts can be aligned.
//
// Tests step that monotonic clock instead of sleeping: NCCLWATCH_CLOCK=test
// stamps with it (never the TSC) and reads it through the host process's
// ncclwatch_test_clock_gettime (plugin/testing/fake_nccl_host.h), where the
// test adds its steps. NowNs calls MonotonicGettime, a direct call of the
// same size as the call through the PLT to clock_gettime was, so the hot
// path's code is unchanged; that one jumps through a pointer which
// TickConverter::Init sets before any event (an instruction more, off the
// TSC).
//
// Thread safety: every function may be called from any thread; a
// TickConverter belongs to one thread (the writer).

#ifndef PLUGIN_CORE_CLOCK_H_
#define PLUGIN_CORE_CLOCK_H_

#include <stdint.h>
#include <time.h>

#include <atomic>
#include <string>

#include "plugin/core/config.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace ncclwatch::plugin {

// clock_gettime as NowNs reads it: clock_gettime itself, or under
// NCCLWATCH_CLOCK=test the host's test clock (TickConverter::Init). Not for
// deadlines handed to the kernel (MonotonicCondVar reads clock_gettime).
int MonotonicGettime(clockid_t id, timespec* ts);

inline uint64_t NowNs() {
  timespec ts;
  MonotonicGettime(CLOCK_MONOTONIC, &ts);
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

// What the choice of tick source depends on (ReadClockFacts on this machine).
// clocksource and available are what the kernel says; invariant_tsc what the
// CPU says; gettime_ns is a measurement, and varies from run to run.
struct ClockFacts {
  bool x86 = false;
  std::string clocksource;            // the kernel's current clocksource
  std::string available;              // its available clocksources, space-separated
  bool invariant_tsc = false;         // CPUID 0x80000007 EDX bit 8
  double gettime_ns = 0;              // measured cost of one clock_gettime(CLOCK_MONOTONIC)
};

// clock_gettime at or above this many ns is taken to be a system call.
constexpr double kSlowClockNs = 100;

struct TickChoice {
  bool tsc = false;
  std::string why;  // e.g. "tsc (kernel clocksource tsc)"; no measured number in it
};

// Pure: the decision described at the top of this file.
TickChoice ChooseTicks(ClockMode mode, const ClockFacts& f);

// Where ReadClockFacts looks. The defaults read this machine; tests point
// them elsewhere to take every path of ChooseTicks on any machine.
struct ClockProbe {
  std::string sysfs_dir = "/sys/devices/system/clocksource/clocksource0";
  bool (*invariant_tsc)() = nullptr;  // null: CPUID 0x80000007 EDX bit 8
  double (*gettime_ns)() = nullptr;   // null: time clock_gettime here
};
// Reads the sysfs files and CPUID and times clock_gettime (a few us; less
// than 50 us even where each call is a system call).
ClockFacts ReadClockFacts(const ClockProbe& probe = ClockProbe());

// Maps ticks to CLOCK_MONOTONIC ns: ns = ns0 + (ticks - tick0) * scale, with
// the scale measured over an ever longer baseline as the writer runs.
class TickConverter {
 public:
  // Decides the tick source (ChooseTicks over `facts`, normally
  // ReadClockFacts()), sets the monotonic reader (the host's test clock
  // under ClockMode::kTest, else clock_gettime) and takes the first (tick,
  // ns) pair. Cheap: it runs on the host's thread.
  void Init(ClockMode mode, const ClockFacts& facts);
  // Measures the scale (the first call waits until 2 ms have passed since
  // Init) and refines it later; call it before ToNs, from the writer thread.
  void Refine();
  // A tick older than Init's (a slot's "never updated" 0, a stamp taken
  // before the converter started) maps to 0 at the earliest: converting a
  // negative double to unsigned is undefined (UBSan stopped stress_test on
  // a proxy slot that had no update yet).
  uint64_t ToNs(uint64_t ticks) const {
    if (!tsc_) return ticks;
    const double off = static_cast<double>(static_cast<int64_t>(ticks - tick0_)) * scale_;
    const double ns = static_cast<double>(ns0_) + off;
    if (!(ns > 0)) return 0;
    if (ns >= 18446744073709551615.0) return UINT64_MAX;
    return off >= 0 ? ns0_ + static_cast<uint64_t>(off) : ns0_ - static_cast<uint64_t>(-off);
  }
  // How many ticks `ns` nanoseconds are; 0 before the first Refine() has
  // measured the TSC's rate.
  uint64_t TicksOf(uint64_t ns) const {
    if (!tsc_) return ns;
    if (!(scale_ > 0)) return 0;
    return static_cast<uint64_t>(static_cast<double>(ns) / scale_);
  }
  bool tsc() const { return tsc_; }
  const std::string& why() const { return why_; }
  const ClockFacts& facts() const { return facts_; }

 private:
  bool tsc_ = false;
  std::string why_;
  ClockFacts facts_;
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

#endif  // PLUGIN_CORE_CLOCK_H_
