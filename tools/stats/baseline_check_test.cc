// ParseBaseline (baseline_check.h): every baseline `ncclwatch stats` makes
// of the recordings in testdata/ (and of a per-node summary) is accepted;
// each way a damaged or hand-made one was trusted before is refused, with
// the row, its key and the field named.

#include "tools/stats/baseline_check.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "proto/stats.pb.h"
#include "tools/cli.h"
#include "tools/stats/compare.h"
#include "tools/stats/stats.h"

namespace ncclwatch::tools {
namespace {

std::string StatsJsonOf(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ncclwatch", "stats", "--format=json"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::ostringstream out, err;
  EXPECT_EQ(RunCli(argv, out, err), 0) << err.str();
  return out.str();
}

// The folders under `dir` that hold trace files themselves (one job each).
void JobDirs(const std::string& dir, std::vector<std::string>* out) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  bool traces = false;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    struct stat st;
    if (name[0] == '.' || stat((dir + "/" + name).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) JobDirs(dir + "/" + name, out);
    traces |= name.size() > 10 && name.compare(name.size() - 10, 10, ".ncclwatch") == 0;
  }
  closedir(d);
  if (traces) out->push_back(dir);
}

TEST(BaselineCheck, EveryRecordingsStatsAreAccepted) {
  std::vector<std::string> dirs;
  JobDirs("testdata", &dirs);
  for (const std::string& dir : dirs) {
    stats::Stats s;
    std::string error;
    EXPECT_TRUE(ParseBaseline(StatsJsonOf({dir}), &s, &error)) << dir << ": " << error;
  }
  EXPECT_GT(dirs.size(), 60u);
}

TEST(BaselineCheck, StatsOfASummaryAreAccepted) {
  // Sketched rows: their samples are the sketch's representatives.
  const char* t = getenv("TEST_TMPDIR");
  const std::string summary = std::string(t ? t : "/tmp") + "/healthy.ncclsummary";
  std::ostringstream out, err;
  ASSERT_EQ(RunCli({"ncclwatch", "summarize", "-o", summary, "testdata/gpu-events4/healthy"}, out, err), 0)
      << err.str();
  stats::Stats s;
  std::string error;
  ASSERT_TRUE(ParseBaseline(StatsJsonOf({summary}), &s, &error)) << error;
  bool sketched = false;
  for (const stats::StatRow& r : s.rows()) sketched |= r.sketched();
  EXPECT_TRUE(sketched);
}

class Damaged : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(ParseBaseline(StatsJsonOf({"testdata/gpu/healthy"}), &good_, &error)) << error;
    for (int i = 0; i < good_.rows_size(); ++i)
      if (good_.rows(i).latency_us_size() >= 3 && good_.rows(i).has_busbw_gbps() && timed_ < 0) timed_ = i;
    ASSERT_GE(timed_, 0);
    ASSERT_GT(good_.ranks_size(), 0);
  }
  // The error ParseBaseline gives on the good baseline changed by `edit`,
  // through JSON as the file would hold it; "" if it was accepted.
  std::string ErrorOf(const std::function<void(stats::Stats*)>& edit) {
    stats::Stats s = good_;
    edit(&s);
    return ErrorOfJson(StatsToJson(s));
  }
  static std::string ErrorOfJson(const std::string& json) {
    stats::Stats parsed;
    std::string error;
    return ParseBaseline(json, &parsed, &error) ? "" : error;
  }
  stats::StatRow* Timed(stats::Stats* s) { return s->mutable_rows(timed_); }
  std::string TimedWhere() const {
    const stats::StatRow& r = good_.rows(timed_);
    return "row " + std::to_string(timed_) + " (comm '" + r.comm() + "', " + std::to_string(r.nranks()) +
           " ranks, '" + r.func() + "', '" + r.bucket() + "')";
  }
  stats::Stats good_;
  int timed_ = -1;
};

TEST_F(Damaged, NonFiniteOrNegativeOrZeroLatencies) {
  for (double bad : {double{NAN}, double{INFINITY}, -double{INFINITY}, -1.0}) {
    const std::string e = ErrorOf([&](stats::Stats* s) {
      for (double& v : *Timed(s)->mutable_latency_us()) v = bad;
    });
    EXPECT_EQ(e.rfind(TimedWhere() + ": latencyUs[0] is ", 0), 0u) << bad << ": " << e;
    EXPECT_NE(e.find("a finite number >= 0"), std::string::npos) << e;
  }
  // Zero samples under the row's own percentiles: not its samples.
  std::string e = ErrorOf([&](stats::Stats* s) {
    for (double& v : *Timed(s)->mutable_latency_us()) v = 0;
  });
  EXPECT_EQ(e.rfind(TimedWhere() + ": latencyP50Us is ", 0), 0u) << e;
  EXPECT_NE(e.find("where the nearest-rank p50 of its"), std::string::npos) << e;
  // ... and with percentiles of 0 too: no latency to hold a run to.
  e = ErrorOf([&](stats::Stats* s) {
    for (double& v : *Timed(s)->mutable_latency_us()) v = 0;
    Timed(s)->set_latency_p50_us(0);
    Timed(s)->set_latency_p99_us(0);
  });
  EXPECT_EQ(e.rfind(TimedWhere() + ": latencyP50Us is 0; it must be a finite number > 0", 0), 0u) << e;
  // One sample of 0 (shorter than the clock's tick) is a measurement.
  EXPECT_EQ(ErrorOf([&](stats::Stats* s) { Timed(s)->set_latency_us(0, 0); }), "");
  // Every latency of every row NaN: the first named, the others counted.
  e = ErrorOf([](stats::Stats* s) {
    for (stats::StatRow& r : *s->mutable_rows())
      for (double& v : *r.mutable_latency_us()) v = NAN;
  });
  EXPECT_NE(e.find("is NaN"), std::string::npos) << e;
  EXPECT_NE(e.find("more problems)"), std::string::npos) << e;
}

TEST_F(Damaged, NaNPercentileAndNegativeBandwidth) {
  EXPECT_NE(ErrorOf([&](stats::Stats* s) { Timed(s)->set_latency_p50_us(Timed(s)->latency_p50_us() * 2); })
                .find("latencyP50Us is "),
            std::string::npos);
  EXPECT_NE(ErrorOf([](stats::Stats* s) { s->mutable_ranks(0)->set_lateness_p50_us(1e6); }).find("latenessP50Us"),
            std::string::npos);
  EXPECT_EQ(ErrorOf([&](stats::Stats* s) { Timed(s)->set_latency_p50_us(NAN); }),
            TimedWhere() + ": latencyP50Us is NaN; it must be a finite number > 0");
  EXPECT_EQ(ErrorOf([&](stats::Stats* s) { Timed(s)->set_busbw_gbps(-1); }),
            TimedWhere() + ": busbwGbps is -1; it must be a finite number >= 0");
  EXPECT_NE(ErrorOf([&](stats::Stats* s) { Timed(s)->set_latency_p99_us(Timed(s)->latency_p50_us() / 2); })
                .find("latencyP99Us ("),
            std::string::npos);
  EXPECT_NE(ErrorOf([](stats::Stats* s) { s->set_alignment_error_us(-INFINITY); }).find("alignmentErrorUs"),
            std::string::npos);
}

TEST_F(Damaged, RanksOutOfRange) {
  EXPECT_NE(ErrorOf([&](stats::Stats* s) { Timed(s)->set_nranks(-1); }).find("nranks is -1"), std::string::npos);
  EXPECT_NE(ErrorOf([](stats::Stats* s) { s->mutable_ranks(0)->set_nranks(0); }).find("ranks[0]"), std::string::npos);
  EXPECT_NE(ErrorOf([](stats::Stats* s) { s->mutable_ranks(0)->set_rank(s->ranks(0).nranks()); }).find("rank is "),
            std::string::npos);
  EXPECT_NE(ErrorOf([&](stats::Stats* s) { Timed(s)->set_bucket_log2(64); }).find("bucketLog2 is 64"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&](stats::Stats* s) { Timed(s)->set_bucket("2 GiB"); }).find("bucket is '2 GiB'"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&](stats::Stats* s) { Timed(s)->set_timing("fast"); }).find("timing is 'fast'"),
            std::string::npos);
}

TEST_F(Damaged, RowsWithoutKeyOrTwice) {
  EXPECT_NE(ErrorOf([&](stats::Stats* s) { Timed(s)->clear_comm(); }).find("comm is missing"), std::string::npos);
  EXPECT_NE(ErrorOf([&](stats::Stats* s) { Timed(s)->clear_func(); }).find("func is missing"), std::string::npos);
  const std::string twice = ErrorOf([](stats::Stats* s) {
    const int n = s->rows_size();
    for (int i = 0; i < n; ++i) *s->add_rows() = s->rows(i);
  });
  EXPECT_NE(twice.find("row " + std::to_string(good_.rows_size()) + " ("), std::string::npos) << twice;
  EXPECT_NE(twice.find("a second row of this communicator"), std::string::npos) << twice;
  EXPECT_NE(ErrorOf([](stats::Stats* s) { *s->add_ranks() = s->ranks(0); }).find("a second row"), std::string::npos);
  // A name is kept as the file has it: every output escapes it (tools/text).
  EXPECT_NE(ErrorOf([&](stats::Stats* s) {
              Timed(s)->set_comm("tp\x1b[2J");
              Timed(s)->set_nranks(0);
            }).find("comm 'tp\x1b[2J'"),
            std::string::npos);
}

TEST_F(Damaged, SamplesThatDisagreeWithTheirCounts) {
  EXPECT_NE(ErrorOf([&](stats::Stats* s) { Timed(s)->mutable_latency_us()->RemoveLast(); }).find("latencyUs holds "),
            std::string::npos);
  EXPECT_NE(ErrorOf([&](stats::Stats* s) { Timed(s)->add_latency_us(1e9); }).find("more than samples"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&](stats::Stats* s) { Timed(s)->set_samples(0); }).find("samples 0"), std::string::npos);
  EXPECT_NE(ErrorOf([&](stats::Stats* s) {
              std::swap(*Timed(s)->mutable_latency_us()->Mutable(0), *Timed(s)->mutable_latency_us()->Mutable(2));
            }).find("less than the value before"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&](stats::Stats* s) { Timed(s)->clear_latency_p50_us(); }).find("latencyP50Us is missing"),
            std::string::npos);
  EXPECT_NE(ErrorOf([](stats::Stats* s) { s->mutable_ranks(0)->add_lateness_us(1e9); }).find("latenessUs holds"),
            std::string::npos);
  // More samples than stats keeps, with a count that says so: valid (check
  // reduces them to kMaxRowSamples quantiles).
  EXPECT_EQ(ErrorOf([&](stats::Stats* s) {
              stats::StatRow* r = Timed(s);
              r->clear_latency_us();
              for (size_t i = 0; i < 3 * kMaxRowSamples; ++i) r->add_latency_us(1.0 + static_cast<double>(i));
              r->set_samples(static_cast<uint32_t>(3 * kMaxRowSamples));
              r->set_latency_p50_us(static_cast<double>(3 * kMaxRowSamples / 2));  // nearest rank 1,536
              r->set_latency_p99_us(3042);                                          // ceil(0.99 x 3,072)
            }),
            "");
}

TEST_F(Damaged, BytesThatAreNotOneJsonDocument) {
  const std::string json = StatsToJson(good_);
  ASSERT_EQ(ErrorOfJson(json), "");
  std::string nul = json;
  nul.insert(json.size() / 2, 1, '\0');
  const std::string e = ErrorOfJson(nul);
  EXPECT_EQ(e.rfind("byte " + std::to_string(json.size() / 2) + " (line ", 0), 0u) << e;
  EXPECT_NE(e.find("a control byte (0x00)"), std::string::npos) << e;
  EXPECT_NE(ErrorOfJson(json + "garbage").find("not ncclwatch stats JSON"), std::string::npos);
  EXPECT_NE(ErrorOfJson(json + "{}").find("not ncclwatch stats JSON"), std::string::npos);
  EXPECT_NE(ErrorOfJson(json.substr(0, json.size() / 2)).find("not ncclwatch stats JSON"), std::string::npos);
  EXPECT_NE(ErrorOfJson("").find("not ncclwatch stats JSON"), std::string::npos);
  EXPECT_NE(ErrorOfJson("{}").find("no \"format\""), std::string::npos);
}

}  // namespace
}  // namespace ncclwatch::tools
