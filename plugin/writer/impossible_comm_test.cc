// NCCL handing the plugin communicator arguments no communicator can have
// (a size of 0, -1 or 2^31-1, a rank of -5, or 7 of 2): the plugin records
// them as given, marked as NCCL's (CommInit.nccl_impossible), keeps no
// per-rank state from them, and the tools read the file as undamaged and
// say what NCCL gave.

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "plugin/core/state.h"
#include "plugin/testing/fake_nccl_host.h"
#include "proto/trace.pb.h"
#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"

namespace ncclwatch::testing {
namespace {

static_assert(plugin::kMaxCommRanks == tools::kMaxCommRanks,
              "the plugin and the reader must agree on the largest possible communicator");

struct Args {
  int nranks;
  int rank;
};

class ImpossibleComm : public ::testing::TestWithParam<Args> {};

TEST_P(ImpossibleComm, RecordedAsNcclGaveThemAndNotCalledDamage) {
  const Args a = GetParam();
  const std::string dir = MakeTempDir("impossible");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_FLUSH_MS", "10"}});
  ClearLogs();
  {
    FakeComm c(PluginLib::Shared(), 5);
    ASSERT_EQ(c.Init(0x1b0 + static_cast<uint64_t>(a.nranks & 0xff), "odd", 1, a.nranks, a.rank), 0);
    ASSERT_NE(c.context(), nullptr) << "the communicator is still profiled";
    OpSpec coll;
    coll.seq = 0;
    c.RunOp(coll);
    OpSpec p2p;
    p2p.p2p = true;
    p2p.func = "Send";
    p2p.peer = 1;
    p2p.seq = 1;
    c.RunOp(p2p);
    ASSERT_EQ(c.Finalize(), 0);
  }
  bool warned = false;
  for (const std::string& w : Warnings()) warned |= w.find("no communicator can have") != std::string::npos;
  EXPECT_TRUE(warned) << "a warning through NCCL's logger";

  std::unique_ptr<Trace> t = ReadSingleTrace(dir);
  EXPECT_TRUE(t->raw.issues.empty());
  ASSERT_EQ(t->comm_inits.size(), 1u);
  EXPECT_EQ(t->comm_inits[0]->nranks(), a.nranks);
  EXPECT_EQ(t->comm_inits[0]->rank(), a.rank);
  EXPECT_TRUE(t->comm_inits[0]->nccl_impossible());
  EXPECT_EQ(t->ops.size(), 2u);

  tools::Model m;
  std::string error;
  ASSERT_TRUE(tools::BuildModel({dir}, tools::LoadOptions(), &m, &error)) << error;
  ASSERT_EQ(m.procs.size(), 1u);
  EXPECT_FALSE(m.procs[0].damaged) << "at offset " << m.procs[0].damaged_at;
  for (const std::string& issue : m.procs[0].issues) ADD_FAILURE() << issue;
  ASSERT_EQ(m.comms.size(), 1u);
  ASSERT_EQ(m.comms[0].members.size(), 1u);
  const tools::CommMember& mem = m.comms[0].members[0];
  EXPECT_TRUE(mem.nccl_impossible);
  EXPECT_EQ(mem.nccl_nranks, a.nranks);
  EXPECT_EQ(mem.nccl_rank, a.rank);
  EXPECT_EQ(m.ops.size(), 2u);

  const report::Diagnosis d = tools::Diagnose(m, tools::DiagnoseOptions());
  const std::string line =
      "NCCL gave comm 'odd' (size unknown, 1 given) nranks " + std::to_string(a.nranks) + ", rank " +
      std::to_string(a.rank) + " (impossible), so the evidence for that communicator is incomplete";
  EXPECT_EQ(d.verdict().rfind("INCOMPLETE", 0), 0u) << d.verdict();
  EXPECT_NE(d.verdict().find(line), std::string::npos) << d.verdict();
  EXPECT_EQ(d.verdict().find("damaged"), std::string::npos) << d.verdict();
  EXPECT_EQ(d.verdict().find("profiler API v1 to v3"), std::string::npos) << d.verdict();
}

INSTANTIATE_TEST_SUITE_P(Values, ImpossibleComm,
                         ::testing::Values(Args{0, 0}, Args{-1, 0}, Args{std::numeric_limits<int>::max(), 0},
                                           Args{2, -5}, Args{2, 7}, Args{2, 2}, Args{(1 << 17) + 1, 0}));

// A possible communicator is not marked, even at the largest size.
TEST(PossibleComm, NotMarked) {
  const std::string dir = MakeTempDir("possible");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_FLUSH_MS", "10"}});
  {
    FakeComm c(PluginLib::Shared(), 5);
    ASSERT_EQ(c.Init(0x1c0, "big", 1, 1 << 17, (1 << 17) - 1), 0);
    ASSERT_EQ(c.Finalize(), 0);
  }
  std::unique_ptr<Trace> t = ReadSingleTrace(dir);
  ASSERT_EQ(t->comm_inits.size(), 1u);
  EXPECT_FALSE(t->comm_inits[0]->nccl_impossible());
  tools::Model m;
  std::string error;
  ASSERT_TRUE(tools::BuildModel({dir}, tools::LoadOptions(), &m, &error)) << error;
  EXPECT_FALSE(m.procs[0].damaged);
  ASSERT_EQ(m.comms.size(), 1u);
  EXPECT_EQ(m.comms[0].nranks, 1 << 17);
}

}  // namespace
}  // namespace ncclwatch::testing
