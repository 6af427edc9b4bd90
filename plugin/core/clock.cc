#include "plugin/core/clock.h"

#include <ctype.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace ncclwatch::plugin {
namespace {

// The first line of a small sysfs file, without its newline ("" if unreadable).
std::string ReadLine(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[256];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return "";
  std::string s(buf, static_cast<size_t>(n));
  size_t nl = s.find('\n');
  if (nl != std::string::npos) s.resize(nl);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// Whether a space-separated sysfs list holds `word`. No iostreams: they
// would pull libstdc++'s locales into the statically linked .so.
bool ListHas(const std::string& list, const std::string& word) {
  size_t i = 0;
  while (i < list.size()) {
    while (i < list.size() && isspace(static_cast<unsigned char>(list[i]))) ++i;
    size_t end = i;
    while (end < list.size() && !isspace(static_cast<unsigned char>(list[end]))) ++end;
    if (end > i && list.compare(i, end - i, word) == 0) return true;
    i = end;
  }
  return false;
}

// The cheapest of a few batches' average: a system call shows up as hundreds
// of ns whatever the noise, a vDSO read as tens.
double GettimeNs() {
  double best = 1e18;
  for (int batch = 0; batch < 4; ++batch) {
    uint64_t a = NowNs();
    for (int i = 0; i < 8; ++i) (void)NowNs();
    uint64_t b = NowNs();
    best = std::min(best, static_cast<double>(b - a) / 9.0);
  }
  return best;
}

#if defined(__x86_64__)
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
#endif

using MonotonicReader = int (*)(clockid_t, timespec*);
std::atomic<MonotonicReader> g_monotonic_reader{&clock_gettime};

}  // namespace

int MonotonicGettime(clockid_t id, timespec* ts) { return g_monotonic_reader.load(std::memory_order_relaxed)(id, ts); }

TickChoice ChooseTicks(ClockMode mode, const ClockFacts& f) {
  // The reason names the side of kSlowClockNs the measurement fell on, not
  // the measurement: ClockFacts::gettime_ns goes into a field of its own.
  const std::string src = "clocksource " + (f.clocksource.empty() ? std::string("unknown") : f.clocksource);
  if (mode == ClockMode::kMonotonic) return {false, "monotonic (NCCLWATCH_CLOCK=monotonic)"};
  if (mode == ClockMode::kTest) return {false, "monotonic (NCCLWATCH_CLOCK=test: the host's test clock)"};
  if (!f.x86) return {false, "monotonic (no TSC on this CPU architecture)"};
  if (mode == ClockMode::kTsc) return {true, "tsc (NCCLWATCH_CLOCK=tsc; " + src + ")"};
  if (f.clocksource == "tsc") return {true, "tsc (kernel clocksource tsc)"};
  if (f.gettime_ns < kSlowClockNs) return {false, "monotonic (" + src + "; clock_gettime fast)"};
  if (!f.invariant_tsc) return {false, "monotonic (" + src + "; clock_gettime slow; TSC not invariant)"};
  if (!ListHas(f.available, "tsc"))
    return {false, "monotonic (" + src + "; clock_gettime slow; kernel does not list tsc as usable)"};
  return {true, "tsc (invariant TSC; " + src + "; clock_gettime slow)"};
}

ClockFacts ReadClockFacts(const ClockProbe& probe) {
  ClockFacts f;
#if defined(__x86_64__)
  f.x86 = true;
  if (probe.invariant_tsc != nullptr) {
    f.invariant_tsc = probe.invariant_tsc();
  } else {
    unsigned a = 0, b = 0, c = 0, d = 0;
    f.invariant_tsc = __get_cpuid(0x80000007, &a, &b, &c, &d) != 0 && (d & (1u << 8)) != 0;
  }
#endif
  f.clocksource = ReadLine((probe.sysfs_dir + "/current_clocksource").c_str());
  f.available = ReadLine((probe.sysfs_dir + "/available_clocksource").c_str());
  f.gettime_ns = probe.gettime_ns != nullptr ? probe.gettime_ns() : GettimeNs();
  return f;
}

void TickConverter::Init(ClockMode mode, const ClockFacts& facts) {
  // Before any event is stamped, and set again by each Profiler: a test
  // clock never outlives the settings that asked for it.
  MonotonicReader reader = &clock_gettime;
  void* host = mode == ClockMode::kTest ? dlsym(RTLD_DEFAULT, "ncclwatch_test_clock_gettime") : nullptr;
  if (host != nullptr) reader = reinterpret_cast<MonotonicReader>(host);
  g_monotonic_reader.store(reader, std::memory_order_relaxed);
  facts_ = facts;
  TickChoice choice = ChooseTicks(mode, facts);
  why_ = choice.why;
  if (mode == ClockMode::kTest && host == nullptr)
    why_ = "monotonic (NCCLWATCH_CLOCK=test, but no test clock in the host)";
#if defined(__x86_64__)
  tsc_ = choice.tsc;
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
