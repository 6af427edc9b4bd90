#include "plugin/core/ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace ncclwatch::plugin {
namespace {

TEST(RingTest, FillsThenRefusesThenDrains) {
  std::vector<Rec> storage(8);
  Ring ring;
  ring.Init(storage.data(), 8);
  for (uint64_t i = 0; i < 8; ++i) {
    Rec* r = ring.Reserve();
    ASSERT_NE(r, nullptr);
    r->id = i;
    ring.Commit();
  }
  EXPECT_EQ(ring.Reserve(), nullptr);
  std::vector<uint64_t> got;
  EXPECT_EQ(ring.Drain(3, [&](const Rec& r) { got.push_back(r.id); }), 3u);
  EXPECT_NE(ring.Reserve(), nullptr);
  ring.Drain(100, [&](const Rec& r) { got.push_back(r.id); });
  EXPECT_EQ(got, (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(ring.Empty());
}

TEST(RingTest, AFillLimitKeepsTheRestForOthers) {
  std::vector<Rec> storage(8);
  Ring ring;
  ring.Init(storage.data(), 8);
  for (int i = 0; i < 6; ++i) {
    ASSERT_NE(ring.Reserve(6), nullptr);
    ring.Commit();
  }
  EXPECT_EQ(ring.Reserve(6), nullptr);  // limited writers stop at 6
  for (int i = 0; i < 2; ++i) {        // the whole ring is still there for others
    ASSERT_NE(ring.Reserve(), nullptr);
    ring.Commit();
  }
  EXPECT_EQ(ring.Reserve(), nullptr);
  EXPECT_EQ(ring.Drain(3, [](const Rec&) {}), 3u);
  ASSERT_NE(ring.Reserve(6), nullptr);  // 5 waiting
  ring.Commit();
  EXPECT_EQ(ring.Reserve(6), nullptr);  // 6 waiting
  EXPECT_EQ(ring.Drain(1, [](const Rec&) {}), 1u);
  EXPECT_NE(ring.Reserve(6), nullptr);  // 5 waiting again
}

TEST(RingTest, ProducerConsumerKeepOrderAndCountDrops) {
  std::vector<Rec> storage(64);
  Ring ring;
  ring.Init(storage.data(), 64);
  constexpr uint64_t kN = 200000;
  std::atomic<uint64_t> dropped{0};
  std::thread producer([&] {
    for (uint64_t i = 0; i < kN; ++i) {
      Rec* r = ring.Reserve();
      if (r == nullptr) {
        ++dropped;
        continue;
      }
      r->id = i;
      ring.Commit();
    }
  });
  std::vector<uint64_t> got;
  bool done = false;
  while (!done) {
    done = !producer.joinable() || got.size() + dropped >= kN;
    ring.Drain(1000, [&](const Rec& r) { got.push_back(r.id); });
    if (got.size() + dropped >= kN) break;
    std::this_thread::yield();
  }
  producer.join();
  ring.Drain(1000, [&](const Rec& r) { got.push_back(r.id); });
  EXPECT_EQ(got.size() + dropped, kN);
  for (size_t i = 1; i < got.size(); ++i) ASSERT_LT(got[i - 1], got[i]);
}

}  // namespace
}  // namespace ncclwatch::plugin
