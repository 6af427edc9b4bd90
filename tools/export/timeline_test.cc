#include "tools/export/timeline.h"

#include <gtest/gtest.h>

#include "tools/export/export_test_job.h"

namespace ncclwatch::tools {
namespace {

TEST(TimelineTest, ParseRankList) {
  std::set<int32_t> r;
  std::string error;
  ASSERT_TRUE(ParseRankList("0,2-5,9", &r, &error)) << error;
  EXPECT_EQ(r, (std::set<int32_t>{0, 2, 3, 4, 5, 9}));
  for (const char* bad : {"", "1,", "-3", "5-2", "a", "1-2-3", "1 ,2", "9999999999"}) {
    std::set<int32_t> x;
    EXPECT_FALSE(ParseRankList(bad, &x, &error)) << bad;
    EXPECT_NE(error.find("is not a rank"), std::string::npos) << bad << ": " << error;
  }
  std::set<int32_t> x;
  EXPECT_FALSE(ParseRankList("0-999999999", &x, &error));
  EXPECT_NE(error.find("more ranks than a job has"), std::string::npos) << error;
}

TEST(TimelineTest, RankOfFollowsTheProcessName) {
  Job j("world");
  EXPECT_EQ(RankOf(j.m, 1), 1);
  j.m.procs[1].launcher_rank = -1;  // then its rank in its largest communicator
  EXPECT_EQ(RankOf(j.m, 1), 1);
  j.m.comms[0].size_guessed = true;  // no rank to name it by: pid@host
  EXPECT_EQ(RankOf(j.m, 1), -1);
}

TEST(TimelineTest, WindowAroundOperations) {
  Job j("world");
  j.Add(0, "AllReduce", 0, 2'000'000'000, 2'500'000'000);  // 2 s to 2.5 s
  j.Add(1, "AllReduce", 0, 2'100'000'000, -1);             // never completes: to its process's end
  j.m.procs[1].last_ns = kT0 + 4'000'000'000;
  ExportOptions o;
  ASSERT_TRUE(WindowAround(j.m, {0, 1}, 1'000'000'000, &o));
  EXPECT_EQ(o.from_ns, 1'000'000'000);
  EXPECT_EQ(o.to_ns, 5'000'000'000);
  ASSERT_TRUE(WindowAround(j.m, {0}, 3'000'000'000, &o));
  EXPECT_EQ(o.from_ns, 0);  // not before the job
  EXPECT_FALSE(WindowAround(j.m, {}, 0, &o));
}

TEST(TimelineTest, SlicesOfAProcessAndFlowSteps) {
  Job j("world", 3);
  j.Add(0, "AllReduce", 0, 3'000, 9'000);
  j.Add(1, "AllReduce", 0, 1'000, 9'000);
  j.Add(2, "AllReduce", 0, 1'000, 9'000);  // same start as rank 1: rank 1 first
  j.Link({0, 1, 2});
  Timeline t(j.m, ExportOptions());
  EXPECT_EQ(t.ops_total(), 3u);
  EXPECT_EQ(t.Layout(1).slices.at(0).flow, FlowStep::kFirst);
  EXPECT_EQ(t.Layout(2).slices.at(0).flow, FlowStep::kMiddle);
  EXPECT_EQ(t.Layout(0).slices.at(0).flow, FlowStep::kLast);
  ExportOptions one;
  one.ranks = {2};
  Timeline alone(j.m, one);
  EXPECT_EQ(alone.procs(), std::vector<uint32_t>{2});
  EXPECT_EQ(alone.Layout(2).slices.at(0).flow, FlowStep::kNone);  // nothing to link to
}

// --ranks of ranks the job lacks is an error that names those it has.
TEST(TimelineTest, RanksExistNamesTheJobsRanks) {
  Job j("world", 4);
  std::string error;
  EXPECT_TRUE(RanksExist(j.m, {0, 3}, &error)) << error;
  EXPECT_FALSE(RanksExist(j.m, {9}, &error));
  EXPECT_EQ(error, "no rank 9: the job's ranks are 0-3");
  EXPECT_FALSE(RanksExist(j.m, {2, 7, 8}, &error));
  EXPECT_EQ(error, "no ranks 7-8: the job's ranks are 0-3");
}

}  // namespace
}  // namespace ncclwatch::tools
