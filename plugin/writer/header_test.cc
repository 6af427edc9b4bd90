// The process header's clock fields, for every path of the clock choice, with
// what the choice reads injected (ProfilerOptions::clock_probe): the header
// must say which clock stamped the file, why, and what it measured, whatever
// machine runs the test.

#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/stat.h>

#include <string>

#include "plugin/core/clock.h"
#include "plugin/core/core.h"
#include "plugin/testing/fake_nccl_host.h"
#include "proto/trace.pb.h"

namespace ncclwatch::testing {
namespace {

struct Injected {
  const char* current;
  const char* available;
  bool invariant;
  double gettime_ns;
};
Injected g_now;

std::string WriteSysfs(const std::string& dir, const Injected& k) {
  const std::string sys = dir + "/sysfs";
  mkdir(sys.c_str(), 0755);
  for (auto [name, text] : {std::pair{"current_clocksource", k.current}, std::pair{"available_clocksource", k.available}}) {
    FILE* f = fopen((sys + "/" + name).c_str(), "w");
    if (f == nullptr) continue;
    fprintf(f, "%s\n", text);
    fclose(f);
  }
  return sys;
}

// Starts and ends a Profiler with `k` injected; returns its file's header.
trace::ProcessHeader HeaderWith(const Injected& k, plugin::ClockMode mode) {
  const std::string dir = MakeTempDir("header");
  g_now = k;
  plugin::ProfilerOptions o;
  o.config.dir = dir;
  o.config.clock = mode;
  o.api_version = 5;
  o.file_name_override = "h.ncclwatch";
  o.clock_probe.sysfs_dir = WriteSysfs(dir, k);
  o.clock_probe.invariant_tsc = [] { return g_now.invariant; };
  o.clock_probe.gettime_ns = [] { return g_now.gettime_ns; };
  std::string err;
  plugin::Profiler* p = plugin::Profiler::Acquire(o, &err);
  EXPECT_NE(p, nullptr) << err;
  if (p == nullptr) return trace::ProcessHeader();
  plugin::Profiler::Release(p);
  auto t = ReadTrace(dir + "/h.ncclwatch");
  EXPECT_TRUE(t->raw.issues.empty());
  EXPECT_NE(t->header, nullptr);
  return t->header != nullptr ? *t->header : trace::ProcessHeader();
}

TEST(HeaderClock, EveryPathIsRecordedAsChoiceReasonAndFacts) {
  struct Case {
    Injected in;
    plugin::ClockMode mode;
    trace::TickClock want;
    const char* why;
  };
  const Case cases[] = {
      {{"tsc", "tsc hpet", true, 22}, plugin::ClockMode::kAuto, trace::TICK_CLOCK_TSC, "tsc (kernel clocksource tsc)"},
      {{"kvm-clock", "kvm-clock tsc", true, 27}, plugin::ClockMode::kAuto, trace::TICK_CLOCK_MONOTONIC,
       "monotonic (clocksource kvm-clock; clock_gettime fast)"},
      {{"kvm-clock", "kvm-clock tsc", true, 640}, plugin::ClockMode::kAuto, trace::TICK_CLOCK_TSC,
       "tsc (invariant TSC; clocksource kvm-clock; clock_gettime slow)"},
      {{"hpet", "hpet tsc", false, 900}, plugin::ClockMode::kAuto, trace::TICK_CLOCK_MONOTONIC,
       "monotonic (clocksource hpet; clock_gettime slow; TSC not invariant)"},
      {{"xen", "xen", true, 800}, plugin::ClockMode::kAuto, trace::TICK_CLOCK_MONOTONIC,
       "monotonic (clocksource xen; clock_gettime slow; kernel does not list tsc as usable)"},
      {{"tsc", "tsc", true, 22}, plugin::ClockMode::kMonotonic, trace::TICK_CLOCK_MONOTONIC,
       "monotonic (NCCLWATCH_CLOCK=monotonic)"},
      {{"hpet", "hpet", false, 30}, plugin::ClockMode::kTsc, trace::TICK_CLOCK_TSC,
       "tsc (NCCLWATCH_CLOCK=tsc; clocksource hpet)"},
  };
  for (const Case& k : cases) {
    trace::TickClock want = k.want;
    std::string why = k.why;
#if !defined(__x86_64__)
    // No TSC to choose: every mode but an explicit monotonic one says so.
    if (k.mode != plugin::ClockMode::kMonotonic) {
      want = trace::TICK_CLOCK_MONOTONIC;
      why = "monotonic (no TSC on this CPU architecture)";
    }
#endif
    SCOPED_TRACE(k.why);
    trace::ProcessHeader h = HeaderWith(k.in, k.mode);
    EXPECT_EQ(h.tick_clock(), want);
    EXPECT_EQ(h.clock_source(), why);
    EXPECT_EQ(h.kernel_clocksource(), k.in.current);
    EXPECT_DOUBLE_EQ(h.clock_gettime_ns(), k.in.gettime_ns);
  }
}

}  // namespace
}  // namespace ncclwatch::testing
