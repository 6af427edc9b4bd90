#include "tools/cli.h"
#include "tools/diagnose/diagnose.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace ncclwatch::tools {
namespace {

constexpr int64_t kSec = 1000000000;
int64_t Ns(double sec) { return static_cast<int64_t>(sec * 1e9); }

// Builds a Model by hand: processes, communicators, operations; Finish()
// orders each process's ops and matches them (as MatchOps would).
struct Job {
  Model m;

  uint32_t Proc(int rank, double last_sec, const std::string& host = "node0") {
    tools::Proc p;
    p.path = "/traces/" + host + "-" + std::to_string(1000 + rank) + ".ncclwatch";
    p.host = host;
    p.pid = 1000 + rank;
    p.launcher_rank = rank;
    p.launcher_world_size = -1;
    p.api_version = 5;
    p.heartbeat_ms = 1000;
    p.stuck_sec = 60;
    p.first_ns = 0;
    p.last_ns = Ns(last_sec);
    p.last_heartbeat_ns = Ns(last_sec);
    p.heartbeats = static_cast<uint32_t>(last_sec);
    m.procs.push_back(p);
    return static_cast<uint32_t>(m.procs.size() - 1);
  }
  // Processes 0..n-1 alive until `last_sec`.
  void Procs(int n, double last_sec) {
    for (int i = 0; i < n; ++i) Proc(i, last_sec);
  }
  // A communicator whose rank r is process procs[r].
  uint32_t Comm(const std::string& name, uint64_t hash, const std::vector<uint32_t>& procs) {
    tools::Comm c;
    c.hash = hash;
    c.name = name;
    c.nranks = static_cast<int32_t>(procs.size());
    for (size_t r = 0; r < procs.size(); ++r) {
      CommMember mem;
      mem.proc = procs[r];
      mem.rank = static_cast<int32_t>(r);
      mem.init_ns = 0;
      c.members.push_back(mem);
      c.proc_of_rank.push_back(procs[r]);
    }
    m.comms.push_back(c);
    return static_cast<uint32_t>(m.comms.size() - 1);
  }
  int32_t RankOf(uint32_t proc, uint32_t comm) {
    for (const CommMember& mem : m.comms[comm].members)
      if (mem.proc == proc) return mem.rank;
    return -1;
  }
  // done_sec < 0: in flight.
  uint32_t Coll(uint32_t proc, uint32_t comm, uint64_t seq, const std::string& func, uint64_t count, double start_sec,
                double done_sec, const std::string& dtype = "ncclFloat32", int32_t root = 0) {
    Op op;
    op.proc = proc;
    op.comm = comm;
    op.rank = RankOf(proc, comm);
    op.kind = OpKind::kColl;
    m.SetFunc(&op, func);
    op.datatype = m.Intern(dtype);
    op.count = count;
    op.seq = seq;
    op.peer_or_root = root;
    op.nchannels = 2;
    op.start_ns = Ns(start_sec);
    if (done_sec >= 0) {
      op.state = OpState::kCompleted;
      op.done_ns = Ns(done_sec);
    } else {
      op.state = OpState::kInFlight;
    }
    m.ops.push_back(op);
    m.procs[proc].ops.push_back(static_cast<uint32_t>(m.ops.size() - 1));
    return static_cast<uint32_t>(m.ops.size() - 1);
  }
  uint32_t P2p(uint32_t proc, uint32_t comm, const std::string& func, int32_t peer, uint64_t seq, uint64_t count,
               double start_sec, double done_sec, const std::string& dtype = "ncclFloat32") {
    uint32_t oi = Coll(proc, comm, seq, func, count, start_sec, done_sec, dtype, peer);
    m.ops[oi].kind = OpKind::kP2p;
    return oi;
  }
  // Collectives #1..#n on every rank of `comm`, 0.1 s apart, each 10 ms long.
  void Steps(uint32_t comm, int n, double t = 0.1, const std::string& func = "AllReduce") {
    for (int k = 1; k <= n; ++k)
      for (uint32_t p : m.comms[comm].proc_of_rank) Coll(p, comm, k, func, 1024, t + 0.1 * (k - 1), t + 0.1 * (k - 1) + 0.01);
  }
  void Finalize(uint32_t proc, double at) {
    m.procs[proc].finalized = true;
    m.procs[proc].clean = true;
    m.procs[proc].last_ns = Ns(at);
    for (tools::Comm& c : m.comms)
      for (CommMember& mem : c.members)
        if (mem.proc == proc) mem.finalize_ns = Ns(at) - Ns(0.01);
  }
  Model& Finish() {
    for (tools::Proc& p : m.procs) {
      std::stable_sort(p.ops.begin(), p.ops.end(), [&](uint32_t a, uint32_t b) { return m.ops[a].start_ns < m.ops[b].start_ns; });
      for (uint32_t i = 0; i < p.ops.size(); ++i) m.ops[p.ops[i]].index = i;
    }
    std::map<std::tuple<uint32_t, int, int32_t, int32_t, uint64_t>, uint32_t> idx;
    m.matches.clear();
    for (uint32_t oi = 0; oi < m.ops.size(); ++oi) {
      Op& o = m.ops[oi];
      int32_t src = -1, dst = -1;
      size_t slot = static_cast<size_t>(o.rank);
      if (o.kind == OpKind::kP2p) {
        const bool recv = m.Str(o.func) == "Recv";
        src = recv ? o.peer_or_root : o.rank;
        dst = recv ? o.rank : o.peer_or_root;
        slot = recv ? 1 : 0;
      }
      auto key = std::make_tuple(o.comm, static_cast<int>(o.kind), src, dst, o.seq);
      auto it = idx.find(key);
      if (it == idx.end()) {
        Match mt;
        mt.comm = o.comm;
        mt.kind = o.kind;
        mt.seq = o.seq;
        mt.src = src;
        mt.dst = dst;
        mt.ops.assign(o.kind == OpKind::kP2p ? 2 : static_cast<size_t>(m.comms[o.comm].nranks), kNone);
        m.matches.push_back(mt);
        it = idx.emplace(key, static_cast<uint32_t>(m.matches.size() - 1)).first;
      }
      m.matches[it->second].ops[slot] = oi;
      o.match = it->second;
    }
    m.alignment_method = "one host: its processes share one clock";
    m.alignment_error_ns = 20000;
    m.hosts = {"node0"};
    return m;
  }
};

std::vector<std::string> Names(const google::protobuf::RepeatedPtrField<report::ProcRef>& refs) {
  std::vector<std::string> v;
  for (const auto& r : refs) v.push_back(r.name());
  return v;
}

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

const report::Finding* FindKind(const report::Diagnosis& d, report::FindingKind k) {
  for (const auto& f : d.findings())
    if (f.kind() == k) return &f;
  return nullptr;
}

using V = std::vector<std::string>;

// ---------------------------------------------------------------- healthy

TEST(Diagnose, HealthyJob) {
  Job j;
  j.Procs(4, 2.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 10);
  for (uint32_t p = 0; p < 4; ++p) j.Finalize(p, 2.0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.findings_size(), 0) << FormatText(d);
  EXPECT_EQ(ExitStatus(d), 0);
  EXPECT_EQ(d.severity(), report::SEVERITY_OK);
  EXPECT_EQ(d.verdict(), "OK: no problem found in 4 processes (1 communicator, 40 operations, 40 completed)");
  ASSERT_EQ(d.completed_before_hang_size(), 1);
  EXPECT_EQ(d.completed_before_hang(0).last_completed_seq(), 10u);
  EXPECT_EQ(d.completed_before_hang(0).completed_everywhere(), 10u);
}

// A job killed while its last collective was in flight (0.2 s): not a hang,
// and not healthy either. Every rank ended at the same moment: nobody to
// blame, and the verdict says what would tell.
TEST(Diagnose, KilledMidOperationIsNotHealthy) {
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
TEST(Diagnose, FinalizedJobIsHealthy) {
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
TEST(Diagnose, RankKilledThenLauncherEndsTheRest) {
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
TEST(Diagnose, RankExitedByItselfIsProgramLogic) {
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
TEST(Diagnose, EveryRankIdleThenKilledIsAHangOutsideNccl) {
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
TEST(Diagnose, OneRankEndedWithoutFinalizingAfterTheWorkIsNoOk) {
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

// ---------------------------------------------------------------- 1. missing rank

// Ranks 0..2 enter AllReduce #12 at 5 s and wait until 15 s; rank 3 stops after #11.
Job MissingRankJob() {
  Job j;
  j.Procs(4, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 11);
  for (uint32_t p = 0; p < 3; ++p) j.Coll(p, w, 12, "AllReduce", 1024, 5.0, -1);
  return j;
}

TEST(Diagnose, MissingRankLeftCleanly) {
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

TEST(Diagnose, MissingRankDied) {
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

TEST(Diagnose, MissingRankIdle) {
  Job j = MissingRankJob();  // rank 3's heartbeats go on until 15 s, no op in flight
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "HANG: rank 3 never joined AllReduce #12 on comm 'world' (4 ranks); ranks 0,1,2 waited 10.0 s; "
            "rank 3 is alive but idle outside NCCL after AllReduce #11 [cause: rank 3's resources]");
  EXPECT_EQ(d.findings(0).fates(0), report::FATE_IDLE);
  EXPECT_EQ(d.findings_size(), 1) << FormatText(d);
}

// ---- Without completion tracking (NCCLWATCH_EVENTS without kernelch, or
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
TEST(Diagnose, UntrackedSkipIsFoundThroughTheAbort) {
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
TEST(Diagnose, UntrackedLongWaitIsNotStuck) {
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
TEST(Diagnose, UntrackedDeadRanksLostRecordsAreNotAbsence) {
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
TEST(Diagnose, UntrackedSkipPutsTheSkipperInTheNextOperation) {
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

// Rank 3 waits in 'pp' for rank 4, which idles: rank 4 is the root cause,
// and the 'world' hang follows from it.
TEST(Diagnose, MissingRankWaitsInAnotherComm) {
  Job j = MissingRankJob();
  j.Proc(4, 15.0);
  uint32_t pp = j.Comm("pp", 0xdef, {3, 4});
  j.Coll(3, pp, 1, "Broadcast", 4096, 5.1, -1, "ncclBfloat16", 0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "HANG: rank 4 never joined Broadcast #1 on comm 'pp' (2 ranks); rank 3 waited 9.9 s; "
            "rank 4 is alive but idle outside NCCL [cause: rank 4's resources]");
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

// Rank 3 waits in 'pp' for rank 2, which waits in 'world' for rank 3.
TEST(Diagnose, MissingRanksOnACycleAreADeadlock) {
  Job j = MissingRankJob();
  uint32_t pp = j.Comm("pp", 0xdef, {2, 3});
  j.Coll(3, pp, 5, "Broadcast", 4096, 4.9, -1, "ncclBfloat16", 0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "DEADLOCK: rank 2 waits in AllReduce #12 on comm 'world' (4 ranks) for rank 3, which waits in Broadcast #5 "
            "on comm 'pp' (2 ranks) for rank 2; neither issued the other's operation (waited 10.0 s) [cause: program logic]");
  // The missing ranks on the cycle are its consequences, not causes.
  EXPECT_EQ(FindKind(d, report::MISSING_RANK), nullptr);
  ASSERT_GE(d.consequences_size(), 1) << FormatText(d);
  EXPECT_EQ(d.consequences(0).kind(), report::MISSING_RANK);
}

// Records lost at the tail of a file (the op completed elsewhere, so the rank took part): not a hang.
TEST(Diagnose, CompletedElsewhereIsDataLossNotAbsence) {
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
TEST(Diagnose, ADroppedRecordIsNotASkip) {
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
TEST(Diagnose, BlamingARankThatLostEventsSaysSo) {
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

// ---------------------------------------------------------------- 2. mismatch

TEST(Diagnose, MismatchNamesTheOddRankOutNotTheMajority) {
  Job j;
  j.Procs(4, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 2);
  for (uint32_t p = 0; p < 4; ++p) j.Coll(p, w, 3, "AllReduce", p == 1 ? 512 : 1024, 1.0, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "MISMATCH: AllReduce #3 on comm 'world' (4 ranks): rank 1 called count 512 where ranks 0,2,3 called count 1,024 [cause: program logic]");
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(f.kind(), report::MISMATCH);
  EXPECT_EQ(Names(f.culprits()), V{"rank 1"});
  EXPECT_EQ(Names(f.waiting()), (V{"rank 0", "rank 2", "rank 3"}));
  // The hang at #3 is explained by the mismatch: no STUCK finding for it.
  EXPECT_EQ(FindKind(d, report::STUCK_IN_PROGRESS), nullptr) << FormatText(d);
  EXPECT_EQ(ExitStatus(d), 1);
}

TEST(Diagnose, MismatchOfFunctionAndDatatype) {
  Job j;
  j.Procs(3, 15.0);
  uint32_t w = j.Comm("", 0x12ab, {0, 1, 2});
  j.Coll(0, w, 1, "AllReduce", 1024, 1.0, -1);
  j.Coll(1, w, 1, "AllGather", 256, 1.0, -1, "ncclBfloat16");
  j.Coll(2, w, 1, "AllReduce", 1024, 1.0, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "MISMATCH: AllReduce #1 on comm 0x12ab (3 ranks): rank 1 called AllGather count 256 ncclBfloat16 where "
            "ranks 0,2 called AllReduce count 1,024 ncclFloat32 [cause: program logic]");
}

TEST(Diagnose, MismatchOfRoot) {
  Job j;
  j.Procs(3, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  for (uint32_t p = 0; p < 3; ++p) j.Coll(p, w, 1, "Broadcast", 64, 1.0, -1, "ncclFloat32", p == 0 ? 1 : 0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(), "MISMATCH: Broadcast #1 on comm 'world' (3 ranks): rank 0 called root 1 where ranks 1,2 called root 0 [cause: program logic]");
}

TEST(Diagnose, MismatchWithoutMajorityNamesEverySide) {
  Job j;
  j.Procs(2, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1});
  j.Coll(0, w, 1, "AllReduce", 1024, 1.0, -1);
  j.Coll(1, w, 1, "AllReduce", 2048, 1.0, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.findings(0).kind(), report::MISMATCH);
  EXPECT_EQ(Names(d.findings(0).culprits()), (V{"rank 0", "rank 1"}));
  EXPECT_NE(d.verdict().find("no majority"), std::string::npos) << d.verdict();
}

// Rank 2 skipped AllReduce #3: its later collectives are the others' next ones.
TEST(Diagnose, SkippedCollective) {
  Job j;
  j.Procs(3, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  const char* f[] = {"AllReduce", "AllGather", "AllReduce", "AllGather", "AllReduce", "AllGather"};
  for (uint32_t p = 0; p < 3; ++p) {
    uint64_t seq = 1;
    for (int k = 0; k < 6; ++k) {
      if (p == 2 && k == 2) continue;
      j.Coll(p, w, seq++, f[k], k % 2 ? 256 : 1024, 1.0 + 0.1 * k, -1);
    }
  }
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "MISMATCH: rank 2 skipped AllReduce(1,024 ncclFloat32) #3 on comm 'world' (3 ranks): its #3 is the #4 of ranks 0,1 [cause: program logic]");
  EXPECT_EQ(Names(d.findings(0).culprits()), V{"rank 2"});
}

TEST(Diagnose, ExtraCollective) {
  Job j;
  j.Procs(3, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  for (uint32_t p = 0; p < 3; ++p) {
    uint64_t seq = 1;
    for (int k = 0; k < 4; ++k) {
      if (p == 0 && k == 1) j.Coll(p, w, seq++, "Broadcast", 8, 1.05, -1, "ncclInt64", 0);
      j.Coll(p, w, seq++, k % 2 ? "AllGather" : "AllReduce", k % 2 ? 256 : 1024, 1.0 + 0.1 * k, -1);
    }
  }
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "MISMATCH: rank 0 issued Broadcast(8 ncclInt64) as #2 on comm 'world' (3 ranks), which ranks 1,2 never "
            "issued: its #3 is their #2 [cause: program logic]");
}

// ---------------------------------------------------------------- 3. order mismatch

TEST(Diagnose, SwappedOrder) {
  Job j;
  j.Procs(3, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  j.Steps(w, 4);
  for (uint32_t p = 0; p < 3; ++p) {
    const bool odd = p == 2;
    j.Coll(p, w, 5, odd ? "AllGather" : "AllReduce", odd ? 256 : 1024, 1.0, -1);
    j.Coll(p, w, 6, odd ? "AllReduce" : "AllGather", odd ? 1024 : 256, 1.1, -1);
  }
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "ORDER MISMATCH: comm 'world' (3 ranks) #5-#6: rank 2 issued AllGather(256 ncclFloat32) then "
            "AllReduce(1,024 ncclFloat32) where ranks 0,1 issued AllReduce(1,024 ncclFloat32) then AllGather(256 ncclFloat32) [cause: program logic]");
  EXPECT_EQ(d.findings(0).kind(), report::ORDER_MISMATCH);
  EXPECT_EQ(Names(d.findings(0).culprits()), V{"rank 2"});
  EXPECT_EQ(FindKind(d, report::MISMATCH), nullptr);
}

// NCCL numbers collectives per function, so AllReduce #k and AllGather #k
// match on every rank whatever the order (here AllGather's numbers are
// 101.., since Job matches by number alone). Over the network transport a
// swapped pair can complete, each run against the other: not a hang, and
// worse than one. It is an error all the same, and says that it completed.
TEST(Diagnose, SwappedOrderThatCompletedIsAnError) {
  Job j;
  j.Procs(4, 2.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  for (uint32_t p = 0; p < 4; ++p) {
    for (int k = 1; k <= 4; ++k) {
      const bool swap = p == 1 && k == 3;
      const double t = 0.1 * k;
      j.Coll(p, w, k, "AllReduce", 1024, swap ? t + 0.02 : t, (swap ? t + 0.02 : t) + 0.01);
      j.Coll(p, w, 100 + k, "AllGather", 256, swap ? t : t + 0.02, (swap ? t : t + 0.02) + 0.01);
    }
    j.Finalize(p, 2.0);
  }
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_GE(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).kind(), report::ORDER_MISMATCH);
  EXPECT_TRUE(d.findings(0).completed());
  EXPECT_EQ(Names(d.findings(0).culprits()), V{"rank 1"});
  EXPECT_EQ(ExitStatus(d), 1);
  EXPECT_EQ(d.verdict(),
            "ORDER MISMATCH: rank 1 issued AllGather #103 before AllReduce #3 on comm 'world' (4 ranks) where ranks "
            "0,2,3 issued AllReduce #3 first; both completed on every rank, each against the other: their results "
            "are wrong [cause: program logic]");
}

// A count mismatch that completed: the same first line, and that it completed.
TEST(Diagnose, MismatchThatCompletedSaysTheResultsAreWrong) {
  Job j;
  j.Procs(3, 2.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  j.Steps(w, 2);
  for (uint32_t p = 0; p < 3; ++p) {
    j.Finalize(p, 2.0);
    j.Coll(p, w, 3, "AllReduce", p == 2 ? 512 : 1024, 1.0, 1.01);
  }
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_GE(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).kind(), report::MISMATCH);
  EXPECT_TRUE(d.findings(0).completed());
  EXPECT_EQ(d.verdict(),
            "MISMATCH: AllReduce #3 on comm 'world' (3 ranks): rank 2 called count 512 where ranks 0,1 called count "
            "1,024; it completed on every rank: the results are wrong [cause: program logic]");
}

// Rank 1 sleeps 30 s before AllReduce #5; ranks 0,2,3 wait in it, then
// their watchdogs end them, and rank 1, on its own, waits in #6 for ranks
// that are gone. The late arrival is the cause; the later hang follows.
TEST(Diagnose, LateRankIsTheCauseOfTheHangThatFollows) {
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
  EXPECT_EQ(f.cause(), report::CAUSE_RESOURCES);
  EXPECT_EQ(d.verdict(),
            "LATE: rank 1 reached AllReduce #5 on comm 'world' (4 ranks) 30.0 s after ranks 0,2,3, which waited in "
            "it; it was idle outside NCCL until then [cause: rank 1's resources]");
  // The hang that follows names ranks 0,2,3 as missing: a consequence, blaming no one.
  ASSERT_GE(d.consequences_size(), 1) << FormatText(d);
  EXPECT_EQ(d.consequences(0).kind(), report::MISSING_RANK);
  EXPECT_EQ(d.consequences(0).culprits_size(), 0);
  EXPECT_EQ(ExitStatus(d), 1);
}

// Every rank issued AllReduce #5 in time, but rank 1's GPU was busy: the
// stuck reports of ranks 0,2 saw their GPUs in it and rank 1's saw its GPU
// not started; it completed 30 s later.
TEST(Diagnose, LateGpuIsNamedFromTheStuckReports) {
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

// Sampled events (NCCLWATCH_EVENT_INTERVAL_US): AllReduce #2 and #3 were
// launched without events of their own. Ranks 0,1 passed them (a later
// event proved them) and their GPUs are in #4; rank 2's stuck report puts
// its GPU in the window #2..#3 and says it never started #4. The finding is
// on #4, names rank 2, and gives the window; no finding names #2 or #3
// alone, and no LATE finding reads the window as "not started".
TEST(Diagnose, SampledEventsNameTheWindowNeverOneOp) {
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
TEST(Diagnose, SampledEventsWithEveryGpuInAWindowNameNoRankAlone) {
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
TEST(Diagnose, SampledTailLeftUnprovenIsNoHang) {
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

// The same with CUDA-event completions where rank 1's stuck report has no
// answer (NCCLWATCH_START_EVENTS=0, or its event pair taken over by later
// launches): no kernel-channel counts either, so nothing says its GPU had
// not started it. No LATE finding may rest on that.
TEST(Diagnose, AnEventReportWithoutGpuProgressSaysNothingOfTheGpu) {
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

// ---------------------------------------------------------------- 4. stuck in progress

TEST(Diagnose, StuckInProgressNamesChannelAndPeer) {
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

TEST(Diagnose, StuckOnSomeRanksNamesThem) {
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

// ---------------------------------------------------------------- 5. point-to-point

TEST(Diagnose, SendWithoutReceive) {
  Job j;
  j.Procs(3, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  j.P2p(0, w, "Send", 2, 1, 4096, 1.0, 1.2);
  j.P2p(2, w, "Recv", 0, 1, 4096, 1.0, 1.2);
  j.P2p(0, w, "Send", 2, 2, 4096, 2.0, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "UNMATCHED P2P: rank 0 sent 4,096 x ncclFloat32 to rank 2 on comm 'world' (3 ranks) (Send #2 between them); "
            "rank 2 never posted the matching Recv; rank 0 waited 13.0 s; rank 2 is alive but idle outside NCCL "
            "after Recv #1 from rank 0 [cause: program logic]");
  EXPECT_EQ(Names(d.findings(0).culprits()), V{"rank 2"});
  EXPECT_EQ(Names(d.findings(0).waiting()), V{"rank 0"});
  EXPECT_TRUE(d.findings(0).p2p());
}

TEST(Diagnose, SendAndReceiveSizesDisagree) {
  Job j;
  j.Procs(2, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1});
  j.P2p(0, w, "Send", 1, 1, 1024, 1.0, -1);
  j.P2p(1, w, "Recv", 0, 1, 2048, 1.0, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "UNMATCHED P2P: sizes disagree on comm 'world' (2 ranks): rank 0's Send #1 to rank 1 carries 1,024 x ncclFloat32 "
            "but rank 1's Recv expects 2,048 x ncclFloat32 [cause: program logic]");
  EXPECT_EQ(Names(d.findings(0).culprits()), (V{"rank 0", "rank 1"}));
}

TEST(Diagnose, SameBytesInDifferentDatatypesAgree) {
  Job j;
  j.Procs(2, 2.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1});
  j.P2p(0, w, "Send", 1, 1, 1024, 1.0, 1.1, "ncclFloat32");
  j.P2p(1, w, "Recv", 0, 1, 2048, 1.0, 1.1, "ncclBfloat16");
  for (uint32_t p = 0; p < 2; ++p) j.Finalize(p, 2.0);
  EXPECT_EQ(Diagnose(j.Finish()).findings_size(), 0);
}

// ---------------------------------------------------------------- 6. dead rank

TEST(Diagnose, DeadRankInsideTheOperationOthersWaitIn) {
  Job j;
  j.Procs(4, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 11);
  for (uint32_t p = 0; p < 4; ++p) j.Coll(p, w, 12, "AllReduce", 1024, 5.0, -1);
  j.m.procs[3].last_ns = Ns(5.5);
  j.m.procs[3].last_heartbeat_ns = Ns(5.0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "DEAD: rank 3 stopped without finalizing at 5.50 s (9.5 s before the job's last record), inside AllReduce #12 "
            "on comm 'world' (4 ranks); ranks 0,1,2 wait in it (10.0 s) [cause: rank 3's resources]");
  EXPECT_EQ(d.findings(0).kind(), report::DEAD_RANK);
  EXPECT_DOUBLE_EQ(d.findings(0).t_last_sign_of_life_sec(), 5.5);
  // The stuck collective is blocked behind the death that explains it: a
  // consequence, with its ranks waiting and no culprit.
  EXPECT_EQ(FindKind(d, report::STUCK_IN_PROGRESS), nullptr);
  ASSERT_EQ(d.consequences_size(), 1) << FormatText(d);
  EXPECT_EQ(d.consequences(0).kind(), report::STUCK_IN_PROGRESS);
  EXPECT_EQ(d.consequences(0).culprits_size(), 0);
  EXPECT_EQ(d.consequences(0).waiting_size(), 4);
  EXPECT_NE(FormatText(d).find("\nBlocked behind it (1):\n  STUCK: AllReduce #12"), std::string::npos) << FormatText(d);
}

TEST(Diagnose, RecentSilenceIsNotDeath) {
  Job j;
  j.Procs(2, 5.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1});
  j.Steps(w, 3);
  j.m.procs[1].last_ns = Ns(3.5);  // 1.5 s before the job's end: within max(3 x 1 s, 2 s)
  EXPECT_EQ(FindKind(Diagnose(j.Finish()), report::DEAD_RANK), nullptr);
}

// ---------------------------------------------------------------- 7. wait cycle

TEST(Diagnose, CrossCommunicatorDeadlock) {
  Job j;
  j.Procs(2, 15.0);
  uint32_t a = j.Comm("a", 0xa, {0, 1});
  uint32_t b = j.Comm("b", 0xb, {0, 1});
  j.Steps(a, 4);
  j.Steps(b, 2, 0.15);
  j.Coll(0, a, 5, "AllReduce", 1024, 1.0, -1);
  j.Coll(1, b, 3, "AllReduce", 1024, 1.0, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "DEADLOCK: rank 0 waits in AllReduce #5 on comm 'a' (2 ranks) for rank 1, which waits in AllReduce #3 on "
            "comm 'b' (2 ranks) for rank 0; neither issued the other's operation (waited 14.0 s) [cause: program logic]");
  EXPECT_EQ(Names(d.findings(0).culprits()), (V{"rank 0", "rank 1"}));
  // Both missing-rank findings are blocked behind the cycle: consequences,
  // each naming the other communicator, without culprits.
  EXPECT_EQ(d.findings_size(), 1) << FormatText(d);
  int missing = 0;
  for (const auto& f : d.consequences()) {
    missing += f.kind() == report::MISSING_RANK;
    EXPECT_EQ(f.culprits_size(), 0);
  }
  EXPECT_EQ(missing, 2) << FormatText(d);
}

// ---------------------------------------------------------------- 8. straggler

TEST(Diagnose, StragglerIsAWarning) {
  Job j;
  j.Procs(4, 3.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  for (int k = 1; k <= 10; ++k)
    for (uint32_t p = 0; p < 4; ++p) {
      double t = 0.1 * k;
      double late = p == 2 ? 0.005 + 0.001 * (k % 3) : 0.0001 * p;
      j.Coll(p, w, k, "AllReduce", 1024, t + late, t + 0.009);
    }
  for (uint32_t p = 0; p < 4; ++p) j.Finalize(p, 3.0);
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_EQ(d.findings_size(), 1) << FormatText(d);
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(f.kind(), report::STRAGGLER);
  EXPECT_EQ(f.severity(), report::SEVERITY_WARNING);
  EXPECT_EQ(d.severity(), report::SEVERITY_WARNING);
  EXPECT_EQ(Names(f.culprits()), V{"rank 2"});
  EXPECT_EQ(f.straggler().collectives(), 10u);
  EXPECT_EQ(f.straggler().late(), 10u);
  EXPECT_NEAR(f.straggler().max_lag_ms(), 6.8, 0.01);
  EXPECT_NEAR(f.straggler().median_lag_ms(), 5.8, 0.01);
  EXPECT_EQ(d.verdict(),
            "STRAGGLER: rank 2 arrived last at 10 of 10 collectives (100%), a median 5.8 ms after the median rank "
            "(max 6.8 ms) [cause: rank 2's resources]");
  EXPECT_EQ(ExitStatus(d), 1);
}

// Rank 2 sleeps before each AllReduce and nothing else: late at 8 of its
// 24 collectives, a third, and a straggler at AllReduce all the same.
TEST(Diagnose, StragglerAtOneFunction) {
  Job j;
  j.Procs(4, 3.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  for (int k = 1; k <= 8; ++k)
    for (uint32_t p = 0; p < 4; ++p) {
      const double t = 0.3 * k, jitter = 0.0001 * p;
      j.Coll(p, w, k, "AllReduce", 1024, t + (p == 2 ? 0.05 : jitter), t + 0.06);
      j.Coll(p, w, 100 + k, "AllGather", 1024, t + 0.07 + jitter, t + 0.08);
      j.Coll(p, w, 200 + k, "Broadcast", 1024, t + 0.09 + jitter, t + 0.1);
    }
  for (uint32_t p = 0; p < 4; ++p) j.Finalize(p, 3.0);
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_EQ(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).kind(), report::STRAGGLER);
  EXPECT_EQ(Names(d.findings(0).culprits()), V{"rank 2"});
  EXPECT_EQ(d.findings(0).func(), "AllReduce");
  EXPECT_EQ(d.verdict().rfind("STRAGGLER: rank 2 arrived last at 8 of 8 AllReduce on comm 'world' (4 ranks) (100%)", 0),
            0u)
      << d.verdict();
}

TEST(Diagnose, EvenArrivalsAreNoStraggler) {
  Job j;
  j.Procs(4, 3.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  for (int k = 1; k <= 10; ++k)
    for (uint32_t p = 0; p < 4; ++p) j.Coll(p, w, k, "AllReduce", 1024, 0.1 * k + 0.0002 * ((p + k) % 4), 0.1 * k + 0.009);
  for (uint32_t p = 0; p < 4; ++p) j.Finalize(p, 3.0);
  EXPECT_EQ(Diagnose(j.Finish()).findings_size(), 0);
}

// ---------------------------------------------------------------- precedence, input, output

TEST(Diagnose, MismatchComesBeforeMissingRankAndStuck) {
  Job j = MissingRankJob();  // a missing rank on 'world'
  uint32_t t = j.Comm("tp", 0x7, {0, 1, 2});
  for (uint32_t p = 0; p < 3; ++p) j.Coll(p, t, 1, "AllGather", p == 0 ? 128 : 256, 6.0, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_GE(d.findings_size(), 2);
  EXPECT_EQ(d.findings(0).kind(), report::MISMATCH);
  EXPECT_EQ(d.findings(1).kind(), report::MISSING_RANK);
}

// Every communicator is complete, but the launcher started 8 ranks and 4
// gave files (a job whose other half used other communicators): not OK.
TEST(Diagnose, LauncherRanksWithoutFilesAreIncomplete) {
  Job j;
  j.Procs(4, 2.0);
  for (uint32_t p = 0; p < 4; ++p) j.m.procs[p].launcher_world_size = 8;
  uint32_t w = j.Comm("half", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 3);
  for (uint32_t p = 0; p < 4; ++p) j.Finalize(p, 2.0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(ExitStatus(d), 3) << FormatText(d);
  EXPECT_NE(d.verdict().find("but 4 of the launcher's 8 ranks given"), std::string::npos) << d.verdict();
}

TEST(Diagnose, InputIssues) {
  Job j;
  j.Procs(3, 2.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  j.m.comms[w].nranks = 4;
  j.m.comms[w].proc_of_rank.push_back(kNone);
  j.m.procs[2].drops.write_failed = 1234;
  j.m.procs[2].drops.last_write_error = "No space left on device";
  j.m.procs[1].cut_tail = true;
  j.m.procs[1].issues.push_back("/traces/node0-1001.ncclwatch: offset 4096: cut tail: the last record's length is incomplete");
  j.m.errors.push_back("cannot open /traces/x.ncclwatch: Permission denied");
  for (uint32_t p = 0; p < 3; ++p) j.Finalize(p, 2.0);
  report::Diagnosis d = Diagnose(j.Finish());
  // Input notes make the evidence incomplete: never OK, and the first line says why.
  EXPECT_EQ(ExitStatus(d), 3) << FormatText(d);
  EXPECT_EQ(d.verdict().rfind("INCOMPLETE: no problem found in the 3 processes given, but the files hold no operation; "
                              "no file for rank 3 of comm 'world' (4 ranks) (3 of 4 given); and 2 more (Input): cannot "
                              "tell",
                              0),
            0u)
      << d.verdict();
  EXPECT_EQ(d.incomplete_size(), 4);
  std::string text = FormatText(d);
  EXPECT_NE(text.find("rank 2 lost 1,234 events: 1,234 in failed writes (No space left on device)"), std::string::npos) << text;
  EXPECT_NE(text.find("cut tail: the last record's length is incomplete (normal for a killed process)"), std::string::npos);
  EXPECT_NE(text.find("comm 'world' (4 ranks): no trace file for its rank 3 (3 of 4 given)"), std::string::npos);
  EXPECT_NE(text.find("cannot open /traces/x.ncclwatch: Permission denied"), std::string::npos);
  int drops = 0;
  for (const auto& i : d.input_issues())
    if (i.kind() == report::InputIssue::DROPS) {
      ++drops;
      EXPECT_EQ(i.lost_events(), 1234u);
    }
  EXPECT_EQ(drops, 1);
}

// What a windowed reader (ncclwatch watch) let go once every rank had
// finished it counts in the totals; what it let go before makes the
// evidence incomplete, and the first line says so.
TEST(Diagnose, OperationsAWindowLetGo) {
  Job j;
  j.Procs(4, 2.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 10);
  for (uint32_t p = 0; p < 4; ++p) {
    j.Finalize(p, 2.0);
    j.m.procs[p].settled_ops = 90;
    j.m.procs[p].settled_completed = 90;
  }
  j.m.comms[w].settled_colls = 90;
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(ExitStatus(d), 0) << FormatText(d);
  EXPECT_EQ(d.verdict(), "OK: no problem found in 4 processes (1 communicator, 400 operations, 400 completed)");
  EXPECT_EQ(d.operations(), 400u);
  ASSERT_EQ(d.completed_before_hang_size(), 1);
  EXPECT_EQ(d.completed_before_hang(0).completed_everywhere(), 100u);
  EXPECT_NE(FormatText(d).find("watch kept a recent window: it let go of 360 operations"), std::string::npos);

  j.m.procs[1].cut_ops = 7;
  d = Diagnose(j.m);
  EXPECT_EQ(ExitStatus(d), 3) << FormatText(d);
  EXPECT_EQ(d.verdict(), "INCOMPLETE: no problem found in the 4 processes given, but watch let go of 7 operations of "
                         "rank 1 before every rank had finished them: cannot tell whether the job was healthy");
}

TEST(Diagnose, JsonRoundTrip) {
  Job j = MissingRankJob();
  j.Finalize(3, 5.2);
  report::Diagnosis d = Diagnose(j.Finish());
  std::string json = FormatJson(d);
  EXPECT_NE(json.find("\"verdict\": \"HANG: rank 3 never joined"), std::string::npos) << json;
  EXPECT_NE(json.find("\"kind\": \"MISSING_RANK\""), std::string::npos) << json;
  report::Diagnosis back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &back).ok());
  EXPECT_EQ(back.SerializeAsString(), d.SerializeAsString());
  EXPECT_EQ(FormatText(back), FormatText(d));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The whole text of one hang. To regenerate:
//   bazel test //tools/diagnose:diagnose_test --test_env=UPDATE_GOLDEN=$PWD/tools/diagnose/testdata
TEST(Diagnose, GoldenTextOfAHang) {
  Job j = MissingRankJob();
  j.m.procs[3].last_ns = Ns(5.0);
  j.m.procs[3].last_heartbeat_ns = Ns(4.9);
  j.m.procs[3].cut_tail = true;
  j.m.procs[3].issues.push_back("/traces/node0-1003.ncclwatch: offset 8190: cut tail: the last record's length is incomplete");
  StuckReport r;
  r.time_ns = Ns(11.0);
  r.threshold_sec = 6;
  StuckOp so;
  so.op = j.m.procs[0].ops.back();
  so.comm = 0;
  so.seq = 12;
  so.func = j.m.Intern("AllReduce");
  so.age_ns = 6 * kSec;
  so.nchannels = 2;
  so.kernel_started = 2;
  so.kernel_stopped = 0;
  ProxyState x;
  x.channel = 0;
  x.peer = 3;
  x.nsteps = 8;
  x.last_step = 0;
  x.last_state = 10;
  x.last_update_ns = Ns(5.0);
  so.proxy = {x};
  r.ops.push_back(so);
  j.m.procs[0].stucks.push_back(r);
  report::Diagnosis d = Diagnose(j.Finish());
  const std::string text = FormatText(d);
  EXPECT_EQ(FirstLine(text), d.verdict());
  if (const char* dir = getenv("UPDATE_GOLDEN")) {
    std::ofstream(std::string(dir) + "/hang.txt") << text;
  }
  EXPECT_EQ(text, ReadFile("tools/diagnose/testdata/hang.txt"));
}

TEST(DiagnoseCommand, Usage) {
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"ncclwatch", "diagnose", "--help"}, out, err), 0);
  EXPECT_NE(out.str().find("usage: ncclwatch diagnose"), std::string::npos);
  std::ostringstream out2, err2;
  EXPECT_EQ(RunCli({"ncclwatch", "diagnose", "--bogus"}, out2, err2), 2);
  EXPECT_NE(err2.str().find("unknown option '--bogus'"), std::string::npos);
  std::ostringstream out3, err3;
  EXPECT_EQ(RunCli({"ncclwatch", "diagnose"}, out3, err3), 2);
  std::ostringstream out4, err4;
  EXPECT_EQ(RunCli({"ncclwatch", "diagnose", "--format=xml", "x"}, out4, err4), 2);
}

TEST(DiagnoseCommand, UnusableInputIsExit2) {
  const std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/garbage.ncclwatch";
  std::ofstream(path) << "this is not a trace file";
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"ncclwatch", "diagnose", path}, out, err), 2);
  EXPECT_NE(err.str().find(path), std::string::npos) << err.str();
  std::ostringstream jout, jerr;
  EXPECT_EQ(RunCli({"ncclwatch", "diagnose", "--format=json", "/nonexistent/dir/x.ncclwatch"}, jout, jerr), 2);
  report::Diagnosis d;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(jout.str(), &d).ok()) << jout.str();
  EXPECT_EQ(d.exit_status(), 2);
  EXPECT_EQ(ExitStatus(d), 2);
  EXPECT_NE(d.verdict().find("UNUSABLE INPUT: "), std::string::npos);
}

}  // namespace
}  // namespace ncclwatch::tools
