#include "plugin/writer/cycle.h"

#include <gtest/gtest.h>

namespace ncclwatch::plugin {
namespace {

TEST(CycleTest, DrainsEveryFlushIntervalAndAtLeastEvery10Ms) {
  EXPECT_EQ(DrainPeriodNs(1), 1'000'000u);
  EXPECT_EQ(DrainPeriodNs(3), 3'000'000u);
  EXPECT_EQ(DrainPeriodNs(10), 10'000'000u);
  EXPECT_EQ(DrainPeriodNs(100), kMaxDrainPeriodNs);
  EXPECT_EQ(DrainPeriodNs(60000), kMaxDrainPeriodNs);
}

// The order the trace builder sorts by is the writer's: mask first (read
// before the drain), what was drained, then the writer's own records, the
// write, and at the very end the Finalize.
TEST(CycleTest, StepsRankInWriteOrder) {
  const CycleStep order[] = {CycleStep::kMaskChange,   CycleStep::kCommInit,  CycleStep::kRecords,
                             CycleStep::kCommFinalize, CycleStep::kDrops,     CycleStep::kHeartbeat,
                             CycleStep::kLaunchCompletions, CycleStep::kStuckReport, CycleStep::kWrite,
                             CycleStep::kFinalize};
  for (size_t i = 1; i < sizeof(order) / sizeof(order[0]); ++i)
    EXPECT_LT(CycleRank(order[i - 1]), CycleRank(order[i])) << i;
}

}  // namespace
}  // namespace ncclwatch::plugin
