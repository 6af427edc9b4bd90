// NCCL 2.31 (profiler API v7) passes the caller's tag of each call
// (ncclCollConfig_t.userProfilerTag: a framework's step, layer or phase).
// On the fake host, two ranks tag their all-reduces; rank 1 never issues the
// third. The verdict names the operation with its tag, and stats lists the
// tags of each row.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "plugin/testing/fake_nccl_host.h"
#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"
#include "tools/stats/stats.h"

namespace ncclwatch::testing {
namespace {

TEST(UserTag, TheVerdictAndStatsShowTheCallersTag) {
  const std::string dir = MakeTempDir("usertag");
  for (int r = 0; r < 2; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string mine = dir + "/rank" + std::to_string(r);
      mkdir(mine.c_str(), 0755);
      // Kernel channels give completions here, without libcuda.
      SetPluginEnv({{"NCCLWATCH_DIR", mine}, {"NCCLWATCH_COMPLETIONS", "channels"}, {"RANK", std::to_string(r)},
                    {"WORLD_SIZE", "2"}});
      FakeComm c(PluginLib::FreshCopy(), 7);
      if (c.Init(0x7a60, "world", 1, 2, r) != 0) _exit(3);
      for (uint64_t seq = 0; seq < 3; ++seq) {
        OpSpec s;
        s.seq = seq;
        s.user_tag = 4700 + seq;           // e.g. a layer's number
        if (seq == 2 && r == 1) break;     // rank 1 skips the third
        s.kernel_runs = seq < 2;           // rank 0 waits in it
        c.RunOp(s);
      }
      _exit(c.Finalize() == 0 ? 0 : 4);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  tools::Model m;
  std::string err;
  ASSERT_TRUE(tools::BuildModel({dir}, tools::LoadOptions(), &m, &err)) << err;
  EXPECT_EQ(m.user_tags.size(), 5u);  // 3 calls on rank 0, 2 on rank 1
  const report::Diagnosis d = tools::Diagnose(m, tools::DiagnoseOptions());
  EXPECT_NE(d.verdict().find("AllReduce #2 (tag 4702)"), std::string::npos) << tools::FormatText(d);
  EXPECT_NE(d.verdict().find("rank 1"), std::string::npos) << d.verdict();

  const stats::Stats st = tools::ComputeStats(m);
  ASSERT_EQ(st.rows_size(), 1) << st.ShortDebugString();
  const stats::StatRow& row = st.rows(0);
  ASSERT_EQ(row.user_tags_size(), 3) << row.ShortDebugString();
  EXPECT_EQ(row.user_tags(0), 4700u);
  EXPECT_EQ(row.user_tags(2), 4702u);
  EXPECT_FALSE(row.user_tags_cut());
}

}  // namespace
}  // namespace ncclwatch::testing
