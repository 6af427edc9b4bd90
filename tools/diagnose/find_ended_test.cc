// JOB_ENDED (find_ended.h): how the job's processes ended, through Diagnose.

#include "tools/diagnose/diagnose.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/diagnose/test_job.h"

namespace ncclwatch::tools {
namespace {

using namespace diagnose_testing;  // NOLINT: the tests' own job builder

// A job killed while its last collective was in flight (0.2 s): not a hang,
// and not healthy either. Every rank ended at the same moment: nobody to
// blame, and the verdict says what would tell.
TEST(FindEnded, KilledMidOperationIsNotHealthy) {
  Job j;
  j.Procs(4, 1.3);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 10);
  for (uint32_t p = 0; p < 4; ++p) j.Coll(p, w, 11, "AllReduce", 1024, 1.1, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_EQ(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).kind(), report::JOB_ENDED);
  EXPECT_EQ(d.findings(0).ending(), report::ENDING_ALL_AT_ONCE);
  EXPECT_EQ(d.findings(0).cause(), report::CAUSE_UNKNOWN);
  EXPECT_EQ(d.findings(0).culprits_size(), 0);
  EXPECT_EQ(ExitStatus(d), 1);
  EXPECT_EQ(d.verdict(),
            "ENDED: every rank ended within 0 us of 1.30 s without finishing, 4 operations in flight (AllReduce #11 "
            "on comm 'world' (4 ranks)); no rank stopped first: the job was cancelled or its node lost, or these "
            "files were copied while it ran [cause: cannot tell]");
  // While the files are still written (watch), nobody has ended.
  DiagnoseOptions live;
  live.live = true;
  report::Diagnosis l = Diagnose(j.m, live);
  EXPECT_EQ(l.findings_size(), 0) << FormatText(l);
  EXPECT_EQ(l.verdict().rfind("OK so far: ", 0), 0u) << l.verdict();
}

// The same job, every process finalized with nothing in flight: healthy.
TEST(FindEnded, FinalizedJobIsHealthy) {
  Job j;
  j.Procs(4, 1.3);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 10);
  for (uint32_t p = 0; p < 4; ++p) j.Finalize(p, 1.3);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.findings_size(), 0) << FormatText(d);
  EXPECT_EQ(d.verdict(), "OK: no problem found in 4 processes (1 communicator, 40 operations, 40 completed)");
}

// Rank 1 is killed after AllReduce #10 (its file ends at 1.05 s); the
// others go on into #11 and the launcher ends them 0.5 s later, before any
// watchdog. The most common death of a multi-GPU job: rank 1 is named.
TEST(FindEnded, RankKilledThenLauncherEndsTheRest) {
  Job j;
  j.Proc(0, 1.6);
  j.Proc(1, 1.05);
  j.Proc(2, 1.6);
  j.Proc(3, 1.6);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 10);
  for (uint32_t p : {0u, 2u, 3u}) j.Coll(p, w, 11, "AllReduce", 1024, 1.1, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_GE(d.findings_size(), 1) << FormatText(d);
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(f.kind(), report::JOB_ENDED);
  EXPECT_EQ(f.ending(), report::ENDING_ONE_FIRST);
  EXPECT_EQ(Names(f.culprits()), V{"rank 1"});
  EXPECT_EQ(Names(f.waiting()), (V{"rank 0", "rank 2", "rank 3"}));
  EXPECT_EQ(f.cause(), report::CAUSE_RESOURCES);
  EXPECT_EQ(ExitStatus(d), 1);
  EXPECT_EQ(d.verdict(),
            "ENDED: rank 1 ended first, without finalizing (killed or crashed), at 1.05 s; last operation: AllReduce "
            "#10 on comm 'world' (4 ranks) completed at 1.01 s; ranks 0,2,3 ended up to 550.0 ms after it without "
            "finishing, in AllReduce #11 on comm 'world' (4 ranks): the job was ended after rank 1 ended [cause: rank "
            "1's resources]");
}

// Rank 1 raised and exited: its communicators were finalized (PyTorch
// aborts them at exit) with nothing in flight, the others were ended in #11.
TEST(FindEnded, RankExitedByItselfIsProgramLogic) {
  Job j;
  j.Procs(4, 1.6);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 10);
  j.Finalize(1, 1.05);
  for (uint32_t p : {0u, 2u, 3u}) j.Coll(p, w, 11, "AllReduce", 1024, 1.1, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_GE(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).kind(), report::JOB_ENDED);
  EXPECT_EQ(Names(d.findings(0).culprits()), V{"rank 1"});
  EXPECT_EQ(d.findings(0).cause(), report::CAUSE_PROGRAM);
  EXPECT_NE(d.verdict().find("rank 1 ended first, its communicators finalized or aborted (the process exited by "
                             "itself)"),
            std::string::npos)
      << d.verdict();
}

// Every operation completed, then every rank sat idle for 88 s outside NCCL
// and was killed: a hang outside NCCL, never an OK.
TEST(FindEnded, EveryRankIdleThenKilledIsAHangOutsideNccl) {
  Job j;
  j.Procs(4, 90.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 10);
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_EQ(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).kind(), report::JOB_ENDED);
  EXPECT_EQ(d.findings(0).ending(), report::ENDING_IDLE);
  EXPECT_EQ(ExitStatus(d), 1);
  EXPECT_EQ(d.verdict().rfind("ENDED: every rank sat idle outside NCCL for at least 89.0 s before the end", 0), 0u)
      << d.verdict();
  // A busy host and a program waiting on itself (communicator creation
  // among them) leave the same records: cannot tell, and what would.
  EXPECT_EQ(d.findings(0).cause(), report::CAUSE_UNKNOWN) << d.findings(0).cause_text();
  EXPECT_NE(d.verdict().find("communicator creation"), std::string::npos) << d.verdict();
  const std::string tag = "[cause: cannot tell]";
  EXPECT_EQ(d.verdict().substr(d.verdict().size() - tag.size()), tag) << d.verdict();
  EXPECT_NE(d.findings(0).cause_text().find("what would tell: Flight Recorder dumps (--fr)"), std::string::npos)
      << d.findings(0).cause_text();
  // Without the idle tail the work was done, but no rank finalized: a job
  // cancelled between collectives looks the same. Never an OK, no culprit.
  Job k;
  k.Procs(4, 1.3);
  uint32_t kw = k.Comm("world", 0xabc, {0, 1, 2, 3});
  k.Steps(kw, 10);
  report::Diagnosis ended = Diagnose(k.Finish());
  ASSERT_EQ(ended.findings_size(), 1) << FormatText(ended);
  EXPECT_EQ(ended.findings(0).kind(), report::JOB_ENDED);
  EXPECT_EQ(ended.findings(0).ending(), report::ENDING_UNFINALIZED);
  EXPECT_EQ(ended.findings(0).cause(), report::CAUSE_UNKNOWN);
  EXPECT_EQ(ended.findings(0).culprits_size(), 0);
  EXPECT_EQ(ExitStatus(ended), 1);
  EXPECT_EQ(ended.verdict().rfind("ENDED: every rank ended within ", 0), 0u) << ended.verdict();
  EXPECT_NE(ended.verdict().find("without finalizing, after every operation had completed"), std::string::npos)
      << ended.verdict();
  EXPECT_NE(ended.verdict().find("[cause: cannot tell]"), std::string::npos) << ended.verdict();
}

// The same work, every rank finalized but one: not an OK either, and the
// line names who finalized.
TEST(FindEnded, OneRankEndedWithoutFinalizingAfterTheWorkIsNoOk) {
  Job j;
  j.Procs(4, 1.3);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 10);
  for (uint32_t p = 0; p < 3; ++p) j.Finalize(p, 1.3);
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_EQ(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).ending(), report::ENDING_UNFINALIZED);
  EXPECT_EQ(d.verdict().rfind("ENDED: rank 3 ended at ", 0), 0u) << d.verdict();
  EXPECT_NE(d.verdict().find("while ranks 0,1,2 finalized"), std::string::npos) << d.verdict();
}

}  // namespace
}  // namespace ncclwatch::tools
