// MISSING_RANK and STUCK_IN_PROGRESS (find_missing.h), through Diagnose.

#include "tools/diagnose/diagnose.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/diagnose/test_job.h"

namespace ncclwatch::tools {
namespace {

using namespace diagnose_testing;  // NOLINT: the tests' own job builder

TEST(FindMissingAndStuck, MissingRankLeftCleanly) {
  Job j = MissingRankJob();
  j.Finalize(3, 5.2);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "HANG: rank 3 never joined AllReduce #12 on comm 'world' (4 ranks); ranks 0,1,2 waited 10.0 s; "
            "rank 3 left cleanly after AllReduce #11 [cause: program logic]");
  ASSERT_GE(d.findings_size(), 1);
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(f.kind(), report::MISSING_RANK);
  EXPECT_EQ(f.severity(), report::SEVERITY_ERROR);
  EXPECT_EQ(f.comm_name(), "world");
  EXPECT_EQ(f.comm_hash(), 0xabcu);
  EXPECT_EQ(f.func(), "AllReduce");
  EXPECT_EQ(f.seq(), 12u);
  EXPECT_EQ(Names(f.culprits()), V{"rank 3"});
  EXPECT_EQ(Names(f.waiting()), (V{"rank 0", "rank 1", "rank 2"}));
  ASSERT_EQ(f.fates_size(), 1);
  EXPECT_EQ(f.fates(0), report::FATE_LEFT_CLEANLY);
  EXPECT_DOUBLE_EQ(f.waited_sec(), 10.0);
  EXPECT_EQ(d.findings_size(), 1) << FormatText(d);  // a clean exit is not a dead rank
  EXPECT_EQ(ExitStatus(d), 1);
  ASSERT_EQ(d.completed_before_hang_size(), 1);
  EXPECT_EQ(d.completed_before_hang(0).last_completed_seq(), 11u);
  EXPECT_EQ(d.completed_before_hang(0).highest_seq_issued(), 12u);
}

TEST(FindMissingAndStuck, MissingRankDied) {
  Job j = MissingRankJob();
  j.m.procs[3].last_ns = Ns(5.0);
  j.m.procs[3].last_heartbeat_ns = Ns(4.9);
  j.m.procs[3].cut_tail = true;  // a kill may cut the write in progress short
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "HANG: rank 3 never joined AllReduce #12 on comm 'world' (4 ranks); ranks 0,1,2 waited 10.0 s; "
            "rank 3 died after AllReduce #11 (silent for the last 10.0 s) [cause: rank 3's resources]");
  // Several files that end mid-record without a finalize are a copy taken
  // while they were written: the verdict says its evidence is incomplete.
  j.m.procs[0].cut_tail = true;
  report::Diagnosis cut = Diagnose(j.m);
  EXPECT_EQ(cut.verdict().rfind("INCOMPLETE EVIDENCE (the files of ranks 0,3 end mid-record without a finalize", 0), 0u)
      << cut.verdict();
  EXPECT_EQ(ExitStatus(cut), 3);
  EXPECT_EQ(d.findings(0).fates(0), report::FATE_DIED);
  // The death is also its own finding, after the hang it explains.
  const report::Finding* dead = FindKind(d, report::DEAD_RANK);
  ASSERT_NE(dead, nullptr);
  EXPECT_EQ(Names(dead->culprits()), V{"rank 3"});
  EXPECT_DOUBLE_EQ(dead->silent_sec(), 10.0);
  EXPECT_NE(dead->evidence(0).text().find("ends mid-record"), std::string::npos);
}

TEST(FindMissingAndStuck, MissingRankIdle) {
  Job j = MissingRankJob();  // rank 3's heartbeats go on until 15 s, no op in flight
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "HANG: rank 3 never joined AllReduce #12 on comm 'world' (4 ranks); ranks 0,1,2 waited 10.0 s; "
            "rank 3 is alive but idle outside NCCL after AllReduce #11 [cause: cannot tell]");
  EXPECT_EQ(d.findings(0).fates(0), report::FATE_IDLE);
  // Nothing shows its host busy rather than its program elsewhere: what
  // would tell is named, the P2pApi event only where the header lacks it.
  const std::string& why = d.findings(0).cause_text();
  EXPECT_NE(why.find("--fr"), std::string::npos) << why;
  EXPECT_NE(why.find("NCCLWATCH_ON_STUCK"), std::string::npos) << why;
  EXPECT_EQ(d.findings_size(), 1) << FormatText(d);
}

// profiler API < v4): only who issued what tells an unfinished operation.

void Untrack(Job* j) {
  for (Op& op : j->m.ops) {
    op.state = OpState::kUntracked;
    op.done_ns = kNoTime;
  }
}

// The watchdogs abort every communicator: each rank finalizes, and without
// completions an abort looks like a clean destroy. Rank 3 never issued #12,
// so the others' #12 never finished whatever the finalize says.
TEST(FindMissingAndStuck, UntrackedSkipIsFoundThroughTheAbort) {
  Job j = MissingRankJob();
  Untrack(&j);
  for (uint32_t p = 0; p < 4; ++p) j.Finalize(p, 15.0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(FirstLine(d.verdict()).substr(0, 62), "HANG: rank 3 never joined AllReduce #12 on comm 'world' (4 ran")
      << FormatText(d);
  ASSERT_GE(d.findings_size(), 1);
  EXPECT_EQ(d.findings(0).kind(), report::MISSING_RANK);
  EXPECT_EQ(Names(d.findings(0).waiting()), (V{"rank 0", "rank 1", "rank 2"}));
  ASSERT_GE(d.completed_before_hang_size(), 1);
  EXPECT_TRUE(d.completed_before_hang(0).completion_untracked());
  EXPECT_NE(FormatText(d).find("comm 'world' (4 ranks): completion not tracked; highest issued #12"), std::string::npos)
      << FormatText(d);
}

// Every rank issued everything; the job then idles for 10 s. A long wait
// after an untracked operation proves nothing: no STUCK.
TEST(FindMissingAndStuck, UntrackedLongWaitIsNotStuck) {
  Job j;
  j.Procs(2, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1});
  j.Steps(w, 5);
  j.P2p(0, w, "Send", 1, 6, 4096, 1.0, -1);
  j.P2p(1, w, "Recv", 0, 6, 4096, 1.0, -1);
  Untrack(&j);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(FindKind(d, report::STUCK_IN_PROGRESS), nullptr) << FormatText(d);
  // Nor an OK: no rank finalized and whether the last operations finished is unknown.
  ASSERT_EQ(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).kind(), report::JOB_ENDED);
  EXPECT_EQ(d.findings(0).cause(), report::CAUSE_UNKNOWN);
}

// A dead rank's file may have lost its last records: its absence from #3
// onwards proves nothing without completions. The death is the finding.
TEST(FindMissingAndStuck, UntrackedDeadRanksLostRecordsAreNotAbsence) {
  Job j;
  j.Procs(3, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  j.Steps(w, 5);
  for (Op& op : j.m.ops)
    if (op.proc == 2 && op.seq >= 3) op.proc = kNone;  // lost from rank 2's file
  std::vector<Op> kept;
  for (const Op& op : j.m.ops)
    if (op.proc != kNone) kept.push_back(op);
  j.m.ops = kept;
  for (Proc& p : j.m.procs) p.ops.clear();
  for (uint32_t oi = 0; oi < j.m.ops.size(); ++oi) j.m.procs[j.m.ops[oi].proc].ops.push_back(oi);
  j.m.procs[2].last_ns = Ns(0.35);
  j.m.procs[2].last_heartbeat_ns = Ns(0.35);
  j.m.procs[2].cut_tail = true;
  Untrack(&j);
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_GE(d.findings_size(), 1);
  EXPECT_EQ(d.findings(0).kind(), report::DEAD_RANK) << FormatText(d);
  EXPECT_EQ(FindKind(d, report::MISSING_RANK), nullptr) << FormatText(d);
}

// Rank 3 skipped AllReduce #12 but went on to a broadcast from rank 0 (#13
// here: this harness matches collectives by sequence number alone). The
// others' #12 never finished, so their broadcast never started (a
// communicator's kernels run in order), so rank 3's never got the root's
// data: it is still in it.
TEST(FindMissingAndStuck, UntrackedSkipPutsTheSkipperInTheNextOperation) {
  Job j = MissingRankJob();
  for (uint32_t p = 0; p < 4; ++p) j.Coll(p, 0, 13, "Broadcast", 1024, 5.1, -1);
  Untrack(&j);
  for (uint32_t p = 0; p < 4; ++p) j.Finalize(p, 15.0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "HANG: rank 3 never joined AllReduce #12 on comm 'world' (4 ranks); ranks 0,1,2 waited 10.0 s; "
            "rank 3 is still in Broadcast #13 [cause: program logic]")
      << FormatText(d);
  // The broadcast itself is explained by the all-reduce: no finding of its own.
  EXPECT_EQ(d.findings_size(), 1) << FormatText(d);
}

// Rank 1 is still inside Broadcast #5, which ranks 0,2,3 completed (from
// root 0); ranks 0,2 wait in AllReduce #6, which rank 3, idle, never
// issued either. Rank 1 is held, not one that went on without #6: the
// culprit is rank 3 alone, and its idleness cannot tell a busy host from
// a program elsewhere.
TEST(FindMissingAndStuck, ARankHeldInAnEarlierCollectiveNeverWentOnWithoutTheNext) {
  Job j;
  j.Procs(4, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  for (uint32_t p = 0; p < 4; ++p) j.Coll(p, w, 4, "AllReduce", 1024, 1.0, 1.01);
  for (uint32_t p = 0; p < 4; ++p) j.Coll(p, w, 5, "Broadcast", 1024, 2.0, p == 1 ? -1 : 2.01);
  for (uint32_t p : {0u, 2u}) j.Coll(p, w, 6, "AllReduce", 1024, 2.1, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_GE(d.findings_size(), 1) << FormatText(d);
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(f.kind(), report::MISSING_RANK) << FormatText(d);
  EXPECT_EQ(Names(f.culprits()), V{"rank 3"}) << FormatText(d);
  EXPECT_EQ(f.fates_size(), 1);
  bool held = false;
  for (const report::ProcRef& r : f.waiting()) held |= r.name() == "rank 1";
  EXPECT_TRUE(held) << FormatText(d);
  EXPECT_EQ(f.cause(), report::CAUSE_UNKNOWN) << f.cause_text();
  EXPECT_EQ(d.verdict().find("went on without"), std::string::npos) << d.verdict();
  EXPECT_EQ(f.cause_text().find("went on without"), std::string::npos) << f.cause_text();
}

// Rank 3 waits in 'pp' for rank 4, which idles: rank 4 is the root cause,
// and the 'world' hang follows from it.
TEST(FindMissingAndStuck, MissingRankWaitsInAnotherComm) {
  Job j = MissingRankJob();
  j.Proc(4, 15.0);
  uint32_t pp = j.Comm("pp", 0xdef, {3, 4});
  j.Coll(3, pp, 1, "Broadcast", 4096, 5.1, -1, "ncclBfloat16", 0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "HANG: rank 4 never joined Broadcast #1 on comm 'pp' (2 ranks); rank 3 waited 9.9 s; "
            "rank 4 is alive but idle outside NCCL [cause: cannot tell]");
  // The 'world' hang is blocked behind it: a consequence, rank 3 waiting.
  ASSERT_EQ(d.findings_size(), 1) << FormatText(d);
  ASSERT_EQ(d.consequences_size(), 1) << FormatText(d);
  const report::Finding& f = d.consequences(0);
  EXPECT_EQ(f.summary(),
            "HANG: rank 3 never joined AllReduce #12 on comm 'world' (4 ranks); ranks 0,1,2 waited 10.0 s; "
            "rank 3 waits in Broadcast #1 on comm 'pp' (2 ranks)");
  EXPECT_EQ(f.culprits_size(), 0);
  EXPECT_EQ(Names(f.waiting()), (V{"rank 0", "rank 1", "rank 2", "rank 3"}));
}

// Records lost at the tail of a file (the op completed elsewhere, so the rank took part): not a hang.
TEST(FindMissingAndStuck, CompletedElsewhereIsDataLossNotAbsence) {
  Job j;
  j.Procs(2, 5.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1});
  j.Steps(w, 3);
  j.Coll(0, w, 4, "AllReduce", 1024, 1.0, 1.1);
  for (uint32_t p = 0; p < 2; ++p) j.Finalize(p, 5.0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.findings_size(), 0) << FormatText(d);
}

// A rank whose plugin dropped the record of one operation (no free event
// handle in a burst) but went on: the gap is lost data, not a skipped
// collective, and the drops are named.
TEST(FindMissingAndStuck, ADroppedRecordIsNotASkip) {
  Job j;
  j.Procs(4, 3.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  for (int k = 1; k <= 10; ++k)
    for (uint32_t p = 0; p < 4; ++p)
      if (!(p == 2 && k == 5)) j.Coll(p, w, k, "AllReduce", 1024, 0.1 * k, 0.1 * k + 0.01);
  j.m.procs[2].drops.pool_exhausted = 1;
  for (uint32_t p = 0; p < 4; ++p) j.Finalize(p, 3.0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.findings_size(), 0) << FormatText(d);
  // No finding, but not OK either: what was lost may have been the problem.
  EXPECT_EQ(ExitStatus(d), 3) << FormatText(d);
  EXPECT_EQ(d.verdict(),
            "INCOMPLETE: no problem found in the 4 processes given, but rank 2 lost 1 event: cannot tell whether the "
            "job was healthy");
  EXPECT_NE(FormatText(d).find("rank 2 lost 1 event: 1 with no free event handle"), std::string::npos) << FormatText(d);
}

// The rank a hang would blame lost events: the verdict says its record may
// be among them.
TEST(FindMissingAndStuck, BlamingARankThatLostEventsSaysSo) {
  Job j;
  j.Procs(4, 90.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 4);
  for (uint32_t p = 0; p < 3; ++p) j.Coll(p, w, 5, "AllReduce", 1024, 1.0, -1);
  j.m.procs[3].drops.pool_exhausted = 7;
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_GE(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).kind(), report::MISSING_RANK);
  EXPECT_EQ(d.verdict().rfind("INCOMPLETE EVIDENCE (rank 3 lost 7 events): HANG: rank 3 never joined AllReduce #5", 0),
            0u)
      << d.verdict();
  EXPECT_EQ(ExitStatus(d), 3);
  EXPECT_NE(d.verdict().find("(but rank 3 lost trace events: a record may be missing)"), std::string::npos)
      << d.verdict();
  bool evidence = false;
  for (const auto& e : d.findings(0).evidence())
    evidence |= e.proc() == "rank 3" && e.text().find("its trace lost 7 events") != std::string::npos;
  EXPECT_TRUE(evidence) << FormatText(d);
  // Without the loss, the same job gets the plain verdict.
  Job clean;
  clean.Procs(4, 90.0);
  uint32_t cw = clean.Comm("world", 0xabc, {0, 1, 2, 3});
  clean.Steps(cw, 4);
  for (uint32_t p = 0; p < 3; ++p) clean.Coll(p, cw, 5, "AllReduce", 1024, 1.0, -1);
  EXPECT_EQ(Diagnose(clean.Finish()).verdict().find("lost trace events"), std::string::npos);
}

// Sampled events (NCCLWATCH_EVENT_INTERVAL_US): AllReduce #2 and #3 were
// launched without events of their own. Ranks 0,1 passed them (a later
// event proved them) and their GPUs are in #4; rank 2's stuck report puts
// its GPU in the window #2..#3 and says it never started #4. The finding is
// on #4, names rank 2, and gives the window; no finding names #2 or #3
// alone, and no LATE finding reads the window as "not started".
TEST(FindMissingAndStuck, SampledEventsNameTheWindowNeverOneOp) {
  Job j;
  j.Procs(3, 40.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  j.Steps(w, 1);
  for (uint32_t p = 0; p < 3; ++p) {
    const bool held = p == 2;
    const uint32_t a = j.Coll(p, w, 2, "AllReduce", 1024, 0.5, held ? -1 : 0.6);
    const uint32_t b = j.Coll(p, w, 3, "AllReduce", 1024, 0.5001, held ? -1 : 0.6);
    const uint32_t c = j.Coll(p, w, 4, "AllReduce", 1024, 0.8, -1);
    j.m.ops[a].without_event = true;
    j.m.ops[b].without_event = true;
    StuckReport r;
    r.time_ns = Ns(20.0);
    r.threshold_sec = 10;
    StuckOp so;
    so.comm = w;
    if (held) {
      for (uint32_t oi : {a, b}) {
        so.op = oi;
        so.seq = j.m.ops[oi].seq;
        so.gpu = 3;
        so.window_first = a;
        so.window_last = b;
        r.ops.push_back(so);
      }
    }
    so.op = c;
    so.seq = 4;
    so.gpu = held ? 1 : 2;
    so.window_first = so.window_last = kNone;
    r.ops.push_back(so);
    j.m.procs[p].stucks.push_back(r);
  }
  report::Diagnosis d = Diagnose(j.Finish());
  const std::string text = FormatText(d);
  ASSERT_GE(d.findings_size(), 1) << text;
  EXPECT_EQ(d.findings(0).kind(), report::STUCK_IN_PROGRESS) << text;
  EXPECT_EQ(d.findings(0).seq(), 4u) << text;
  EXPECT_EQ(Names(d.findings(0).culprits()), V{"rank 2"}) << text;
  EXPECT_NE(d.verdict().find("rank 2's GPU never started it; ranks 0,1 started it and wait"), std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 2: its GPU never started it: earlier work on its stream has not finished (somewhere in "
                      "AllReduce #2..#3, launched without CUDA events of their own: which one is not known)"),
            std::string::npos)
      << text;
  for (const auto& f : d.findings()) {
    EXPECT_NE(f.kind(), report::LATE_RANK) << text;
    EXPECT_TRUE(f.seq() != 2 && f.seq() != 3) << text;
  }
}

// Sampled events: every rank's GPU is somewhere in #2..#3 and none started
// #4 (all launched, all in flight). The finding on #4 says where each GPU
// is, as a window, and names every rank, none alone: nothing tells which
// rank holds the others.
TEST(FindMissingAndStuck, SampledEventsWithEveryGpuInAWindowNameNoRankAlone) {
  Job j;
  j.Procs(2, 40.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1});
  j.Steps(w, 1);
  for (uint32_t p = 0; p < 2; ++p) {
    const uint32_t a = j.Coll(p, w, 2, "AllReduce", 1024, 0.5, -1);
    const uint32_t b = j.Coll(p, w, 3, "AllReduce", 1024, 0.5001, -1);
    const uint32_t c = j.Coll(p, w, 4, "AllReduce", 1024, 0.8, -1);
    j.m.ops[a].without_event = true;
    j.m.ops[b].without_event = true;
    StuckReport r;
    r.time_ns = Ns(20.0);
    r.threshold_sec = 10;
    StuckOp so;
    so.comm = w;
    for (uint32_t oi : {a, b}) {
      so.op = oi;
      so.seq = j.m.ops[oi].seq;
      so.gpu = 3;
      so.window_first = a;
      so.window_last = b;
      r.ops.push_back(so);
    }
    so.op = c;
    so.seq = 4;
    so.gpu = 1;
    so.window_first = so.window_last = kNone;
    r.ops.push_back(so);
    j.m.procs[p].stucks.push_back(r);
  }
  report::Diagnosis d = Diagnose(j.Finish());
  const std::string text = FormatText(d);
  ASSERT_GE(d.findings_size(), 1) << text;
  EXPECT_EQ(d.findings(0).kind(), report::STUCK_IN_PROGRESS) << text;
  EXPECT_EQ(d.findings(0).seq(), 4u) << text;
  EXPECT_EQ(Names(d.findings(0).culprits()), (V{"rank 0", "rank 1"})) << text;
  EXPECT_NE(text.find("rank 0: its GPU never started it: earlier work on its stream has not finished (somewhere in "
                      "AllReduce #2..#3"),
            std::string::npos)
      << text;
  for (const auto& f : d.findings()) EXPECT_TRUE(f.seq() != 2 && f.seq() != 3) << text;
}

// Sampled events: a job that finalized with the tail of its last burst
// unproven on every rank (launched without events, nothing after them) is
// no hang: their state is unknown, and Input says so.
TEST(FindMissingAndStuck, SampledTailLeftUnprovenIsNoHang) {
  Job j;
  j.Procs(2, 40.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1});
  j.Steps(w, 1);
  for (uint32_t p = 0; p < 2; ++p) {
    for (uint64_t k = 2; k <= 4; ++k) {
      const uint32_t oi = j.Coll(p, w, k, "AllReduce", 1024, 0.5 + 0.0001 * k, -1);
      j.m.ops[oi].without_event = true;
    }
    j.Finalize(p, 40.0);
  }
  report::Diagnosis d = Diagnose(j.Finish());
  const std::string text = FormatText(d);
  EXPECT_EQ(d.findings_size(), 0) << text;
  EXPECT_NE(text.find("3 operations launched without CUDA events of their own"), std::string::npos) << text;
}

TEST(FindMissingAndStuck, StuckInProgressNamesChannelAndPeer) {
  Job j;
  j.Procs(4, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 11);
  uint32_t stuck_op = 0;
  for (uint32_t p = 0; p < 4; ++p) {
    uint32_t oi = j.Coll(p, w, 12, "AllReduce", 1024, 5.0, -1);
    if (p == 1) stuck_op = oi;
  }
  StuckReport r;
  r.time_ns = Ns(11.0);
  r.threshold_sec = 6;
  StuckOp so;
  so.op = stuck_op;
  so.comm = w;
  so.seq = 12;
  so.func = j.m.Intern("AllReduce");
  so.age_ns = 6 * kSec;
  so.nchannels = 2;
  so.kernel_started = 2;
  so.kernel_stopped = 1;
  so.proxy_started = 4;
  so.proxy_stopped = 3;
  ProxyState done;
  done.channel = 0;
  done.peer = 2;
  done.nsteps = 8;
  done.last_step = 8;
  done.stopped = true;
  ProxyState stalled;
  stalled.channel = 1;
  stalled.peer = 2;
  stalled.is_send = false;
  stalled.nsteps = 8;
  stalled.last_step = 3;
  stalled.last_state = 10;
  stalled.last_update_ns = Ns(5.2);
  so.proxy = {done, stalled};
  r.ops.push_back(so);
  j.m.procs[1].stucks.push_back(r);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "STUCK: AllReduce #12 on comm 'world' (4 ranks) was issued by every rank and never finished on any "
            "(ranks 0-3) (in flight 10.0 s); rank 1: receive from rank 2 never completed on channel 1 [cause: the network]");
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(f.kind(), report::STUCK_IN_PROGRESS);
  ASSERT_EQ(f.stalled_size(), 1);
  EXPECT_EQ(f.stalled(0).proc(), "rank 1");
  EXPECT_EQ(f.stalled(0).peer(), "rank 2");
  EXPECT_EQ(f.stalled(0).channel(), 1u);
  EXPECT_FALSE(f.stalled(0).is_send());
  EXPECT_EQ(f.stalled(0).last_state(), "RecvWait");
  EXPECT_NEAR(f.stalled(0).idle_sec(), 5.8, 1e-9);
  ASSERT_EQ(d.stuck_reports_size(), 1);
  EXPECT_EQ(d.stuck_reports(0).proc(), "rank 1");
  EXPECT_EQ(ExitStatus(d), 1);
}

// One rank's sends stopped in a ring: every rank's transfers stall, but
// only the receive across the stopped link still waits on the network
// (RecvWait); the others got their data and wait on their GPU
// (RecvGPUWait). The verdict names that link, whichever report comes first.
TEST(FindMissingAndStuck, StuckNamesTheReceiveThatWaitsOnTheNetwork) {
  Job j;
  j.Procs(4, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 11);
  std::vector<uint32_t> ops;
  for (uint32_t p = 0; p < 4; ++p) ops.push_back(j.Coll(p, w, 12, "AllReduce", 1024, 5.0, -1));
  for (uint32_t p = 0; p < 4; ++p) {
    StuckReport r;
    r.time_ns = Ns(11.0);
    r.threshold_sec = 6;
    StuckOp so;
    so.op = ops[p];
    so.comm = w;
    so.seq = 12;
    so.func = j.m.Intern("AllReduce");
    so.age_ns = 6 * kSec;
    so.nchannels = 1;
    so.gpu = 2;
    so.proxy_started = 2;
    ProxyState recv;
    recv.channel = 0;
    recv.peer = (p + 3) % 4;
    recv.is_send = false;
    recv.nsteps = 6;
    // Rank 0 on the GPU; ranks 1-3 wait on the network, rank 2 nearest
    // the stop with the fewest steps done.
    recv.last_state = p == 0 ? 12 : 10;
    recv.last_step = p == 2 ? 2 : 4;
    recv.last_update_ns = Ns(8.0);
    ProxyState send = recv;
    send.peer = (p + 1) % 4;
    send.is_send = true;
    send.last_state = 9;  // SendWait
    so.proxy = {recv, send};
    r.ops.push_back(so);
    j.m.procs[p].stucks.push_back(r);
  }
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_GE(d.findings_size(), 1) << FormatText(d);
  EXPECT_NE(d.verdict().find("; rank 2: receive from rank 1 never completed on channel 0 [cause: the network]"),
            std::string::npos)
      << d.verdict();
}

TEST(FindMissingAndStuck, StuckOnSomeRanksNamesThem) {
  Job j;
  j.Procs(3, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  for (uint32_t p = 0; p < 3; ++p) j.Coll(p, w, 1, "Broadcast", 64, 1.0, p == 0 ? 1.01 : -1, "ncclFloat32", 0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "STUCK: Broadcast #1 on comm 'world' (3 ranks) was issued by every rank and never finished on ranks 1,2 "
            "(in flight 14.0 s) [cause: cannot tell]");
  EXPECT_EQ(Names(d.findings(0).culprits()), (V{"rank 1", "rank 2"}));
}

}  // namespace
}  // namespace ncclwatch::tools
