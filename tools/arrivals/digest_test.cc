// What a per-node summary keeps for the straggler finders (DigestArrivals)
// and whether their counts cover the job (ArrivalsWhole), on a whole model.

#include <gtest/gtest.h>

#include <vector>

#include "tools/arrivals/digest.h"
#include "tools/diagnose/test_job.h"

namespace ncclwatch::tools {
namespace {

using diagnose_testing::Job;

TEST(ArrivalDigest, EachProcessOfAWholeCommunicator) {
  Job j;
  j.Procs(4, 3.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  for (int k = 1; k <= 10; ++k)
    for (uint32_t p = 0; p < 4; ++p)
      j.Coll(p, w, k, "AllReduce", 1024, 0.1 * k + (p == 2 ? 0.005 : 0), 0.1 * k + 0.009);
  const Model& m = j.Finish();
  const std::vector<ArrivalDigest> d = DigestArrivals(m);
  ASSERT_EQ(d.size(), 4u);
  for (uint32_t p = 0; p < 4; ++p) {
    EXPECT_TRUE(d[p].valid);
    EXPECT_EQ(d[p].total, 10u);
    ASSERT_EQ(d[p].rows.size(), 1u);
    EXPECT_EQ(d[p].rows[0].comm_hash, 0xabcu);
    EXPECT_EQ(d[p].rows[0].func, "AllReduce");
  }
  EXPECT_EQ(d[2].late, 10u);
  EXPECT_EQ(d[0].late, 0u);
  EXPECT_NEAR(d[2].median_lag_s, 0.005, 1e-6);
  // Every operation is in the model: its arrivals are whole.
  EXPECT_TRUE(ArrivalsWhole(m));
}

TEST(ArrivalDigest, APeerOutsideTheModelMakesItInvalid) {
  Job j;
  j.Procs(2, 3.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1});
  j.m.comms[w].nranks = 4;  // ranks 2 and 3 are on another node
  const std::vector<ArrivalDigest> d = DigestArrivals(j.Finish());
  ASSERT_EQ(d.size(), 2u);
  EXPECT_FALSE(d[0].valid);
  EXPECT_FALSE(d[1].valid);
}

}  // namespace
}  // namespace ncclwatch::tools
