#include "plugin/core/config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "plugin/abi/profiler_common.h"

namespace ncclwatch::plugin {
namespace {

std::map<std::string, std::string>* g_env;
const char* FakeGetenv(const char* name) {
  auto it = g_env->find(name);
  return it == g_env->end() ? nullptr : it->second.c_str();
}

Config Parse(std::map<std::string, std::string> env) {
  g_env = &env;
  return ParseConfig(&FakeGetenv);
}

TEST(ConfigTest, Defaults) {
  Config c = Parse({});
  EXPECT_TRUE(c.enabled);
  EXPECT_EQ(c.dir, ".");
  EXPECT_EQ(c.nccl_mask, DefaultMask());
  EXPECT_EQ(c.nccl_mask, uint64_t{nccl::kColl | nccl::kP2p | nccl::kKernelCh});
  EXPECT_EQ(c.raw_kinds, 0u);
  EXPECT_EQ(c.flush_ms, 100u);
  EXPECT_EQ(c.heartbeat_ms, 1000u);
  EXPECT_EQ(c.stuck_sec, 60.0);
  EXPECT_EQ(c.buffer_mb, 64u);
  EXPECT_EQ(c.clock, ClockMode::kAuto);
  EXPECT_TRUE(c.on_stuck.empty());
  EXPECT_EQ(c.on_stuck_max_bytes, 1u << 20);
  EXPECT_EQ(c.file_mode, 0600u);
  EXPECT_TRUE(c.warnings.empty());
}

// A command that cannot be split gets one warning and no command runs;
// so does one that is set but empty.
TEST(ConfigTest, BadOnStuckIsOff) {
  for (const char* v : {"echo 'abc", "", "  ", "echo a\\", "\"\" x"}) {
    Config c = Parse({{"NCCLWATCH_ON_STUCK", v}});
    EXPECT_TRUE(c.on_stuck.empty()) << v;
    ASSERT_EQ(c.warnings.size(), 1u) << v;
    EXPECT_EQ(c.warnings[0].find(std::string("NCCLWATCH_ON_STUCK='") + v + "' ignored: "), 0u) << c.warnings[0];
    EXPECT_NE(c.warnings[0].find("; using no command"), std::string::npos) << c.warnings[0];
  }
  Config c = Parse({{"NCCLWATCH_ON_STUCK", "echo 'abc"}});
  EXPECT_NE(c.warnings[0].find("the single quote at byte 5 is never closed"), std::string::npos) << c.warnings[0];
}

// Modes: read and write bits only, the owner's always; never executable.
TEST(ConfigTest, FileMode) {
  EXPECT_EQ(Parse({{"NCCLWATCH_FILE_MODE", "600"}}).file_mode, 0600u);
  EXPECT_EQ(Parse({{"NCCLWATCH_FILE_MODE", "0666"}}).file_mode, 0666u);
  EXPECT_EQ(Parse({{"NCCLWATCH_FILE_MODE", " 0644 "}}).file_mode, 0644u);
  for (const char* v : {"0700", "0755", "0400", "0200", "04600", "0668", "0x180", "384", "-0600", "0o600", "0000600"}) {
    Config c = Parse({{"NCCLWATCH_FILE_MODE", v}});
    EXPECT_EQ(c.file_mode, 0600u) << v;
    ASSERT_EQ(c.warnings.size(), 1u) << v;
    EXPECT_NE(c.warnings[0].find("not an octal mode within 0666 that includes 0600; using 0600"), std::string::npos)
        << c.warnings[0];
  }
}

TEST(ConfigTest, Clock) {
  EXPECT_EQ(Parse({{"NCCLWATCH_CLOCK", "tsc"}}).clock, ClockMode::kTsc);
  EXPECT_EQ(Parse({{"NCCLWATCH_CLOCK", " Monotonic "}}).clock, ClockMode::kMonotonic);
  EXPECT_EQ(Parse({{"NCCLWATCH_CLOCK", "auto"}}).clock, ClockMode::kAuto);
  EXPECT_EQ(Parse({{"NCCLWATCH_CLOCK", "test"}}).clock, ClockMode::kTest);
  Config bad = Parse({{"NCCLWATCH_CLOCK", "hpet"}});
  EXPECT_EQ(bad.clock, ClockMode::kAuto);
  ASSERT_EQ(bad.warnings.size(), 1u);
  EXPECT_NE(bad.warnings[0].find("NCCLWATCH_CLOCK='hpet' ignored: not auto, tsc or monotonic"), std::string::npos);
}

TEST(ConfigTest, Completions) {
  EXPECT_EQ(Parse({}).completions, Completions::kAuto);  // events where they can be had
  EXPECT_EQ(Parse({{"NCCLWATCH_COMPLETIONS", " Events "}}).completions, Completions::kEvents);
  EXPECT_EQ(Parse({{"NCCLWATCH_COMPLETIONS", "channels"}}).completions, Completions::kChannels);
  EXPECT_EQ(Parse({{"NCCLWATCH_COMPLETIONS", "auto"}}).completions, Completions::kAuto);
  EXPECT_TRUE(Parse({}).start_events);
  EXPECT_FALSE(Parse({{"NCCLWATCH_START_EVENTS", "0"}}).start_events);
  Config bad = Parse({{"NCCLWATCH_COMPLETIONS", "cupti"}});
  EXPECT_EQ(bad.completions, Completions::kAuto);
  ASSERT_EQ(bad.warnings.size(), 1u);
  EXPECT_NE(bad.warnings[0].find("NCCLWATCH_COMPLETIONS='cupti' ignored: not auto, channels or events; using auto"),
            std::string::npos);
}

TEST(ConfigTest, EventInterval) {
  EXPECT_EQ(Parse({}).event_interval_us, 0u);
  EXPECT_EQ(Parse({{"NCCLWATCH_EVENT_INTERVAL_US", "0"}}).event_interval_us, 0u);
  EXPECT_EQ(Parse({{"NCCLWATCH_EVENT_INTERVAL_US", " 50 "}}).event_interval_us, 50u);
  EXPECT_EQ(Parse({{"NCCLWATCH_EVENT_INTERVAL_US", "1000000"}}).event_interval_us, 1000000u);
  for (const char* v : {"-1", "1e3", "10us", "1000001", "0x10"}) {
    Config c = Parse({{"NCCLWATCH_EVENT_INTERVAL_US", v}});
    EXPECT_EQ(c.event_interval_us, 0u) << v;
    ASSERT_EQ(c.warnings.size(), 1u) << v;
    EXPECT_NE(c.warnings[0].find("NCCLWATCH_EVENT_INTERVAL_US='" + std::string(v) +
                                 "' ignored: not an integer in [0, 1000000]; using 0"),
              std::string::npos)
        << c.warnings[0];
  }
}

TEST(ConfigTest, GoodValues) {
  Config c = Parse({{"NCCLWATCH_DIR", "/tmp/x"},
                    {"NCCLWATCH_FLUSH_MS", "250"},
                    {"NCCLWATCH_HEARTBEAT_MS", "500"},
                    {"NCCLWATCH_STUCK_SEC", "2.5"},
                    {"NCCLWATCH_BUFFER_MB", "8"},
                    {"NCCLWATCH_ON_STUCK", " py-spy dump --pid %p "},
                    {"NCCLWATCH_ON_STUCK_TIMEOUT_SEC", "5"},
                    {"NCCLWATCH_ON_STUCK_MAX_BYTES", "4096"},
                    {"NCCLWATCH_FILE_MODE", "0640"},
                    {"NCCLWATCH_EVENTS", "default, ProxyOp,proxystep"}});
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_EQ(c.on_stuck, (std::vector<std::string>{"py-spy", "dump", "--pid", "%p"}));
  EXPECT_EQ(c.on_stuck_timeout_sec, 5.0);
  EXPECT_EQ(c.on_stuck_max_bytes, 4096u);
  EXPECT_EQ(c.file_mode, 0640u);
  EXPECT_EQ(c.dir, "/tmp/x");
  EXPECT_EQ(c.flush_ms, 250u);
  EXPECT_EQ(c.heartbeat_ms, 500u);
  EXPECT_EQ(c.stuck_sec, 2.5);
  EXPECT_EQ(c.buffer_mb, 8u);
  EXPECT_EQ(c.nccl_mask, DefaultMask() | nccl::kProxyOp | nccl::kProxyStep);
  EXPECT_EQ(c.raw_kinds, (1u << kEvProxyOp) | (1u << kEvProxyStep));
}

TEST(ConfigTest, AllAndNumericMask) {
  Config all = Parse({{"NCCLWATCH_EVENTS", "all"}});
  EXPECT_EQ(all.nccl_mask, 0xffffu);
  EXPECT_EQ(all.raw_kinds & (1u << kEvColl), 0u);  // ops are Op records, never raw
  EXPECT_NE(all.raw_kinds & (1u << kEvKernelCh), 0u);
  Config m = Parse({{"NCCLWATCH_EVENTS", "0x42"}});
  EXPECT_EQ(m.nccl_mask, 0x42u);
  EXPECT_TRUE(m.warnings.empty());
}

TEST(ConfigTest, BadValuesWarnAndKeepDefaults) {
  Config c = Parse({{"NCCLWATCH_FLUSH_MS", "10ms"},
                    {"NCCLWATCH_HEARTBEAT_MS", "-5"},
                    {"NCCLWATCH_STUCK_SEC", "soon"},
                    {"NCCLWATCH_BUFFER_MB", "99999"},
                    {"NCCLWATCH_EVENTS", "coll,bogus"},
                    {"NCCLWATCH_ON_STUCK_TIMEOUT_SEC", "0"},
                    {"NCCLWATCH_ON_STUCK_MAX_BYTES", "0"},
                    {"NCCLWATCH_ENABLE", "maybe"}});
  EXPECT_EQ(c.flush_ms, 100u);
  EXPECT_EQ(c.heartbeat_ms, 1000u);
  EXPECT_EQ(c.stuck_sec, 60.0);
  EXPECT_EQ(c.buffer_mb, 64u);
  EXPECT_EQ(c.nccl_mask, DefaultMask());
  EXPECT_TRUE(c.enabled);
  EXPECT_EQ(c.on_stuck_timeout_sec, 60.0);
  EXPECT_EQ(c.on_stuck_max_bytes, 1u << 20);
  ASSERT_EQ(c.warnings.size(), 8u);
  bool named_bogus = false;
  for (const auto& w : c.warnings) named_bogus |= w.find("unknown event name 'bogus'") != std::string::npos;
  EXPECT_TRUE(named_bogus);
  EXPECT_NE(c.warnings[0].find("NCCLWATCH_ENABLE='maybe'"), std::string::npos);
}

TEST(ConfigTest, EventsRejectsOutOfRangeMaskAndEmpty) {
  uint64_t m;
  uint32_t r;
  std::string err;
  EXPECT_FALSE(ParseEvents("0x10000", &m, &r, &err));
  EXPECT_FALSE(ParseEvents(" , ", &m, &r, &err));
  EXPECT_FALSE(ParseEvents("0", &m, &r, &err));
  EXPECT_TRUE(ParseEvents("KernelCh", &m, &r, &err));
  EXPECT_EQ(m, uint64_t{nccl::kKernelCh});
}

TEST(ConfigTest, Disable) {
  EXPECT_FALSE(Parse({{"NCCLWATCH_ENABLE", "0"}}).enabled);
  EXPECT_FALSE(Parse({{"NCCLWATCH_ENABLE", "off"}}).enabled);
}

}  // namespace
}  // namespace ncclwatch::plugin
