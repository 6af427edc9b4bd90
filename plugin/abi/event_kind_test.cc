#include "plugin/abi/event_kind.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "plugin/abi/profiler_common.h"

namespace ncclwatch::plugin {
namespace {

TEST(EventKindTest, KindOfMaskIsTheInverseOfMaskOf) {
  for (int k = kEvGroup; k < kEvCount; ++k) {
    const EventKind kind = static_cast<EventKind>(k);
    EXPECT_EQ(KindOfMask(MaskOf(kind)), kind) << EventKindName(kind);
  }
  EXPECT_EQ(KindOfMask(0), kEvNone);
  EXPECT_EQ(KindOfMask(nccl::kColl | nccl::kP2p), kEvNone);  // not one type
  EXPECT_EQ(KindOfMask(uint64_t{1} << 16), kEvNone);         // unknown bit
  EXPECT_EQ(KindOfMask(nccl::kKernelPhase), kEvKernelPhase);  // v7
  EXPECT_EQ(KindOfMask(uint64_t{1} << 63), kEvNone);
  EXPECT_EQ(KindOfMask(nccl::kKernelCh), kEvKernelCh);
}

// Every kind has a name of its own (NCCLWATCH_EVENTS words); no kind is
// "none" but kEvNone.
TEST(EventKindTest, EveryKindHasItsOwnName) {
  std::set<std::string> names;
  for (int k = kEvGroup; k < kEvCount; ++k) {
    const std::string name = EventKindName(static_cast<EventKind>(k));
    EXPECT_NE(name, "none") << k;
    EXPECT_TRUE(names.insert(name).second) << name;
  }
  EXPECT_STREQ(EventKindName(kEvNone), "none");
  EXPECT_EQ(MaskOf(kEvNone), 0u);
}

}  // namespace
}  // namespace ncclwatch::plugin
