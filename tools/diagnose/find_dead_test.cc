// DEAD_RANK (find_dead.h), through Diagnose.

#include "tools/diagnose/diagnose.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/diagnose/test_job.h"

namespace ncclwatch::tools {
namespace {

using namespace diagnose_testing;  // NOLINT: the tests' own job builder

TEST(FindDead, DeadRankInsideTheOperationOthersWaitIn) {
  Job j;
  j.Procs(4, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 11);
  for (uint32_t p = 0; p < 4; ++p) j.Coll(p, w, 12, "AllReduce", 1024, 5.0, -1);
  j.m.procs[3].last_ns = Ns(5.5);
  j.m.procs[3].last_heartbeat_ns = Ns(5.0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "DEAD: rank 3 stopped without finalizing at 5.50 s (9.5 s before the job's last record), inside AllReduce #12 "
            "on comm 'world' (4 ranks); ranks 0,1,2 wait in it (10.0 s) [cause: rank 3's resources]");
  EXPECT_EQ(d.findings(0).kind(), report::DEAD_RANK);
  EXPECT_DOUBLE_EQ(d.findings(0).t_last_sign_of_life_sec(), 5.5);
  // The stuck collective is blocked behind the death that explains it: a
  // consequence, with its ranks waiting and no culprit.
  EXPECT_EQ(FindKind(d, report::STUCK_IN_PROGRESS), nullptr);
  ASSERT_EQ(d.consequences_size(), 1) << FormatText(d);
  EXPECT_EQ(d.consequences(0).kind(), report::STUCK_IN_PROGRESS);
  EXPECT_EQ(d.consequences(0).culprits_size(), 0);
  EXPECT_EQ(d.consequences(0).waiting_size(), 4);
  EXPECT_NE(FormatText(d).find("\nBlocked behind it (1):\n  STUCK: AllReduce #12"), std::string::npos) << FormatText(d);
}

TEST(FindDead, RecentSilenceIsNotDeath) {
  Job j;
  j.Procs(2, 5.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1});
  j.Steps(w, 3);
  j.m.procs[1].last_ns = Ns(3.5);  // 1.5 s before the job's end: within max(3 x 1 s, 2 s)
  EXPECT_EQ(FindKind(Diagnose(j.Finish()), report::DEAD_RANK), nullptr);
}

}  // namespace
}  // namespace ncclwatch::tools
