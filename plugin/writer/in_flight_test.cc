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

TEST(InFlightTable, UnsureOpsNeverTriggerAndGoAfterTheGrace) {
  InFlightTable t;
  const uint64_t s = 1'000'000'000;
  t.Enqueued(1, OpOn(0, 100, 110), true);    // before the change: a real hang
  t.Enqueued(2, OpOn(0, 500, 510), true);    // after the last read with the source
  t.MarkUnsure(400, 600);
  EXPECT_EQ(t.StuckTrigger(10 * s, s), 1u);
  auto oldest = t.OldestFirst(10);
  ASSERT_EQ(oldest.size(), 1u);
  EXPECT_EQ(oldest[0].first, 1u);
  // Op 1 reported: nothing else triggers, the unsure one never does.
  oldest[0].second->reported = true;
  EXPECT_EQ(t.StuckTrigger(10 * s, s), 0u);
  // A completion that comes for an unsure op is real, and counted.
  InFlightTable::Op late = OpOn(0, 700, 710);
  late.unsure = true;
  late.unsure_at = 800;
  t.Enqueued(3, late, true);
  t.Completed(3, 0, 900);
  EXPECT_FALSE(t.Has(3));
  EXPECT_EQ(t.completed(0), 1u);
  // Released only after the grace, and only where the handle was freed.
  std::vector<uint64_t> released;
  EXPECT_EQ(t.ReleaseUnsure(600 + kLostGraceNs - 1, [&](uint64_t id) { released.push_back(id); return true; }), 0u);
  EXPECT_EQ(t.ReleaseUnsure(600 + kLostGraceNs, [](uint64_t) { return false; }), 0u);
  EXPECT_TRUE(t.Has(2));
  EXPECT_EQ(t.ReleaseUnsure(600 + kLostGraceNs, [&](uint64_t id) { released.push_back(id); return true; }), 1u);
  EXPECT_EQ(released, std::vector<uint64_t>{2});
  EXPECT_TRUE(t.Has(1));
}

TEST(InFlightTable, ForgetFromEndsTheWatchOfLaterOpsOnly) {
  InFlightTable t;
  t.Enqueued(1, OpOn(0, 100, 110), true);
  t.Enqueued(2, OpOn(1, 500, 510), true);
  t.Enqueued(3, OpOn(0, 400, 410), true);
  EXPECT_EQ(t.ForgetFrom(400), 2u);
  EXPECT_TRUE(t.Has(1));
  EXPECT_FALSE(t.Has(2));
  EXPECT_FALSE(t.Has(3));
}

// The threshold's edge: an operation exactly stuck_sec old triggers, one
// older by less does not, and a start after now (a clock read out of order)
// never does.
TEST(InFlightTable, TheStuckThresholdIsInclusive) {
  EXPECT_EQ(StuckThresholdNs(0.3), 300'000'000u);
  EXPECT_EQ(StuckThresholdNs(2), 2'000'000'000u);
  EXPECT_TRUE(PastStuckThreshold(1300, 300, 1000));
  EXPECT_FALSE(PastStuckThreshold(1299, 300, 1000));
  EXPECT_FALSE(PastStuckThreshold(300, 301, 0));
  InFlightTable t;
  t.Enqueued(1, OpOn(0, 300, 310), true);
  EXPECT_EQ(t.StuckTrigger(1299, 1000), 0u);
  EXPECT_EQ(t.StuckTrigger(1300, 1000), 1u);
}

}  // namespace
}  // namespace ncclwatch::plugin
