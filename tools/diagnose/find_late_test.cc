// LATE_RANK (find_late.h), through Diagnose.

#include "tools/diagnose/diagnose.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/diagnose/test_job.h"

namespace ncclwatch::tools {
namespace {

using namespace diagnose_testing;  // NOLINT: the tests' own job builder

// Rank 1 sleeps 30 s before AllReduce #5; ranks 0,2,3 wait in it, then
// their watchdogs end them, and rank 1, on its own, waits in #6 for ranks
// that are gone. The late arrival is the cause; the later hang follows.
TEST(FindLate, LateRankIsTheCauseOfTheHangThatFollows) {
  Job j;
  j.Procs(4, 60.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 4);
  for (uint32_t p = 0; p < 4; ++p) j.Coll(p, w, 5, "AllReduce", 1024, p == 1 ? 30.5 : 0.5, 30.51);
  j.Coll(1, w, 6, "AllReduce", 1024, 30.6, -1);
  for (uint32_t p : {0u, 2u, 3u}) j.Finalize(p, 31.0);
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_GE(d.findings_size(), 1) << FormatText(d);
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(f.kind(), report::LATE_RANK);
  EXPECT_EQ(Names(f.culprits()), V{"rank 1"});
  EXPECT_EQ(Names(f.waiting()), (V{"rank 0", "rank 2", "rank 3"}));
  // Idle outside NCCL: a busy host and a program doing other work look alike.
  EXPECT_EQ(f.cause(), report::CAUSE_UNKNOWN);
  EXPECT_NE(f.cause_text().find("what would tell: "), std::string::npos) << f.cause_text();
  EXPECT_EQ(d.verdict(),
            "LATE: rank 1 reached AllReduce #5 on comm 'world' (4 ranks) 30.0 s after ranks 0,2,3, which waited in "
            "it; it was idle outside NCCL until then [cause: cannot tell]");
  // The hang that follows names ranks 0,2,3 as missing: a consequence, blaming no one.
  ASSERT_GE(d.consequences_size(), 1) << FormatText(d);
  EXPECT_EQ(d.consequences(0).kind(), report::MISSING_RANK);
  EXPECT_EQ(d.consequences(0).culprits_size(), 0);
  EXPECT_EQ(ExitStatus(d), 1);
}

// Every rank issued AllReduce #5 in time, but rank 1's GPU was busy: the
// stuck reports of ranks 0,2 saw their GPUs in it and rank 1's saw its GPU
// not started; it completed 30 s later.
TEST(FindLate, LateGpuIsNamedFromTheStuckReports) {
  Job j;
  j.Procs(3, 40.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  j.Steps(w, 4);
  for (uint32_t p = 0; p < 3; ++p) {
    const uint32_t oi = j.Coll(p, w, 5, "AllReduce", 1024, 0.5, 30.5);
    StuckReport r;
    r.time_ns = Ns(3.5);
    r.threshold_sec = 3;
    StuckOp so;
    so.op = oi;
    so.comm = w;
    so.seq = 5;
    so.gpu = p == 1 ? 1 : 2;
    r.ops.push_back(so);
    j.m.procs[p].stucks.push_back(r);
    j.Finalize(p, 40.0);
  }
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_GE(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).kind(), report::LATE_RANK);
  EXPECT_EQ(Names(d.findings(0).culprits()), V{"rank 1"});
  EXPECT_EQ(d.verdict().rfind("LATE: rank 1's GPU had not started AllReduce #5 on comm 'world' (3 ranks)", 0), 0u)
      << d.verdict();
}

// The same with CUDA-event completions where rank 1's stuck report has no
// answer (NCCLWATCH_START_EVENTS=0, or its event pair taken over by later
// launches): no kernel-channel counts either, so nothing says its GPU had
// not started it. No LATE finding may rest on that.
TEST(FindLate, AnEventReportWithoutGpuProgressSaysNothingOfTheGpu) {
  Job j;
  j.Procs(3, 40.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  j.Steps(w, 4);
  for (uint32_t p = 0; p < 3; ++p) {
    j.m.procs[p].event_completions = true;
    const uint32_t oi = j.Coll(p, w, 5, "AllReduce", 1024, 0.5, 30.5);
    StuckReport r;
    r.time_ns = Ns(3.5);
    r.threshold_sec = 3;
    StuckOp so;
    so.op = oi;
    so.comm = w;
    so.seq = 5;
    so.nchannels = 2;  // as the plugin writes it; no channel counts with events
    so.gpu = p == 1 ? 0 : 2;
    r.ops.push_back(so);
    j.m.procs[p].stucks.push_back(r);
    j.Finalize(p, 40.0);
  }
  report::Diagnosis d = Diagnose(j.Finish());
  const std::string text = FormatText(d);
  for (const auto& f : d.findings()) EXPECT_NE(f.kind(), report::LATE_RANK) << text;
  EXPECT_EQ(text.find("had not started"), std::string::npos) << text;
  EXPECT_NE(text.find("whether its GPU had reached it is not known"), std::string::npos) << text;
}

}  // namespace
}  // namespace ncclwatch::tools
