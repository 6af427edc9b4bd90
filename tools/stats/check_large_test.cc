// `ncclwatch check` on a baseline near the size limit (64 MiB): one row of
// 8 million latency samples, valid, as another tool or an older version
// might write. The command must end with a verdict: it compares no more
// than kMaxRowSamples quantiles of a row (check.cc Bounded), where the
// bootstrap over every sample once ran for hours. No time is asserted; the
// target's timeout is the bound.

#include <gtest/gtest.h>
#include <google/protobuf/util/json_util.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "proto/stats.pb.h"
#include "tools/cli.h"
#include "tools/stats/compare.h"
#include "tools/stats/stats.h"

namespace ncclwatch::tools {
namespace {

constexpr uint32_t kSamples = 8'000'000;
// A value no real row holds, replaced in the JSON text by the big list:
// protobuf's printer holds about ten times its output.
constexpr char kMark[] = "424242.125";

TEST(CheckLarge, EightMillionSamplesInOneRowEndWithAVerdict) {
  std::ostringstream json, err;
  ASSERT_EQ(RunCli({"ncclwatch", "stats", "--format=json", "testdata/gpu/healthy"}, json, err), 0) << err.str();
  stats::Stats s;
  std::string error;
  ASSERT_TRUE(StatsFromJson(json.str(), &s, &error)) << error;
  stats::StatRow* row = nullptr;
  for (stats::StatRow& r : *s.mutable_rows())
    if (row == nullptr && r.latency_us_size() >= 10) row = &r;
  ASSERT_NE(row, nullptr);
  const std::vector<double> own(row->latency_us().begin(), row->latency_us().end());
  row->clear_latency_us();
  row->add_latency_us(424242.125);
  row->set_samples(kSamples);
  std::string text = StatsToJson(s);
  const size_t at = text.find(kMark);
  ASSERT_NE(at, std::string::npos);
  // The row's own samples, each repeated: sorted, as stats writes them.
  std::string list;
  list.reserve(size_t{kSamples} * 8);
  char buf[32];
  for (uint32_t i = 0; i < kSamples; ++i) {
    const int n = snprintf(buf, sizeof(buf), "%s%.3f", i ? "," : "", own[size_t{i} * own.size() / kSamples]);
    list.append(buf, static_cast<size_t>(n));
  }
  text.replace(at, strlen(kMark), list);
  ASSERT_LT(text.size(), size_t{64} << 20);
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/large.json";
  std::ofstream(path) << text;

  std::ostringstream out, err2;
  const int status =
      RunCli({"ncclwatch", "check", "--format=json", "--baseline", path, "testdata/gpu/healthy"}, out, err2);
  ASSERT_TRUE(status == 0 || status == 1) << status << ": " << err2.str();
  stats::CheckReport rep;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out.str(), &rep).ok()) << out.str().substr(0, 1000);
  bool seen = false;
  for (const stats::CheckItem& it : rep.items())
    if (it.comm() == row->comm() && it.func() == row->func() && it.bucket_log2() == row->bucket_log2() &&
        it.metric() == "latency_p50") {
      seen = true;
      EXPECT_EQ(it.baseline_samples(), kSamples);
      // The same samples, repeated: their median is the row's own.
      EXPECT_NE(it.status(), "regressed") << it.note();
    }
  EXPECT_TRUE(seen) << out.str().substr(0, 2000);
}

}  // namespace
}  // namespace ncclwatch::tools
