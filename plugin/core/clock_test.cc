#include "plugin/core/clock.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <string>

// The host's test clock, as a test binary exports it (-rdynamic): a
// monotonic clock that reads what the test set.
static std::atomic<uint64_t> g_host_clock_ns{42'000'000'007};
extern "C" __attribute__((visibility("default"))) int ncclwatch_test_clock_gettime(clockid_t, timespec* ts) {
  const uint64_t ns = g_host_clock_ns.load();
  ts->tv_sec = static_cast<time_t>(ns / 1000000000);
  ts->tv_nsec = static_cast<long>(ns % 1000000000);
  return 0;
}

namespace ncclwatch::plugin {
namespace {

ClockFacts Facts(const char* src, const char* avail, bool inv, double ns) {
  ClockFacts f;
  f.x86 = true;
  f.clocksource = src;
  f.available = avail;
  f.invariant_tsc = inv;
  f.gettime_ns = ns;
  return f;
}

TEST(ChooseTicksTest, KernelTscIsUsed) {
  TickChoice c = ChooseTicks(ClockMode::kAuto, Facts("tsc", "tsc hpet acpi_pm", true, 24));
  EXPECT_TRUE(c.tsc);
  EXPECT_EQ(c.why, "tsc (kernel clocksource tsc)");
}

TEST(ChooseTicksTest, FastParavirtualClockIsKept) {
  // kvm-clock through the vDSO: cheap enough; no reason to trust the TSC.
  TickChoice c = ChooseTicks(ClockMode::kAuto, Facts("kvm-clock", "kvm-clock tsc", true, 30));
  EXPECT_FALSE(c.tsc);
  EXPECT_EQ(c.why, "monotonic (clocksource kvm-clock; clock_gettime fast)");
}

TEST(ChooseTicksTest, SlowClockWithInvariantTscUsesTsc) {
  TickChoice c = ChooseTicks(ClockMode::kAuto, Facts("kvm-clock", "kvm-clock tsc acpi_pm", true, 640));
  EXPECT_TRUE(c.tsc);
  EXPECT_EQ(c.why, "tsc (invariant TSC; clocksource kvm-clock; clock_gettime slow)");
}

TEST(ChooseTicksTest, TheReasonDoesNotCarryTheMeasurement) {
  // Two processes of one machine measure clock_gettime differently; on the
  // same side of kSlowClockNs they must state the same reason.
  for (const char* src : {"kvm-clock", "hpet", "xen", "acpi_pm"}) {
    EXPECT_EQ(ChooseTicks(ClockMode::kAuto, Facts(src, "tsc", true, 21)).why,
              ChooseTicks(ClockMode::kAuto, Facts(src, "tsc", true, 99)).why);
    EXPECT_EQ(ChooseTicks(ClockMode::kAuto, Facts(src, "tsc", true, 100)).why,
              ChooseTicks(ClockMode::kAuto, Facts(src, "tsc", true, 5000)).why);
    EXPECT_EQ(ChooseTicks(ClockMode::kMonotonic, Facts(src, "tsc", true, 20)).why,
              ChooseTicks(ClockMode::kMonotonic, Facts(src, "tsc", true, 900)).why);
  }
  EXPECT_FALSE(ChooseTicks(ClockMode::kAuto, Facts("xen", "xen tsc", true, 99)).tsc);
  EXPECT_TRUE(ChooseTicks(ClockMode::kAuto, Facts("xen", "xen tsc", true, kSlowClockNs)).tsc);
}

TEST(ChooseTicksTest, SlowClockWithoutATrustworthyTscStaysMonotonic) {
  TickChoice not_inv = ChooseTicks(ClockMode::kAuto, Facts("hpet", "hpet tsc", false, 900));
  EXPECT_FALSE(not_inv.tsc);
  EXPECT_NE(not_inv.why.find("TSC not invariant"), std::string::npos) << not_inv.why;
  // The kernel dropped tsc from its usable clocksources (marked unstable).
  TickChoice unlisted = ChooseTicks(ClockMode::kAuto, Facts("hpet", "hpet acpi_pm", true, 900));
  EXPECT_FALSE(unlisted.tsc);
  EXPECT_NE(unlisted.why.find("does not list tsc"), std::string::npos) << unlisted.why;
  // "tsc" must be a whole word of the list.
  EXPECT_FALSE(ChooseTicks(ClockMode::kAuto, Facts("hpet", "hpet tsc_early", true, 900)).tsc);
}

TEST(ChooseTicksTest, ForcedModes) {
  EXPECT_TRUE(ChooseTicks(ClockMode::kTsc, Facts("hpet", "hpet", false, 20)).tsc);
  TickChoice m = ChooseTicks(ClockMode::kMonotonic, Facts("tsc", "tsc", true, 900));
  EXPECT_FALSE(m.tsc);
  EXPECT_EQ(m.why.rfind("monotonic (NCCLWATCH_CLOCK=monotonic", 0), 0u) << m.why;
  ClockFacts arm = Facts("arch_sys_counter", "arch_sys_counter", false, 900);
  arm.x86 = false;
  EXPECT_FALSE(ChooseTicks(ClockMode::kTsc, arm).tsc);
  EXPECT_FALSE(ChooseTicks(ClockMode::kAuto, arm).tsc);
}

// A clocksource directory of our own, as sysfs lays it out.
std::string FakeSysfs(const char* current, const char* available) {
  const char* tmp = getenv("TEST_TMPDIR");
  static int n = 0;
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/clocksource" + std::to_string(++n);
  mkdir(dir.c_str(), 0755);
  for (auto [name, text] : {std::pair{"current_clocksource", current}, std::pair{"available_clocksource", available}}) {
    FILE* f = fopen((dir + "/" + name).c_str(), "w");
    if (f == nullptr) return dir;
    fprintf(f, "%s\n", text);
    fclose(f);
  }
  return dir;
}

// Every path of the automatic choice, with what ReadClockFacts reads injected:
// the sysfs files, the CPU's invariant-TSC flag and the timing.
TEST(ClockFactsTest, EveryPathFromInjectedFacts) {
  struct Case {
    const char* current;
    const char* available;
    bool invariant;
    double gettime_ns;
    bool want_tsc;
    const char* want_why;
  };
  const Case cases[] = {
      {"tsc", "tsc hpet acpi_pm ", true, 20, true, "tsc (kernel clocksource tsc)"},
      {"tsc", "tsc hpet", false, 900, true, "tsc (kernel clocksource tsc)"},
      {"kvm-clock", "kvm-clock tsc acpi_pm ", true, 26, false, "monotonic (clocksource kvm-clock; clock_gettime fast)"},
      {"kvm-clock", "kvm-clock tsc", true, 640, true, "tsc (invariant TSC; clocksource kvm-clock; clock_gettime slow)"},
      {"hpet", "hpet tsc", false, 900, false, "monotonic (clocksource hpet; clock_gettime slow; TSC not invariant)"},
      {"xen", "xen", true, 700, false,
       "monotonic (clocksource xen; clock_gettime slow; kernel does not list tsc as usable)"},
      {"xen", "xen tsc", true, 50, false, "monotonic (clocksource xen; clock_gettime fast)"},
  };
  for (const Case& k : cases) {
    static double g_ns;
    static bool g_inv;
    g_ns = k.gettime_ns;
    g_inv = k.invariant;
    ClockProbe probe;
    probe.sysfs_dir = FakeSysfs(k.current, k.available);
    probe.invariant_tsc = [] { return g_inv; };
    probe.gettime_ns = [] { return g_ns; };
    ClockFacts f = ReadClockFacts(probe);
    EXPECT_EQ(f.clocksource, k.current);
    EXPECT_EQ(f.gettime_ns, k.gettime_ns);
#if defined(__x86_64__)
    EXPECT_EQ(f.invariant_tsc, k.invariant);
    TickChoice c = ChooseTicks(ClockMode::kAuto, f);
    EXPECT_EQ(c.tsc, k.want_tsc) << k.current << " " << k.gettime_ns;
    EXPECT_EQ(c.why, k.want_why);
#endif
  }
}

TEST(ClockFactsTest, NoSysfsReadsAsUnknown) {
  ClockProbe probe;
  probe.sysfs_dir = "/nonexistent/clocksource0";
  probe.gettime_ns = [] { return 30.0; };
  ClockFacts f = ReadClockFacts(probe);
  EXPECT_EQ(f.clocksource, "");
  EXPECT_EQ(f.available, "");
  TickChoice c = ChooseTicks(ClockMode::kAuto, f);
  EXPECT_FALSE(c.tsc);
#if defined(__x86_64__)
  EXPECT_EQ(c.why, "monotonic (clocksource unknown; clock_gettime fast)");
#endif
}

TEST(ClockFactsTest, ThisMachine) {
  ClockFacts f = ReadClockFacts();
  EXPECT_GT(f.gettime_ns, 0);
  EXPECT_LT(f.gettime_ns, 1e6);
#if defined(__x86_64__)
  EXPECT_TRUE(f.x86);
#endif
  // Linux always has a current clocksource (sysfs may be absent in odd sandboxes).
  if (!f.clocksource.empty()) {
    EXPECT_EQ(f.clocksource.find('\n'), std::string::npos);
  }
}

TEST(TickConverterTest, MonotonicModeIsIdentityAndTscModeConverts) {
  TickConverter mono;
  mono.Init(ClockMode::kMonotonic, ReadClockFacts());
  EXPECT_FALSE(mono.tsc());
  EXPECT_FALSE(g_ticks_are_tsc.load());
  uint64_t t = Ticks();
  EXPECT_EQ(mono.ToNs(t), t);
#if defined(__x86_64__)
  TickConverter tsc;
  tsc.Init(ClockMode::kTsc, ReadClockFacts());
  EXPECT_TRUE(tsc.tsc());
  EXPECT_TRUE(g_ticks_are_tsc.load());
  tsc.Refine();  // waits out the 2 ms baseline
  uint64_t before = NowNs();
  uint64_t ticks = Ticks();
  uint64_t after = NowNs();
  uint64_t ns = tsc.ToNs(ticks);
  // Within 100 us of CLOCK_MONOTONIC read around it (the scale is from 2 ms).
  EXPECT_GT(ns + 100000, before);
  EXPECT_LT(ns, after + 100000);
  mono.Init(ClockMode::kMonotonic, ReadClockFacts());  // leave the process in the default state
#endif
}

TEST(TickConverterTest, TicksBeforeInitMapToZeroNotToAWrappedTime) {
#if defined(__x86_64__)
  TickConverter tsc;
  tsc.Init(ClockMode::kTsc, ReadClockFacts());
  tsc.Refine();
  const uint64_t now = tsc.ToNs(Ticks());
  // 0 is what a proxy slot holds before its first update: before Init, and
  // on some hosts (a VM's offset TSC) before CLOCK_MONOTONIC's 0 too. Under
  // UBSan (scripts/test.sh's asan configuration) the old conversion of a
  // negative double to unsigned stopped the process there.
  EXPECT_LE(tsc.ToNs(0), now);
  EXPECT_EQ(tsc.ToNs(Ticks() - (uint64_t{1} << 62)), 0u);  // ~10^18 ns before Init
  // A tick just before the latest one still converts to a time before it.
  const uint64_t t = Ticks();
  EXPECT_LE(tsc.ToNs(t - 1000), tsc.ToNs(t));
  EXPECT_GT(tsc.ToNs(t - 1000), 0u);
  TickConverter mono;
  mono.Init(ClockMode::kMonotonic, ReadClockFacts());  // leave the process in the default state
#endif
}

// NCCLWATCH_CLOCK=test: never the TSC, and every monotonic reading the
// host's clock, which the test steps; any other mode reads clock_gettime
// again.
TEST(TickConverterTest, TheTestModeReadsTheHostsClock) {
  const ClockFacts tsc_here = Facts("tsc", "tsc", true, 20);
  TickConverter t;
  t.Init(ClockMode::kTest, tsc_here);
  EXPECT_FALSE(t.tsc());
  EXPECT_EQ(t.why(), "monotonic (NCCLWATCH_CLOCK=test: the host's test clock)");
  EXPECT_EQ(NowNs(), 42'000'000'007u);
  EXPECT_EQ(Ticks(), 42'000'000'007u);
  g_host_clock_ns += 250'000'000;
  EXPECT_EQ(NowNs(), 42'250'000'007u);
  EXPECT_EQ(t.ToNs(Ticks()), 42'250'000'007u);
  TickConverter m;
  m.Init(ClockMode::kMonotonic, tsc_here);
  EXPECT_NE(NowNs(), 42'250'000'007u);
}

}  // namespace
}  // namespace ncclwatch::plugin
