#include "plugin/writer/in_flight.h"

#include <gtest/gtest.h>

#include <vector>

#include "plugin/core/config.h"

namespace ncclwatch::plugin {
namespace {

InFlightTable::Op OpOn(uint32_t comm, uint64_t start_ns, uint64_t stop_ns) {
  return {comm, kEvColl, 1, "AllReduce", 8, 0, start_ns, 2, false, stop_ns};
}

TEST(InFlightTable, CompletionEndsTheWatchInEitherOrder) {
  InFlightTable t;
  t.Enqueued(1, OpOn(0, 100, 110), true);
  EXPECT_TRUE(t.Has(1));
  t.Completed(1, 0, 500);
  EXPECT_TRUE(t.empty());
  // The OpDone drained before its Op: the Op is never watched.
  t.Completed(2, 0, 600);
  t.Enqueued(2, OpOn(0, 200, 210), true);
  EXPECT_TRUE(t.empty());
  // Untracked: counted, never watched.
  t.Enqueued(3, OpOn(0, 300, 310), false);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.enqueued(0), 3u);
  EXPECT_EQ(t.completed(0), 2u);
}

TEST(InFlightTable, ALaterCompletionProvesEarlierOpsOnlyOnItsCommAfterTheGrace) {
  InFlightTable t;
  t.Enqueued(1, OpOn(0, 100, 110), true);    // its completion never comes
  t.Enqueued(2, OpOn(1, 100, 110), true);    // another communicator
  t.EnqueuedCompleted(0, 200, 1'000);         // a later op on comm 0 completed at 1 us
  t.Enqueued(3, OpOn(0, 300, 310), true);    // enqueued after it: not proven
  std::vector<uint64_t> released;
  auto release = [&](uint64_t id) { released.push_back(id); };
  EXPECT_EQ(t.ReclaimLost(1'000 + kLostGraceNs - 1, release), 0u);
  // ReclaimLost looks at most every 100 ms.
  EXPECT_EQ(t.ReclaimLost(1'000 + kLostGraceNs + 50'000'000, release), 0u);
  EXPECT_EQ(t.ReclaimLost(1'000 + kLostGraceNs + 200'000'000, release), 1u);
  EXPECT_EQ(released, std::vector<uint64_t>{1});
  EXPECT_FALSE(t.Has(1));
  EXPECT_TRUE(t.Has(2));
  EXPECT_TRUE(t.Has(3));
  EXPECT_EQ(t.lost_completions(), 1u);
}

TEST(InFlightTable, TheOldestUnreportedOpPastTheThresholdTriggers) {
  InFlightTable t;
  t.Enqueued(1, OpOn(0, 1'000, 1'010), true);
  t.Enqueued(2, OpOn(0, 500, 510), true);
  EXPECT_EQ(t.StuckTrigger(1'400, 1'000), 0u);
  EXPECT_EQ(t.StuckTrigger(1'500, 1'000), 2u);
  EXPECT_EQ(t.StuckTrigger(2'000, 1'000), 2u);
  auto oldest = t.OldestFirst(8);
  ASSERT_EQ(oldest.size(), 2u);
  EXPECT_EQ(oldest[0].first, 2u);
  for (auto& [id, op] : oldest) op->reported = true;
  EXPECT_EQ(t.StuckTrigger(5'000, 1'000), 0u);
  EXPECT_EQ(t.OldestFirst(1).size(), 1u);
}

TEST(InFlightTable, AFinalizedCommIsNoLongerWatched) {
  InFlightTable t;
  t.Enqueued(1, OpOn(0, 100, 110), true);
  t.Enqueued(2, OpOn(1, 100, 110), true);
  t.CommFinalized(0);
  EXPECT_FALSE(t.Has(1));
  EXPECT_TRUE(t.Has(2));
}

}  // namespace
}  // namespace ncclwatch::plugin
