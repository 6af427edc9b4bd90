// What the straggler finders count (counts.h).

#include "tools/arrivals/counts.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "tools/diagnose/test_job.h"

namespace ncclwatch::tools::arrivals {
namespace {

using diagnose_testing::Job;

TEST(StragglerCounts, MedianOfOddEvenAndNone) {
  EXPECT_DOUBLE_EQ(MedianOf({}), 0);
  EXPECT_DOUBLE_EQ(MedianOf({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(MedianOf({4, 1, 3, 2}), 2.5);
}

TEST(StragglerCounts, ThresholdIsTheClocksErrorAcrossHosts) {
  Model m;
  m.hosts = {"a"};
  m.alignment_error_ns = 5e6;
  StragglerOptions o;
  EXPECT_DOUBLE_EQ(Threshold(m, o), o.straggler_threshold_ms * 1e-3);
  m.hosts = {"a", "b"};
  EXPECT_DOUBLE_EQ(Threshold(m, o), 0.01);
}

// Rank 2 arrives 5 ms after the others at 10 AllReduces of 9 ms.
Job LateRank2() {
  Job j;
  j.Procs(4, 3.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  for (int k = 1; k <= 10; ++k)
    for (uint32_t p = 0; p < 4; ++p)
      j.Coll(p, w, k, "AllReduce", 1024, 0.1 * k + (p == 2 ? 0.005 : 0), 0.1 * k + 0.009);
  return j;
}

TEST(StragglerCounts, CountsTheLastArriverAsLate) {
  Job j = LateRank2();
  const Model& m = j.Finish();
  const Tally t = Count(m, 0.001, 0.2);
  for (uint32_t p = 0; p < 4; ++p) EXPECT_EQ(t.total[p], 10u);
  EXPECT_EQ(t.late, (std::vector<uint32_t>{0, 0, 10, 0}));
  ASSERT_EQ(t.rows[2].size(), 1u);
  EXPECT_EQ(t.rows[2].begin()->second.late, 10u);
  EXPECT_EQ(t.late_comm[2].at(0), 10u);
  const StragglerCounts counts = CountForStragglers(m, StragglerOptions());
  EXPECT_EQ(counts.window.late, t.late);
  EXPECT_TRUE(counts.sampled.late.empty() || counts.sampled.late == std::vector<uint32_t>(4, 0));
}

TEST(StragglerCounts, AWholeWindowLacksNothing) {
  Job j = LateRank2();
  const Model& m = j.Finish();
  EXPECT_EQ(WindowLacks(m), std::vector<bool>(4, false));
  EXPECT_EQ(SampledTotals(m), std::vector<uint32_t>(4, 0));
  EXPECT_TRUE(SampledOf(m)[0].empty());
}

}  // namespace
}  // namespace ncclwatch::tools::arrivals
