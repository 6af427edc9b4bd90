#include "tools/model/collectives.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ncclwatch::tools {
namespace {

TEST(CollectivesTest, ParsesWhatItFormats) {
  const std::vector<CollectiveRange> ranges = {{0x5c0e71c9a3b1d2f4ull, 1, 64}, {0x12ull, 65, 65}};
  const std::string text = FormatCollectiveRanges(ranges);
  EXPECT_EQ(text, "0x5c0e71c9a3b1d2f4:1-64,0x0000000000000012:65-65");
  std::vector<CollectiveRange> back;
  std::string error;
  ASSERT_TRUE(ParseCollectiveRanges(text, &back, &error)) << error;
  EXPECT_EQ(back, ranges);
  // Without 0x, fewer digits, upper case: the same hash.
  ASSERT_TRUE(ParseCollectiveRanges("5C0E71C9A3B1D2F4:1-64", &back, &error)) << error;
  EXPECT_EQ(back[0].comm_hash, 0x5c0e71c9a3b1d2f4ull);
  EXPECT_EQ(FormatCollectiveRanges({}), "");
}

TEST(CollectivesTest, BadInputSaysWhatIsWrong) {
  std::vector<CollectiveRange> r;
  std::string error;
  auto bad = [&](const std::string& text, const std::string& says) {
    error.clear();
    EXPECT_FALSE(ParseCollectiveRanges(text, &r, &error)) << text;
    EXPECT_NE(error.find(says), std::string::npos) << text << ": " << error;
  };
  bad("", "expected COMM:FROM-TO");
  bad("0x12", "expected COMM:FROM-TO");
  bad("0x12:5", "expected COMM:FROM-TO");
  bad("world:1-64", "hash in hex");
  bad("0x0:1-64", "not 0");
  bad("0x12345678901234567:1-2", "1 to 16 digits");
  bad("0x12:0-3", "from 1");
  bad("0x12:9-3", "FROM not after TO");
  bad("0x12:-1-3", "FROM-TO");
  bad("0x12:1-99999999999999999999999", "FROM-TO");
  bad("0x12:1-64,", "expected COMM:FROM-TO");
  bad("0x12:1-65", "at most 64 collectives per range (split it: 0x0000000000000012:1-64,0x0000000000000012:65-65)");
  std::string many;
  for (int i = 1; i <= 17; ++i)
    many += (i > 1 ? "," : "") + std::string("0x12:") + std::to_string(i) + "-" + std::to_string(i);
  bad(many, "at most 16 ranges per communicator");
  std::string comms;
  for (int i = 1; i <= 17; ++i) comms += (i > 1 ? "," : "") + std::string("0x") + std::to_string(i) + ":1-1";
  bad(comms, "at most 16 communicators");
}

TEST(CollectivesTest, AWideRangeIsAskedInPieces) {
  EXPECT_EQ(RangesToAsk(7, 1, 64), (std::vector<CollectiveRange>{{7, 1, 64}}));
  EXPECT_EQ(RangesToAsk(7, 65, 192), (std::vector<CollectiveRange>{{7, 65, 128}, {7, 129, 192}}));
  EXPECT_EQ(RangesToAsk(7, 0, 3), (std::vector<CollectiveRange>{{7, 1, 3}}));
  // Past 16 pieces, from the start only.
  const std::vector<CollectiveRange> wide = RangesToAsk(7, 1, 64 * 100);
  ASSERT_EQ(wide.size(), kMaxAskedRangesPerComm);
  EXPECT_EQ(wide.back().to, 64u * 16);
  // No wrap at the top of the positions.
  EXPECT_EQ(RangesToAsk(7, UINT64_MAX - 3, UINT64_MAX).size(), 1u);
}

}  // namespace
}  // namespace ncclwatch::tools
