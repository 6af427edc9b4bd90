#include "plugin/core/shared_lane.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ncclwatch::plugin {
namespace {

Rec WithId(uint64_t id) {
  Rec r{};
  r.id = id;
  return r;
}

// Up to its capacity a lane keeps what is pushed, in order; past it, it
// drops and counts; a drain empties it for the next round.
TEST(SharedLaneTest, KeepsInOrderUpToItsCapacityThenCountsDrops) {
  SharedLane lane(3);
  for (uint64_t id = 1; id <= 5; ++id) EXPECT_EQ(lane.Push(WithId(id)), id <= 3) << id;
  EXPECT_EQ(lane.dropped(), 2u);
  std::vector<uint64_t> got;
  lane.Drain([&](const Rec& r) { got.push_back(r.id); });
  EXPECT_EQ(got, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_TRUE(lane.Push(WithId(6)));
  got.clear();
  lane.Drain([&](const Rec& r) { got.push_back(r.id); });
  EXPECT_EQ(got, std::vector<uint64_t>{6});
  EXPECT_EQ(lane.dropped(), 2u);
}

// Threads push while the writer drains: every record comes out once or is
// counted dropped (TSan checks the handover).
TEST(SharedLaneTest, PushersAndADrainerLoseNothingUncounted) {
  SharedLane lane(64);
  constexpr int kThreads = 4, kEach = 2000;
  std::vector<std::thread> pushers;
  for (int t = 0; t < kThreads; ++t)
    pushers.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) lane.Push(WithId(uint64_t(t) * kEach + i + 1));
    });
  uint64_t drained = 0;
  std::vector<int> seen(kThreads * kEach + 1, 0);
  auto drain = [&] {
    lane.Drain([&](const Rec& r) {
      ++drained;
      ++seen[r.id];
    });
  };
  for (int round = 0; round < 100; ++round) drain();
  for (auto& p : pushers) p.join();
  drain();
  EXPECT_EQ(drained + lane.dropped(), uint64_t{kThreads * kEach});
  for (size_t id = 1; id < seen.size(); ++id) ASSERT_LE(seen[id], 1) << id;
}

}  // namespace
}  // namespace ncclwatch::plugin
