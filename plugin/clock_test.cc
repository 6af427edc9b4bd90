#include "plugin/clock.h"

#include <gtest/gtest.h>

#include <string>

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
  EXPECT_EQ(c.why, "monotonic (clocksource kvm-clock, clock_gettime 30 ns)");
}

TEST(ChooseTicksTest, SlowClockWithInvariantTscUsesTsc) {
  TickChoice c = ChooseTicks(ClockMode::kAuto, Facts("kvm-clock", "kvm-clock tsc acpi_pm", true, 640));
  EXPECT_TRUE(c.tsc);
  EXPECT_EQ(c.why, "tsc (invariant TSC; clocksource kvm-clock, clock_gettime 640 ns)");
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
  mono.Init(ClockMode::kMonotonic);
  EXPECT_FALSE(mono.tsc());
  EXPECT_FALSE(g_ticks_are_tsc.load());
  uint64_t t = Ticks();
  EXPECT_EQ(mono.ToNs(t), t);
#if defined(__x86_64__)
  TickConverter tsc;
  tsc.Init(ClockMode::kTsc);
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
  mono.Init(ClockMode::kMonotonic);  // leave the process in the default state
#endif
}

}  // namespace
}  // namespace ncclwatch::plugin
