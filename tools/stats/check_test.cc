#include "tools/cli.h"
#include "tools/stats/check.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "tools/stats/stats.h"
#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools {
namespace {

// `n` latency samples spread evenly over p50 x [1 - spread, 1 + spread]:
// their median is p50.
void SetSamples(stats::StatRow* r, double p50, double spread, int n) {
  r->clear_latency_us();
  for (int i = 0; i < n; ++i) r->add_latency_us(p50 * (1 - spread + 2 * spread * i / (n - 1)));
  r->set_samples(static_cast<uint32_t>(n));
}

stats::StatRow Row(const std::string& comm, const std::string& func, int bucket, double p50, double p99, double busbw,
                   const std::string& timing = "gpu") {
  stats::StatRow r;
  r.set_comm(comm);
  r.set_func(func);
  r.set_bucket_log2(bucket);
  r.set_bucket(BucketLabel(bucket));
  r.set_calls(10);
  r.set_timing(timing);
  r.set_latency_p50_us(p50);
  r.set_latency_p99_us(p99);
  r.set_busbw_gbps(busbw);
  r.set_algbw_gbps(busbw / 1.5);
  SetSamples(&r, p50, 0.02, 201);
  return r;
}

stats::Stats StatsOf(std::vector<stats::StatRow> rows) {
  stats::Stats s;
  s.set_format("ncclwatch-stats/2");
  for (auto& r : rows) *s.add_rows() = r;
  return s;
}

const stats::CheckItem* Item(const CheckResult& r, const std::string& func, const std::string& metric) {
  for (const auto& i : r.items)
    if (i.func() == func && i.metric() == metric) return &i;
  return nullptr;
}

TEST(CheckTest, ParseTolerance) {
  CheckOptions o = DefaultCheckOptions();
  EXPECT_EQ(o.tolerance_pct.at("latency_p50"), 10);
  EXPECT_EQ(o.tolerance_pct.at("latency_p99"), 20);
  EXPECT_EQ(o.tolerance_pct.at("busbw"), 10);
  EXPECT_EQ(o.tolerance_pct.at("arrival"), 10000);  // us
  EXPECT_EQ(o.tolerance_pct.count("algbw"), 0u);
  std::string error;
  ASSERT_TRUE(ParseTolerance("latency_p50=15", &o, &error)) << error;
  EXPECT_EQ(o.tolerance_pct.at("latency_p50"), 15);
  ASSERT_TRUE(ParseTolerance("busbw=2.5%,skew_p99=50", &o, &error)) << error;
  EXPECT_EQ(o.tolerance_pct.at("busbw"), 2.5);
  EXPECT_EQ(o.tolerance_pct.at("skew_p99"), 50);
  ASSERT_TRUE(ParseTolerance("latency_p99=off", &o, &error));
  EXPECT_EQ(o.tolerance_pct.count("latency_p99"), 0u);
  EXPECT_FALSE(ParseTolerance("latency=10", &o, &error));
  EXPECT_NE(error.find("latency_p50"), std::string::npos);  // lists the metrics
  EXPECT_FALSE(ParseTolerance("busbw=", &o, &error));
  EXPECT_FALSE(ParseTolerance("busbw=ten", &o, &error));
  EXPECT_FALSE(ParseTolerance("busbw=-5", &o, &error));
  EXPECT_FALSE(ParseTolerance("", &o, &error));
  // A bandwidth limit of 100% or more could never fail.
  EXPECT_FALSE(ParseTolerance("busbw=100", &o, &error));
  EXPECT_NE(error.find("never fails"), std::string::npos) << error;
  EXPECT_FALSE(ParseTolerance("algbw=329.2", &o, &error));
  ASSERT_TRUE(ParseTolerance("arrival=5ms", &o, &error)) << error;
  EXPECT_EQ(o.tolerance_pct.at("arrival"), 5000);
  ASSERT_TRUE(ParseTolerance("arrival=250us", &o, &error)) << error;
  EXPECT_EQ(o.tolerance_pct.at("arrival"), 250);
  EXPECT_FALSE(ParseTolerance("arrival=5%", &o, &error));
}

TEST(CheckTest, ComparesEachMetricWithItsTolerance) {
  stats::Stats base = StatsOf({Row("world", "AllReduce", 20, 100, 105, 50), Row("world", "AllGather", 20, 100, 105, 50),
                               Row("world", "Broadcast", 20, 100, 105, 50)});
  stats::Stats run = StatsOf({Row("world", "AllReduce", 20, 115, 120, 43),     // p50 +15% > 10%: regressed
                              Row("world", "AllGather", 20, 75, 79, 66),       // -25%: improved
                              Row("world", "Broadcast", 20, 109, 114, 46)});   // +9%: within
  // Three baseline runs: a p99 is judged against no fewer.
  CheckResult r = CompareStats({base, base, base}, run, DefaultCheckOptions());
  ASSERT_NE(Item(r, "AllReduce", "latency_p50"), nullptr);
  EXPECT_EQ(Item(r, "AllReduce", "latency_p50")->status(), "regressed");
  EXPECT_NEAR(Item(r, "AllReduce", "latency_p50")->change_pct(), 15.0, 0.1);
  EXPECT_EQ(Item(r, "AllReduce", "latency_p99")->status(), "ok");  // +15% < 20%
  EXPECT_EQ(Item(r, "AllReduce", "busbw")->status(), "regressed");  // -13% (the latency's samples)
  EXPECT_EQ(Item(r, "AllGather", "busbw")->status(), "improved");
  EXPECT_EQ(Item(r, "AllGather", "latency_p50")->status(), "improved");
  EXPECT_EQ(Item(r, "Broadcast", "latency_p50")->status(), "ok");
  EXPECT_EQ(Item(r, "Broadcast", "latency_p99")->status(), "ok");
  EXPECT_EQ(Item(r, "AllReduce", "algbw"), nullptr);  // off by default
  EXPECT_EQ(r.regressed, 2);
  EXPECT_EQ(r.improved, 3);
  EXPECT_TRUE(r.failed());

  std::ostringstream out;
  PrintCheck(r, DefaultCheckOptions(), out);
  const std::string text = out.str();
  EXPECT_NE(text.find("REGRESSED:"), std::string::npos) << text;
  EXPECT_NE(text.find("+15.0% ["), std::string::npos) << text;
  EXPECT_EQ(text.rfind("FAIL: 2 metric(s) regressed", 0), 0u) << text;
}

TEST(CheckTest, MissingNewAndIncomparableRowsDoNotFail) {
  stats::Stats base = StatsOf({Row("world", "AllReduce", 20, 100, 200, 50), Row("world", "AllGather", 10, 10, 20, 5),
                               Row("tp", "AllReduce", 20, 100, 200, 50, "gpu")});
  stats::Stats run = StatsOf({Row("world", "AllReduce", 20, 100, 200, 50), Row("world", "Send", 10, 10, 20, 5),
                              Row("tp", "AllReduce", 20, 900, 900, 5, "cpu")});
  CheckResult r = CompareStats({base, base, base}, run, DefaultCheckOptions());
  EXPECT_EQ(r.regressed, 0);
  EXPECT_EQ(r.missing, 1);
  EXPECT_EQ(r.added, 1);
  EXPECT_EQ(r.skipped, 3);  // tp: GPU timing in the baseline, CPU in the run
  EXPECT_FALSE(r.failed());
  for (const auto& i : r.items)
    if (i.comm() == "tp") {
      EXPECT_EQ(i.status(), "skipped");
      EXPECT_NE(i.note().find("not comparable"), std::string::npos);
    }
  std::ostringstream out;
  PrintCheck(r, DefaultCheckOptions(), out);
  EXPECT_EQ(out.str().rfind("PASS: 3 metric(s) judged, none regressed", 0), 0u) << out.str();  // the verdict first

  CheckOptions strict = DefaultCheckOptions();
  strict.strict = true;
  CheckResult rs = CompareStats({base, base, base}, run, strict);
  EXPECT_TRUE(rs.failed());
  std::ostringstream sout;
  PrintCheck(rs, strict, sout);
  EXPECT_NE(sout.str().find("FAIL: 1 baseline row(s) missing (--strict)"), std::string::npos) << sout.str();
}

// The limit never widens with the baseline's spread (it did: a 3x slowdown
// passed against a noisy row). A row too noisy to judge is NOISY, which is
// not a pass: a gate with nothing but NOISY rows fails; --strict fails on one.
TEST(CheckTest, ANoisyRowIsNoisyNotPassed) {
  stats::StatRow b = Row("world", "AllReduce", 20, 100, 160, 50);
  SetSamples(&b, 100, 0.9, 21);  // 10 us to 190 us
  stats::StatRow c = b;
  SetSamples(&c, 150, 0.9, 21);  // +50%, not significant on that spread
  CheckResult r = CompareStats(StatsOf({b}), StatsOf({c}), DefaultCheckOptions());
  ASSERT_NE(Item(r, "AllReduce", "latency_p50"), nullptr);
  EXPECT_EQ(Item(r, "AllReduce", "latency_p50")->status(), "noisy");
  EXPECT_DOUBLE_EQ(Item(r, "AllReduce", "latency_p50")->tolerance_pct(), 10.0);  // not widened
  EXPECT_GT(Item(r, "AllReduce", "latency_p50")->change_high_pct(), 50.0);
  EXPECT_EQ(r.judged(), 0);
  EXPECT_TRUE(r.failed());
  std::ostringstream out;
  PrintCheck(r, DefaultCheckOptions(), out);
  EXPECT_EQ(out.str().rfind("FAIL: nothing was judged", 0), 0u) << out.str();

  // Beside a judged row, a NOISY one does not fail, unless --strict.
  stats::Stats base = StatsOf({b, Row("world", "AllGather", 20, 100, 105, 50)});
  stats::Stats run = StatsOf({c, Row("world", "AllGather", 20, 100, 105, 50)});
  r = CompareStats({base, base, base}, run, DefaultCheckOptions());
  EXPECT_EQ(r.noisy, 2);  // latency_p50 and busbw of AllReduce
  EXPECT_FALSE(r.failed());
  std::ostringstream out2;
  PrintCheck(r, DefaultCheckOptions(), out2);
  EXPECT_EQ(out2.str().rfind("PASS: 3 metric(s) judged, none regressed; 2 too noisy to judge", 0), 0u) << out2.str();
  CheckOptions strict = DefaultCheckOptions();
  strict.strict = true;
  EXPECT_TRUE(CompareStats({base, base, base}, run, strict).failed());
}

// A p99 from one baseline run is not judged: one run's slowest samples move
// together. Three runs are judged, their spread raising the floor.
TEST(CheckTest, ATailIsJudgedOnlyAgainstThreeRuns) {
  const stats::StatRow b = Row("world", "AllReduce", 20, 100, 105, 50);
  stats::StatRow c = Row("world", "AllReduce", 20, 100, 105, 50);
  SetSamples(&c, 100, 0.6, 201);  // the same median, a p99 +56%
  CheckResult one = CompareStats(StatsOf({b}), StatsOf({c}), DefaultCheckOptions());
  const stats::CheckItem* i = Item(one, "AllReduce", "latency_p99");
  ASSERT_NE(i, nullptr);
  EXPECT_EQ(i->status(), "skipped");
  EXPECT_NE(i->note().find("a p99 is judged against a baseline of 3 runs or more (one --baseline each; 1 given)"),
            std::string::npos)
      << i->note();
  EXPECT_FALSE(i->has_change_low_pct());  // no interval shown
  CheckResult two = CompareStats({StatsOf({b}), StatsOf({b})}, StatsOf({c}), DefaultCheckOptions());
  EXPECT_EQ(Item(two, "AllReduce", "latency_p99")->status(), "skipped");
  CheckResult three = CompareStats({StatsOf({b}), StatsOf({b}), StatsOf({b})}, StatsOf({c}), DefaultCheckOptions());
  EXPECT_EQ(Item(three, "AllReduce", "latency_p99")->status(), "regressed") << Item(three, "AllReduce", "latency_p99")->note();
  EXPECT_EQ(Item(three, "AllReduce", "latency_p50")->status(), "ok");
}

// A tail whose resamples all give one change (its slowest samples repeat
// one value) shows no interval and is not judged; a median is.
TEST(CheckTest, AZeroWidthTailIntervalIsNeverShown) {
  stats::StatRow b = Row("world", "AllReduce", 20, 100, 100, 50);
  stats::StatRow c = b;
  SetSamples(&b, 100, 0.0, 201);  // every sample 100 us
  SetSamples(&c, 133, 0.0, 201);  // every sample 133 us
  CheckResult r = CompareStats({StatsOf({b}), StatsOf({b}), StatsOf({b})}, StatsOf({c}), DefaultCheckOptions());
  const stats::CheckItem* tail = Item(r, "AllReduce", "latency_p99");
  ASSERT_NE(tail, nullptr);
  EXPECT_EQ(tail->status(), "skipped");
  EXPECT_NE(tail->note().find("interval of zero width"), std::string::npos) << tail->note();
  EXPECT_FALSE(tail->has_change_low_pct());
  EXPECT_EQ(Item(r, "AllReduce", "latency_p50")->status(), "regressed");  // certain: +33%
}

// The same change on a quiet row is significant, and fails past the floor.
TEST(CheckTest, ASignificantChangeFailsOnlyPastTheFloor) {
  stats::StatRow b = Row("world", "AllReduce", 20, 100, 105, 50);
  stats::StatRow c = Row("world", "AllReduce", 20, 105, 110, 50);  // +5%: significant, under 10%
  CheckResult r = CompareStats(StatsOf({b}), StatsOf({c}), DefaultCheckOptions());
  EXPECT_EQ(Item(r, "AllReduce", "latency_p50")->status(), "ok");
  EXPECT_GT(Item(r, "AllReduce", "latency_p50")->change_low_pct(), 0.0);
  c = Row("world", "AllReduce", 20, 150, 160, 50);  // +50%
  r = CompareStats(StatsOf({b}), StatsOf({c}), DefaultCheckOptions());
  EXPECT_EQ(Item(r, "AllReduce", "latency_p50")->status(), "regressed");
  EXPECT_EQ(Item(r, "AllReduce", "busbw")->status(), "regressed");
  EXPECT_NEAR(Item(r, "AllReduce", "busbw")->change_pct(), -100.0 / 3, 0.5);
  EXPECT_NEAR(Item(r, "AllReduce", "busbw")->tolerance_pct(), 10.0, 1e-9);
  EXPECT_TRUE(r.failed());
}

// Several baseline runs: a change within their run-to-run spread is what a
// rerun does; a spread past 1.5x makes the row NOISY.
TEST(CheckTest, SeveralBaselineRunsRaiseTheFloorToTheirSpread) {
  stats::StatRow b1 = Row("world", "AllReduce", 20, 100, 105, 50);
  stats::StatRow b2 = Row("world", "AllReduce", 20, 125, 130, 50);
  stats::StatRow c = Row("world", "AllReduce", 20, 130, 135, 50);  // +18% on the pooled median
  CheckResult one = CompareStats(StatsOf({b1}), StatsOf({c}), DefaultCheckOptions());
  EXPECT_EQ(Item(one, "AllReduce", "latency_p50")->status(), "regressed");
  CheckResult two = CompareStats({StatsOf({b1}), StatsOf({b2})}, StatsOf({c}), DefaultCheckOptions());
  EXPECT_EQ(two.baseline_runs, 2u);
  const stats::CheckItem* i = Item(two, "AllReduce", "latency_p50");
  ASSERT_NE(i, nullptr);
  EXPECT_EQ(i->status(), "ok") << i->note();
  EXPECT_GT(i->tolerance_pct(), 10.0);
  EXPECT_NE(i->note().find("run-to-run spread"), std::string::npos);
  EXPECT_EQ(i->baseline_samples(), 402u);
  stats::StatRow b3 = Row("world", "AllReduce", 20, 300, 305, 50);
  CheckResult wild = CompareStats({StatsOf({b1}), StatsOf({b3})}, StatsOf({c}), DefaultCheckOptions());
  EXPECT_EQ(Item(wild, "AllReduce", "latency_p50")->status(), "noisy");
  EXPECT_NE(Item(wild, "AllReduce", "latency_p50")->note().find("runs differ"), std::string::npos);
}

// With several runs the interval must clear their spread, not just no
// change: a real rerun moved +16.4% [+5.3%, +93.6%] against runs 6.2%
// apart and a limit of +16.2%, every row within 1.1x by the job's clock.
// And a change clear of a spread past 1.5x is judged, not NOISY.
TEST(CheckTest, AChangeMustClearTheBaselinesSpread) {
  stats::StatRow b1 = Row("world", "AllReduce", 20, 100, 105, 50);
  stats::StatRow b2 = Row("world", "AllReduce", 20, 112, 117, 50);
  stats::StatRow c = Row("world", "AllReduce", 20, 124, 130, 50);
  for (stats::StatRow* r : {&b1, &b2, &c}) r->set_calls(201);  // every sample a draw
  SetSamples(&c, 124, 0.2, 201);  // significant, but not clear of the spread
  CheckResult r = CompareStats({StatsOf({b1}), StatsOf({b2})}, StatsOf({c}), DefaultCheckOptions());
  const stats::CheckItem* i = Item(r, "AllReduce", "latency_p50");
  ASSERT_NE(i, nullptr);
  const double spread = i->tolerance_pct() - 10.0;
  EXPECT_GT(i->change_low_pct(), 0) << i->ShortDebugString();
  EXPECT_LT(i->change_low_pct(), spread) << i->ShortDebugString();
  EXPECT_GT(i->change_pct(), i->tolerance_pct()) << i->ShortDebugString();
  EXPECT_NE(i->status(), "regressed") << i->ShortDebugString();
  EXPECT_FALSE(r.failed());
  // The same change on tight samples clears the spread: it regresses.
  SetSamples(&c, 124, 0.02, 201);
  r = CompareStats({StatsOf({b1}), StatsOf({b2})}, StatsOf({c}), DefaultCheckOptions());
  i = Item(r, "AllReduce", "latency_p50");
  EXPECT_GT(i->change_low_pct(), i->tolerance_pct() - 10.0) << i->ShortDebugString();
  EXPECT_EQ(i->status(), "regressed") << i->ShortDebugString();
  // Runs 3x apart: NOISY for a change within them, judged for one clear of them.
  stats::StatRow b3 = Row("world", "AllReduce", 20, 300, 305, 50);
  for (const double p50 : {250.0, 1000.0}) {
    SetSamples(&c, p50, 0.02, 201);
    r = CompareStats({StatsOf({b1}), StatsOf({b3})}, StatsOf({c}), DefaultCheckOptions());
    i = Item(r, "AllReduce", "latency_p50");
    EXPECT_EQ(i->status(), p50 > 300 ? "regressed" : "noisy") << p50 << ": " << i->ShortDebugString();
  }
}

TEST(CheckTest, TailNeedsAHundredSamples) {
  stats::StatRow b = Row("world", "AllReduce", 20, 100, 160, 50);
  SetSamples(&b, 100, 0.02, 60);  // enough for a median, not for a p99
  stats::StatRow c = b;
  c.set_latency_p99_us(900);
  CheckResult r = CompareStats(StatsOf({b}), StatsOf({c}), DefaultCheckOptions());
  EXPECT_EQ(Item(r, "AllReduce", "latency_p99")->status(), "skipped");
  EXPECT_NE(Item(r, "AllReduce", "latency_p99")->note().find("at least 100"), std::string::npos);
}

TEST(CheckTest, NothingComparedIsAFailure) {
  // The baseline has GPU timing, the run (captured without kernel events) none.
  stats::Stats base = StatsOf({Row("world", "AllReduce", 20, 100, 200, 50)});
  stats::Stats run = StatsOf({Row("world", "AllReduce", 20, 900, 900, 5, "cpu")});
  CheckResult r = CompareStats(base, run, DefaultCheckOptions());
  EXPECT_EQ(r.judged(), 0);
  EXPECT_TRUE(r.failed());
  std::ostringstream out;
  PrintCheck(r, DefaultCheckOptions(), out);
  EXPECT_EQ(out.str().rfind("FAIL: nothing was judged", 0), 0u) << out.str();
}

TEST(CheckTest, TheCommunicatorsSizeIsPartOfTheRow) {
  stats::StatRow b = Row("world", "AllReduce", 20, 100, 200, 50);
  b.set_nranks(8);
  stats::StatRow c = Row("world", "AllReduce", 20, 100, 200, 50);
  c.set_nranks(4);
  CheckResult r = CompareStats(StatsOf({b}), StatsOf({c}), DefaultCheckOptions());
  EXPECT_EQ(r.missing, 1);
  EXPECT_EQ(r.added, 1);
  EXPECT_TRUE(r.failed());  // and nothing compared
}

TEST(CheckTest, TooFewSamplesAreNotCompared) {
  stats::StatRow b = Row("world", "AllReduce", 20, 100, 200, 50);
  stats::StatRow c = Row("world", "AllReduce", 20, 100, 900, 50);  // p99 +350%
  SetSamples(&c, 100, 0.02, 4);
  CheckResult r = CompareStats(StatsOf({b, Row("world", "AllGather", 20, 100, 200, 50)}),
                               StatsOf({c, Row("world", "AllGather", 20, 100, 200, 50)}), DefaultCheckOptions());
  ASSERT_NE(Item(r, "AllReduce", "latency_p99"), nullptr);
  EXPECT_EQ(Item(r, "AllReduce", "latency_p99")->status(), "skipped");
  EXPECT_NE(Item(r, "AllReduce", "latency_p99")->note().find("too few samples"), std::string::npos);
  EXPECT_EQ(r.regressed, 0);
  EXPECT_FALSE(r.failed());
}

TEST(CheckTest, IncompleteEvidenceFails) {
  stats::Stats s = StatsOf({Row("world", "AllReduce", 20, 100, 200, 50)});
  CheckResult r = CompareStats(s, s, DefaultCheckOptions());
  report::Diagnosis d;
  d.add_incomplete("no file for rank 3 of comm 'world' (4 ranks) (3 of 4 given)");
  AddFindings(d, &r);
  EXPECT_TRUE(r.failed());
  std::ostringstream out;
  PrintCheck(r, DefaultCheckOptions(), out);
  EXPECT_EQ(out.str().rfind("FAIL: the evidence is incomplete (no file for rank 3", 0), 0u) << out.str();
}

TEST(CheckTest, ParseAllowIncomplete) {
  CheckOptions o = DefaultCheckOptions();
  std::string error;
  EXPECT_TRUE(o.allow_incomplete.empty());  // nothing accepted unless asked
  ASSERT_TRUE(ParseAllowIncomplete({"cuda-graphs"}, &o, &error)) << error;
  EXPECT_EQ(o.allow_incomplete, std::set<report::IncompleteKind>{report::INCOMPLETE_CUDA_GRAPHS});
  CheckOptions bad = DefaultCheckOptions();
  EXPECT_FALSE(ParseAllowIncomplete({"cuda-graphs,everything"}, &bad, &error));
  EXPECT_NE(error.find("--allow-incomplete takes cuda-graphs"), std::string::npos) << error;
  EXPECT_NE(error.find("got 'everything'"), std::string::npos) << error;
}

// --allow-incomplete=cuda-graphs accepts that one gap, says so on the PASS
// line, in the JSON and as a JUnit skip, and nothing else.
TEST(CheckTest, OnlyTheAllowedKindOfIncompleteEvidencePasses) {
  stats::Stats s = StatsOf({Row("world", "AllReduce", 20, 100, 200, 50)});
  const std::string graphs =
      "ranks 0,1 ran NCCL calls captured into CUDA graphs, which NCCL does not number apart from the next call "
      "(AllReduce #1 on comm 'world' (2 ranks) held by several operations), so those operations cannot be matched "
      "across ranks";
  report::Diagnosis d;
  d.add_incomplete(graphs);
  d.add_incomplete_kinds(report::INCOMPLETE_CUDA_GRAPHS);
  CheckOptions allow = DefaultCheckOptions();
  std::string error;
  ASSERT_TRUE(ParseAllowIncomplete({"cuda-graphs"}, &allow, &error)) << error;

  CheckResult by_default = CompareStats(s, s, DefaultCheckOptions());
  AddFindings(d, &by_default);
  EXPECT_TRUE(by_default.failed());

  CheckResult r = CompareStats(s, s, allow);
  AddFindings(d, &r);
  EXPECT_FALSE(r.failed());
  std::ostringstream out;
  PrintCheck(r, allow, out);
  const std::string first = out.str().substr(0, out.str().find('\n'));
  EXPECT_EQ(first.rfind("PASS: ", 0), 0u) << first;
  EXPECT_NE(first.find("; not checked (--allow-incomplete=cuda-graphs): " + graphs), std::string::npos) << first;
  const stats::CheckReport rep = CheckReportOf(r);
  EXPECT_TRUE(rep.passed());
  ASSERT_EQ(rep.accepted_incomplete_size(), 1);
  EXPECT_EQ(rep.accepted_incomplete(0), "cuda-graphs: " + graphs);
  const std::string xml = JUnitXml(r, allow);
  EXPECT_NE(xml.find("<skipped message=\"not checked (--allow-incomplete=cuda-graphs): ranks 0,1"), std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<testsuite name=\"check\" tests=\"2\" failures=\"0\" errors=\"0\" skipped=\"1\""),
            std::string::npos)
      << xml;

  // Any other gap beside it fails, and the FAIL line names that one.
  report::Diagnosis more = d;
  more.add_incomplete("rank 1 ended without finalizing every communicator, in a job that ran NCCL calls captured into CUDA graphs");
  more.add_incomplete_kinds(report::INCOMPLETE_OTHER);
  CheckResult r2 = CompareStats(s, s, allow);
  AddFindings(more, &r2);
  EXPECT_TRUE(r2.failed());
  std::ostringstream out2;
  PrintCheck(r2, allow, out2);
  EXPECT_EQ(out2.str().rfind("FAIL: the evidence is incomplete (rank 1 ended without finalizing", 0), 0u) << out2.str();
  EXPECT_NE(JUnitXml(r2, allow).find("<error type=\"gate\" message=\"the evidence is incomplete: rank 1 ended"),
            std::string::npos);

  // A reason without its kind (a diagnosis written before kinds) is never
  // accepted, whatever its words.
  report::Diagnosis unkinded;
  unkinded.add_incomplete(graphs);
  CheckResult r3 = CompareStats(s, s, allow);
  AddFindings(unkinded, &r3);
  EXPECT_TRUE(r3.failed());
}

TEST(CheckTest, FailsOnErrorFindingsOnly) {
  stats::Stats s = StatsOf({Row("world", "AllReduce", 20, 100, 200, 50)});
  report::Diagnosis d;
  report::Finding* w = d.add_findings();
  w->set_kind(report::STRAGGLER);
  w->set_severity(report::SEVERITY_WARNING);
  w->set_summary("STRAGGLER: rank 3 arrives last");
  CheckResult r = CompareStats(s, s, DefaultCheckOptions());
  AddFindings(d, &r);
  EXPECT_FALSE(r.failed());
  report::Finding* e = d.add_findings();
  e->set_kind(report::MISSING_RANK);
  e->set_severity(report::SEVERITY_ERROR);
  e->set_summary("HANG: rank 2 never called AllReduce #7");
  CheckResult r2 = CompareStats(s, s, DefaultCheckOptions());
  AddFindings(d, &r2);
  EXPECT_TRUE(r2.failed());
  EXPECT_EQ(r2.error_findings, 1);
  std::ostringstream out;
  PrintCheck(r2, DefaultCheckOptions(), out);
  EXPECT_NE(out.str().find("ERROR MISSING_RANK: HANG: rank 2 never called AllReduce #7"), std::string::npos);
  EXPECT_NE(out.str().find("FAIL: 1 diagnose finding(s) of error severity"), std::string::npos) << out.str();
}

// Counts non-overlapping occurrences.
int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

TEST(CheckTest, JUnitEscapesHostileNames) {
  const std::string hostile = "<tp\"&'>]]>\n\x01\xC3\xA9";
  stats::Stats base = StatsOf({Row(hostile, "AllReduce", 20, 100, 105, 50), Row("gone", "Send", 3, 1, 1, 1)});
  stats::Stats run = StatsOf({Row(hostile, "AllReduce", 20, 150, 105, 50)});
  CheckResult r = CompareStats({base, base, base}, run, DefaultCheckOptions());
  report::Diagnosis d;
  report::Finding* f = d.add_findings();
  f->set_kind(report::MISMATCH);
  f->set_severity(report::SEVERITY_ERROR);
  f->set_summary("MISMATCH: </testcase><injected/> & \"quotes\"");
  report::Evidence* ev = f->add_evidence();
  ev->set_proc("rank 1");
  ev->set_text("count 5 <> 6");
  AddFindings(d, &r);
  const std::string xml = JUnitXml(r, DefaultCheckOptions());

  EXPECT_EQ(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites", 0), 0u) << xml;
  // The hostile text appears only escaped.
  EXPECT_EQ(xml.find("<tp"), std::string::npos);
  EXPECT_EQ(xml.find("<injected"), std::string::npos);
  EXPECT_EQ(xml.find("]]>"), std::string::npos);
  EXPECT_EQ(xml.find('\x01'), std::string::npos);
  // A control XML cannot hold shown as its escape (tools/text/safe_text.h).
  EXPECT_NE(xml.find("&lt;tp&quot;&amp;&apos;&gt;]]&gt;&#10;\\x01\xC3\xA9"), std::string::npos) << xml;
  EXPECT_NE(xml.find("count 5 &lt;&gt; 6"), std::string::npos);
  // Every & starts an entity.
  for (size_t p = xml.find('&'); p != std::string::npos; p = xml.find('&', p + 1)) {
    const std::string rest = xml.substr(p, 8);
    EXPECT_TRUE(rest.rfind("&amp;", 0) == 0 || rest.rfind("&lt;", 0) == 0 || rest.rfind("&gt;", 0) == 0 ||
                rest.rfind("&quot;", 0) == 0 || rest.rfind("&apos;", 0) == 0 || rest.rfind("&#", 0) == 0)
        << rest;
  }
  // Balanced elements: 3 stats cases (p50, p99, busbw) + 1 missing row, 1
  // finding, 2 gate cases (passing: empty elements).
  EXPECT_EQ(Count(xml, "<testcase "), 7);
  EXPECT_EQ(Count(xml, "</testcase>"), 5);
  EXPECT_EQ(Count(xml, "<testsuite "), 3);
  EXPECT_EQ(Count(xml, "</testsuite>"), 3);
  EXPECT_EQ(Count(xml, "<failure "), 4);  // p50, p99, busbw regressed; the finding
  EXPECT_EQ(Count(xml, "<skipped "), 1);  // the missing row
  EXPECT_NE(xml.find("<testsuites name=\"ncclwatch check\" tests=\"7\" failures=\"4\" errors=\"0\""), std::string::npos) << xml;
}

// ---------------------------------------------------------------- end to end

std::string TmpDir(const std::string& name) {
  const char* t = getenv("TEST_TMPDIR");
  std::string d = std::string(t ? t : "/tmp") + "/" + name;
  mkdir(d.c_str(), 0755);
  return d;
}

std::vector<std::string> WriteJobTo(const std::string& name, testing::JobSpec spec) {
  const std::string dir = TmpDir(name);
  testing::WriteJob(testing::BuildJob(spec), dir);
  return {dir};
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

testing::JobSpec Healthy(uint64_t duration_ns) {
  testing::JobSpec spec;
  spec.nranks = 4;
  spec.ncolls = 20;
  spec.funcs = {"AllReduce", "AllGather"};
  spec.duration_ns = duration_ns;
  return spec;
}

TEST(CheckEndToEnd, BaselineFromStatsThenCheck) {
  const auto base_dir = WriteJobTo("base", Healthy(testing::kMs));
  std::ostringstream json, err;
  ASSERT_EQ(RunCli({"ncclwatch", "stats", "--format=json", base_dir[0]}, json, err), 0) << err.str();
  const std::string baseline = TmpDir("b") + "/baseline.json";
  std::ofstream(baseline) << json.str();

  std::ostringstream table;
  ASSERT_EQ(RunCli({"ncclwatch", "stats", base_dir[0]}, table, err), 0) << err.str();
  EXPECT_NE(table.str().find("AllReduce"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("world"), std::string::npos) << table.str();

  // The same run passes.
  std::ostringstream out;
  const std::string junit = TmpDir("j") + "/junit.xml";
  EXPECT_EQ(RunCli({"ncclwatch", "check", "--baseline", baseline, "--junit", junit, base_dir[0]}, out, err), 0) << out.str() << err.str();
  EXPECT_NE(out.str().find("PASS"), std::string::npos) << out.str();
  const std::string xml = ReadFile(junit);
  EXPECT_NE(xml.find("<testsuite name=\"stats\""), std::string::npos) << xml;
  EXPECT_EQ(xml.find("<failure"), std::string::npos) << xml;

  // Twice as slow: latency regressed, bandwidth too.
  const auto slow_dir = WriteJobTo("slow", Healthy(2 * testing::kMs));
  std::ostringstream out2;
  EXPECT_EQ(RunCli({"ncclwatch", "check", "--baseline=" + baseline, "--junit=" + junit, slow_dir[0]}, out2, err), 1) << out2.str();
  EXPECT_NE(out2.str().find("REGRESSED:"), std::string::npos) << out2.str();
  EXPECT_NE(out2.str().find("latency_p50"), std::string::npos);
  EXPECT_NE(out2.str().find("busbw"), std::string::npos);
  EXPECT_NE(ReadFile(junit).find("<failure type=\"regressed\""), std::string::npos);
  // ... unless the tolerance allows it.
  std::ostringstream out3;
  EXPECT_EQ(RunCli({"ncclwatch", "check", "--baseline", baseline, "--tolerance", "latency_p50=150,latency_p99=150,busbw=60", slow_dir[0]},
                     out3, err),
            0)
      << out3.str();
}

TEST(CheckEndToEnd, HangFailsThroughDiagnose) {
  const auto base_dir = WriteJobTo("base2", Healthy(testing::kMs));
  std::ostringstream json, err;
  ASSERT_EQ(RunCli({"ncclwatch", "stats", "--format=json", base_dir[0]}, json, err), 0);
  const std::string baseline = TmpDir("b2") + "/baseline.json";
  std::ofstream(baseline) << json.str();

  testing::JobSpec spec = Healthy(testing::kMs);
  spec.stuck_sec = 2;
  spec.op_hook = [](int rank, int index, testing::OpPlan& op) {
    if (rank == 2 && index == 15) op.skip = true;  // rank 2 never calls #15: the others hang
  };
  const auto hang_dir = WriteJobTo("hang", spec);
  std::ostringstream out;
  EXPECT_EQ(RunCli({"ncclwatch", "check", "--baseline", baseline, hang_dir[0]}, out, err), 1) << out.str();
  // The stats themselves pass (the ops before the hang are as fast as ever).
  EXPECT_NE(out.str().find(" 0 regressed"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("\n  ERROR "), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("diagnose finding(s) of error severity"), std::string::npos) << out.str();
}

TEST(CheckEndToEnd, UnusableInputIsTwo) {
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"ncclwatch", "check", "--help"}, out, err), 0);
  EXPECT_NE(out.str().find("usage: ncclwatch check"), std::string::npos);
  EXPECT_EQ(RunCli({"ncclwatch", "check", "somedir"}, out, err), 2);  // no baseline
  EXPECT_EQ(RunCli({"ncclwatch", "check", "--baseline", "/nonexistent.json", "somedir"}, out, err), 2);
  const std::string notjson = TmpDir("nj") + "/x.json";
  std::ofstream(notjson) << "{\"rows\": [";
  std::ostringstream err2;
  EXPECT_EQ(RunCli({"ncclwatch", "check", "--baseline", notjson, "somedir"}, out, err2), 2);
  EXPECT_NE(err2.str().find("not ncclwatch stats JSON"), std::string::npos) << err2.str();
  EXPECT_EQ(RunCli({"ncclwatch", "check", "--baseline", notjson, "--tolerance", "nope=1", "somedir"}, out, err), 2);
  EXPECT_EQ(RunCli({"ncclwatch", "check", "--baseline"}, out, err), 2);
  EXPECT_EQ(RunCli({"ncclwatch", "stats", "--format=xml", "x"}, out, err), 2);
  EXPECT_EQ(RunCli({"ncclwatch", "stats"}, out, err), 2);
  std::ostringstream err3;
  EXPECT_EQ(RunCli({"ncclwatch", "stats", "/nonexistent/dir/x.ncclwatch"}, out, err3), 2);
  EXPECT_NE(err3.str().find("ncclwatch stats: "), std::string::npos);
}

}  // namespace
}  // namespace ncclwatch::tools
