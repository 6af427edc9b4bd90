// WAIT_CYCLE and the merged order's ORDER_MISMATCH (find_cycles.h), through
// Diagnose.

#include "tools/diagnose/diagnose.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/diagnose/test_job.h"

namespace ncclwatch::tools {
namespace {

using namespace diagnose_testing;  // NOLINT: the tests' own job builder

// Rank 3 waits in 'pp' for rank 2, which waits in 'world' for rank 3.
TEST(FindCycles, MissingRanksOnACycleAreADeadlock) {
  Job j = MissingRankJob();
  uint32_t pp = j.Comm("pp", 0xdef, {2, 3});
  j.Coll(3, pp, 5, "Broadcast", 4096, 4.9, -1, "ncclBfloat16", 0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "DEADLOCK: rank 2 waits in AllReduce #12 on comm 'world' (4 ranks) for rank 3, which waits in Broadcast #5 "
            "on comm 'pp' (2 ranks) for rank 2; neither issued the other's operation (waited 10.0 s) [cause: program logic]");
  // The missing ranks on the cycle are its consequences, not causes.
  EXPECT_EQ(FindKind(d, report::MISSING_RANK), nullptr);
  ASSERT_GE(d.consequences_size(), 1) << FormatText(d);
  EXPECT_EQ(d.consequences(0).kind(), report::MISSING_RANK);
}

// NCCL numbers collectives per function, so AllReduce #k and AllGather #k
// match on every rank whatever the order (here AllGather's numbers are
// 101.., since Job matches by number alone). Over the network transport a
// swapped pair can complete, each run against the other: not a hang, and
// worse than one. It is an error all the same, and says that it completed.
TEST(FindCycles, SwappedOrderThatCompletedIsAnError) {
  Job j;
  j.Procs(4, 2.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  for (uint32_t p = 0; p < 4; ++p) {
    for (int k = 1; k <= 4; ++k) {
      const bool swap = p == 1 && k == 3;
      const double t = 0.1 * k;
      j.Coll(p, w, k, "AllReduce", 1024, swap ? t + 0.02 : t, (swap ? t + 0.02 : t) + 0.01);
      j.Coll(p, w, 100 + k, "AllGather", 256, swap ? t : t + 0.02, (swap ? t : t + 0.02) + 0.01);
    }
    j.Finalize(p, 2.0);
  }
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_GE(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).kind(), report::ORDER_MISMATCH);
  EXPECT_TRUE(d.findings(0).completed());
  EXPECT_EQ(Names(d.findings(0).culprits()), V{"rank 1"});
  EXPECT_EQ(ExitStatus(d), 1);
  EXPECT_EQ(d.verdict(),
            "ORDER MISMATCH: rank 1 issued AllGather #103 before AllReduce #3 on comm 'world' (4 ranks) where ranks "
            "0,2,3 issued AllReduce #3 first; both completed on every rank, each against the other: their results "
            "are wrong [cause: program logic]");
}

TEST(FindCycles, CrossCommunicatorDeadlock) {
  Job j;
  j.Procs(2, 15.0);
  uint32_t a = j.Comm("a", 0xa, {0, 1});
  uint32_t b = j.Comm("b", 0xb, {0, 1});
  j.Steps(a, 4);
  j.Steps(b, 2, 0.15);
  j.Coll(0, a, 5, "AllReduce", 1024, 1.0, -1);
  j.Coll(1, b, 3, "AllReduce", 1024, 1.0, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "DEADLOCK: rank 0 waits in AllReduce #5 on comm 'a' (2 ranks) for rank 1, which waits in AllReduce #3 on "
            "comm 'b' (2 ranks) for rank 0; neither issued the other's operation (waited 14.0 s) [cause: program logic]");
  EXPECT_EQ(Names(d.findings(0).culprits()), (V{"rank 0", "rank 1"}));
  // Both missing-rank findings are blocked behind the cycle: consequences,
  // each naming the other communicator, without culprits.
  EXPECT_EQ(d.findings_size(), 1) << FormatText(d);
  int missing = 0;
  for (const auto& f : d.consequences()) {
    missing += f.kind() == report::MISSING_RANK;
    EXPECT_EQ(f.culprits_size(), 0);
  }
  EXPECT_EQ(missing, 2) << FormatText(d);
}

}  // namespace
}  // namespace ncclwatch::tools
