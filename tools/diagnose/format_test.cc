// The text every finder writes its verdicts and evidence with (format.h).

#include "tools/diagnose/format.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ncclwatch::tools::diagnose_internal {
namespace {

TEST(Format, DurationsInTheirUnit) {
  EXPECT_EQ(Dur(150), "150 s");
  EXPECT_EQ(Dur(10), "10.0 s");
  EXPECT_EQ(Dur(0.0123), "12.3 ms");
  EXPECT_EQ(Dur(0.000045), "45 us");
  EXPECT_EQ(Dur(0), "0 us");
}

TEST(Format, TimesAndCounts) {
  EXPECT_EQ(At(3.2), "3.20 s");
  EXPECT_EQ(Thousands(0), "0");
  EXPECT_EQ(Thousands(999), "999");
  EXPECT_EQ(Thousands(1234567), "1,234,567");
  EXPECT_EQ(Plural(1, "process", "processes"), "1 process");
  EXPECT_EQ(Plural(1000, "process", "processes"), "1,000 processes");
}

TEST(Format, PrintfGrowsPastItsBuffer) {
  EXPECT_EQ(Printf("%d%%", 50), "50%");
  const std::string long_text(1000, 'x');
  EXPECT_EQ(Printf("<%s>", long_text.c_str()), "<" + long_text + ">");
}

TEST(Format, RankListsFoldRuns) {
  EXPECT_EQ(RankList({}), "no rank");
  EXPECT_EQ(RankList({"rank 3"}), "rank 3");
  EXPECT_EQ(RankList({"rank 2", "rank 0", "rank 1"}), "ranks 0,1,2");
  EXPECT_EQ(RankList({"rank 0", "rank 1", "rank 2", "rank 3", "rank 4", "rank 9"}), "ranks 0-4,9");
  EXPECT_EQ(RankList({"rank 1", "rank 1"}), "rank 1");
  // Names that are not "rank N" are listed as they are.
  EXPECT_EQ(RankList({"rank 0", "comm rank 3"}), "rank 0, comm rank 3");
}

TEST(Format, ProxyStateNames) {
  EXPECT_EQ(StateName(0), "SendPosted");
  EXPECT_EQ(StateName(12), "RecvGPUWait");
  EXPECT_EQ(StateName(20), "SendPeerWait");
  EXPECT_EQ(StateName(15), "state 15");
}

}  // namespace
}  // namespace ncclwatch::tools::diagnose_internal
