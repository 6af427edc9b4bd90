// Records older than the write that holds them read back undamaged: each
// Batch declares the range of its records' times (trace.proto,
// Batch.time_range), and the tools' loader bounds the records by it.

#include <gtest/gtest.h>

#include <string>

#include "plugin/testing/fake_nccl_host.h"
#include "tools/model/model.h"

namespace ncclwatch::testing {
namespace {

// Loads `dir` with the tools' loader; fails the test on any damage.
void ExpectUndamaged(const std::string& dir, size_t ops) {
  tools::Model m;
  std::string error;
  ASSERT_TRUE(tools::LoadModel({dir}, tools::LoadOptions(), &m, &error)) << error;
  ASSERT_EQ(m.procs.size(), 1u);
  EXPECT_FALSE(m.procs[0].damaged) << "at offset " << m.procs[0].damaged_at;
  for (const std::string& issue : m.procs[0].issues) ADD_FAILURE() << issue;
  EXPECT_EQ(m.ops.size(), ops);
}

Ev Coll(uint64_t seq) { return AllReduceEv(seq); }

// An operation whose enqueue took 3 s (NCCL blocked in the kernel launch
// behind a full launch queue, or a thread descheduled): its record reaches
// the file after writes stamped seconds after its start.
TEST(TimeRange, AnOperationOlderThanTheWriteBeforeReadsUndamaged) {
  const std::string dir = MakeTempDir("old-op");
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_FLUSH_MS", "10"},
                {"NCCLWATCH_HEARTBEAT_MS", "10"},
                {"NCCLWATCH_CLOCK", "test"}});
  {
    FakeComm c(PluginLib::Shared(), 5);
    ASSERT_EQ(c.Init(0x7a1, "old-op", 1, 2, 0), 0);
    void* op = c.Start(Coll(0));
    ASSERT_NE(op, nullptr);
    StepPluginClock(3'000'000'000);
    const uint64_t after = MonoNs();
    // Writes stamped 3 s after the operation began are in the file first.
    WaitForTrace(dir, [&](const Trace& t) { return WriterPast(t, after); });
    c.Stop(op);
    ASSERT_EQ(c.Finalize(), 0);
  }
  ResetPluginClock();
  ExpectUndamaged(dir, 1);
}

}  // namespace
}  // namespace ncclwatch::testing
