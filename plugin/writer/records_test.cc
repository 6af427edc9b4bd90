// No record the reader refuses: what NCCL hands the plugin is bounded, and a
// stuck report fits one record however much is in flight.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "plugin/testing/fake_nccl_host.h"
#include "proto/trace.pb.h"

namespace ncclwatch::testing {
namespace {

// A 9 MB communicator name made a 275-byte file whose operations were all
// lost: the name is now cut, with a marker, and everything else is there.
TEST(RecordsTest, AHugeCommunicatorNameIsCut) {
  std::string dir = MakeTempDir("hugename");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_FLUSH_MS", "5"}});
  const std::string name(9 << 20, 'n');
  {
    FakeComm c(PluginLib::Shared(), 5);
    ASSERT_EQ(c.Init(0x9a, name.c_str(), 1, 2, 0), 0);
    for (uint64_t k = 0; k < 11; ++k) {
      OpSpec s;
      s.seq = k;
      c.RunOp(s);
    }
    ASSERT_EQ(c.Finalize(), 0);
  }
  std::unique_ptr<Trace> t = ReadSingleTrace(dir);
  EXPECT_TRUE(t->raw.issues.empty()) << t->raw.issues[0];
  ASSERT_EQ(t->comm_inits.size(), 1u);
  EXPECT_EQ(t->comm_inits[0]->name(), std::string(256, 'n') + "...(truncated)");
  EXPECT_EQ(t->ops.size(), 11u);
}

// NCCL 2.31 (API v7) in a process without libcuda (no CUDA events): the
// fallback of older releases, kernel channels, would cost every kernel
// there, so the plugin records no completions and says why and how to ask.
TEST(RecordsTest, NoCompletionsRatherThanPricedChannelsOnV7) {
  std::string dir = MakeTempDir("v7nocuda");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_FLUSH_MS", "5"}});
  {
    FakeComm c(PluginLib::Shared(), 7);
    ASSERT_EQ(c.Init(0x9b, "v7nocuda", 1, 2, 0), 0);
    EXPECT_EQ(c.mask() & nccl::kKernelCh, 0);
    OpSpec s;
    s.seq = 0;
    c.RunOp(s);
    ASSERT_EQ(c.Finalize(), 0);
  }
  std::unique_ptr<Trace> t = ReadSingleTrace(dir);
  const std::string& said = t->header->completions();
  EXPECT_EQ(said.rfind("none (CUDA-event completions: libcuda.so.1 is not loaded", 0), 0u) << said;
  EXPECT_NE(said.find("NCCLWATCH_COMPLETIONS=channels asks for them"), std::string::npos) << said;
  ASSERT_EQ(t->ops.size(), 1u);
  EXPECT_FALSE(t->ops[0].op->completion_tracked());
}

// Many operations in flight, each with many proxy operations: the stuck
// report (one record) is capped to what the encode buffer and the reader
// take, and reads back whole.
TEST(RecordsTest, AStuckReportFitsOneRecord) {
  std::string dir = MakeTempDir("bigstuck");
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_STUCK_SEC", "0.2"},
                {"NCCLWATCH_FLUSH_MS", "20"},
                {"NCCLWATCH_HEARTBEAT_MS", "50"},
                {"NCCLWATCH_BUFFER_MB", "64"}});
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0x57b, "big", 1, 8, 0), 0);
  for (uint64_t k = 0; k < 20; ++k) {
    OpSpec s;
    s.seq = k;
    s.nchannels = 8;
    s.proxy_peers = {1, 2, 3, 4, 5, 6, 7};  // 8 channels x 7 peers x send and recv: 112 live proxy ops
    s.kernel_stop = 0;                       // never completes
    s.stop_proxies = false;
    c.RunOp(s);
  }
  // A report lists what was in flight when an operation passed the
  // threshold: wait for one that saw all 20.
  std::unique_ptr<Trace> t = WaitForTrace(dir, [](const Trace& tr) {
    for (const trace::StuckReport* r : tr.stucks)
      if (r->ops_size() == 20) return true;
    return false;
  });
  ASSERT_FALSE(t->stucks.empty());
  EXPECT_TRUE(t->raw.only_cut_tail) << t->raw.issues[0];
  size_t most = 0;
  for (const trace::StuckReport* r : t->stucks)
    for (const trace::InFlightOp& o : r->ops()) most = std::max<size_t>(most, o.proxy_size());
  EXPECT_GT(most, 0u);    // proxy detail is there
  EXPECT_LE(most, 32u);   // capped per operation
  ASSERT_EQ(c.Finalize(), 0);
}

}  // namespace
}  // namespace ncclwatch::testing
