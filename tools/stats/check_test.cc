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

stats::StatRow Row(const std::string& comm, const std::string& func, int bucket, double p50, double p99, double busbw,
                   const std::string& timing = "gpu") {
  stats::StatRow r;
  r.set_comm(comm);
  r.set_func(func);
  r.set_bucket_log2(bucket);
  r.set_bucket(BucketLabel(bucket));
  r.set_calls(10);
  r.set_samples(200);
  r.set_timing(timing);
  r.set_latency_p50_us(p50);
  r.set_latency_p99_us(p99);
  r.set_busbw_gbps(busbw);
  r.set_algbw_gbps(busbw / 1.5);
  return r;
}

stats::Stats StatsOf(std::vector<stats::StatRow> rows) {
  stats::Stats s;
  s.set_format("ncclwatch-stats/1");
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
}

TEST(CheckTest, ComparesEachMetricWithItsTolerance) {
  // A baseline spread (p50 to p99) of 5%: below every tolerance.
  stats::Stats base = StatsOf({Row("world", "AllReduce", 20, 100, 105, 50), Row("world", "AllGather", 20, 100, 105, 50),
                               Row("world", "Broadcast", 20, 100, 105, 50)});
  stats::Stats run = StatsOf({Row("world", "AllReduce", 20, 115, 120.75, 47),     // p50 +15% > 10%: regressed
                              Row("world", "AllGather", 20, 105, 78.75, 40),      // busbw -20%: regressed; p99 improved
                              Row("world", "Broadcast", 20, 109.9, 125.475, 46)});  // all within
  CheckResult r = CompareStats(base, run, DefaultCheckOptions());
  ASSERT_NE(Item(r, "AllReduce", "latency_p50"), nullptr);
  EXPECT_EQ(Item(r, "AllReduce", "latency_p50")->status(), "regressed");
  EXPECT_NEAR(Item(r, "AllReduce", "latency_p50")->change_pct(), 15.0, 1e-9);
  EXPECT_EQ(Item(r, "AllReduce", "latency_p99")->status(), "ok");  // +15% < 20%
  EXPECT_EQ(Item(r, "AllReduce", "busbw")->status(), "ok");        // -6%
  EXPECT_EQ(Item(r, "AllGather", "busbw")->status(), "regressed");
  EXPECT_EQ(Item(r, "AllGather", "latency_p99")->status(), "improved");
  EXPECT_EQ(Item(r, "Broadcast", "latency_p50")->status(), "ok");
  EXPECT_EQ(Item(r, "Broadcast", "latency_p99")->status(), "ok");
  EXPECT_EQ(Item(r, "AllReduce", "algbw"), nullptr);  // off by default
  EXPECT_EQ(r.regressed, 2);
  EXPECT_EQ(r.improved, 1);
  EXPECT_TRUE(r.failed());

  std::ostringstream out;
  PrintCheck(r, DefaultCheckOptions(), out);
  const std::string text = out.str();
  EXPECT_NE(text.find("REGRESSED:"), std::string::npos) << text;
  EXPECT_NE(text.find("+15.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("FAIL: 2 metric(s) regressed"), std::string::npos) << text;
}

TEST(CheckTest, MissingNewAndIncomparableRowsDoNotFail) {
  stats::Stats base = StatsOf({Row("world", "AllReduce", 20, 100, 200, 50), Row("world", "AllGather", 10, 10, 20, 5),
                               Row("tp", "AllReduce", 20, 100, 200, 50, "gpu")});
  stats::Stats run = StatsOf({Row("world", "AllReduce", 20, 100, 200, 50), Row("world", "Send", 10, 10, 20, 5),
                              Row("tp", "AllReduce", 20, 900, 900, 5, "cpu")});
  CheckResult r = CompareStats(base, run, DefaultCheckOptions());
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
  EXPECT_EQ(out.str().rfind("PASS: 3 metric(s) within tolerance", 0), 0u) << out.str();  // the verdict first

  CheckOptions strict = DefaultCheckOptions();
  strict.strict = true;
  CheckResult rs = CompareStats(base, run, strict);
  EXPECT_TRUE(rs.failed());
  std::ostringstream sout;
  PrintCheck(rs, strict, sout);
  EXPECT_NE(sout.str().find("FAIL: 1 baseline row(s) missing (--strict)"), std::string::npos) << sout.str();
}

// The report's cases: a gate that compared nothing has not passed; a row of
// another communicator size is another row; a p99 of a few samples is not
// compared; the verdict is the first line.
// A median that moved less than the baseline's own p50-to-p99 distance is
// within what the baseline did; a p99 needs 100 samples to be compared.
TEST(CheckTest, TheBaselinesSpreadAndTailSamples) {
  stats::StatRow b = Row("world", "AllReduce", 20, 100, 160, 50);  // spread 60%
  stats::StatRow c = Row("world", "AllReduce", 20, 150, 180, 50);  // p50 +50%: inside it
  CheckResult r = CompareStats(StatsOf({b}), StatsOf({c}), DefaultCheckOptions());
  ASSERT_NE(Item(r, "AllReduce", "latency_p50"), nullptr);
  EXPECT_EQ(Item(r, "AllReduce", "latency_p50")->status(), "ok");
  EXPECT_DOUBLE_EQ(Item(r, "AllReduce", "latency_p50")->tolerance_pct(), 60.0);
  EXPECT_NE(Item(r, "AllReduce", "latency_p50")->note().find("baseline's own spread"), std::string::npos);
  c.set_latency_p50_us(170);  // +70%: beyond it
  r = CompareStats(StatsOf({b}), StatsOf({c}), DefaultCheckOptions());
  EXPECT_EQ(Item(r, "AllReduce", "latency_p50")->status(), "regressed");

  b.set_samples(60);  // enough for a median, not for a p99
  c.set_latency_p99_us(900);
  r = CompareStats(StatsOf({b}), StatsOf({c}), DefaultCheckOptions());
  EXPECT_EQ(Item(r, "AllReduce", "latency_p99")->status(), "skipped");
  EXPECT_NE(Item(r, "AllReduce", "latency_p99")->note().find("at least 100"), std::string::npos);
}

TEST(CheckTest, NothingComparedIsAFailure) {
  // The baseline has GPU timing, the run (captured without kernel events) none.
  stats::Stats base = StatsOf({Row("world", "AllReduce", 20, 100, 200, 50)});
  stats::Stats run = StatsOf({Row("world", "AllReduce", 20, 900, 900, 5, "cpu")});
  CheckResult r = CompareStats(base, run, DefaultCheckOptions());
  EXPECT_EQ(r.compared(), 0);
  EXPECT_TRUE(r.failed());
  std::ostringstream out;
  PrintCheck(r, DefaultCheckOptions(), out);
  EXPECT_EQ(out.str().rfind("FAIL: nothing was compared", 0), 0u) << out.str();
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
  c.set_samples(4);
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
  CheckResult r = CompareStats(base, run, DefaultCheckOptions());
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
  EXPECT_NE(xml.find("&lt;tp&quot;&amp;&apos;&gt;]]&gt;&#10;\xEF\xBF\xBD\xC3\xA9"), std::string::npos) << xml;
  EXPECT_NE(xml.find("count 5 &lt;&gt; 6"), std::string::npos);
  // Every & starts an entity.
  for (size_t p = xml.find('&'); p != std::string::npos; p = xml.find('&', p + 1)) {
    const std::string rest = xml.substr(p, 8);
    EXPECT_TRUE(rest.rfind("&amp;", 0) == 0 || rest.rfind("&lt;", 0) == 0 || rest.rfind("&gt;", 0) == 0 ||
                rest.rfind("&quot;", 0) == 0 || rest.rfind("&apos;", 0) == 0 || rest.rfind("&#", 0) == 0)
        << rest;
  }
  // Balanced elements: 3 stats cases (p50, p99, busbw) + 1 missing row, 1 finding.
  EXPECT_EQ(Count(xml, "<testcase "), 5);
  EXPECT_EQ(Count(xml, "</testcase>"), 5);
  EXPECT_EQ(Count(xml, "<testsuite "), 2);
  EXPECT_EQ(Count(xml, "</testsuite>"), 2);
  EXPECT_EQ(Count(xml, "<failure "), 2);  // p50 regressed, the finding
  EXPECT_EQ(Count(xml, "<skipped "), 1);  // the missing row
  EXPECT_NE(xml.find("<testsuites name=\"ncclwatch check\" tests=\"5\" failures=\"2\""), std::string::npos) << xml;
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
