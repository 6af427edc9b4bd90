// MaskWatch: which reads are changes, and which operations a change that
// took the completion source away leaves unsure.

#include "plugin/writer/mask_watch.h"

#include <gtest/gtest.h>

namespace ncclwatch::plugin {
namespace {

constexpr uint64_t kKernelCh = 1 << 6;  // NCCL's bits
constexpr uint64_t kColl = 1 << 1;

TEST(MaskWatchTest, ASameReadIsNoChange) {
  MaskWatch w(kColl | kKernelCh, kKernelCh, 100);
  MaskWatch::Change c;
  EXPECT_FALSE(w.Read(kColl | kKernelCh, 200, &c));
  EXPECT_FALSE(w.Unsure(150));
  EXPECT_FALSE(w.Unsure(250));
}

TEST(MaskWatchTest, LosingTheSourceMakesOpsFromTheLastGoodReadUnsure) {
  MaskWatch w(kColl | kKernelCh, kKernelCh, 100);
  MaskWatch::Change c;
  EXPECT_FALSE(w.Read(kColl | kKernelCh, 200, &c));
  ASSERT_TRUE(w.Read(kColl, 300, &c));
  EXPECT_EQ(c.old_mask, kColl | kKernelCh);
  EXPECT_EQ(c.new_mask, kColl);
  EXPECT_EQ(c.since_ns, 200u);
  EXPECT_TRUE(c.source_lost);
  EXPECT_FALSE(c.source_back);
  EXPECT_FALSE(w.Unsure(199));  // its API call read the old mask
  EXPECT_TRUE(w.Unsure(200));
  EXPECT_TRUE(w.Unsure(5'000'000'000));
}

TEST(MaskWatchTest, TheSourceBackEndsTheWindowAPadLater) {
  MaskWatch w(kColl | kKernelCh, kKernelCh, 100);
  MaskWatch::Change c;
  ASSERT_TRUE(w.Read(kColl, 200, &c));
  ASSERT_TRUE(w.Read(kColl | kKernelCh, 1000, &c));
  EXPECT_TRUE(c.source_back);
  EXPECT_FALSE(c.source_lost);
  EXPECT_TRUE(w.Unsure(1000 + MaskWatch::kReturnPadNs - 1));
  EXPECT_FALSE(w.Unsure(1000 + MaskWatch::kReturnPadNs));
  EXPECT_FALSE(w.Unsure(50));
}

TEST(MaskWatchTest, AChangeOfOtherBitsLeavesOpsSure) {
  MaskWatch w(kColl | kKernelCh, kKernelCh, 100);
  MaskWatch::Change c;
  ASSERT_TRUE(w.Read(kColl | kKernelCh | (1 << 3), 200, &c));
  EXPECT_FALSE(c.source_lost);
  EXPECT_FALSE(c.source_back);
  EXPECT_FALSE(w.Unsure(300));
}

TEST(MaskWatchTest, WithoutASourceNothingIsUnsure) {
  MaskWatch w(kColl, 0, 100);
  MaskWatch::Change c;
  ASSERT_TRUE(w.Read(0, 200, &c));
  EXPECT_FALSE(c.source_lost);
  EXPECT_FALSE(w.Unsure(300));
}

TEST(MaskWatchTest, ManyFlapsMergeOldWindowsNeverDropThem) {
  MaskWatch w(kKernelCh, kKernelCh, 0);
  MaskWatch::Change c;
  uint64_t t = 10;
  for (size_t i = 0; i < MaskWatch::kMaxWindows + 4; ++i) {
    ASSERT_TRUE(w.Read(0, t, &c));
    ASSERT_TRUE(w.Read(kKernelCh, t + 1, &c));
    t += 10 * MaskWatch::kReturnPadNs;
  }
  // The first window's start is still unsure (merged, not forgotten).
  EXPECT_TRUE(w.Unsure(0));
  EXPECT_FALSE(w.Unsure(t));
}

}  // namespace
}  // namespace ncclwatch::plugin
