#include "plugin/core/pending_bits.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace ncclwatch::plugin {
namespace {

constexpr size_t kN = 4352;  // a thread's slots and spare slots (core.h)

TEST(PendingBitsTest, CollectsEachRaisedFlagOnceAndClearsIt) {
  PendingBits<kN> p;
  std::vector<size_t> got;
  EXPECT_EQ(p.Collect([&](size_t i) { got.push_back(i); }), 0u);
  for (size_t i : {size_t{0}, size_t{63}, size_t{64}, size_t{1000}, kN - 1}) p.Raise(i);
  p.Raise(1000);  // twice before a collection: one flag
  EXPECT_EQ(p.Collect([&](size_t i) { got.push_back(i); }), 5u);
  EXPECT_EQ(got, (std::vector<size_t>{0, 63, 64, 1000, kN - 1}));
  got.clear();
  EXPECT_EQ(p.Collect([&](size_t i) { got.push_back(i); }), 0u);
  p.Raise(7);
  EXPECT_EQ(p.Collect([&](size_t i) { got.push_back(i); }), 1u);
  EXPECT_EQ(got, std::vector<size_t>{7});
}

// Raisers and a collector at once: every flag comes out exactly once, and
// what a raiser wrote before raising is what the collector reads (TSan
// checks the ordering).
TEST(PendingBitsTest, NothingIsLostOrSeenTwiceUnderConcurrentRaises) {
  PendingBits<kN> p;
  std::vector<uint64_t> payload(kN, 0);  // written by raisers, read by the collector
  std::vector<int> seen(kN, 0);
  constexpr size_t kRaisers = 4;
  std::vector<std::thread> raisers;
  for (size_t t = 0; t < kRaisers; ++t)
    raisers.emplace_back([&, t] {
      for (size_t i = t; i < kN; i += kRaisers) {
        payload[i] = i * 3 + 1;
        p.Raise(i);
      }
    });
  size_t total = 0;
  bool payload_ok = true;
  // Every flag is raised, and each collected once: the loop ends (a lost
  // flag would hang it, which the test's timeout ends).
  while (total < kN) {
    total += p.Collect([&](size_t i) {
      ++seen[i];
      payload_ok &= payload[i] == i * 3 + 1;
    });
    std::this_thread::yield();
  }
  for (auto& th : raisers) th.join();
  total += p.Collect([&](size_t i) { ++seen[i]; });
  EXPECT_EQ(total, kN);
  EXPECT_TRUE(payload_ok);
  for (size_t i = 0; i < kN; ++i) ASSERT_EQ(seen[i], 1) << "flag " << i;
}

}  // namespace
}  // namespace ncclwatch::plugin
