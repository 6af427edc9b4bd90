#include "tools/ras/evidence.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ncclwatch::tools {
namespace {

report::RasReport Report(const std::string& name) {
  std::ifstream f("tools/ras/testdata/" + name);
  std::stringstream s;
  s << f.rdbuf();
  report::RasReport r = RasReportOf("127.0.0.1:28028", s.str());
  EXPECT_TRUE(r.error().empty()) << r.error();
  return r;
}

std::vector<std::string> Lines(const report::RasReport& r) { return {r.lines().begin(), r.lines().end()}; }
std::vector<std::string> Versus(const report::Diagnosis& d) {
  return {d.ras().versus_traces().begin(), d.ras().versus_traces().end()};
}

// A verdict on communicator 0x8a1c61f6e31e2b29 naming one culprit.
report::Diagnosis Verdict(report::FindingKind kind, int comm_rank, report::Cause cause) {
  report::Diagnosis d;
  d.set_verdict("HANG: the traces' verdict");
  d.set_exit_status(1);
  d.set_severity(report::SEVERITY_ERROR);
  report::Finding* f = d.add_findings();
  f->set_kind(kind);
  f->set_comm_hash(0x8a1c61f6e31e2b29ull);
  f->set_cause(cause);
  report::ProcRef* p = f->add_culprits();
  p->set_name("rank " + std::to_string(comm_rank));
  p->set_comm_rank(comm_rank);
  return d;
}

TEST(RasEvidenceTest, LinesOfEachAnswer) {
  EXPECT_EQ(Lines(Report("idle_rank.json")),
            std::vector<std::string>({"communicator 0x8a1c61f6e31e2b29 (4 ranks): AllReduce launches: ranks 0,1,3 at "
                                      "12, rank 2 at 11"}));
  // The text names the outlier only.
  EXPECT_EQ(Lines(Report("idle_rank.txt")),
            std::vector<std::string>(
                {"communicator 0x8a1c61f6e31e2b29 #0-0 (4 ranks): AllReduce launches: 3 ranks at 12, rank 2 at 11"}));
  EXPECT_EQ(Lines(Report("dead.txt")),
            std::vector<std::string>({
                "process 3487984 on 172.16.64.213 (GPU 5) dead: unreachable via the RAS network",
                "communicator 0xcf264af53edbe986 #0-0 (32 ranks): no data from rank 21 (their processes unresponsive)",
                "2 communication timeouts while RAS gathered its data: its view may lack some processes",
            }));
  EXPECT_EQ(Lines(Report("init.json")),
            std::vector<std::string>({
                "process 41234 on 10.0.0.7 (GPU 3) unresponsive: RAS got no data from it",
                "communicator 0x3f00a9c1d2e4b5a6 (4 ranks): init incomplete on rank 2; no data from rank 3 (their "
                "processes unresponsive)",
                "1 communication timeout while RAS gathered its data: its view may lack some processes",
            }));
  EXPECT_EQ(Lines(Report("v2.24_status.txt")),
            std::vector<std::string>({
                "process 41234 on 10.0.0.7 (GPU 3) unresponsive: RAS got no data from it",
                "communicator 0x3e7 #0-0 (4 ranks): init incomplete on rank 1; no data from rank 3 (their processes "
                "unresponsive); init error on rank 1: Internal error; collective launches: ranks 0,2 at 4, rank 1 at 0",
            }));
}

TEST(RasEvidenceTest, AgreesWithTheCulprit) {
  report::Diagnosis d = Verdict(report::MISSING_RANK, 2, report::CAUSE_PROGRAM);
  const report::Diagnosis before = d;
  AddRasEvidence(Report("idle_rank.json"), {}, &d);
  EXPECT_EQ(Versus(d), std::vector<std::string>(
                           {"RAS agrees on communicator 0x8a1c61f6e31e2b29: comm rank 2: fewest AllReduce launches (11)"}));
  EXPECT_EQ(d.verdict(), before.verdict());
  EXPECT_EQ(d.exit_status(), before.exit_status());
  EXPECT_EQ(d.findings(0).DebugString(), before.findings(0).DebugString());
}

TEST(RasEvidenceTest, DisagreementSaysBoth) {
  report::Diagnosis d = Verdict(report::MISSING_RANK, 1, report::CAUSE_PROGRAM);
  AddRasEvidence(Report("idle_rank.json"), {}, &d);
  EXPECT_EQ(Versus(d), std::vector<std::string>(
                           {"RAS and the traces disagree on communicator 0x8a1c61f6e31e2b29: the traces name rank 1 "
                            "(comm rank 1), RAS singles out comm rank 2: fewest AllReduce launches (11); the verdict "
                            "stands on the traces"}));
  EXPECT_EQ(d.findings(0).culprits(0).name(), "rank 1");
}

TEST(RasEvidenceTest, LaunchesAloneCannotSeeAHangInsideAnOperation) {
  report::Diagnosis d = Verdict(report::STUCK_IN_PROGRESS, 1, report::CAUSE_NETWORK);
  AddRasEvidence(Report("init.json"), {0x8a1c61f6e31e2b29ull, 0x3f00a9c1d2e4b5a6ull}, &d);
  EXPECT_EQ(Versus(d), std::vector<std::string>(
                           {"RAS singles out no rank of communicator 0x8a1c61f6e31e2b29: it counts launches, not "
                            "completions, so ranks inside an operation they all launched look alike to it"}));
}

TEST(RasEvidenceTest, TellsMoreWhereTheVerdictCannotTell) {
  report::Diagnosis d = Verdict(report::MISSING_RANK, 3, report::CAUSE_UNKNOWN);
  d.mutable_findings(0)->set_cause_text("cannot tell");
  AddRasEvidence(Report("init.json"), {0x8a1c61f6e31e2b29ull}, &d);
  const std::string tells =
      "process 41234 on 10.0.0.7 unresponsive; communicator 0x3f00a9c1d2e4b5a6 (4 ranks) stuck in init";
  EXPECT_EQ(Versus(d), std::vector<std::string>({
                           "communicator 0x3f00a9c1d2e4b5a6 (4 ranks) is in no trace: its init has not completed, and "
                           "NCCL starts the profiler of a communicator only once its init is done",
                           "RAS singles out no rank of communicator 0x8a1c61f6e31e2b29: it counts launches, not "
                           "completions, so ranks inside an operation they all launched look alike to it",
                           "RAS tells more than the traces: " + tells,
                       }));
  ASSERT_EQ(d.findings(0).evidence_size(), 1);
  EXPECT_EQ(d.findings(0).evidence(0).text(), "RAS (127.0.0.1:28028): " + tells);
  EXPECT_EQ(d.findings(0).cause(), report::CAUSE_UNKNOWN);  // evidence, not a cause
}

TEST(RasEvidenceTest, NeverTurnsAnOkIntoAFault) {
  report::Diagnosis d;
  d.set_verdict("OK: 4 processes");
  AddRasEvidence(Report("dead.txt"), {}, &d);
  EXPECT_EQ(d.verdict(), "OK: 4 processes");
  EXPECT_EQ(d.exit_status(), 0);
  EXPECT_EQ(d.findings_size(), 0);
  EXPECT_EQ(Versus(d), std::vector<std::string>(
                           {"the traces show no problem and RAS reports the above; the verdict stands on the traces"}));
  ASSERT_EQ(d.ras().lines_size(), 3);
}

TEST(RasEvidenceTest, UnreachableOrUnusable) {
  report::Diagnosis d;
  AddRasEvidence(RasReportError("127.0.0.1:28028", "RAS not reachable at 127.0.0.1:28028: Connection refused"), {}, &d);
  EXPECT_EQ(d.ras().error(), "RAS not reachable at 127.0.0.1:28028: Connection refused");
  EXPECT_EQ(d.ras().lines_size(), 0);
  EXPECT_EQ(d.ras().versus_traces_size(), 0);
  const report::RasReport r = RasReportOf("saved.txt", "hello\n");
  EXPECT_EQ(r.error(),
            "RAS answer from saved.txt: not an answer of NCCL's RAS: it begins 'hello' (expected 'NCCL version', 'Job "
            "summary' or 'Communicators...')");
  EXPECT_FALSE(r.has_view());
}

TEST(RasEvidenceTest, LaunchCountsThatDoNotMove) {
  const report::RasReport behind = Report("idle_rank.json");
  RasLaunchTracker t;
  t.Add(behind.view(), 10);
  report::RasReport r = behind;
  t.Note(&r);
  EXPECT_EQ(r.lines_size(), behind.lines_size());  // one answer says nothing yet
  t.Add(behind.view(), 12);
  t.Add(behind.view(), 14.5);
  r = behind;
  t.Note(&r);
  ASSERT_EQ(r.lines_size(), behind.lines_size() + 1);
  EXPECT_EQ(r.lines(r.lines_size() - 1),
            "communicator 0x8a1c61f6e31e2b29 (4 ranks): these launch counts have not moved for 4.5 s (3 answers): its "
            "ranks launched nothing meanwhile");
  // Counts that moved start again; counts that agree are not followed.
  report::RasView moved = behind.view();
  for (report::RasLaunches& l : *moved.mutable_comms(0)->mutable_launches())
    for (report::RasLaunchGroup& g : *l.mutable_groups()) g.set_launches(g.launches() + 1);
  t.Add(moved, 16);
  r = behind;
  t.Note(&r);
  EXPECT_EQ(r.lines_size(), behind.lines_size());
  t.Add(Report("init.json").view(), 18);
  t.Add(Report("init.json").view(), 20);
  r = Report("init.json");
  const int before = r.lines_size();
  t.Note(&r);
  EXPECT_EQ(r.lines_size(), before);
}

TEST(RasEvidenceTest, RankLists) {
  report::RasRanks r;
  for (int k : {7, 0, 2, 3, 4, 5, 9, 10}) r.add_ranks(k);
  EXPECT_EQ(RasRanksText(r), "ranks 0,2-5,7,9,10");
  r.set_count(26);
  EXPECT_EQ(RasRanksText(r), "26 ranks (0,2-5,7,9,10)");
  r.clear_ranks();
  EXPECT_EQ(RasRanksText(r), "26 ranks");
}

}  // namespace
}  // namespace ncclwatch::tools
