// End to end: synthetic trace files (tools/testing/trace_builder.h) through
// BuildModel and Diagnose, and `ncclwatch diagnose` (RunCli) on a directory.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <iostream>
#include <map>
#include <utility>
#include <vector>
#include <sstream>

#include "tools/cli.h"
#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"
#include "proto/trace.pb.h"
#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools {
namespace {

using testing::BuildJob;
using testing::JobSpec;
using testing::kMs;
using testing::kSec;
using testing::OpPlan;
using testing::RankPlan;

std::string TempDir() { return testing::NewTestDir("diagnose_e2e"); }

report::Diagnosis RunJob(const JobSpec& spec, std::string* dir_out = nullptr) {
  std::string dir = TempDir();
  testing::WriteJob(BuildJob(spec), dir);
  if (dir_out) *dir_out = dir;
  Model m;
  std::string err;
  EXPECT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
  report::Diagnosis d = Diagnose(m);
  std::cout << "---- " << ::testing::UnitTest::GetInstance()->current_test_info()->name() << "\n" << FormatText(d);
  return d;
}

// Rank `rank` of a 2-rank job without stuck reports: pid `pid0 + rank`,
// profiler API `api`, NCCL's event mask `mask`.
testing::ProcSpec TwoRankSpec(int64_t pid0, int rank, uint32_t api, uint64_t mask) {
  testing::ProcSpec ps;
  ps.pid = pid0 + rank;
  ps.launcher_rank = rank;
  ps.launcher_world_size = 2;
  ps.api = api;
  ps.event_mask = mask;
  ps.stuck_sec = 0;
  return ps;
}

std::vector<std::string> Names(const report::Finding& f) {
  std::vector<std::string> v;
  for (const auto& r : f.culprits()) v.push_back(r.name());
  return v;
}

// Rank 1 is killed at 3.095 s; the launcher ends the others half a second
// later, while they wait in the collective rank 1 never issued: no watchdog
// fired, nothing waited long enough to be a hang, and the job is dead.
TEST(DiagnoseE2E, RankKilledThenLauncherEndsTheRest) {
  JobSpec spec;
  spec.nranks = 4;
  spec.ncolls = 20;
  spec.end_ns = 3 * kSec + 600 * kMs;
  spec.rank_hook = [](int rank, RankPlan& r) {
    if (rank == 1) r.dies_at_ns = 3 * kSec + 95 * kMs;
    else r.end = testing::RankEnd::kKilled;
  };
  report::Diagnosis d = RunJob(spec);
  ASSERT_GE(d.findings_size(), 1);
  EXPECT_EQ(d.findings(0).kind(), report::JOB_ENDED);
  EXPECT_EQ(d.findings(0).ending(), report::ENDING_ONE_FIRST);
  EXPECT_EQ(Names(d.findings(0)), std::vector<std::string>{"rank 1"});
  EXPECT_EQ(ExitStatus(d), 1);
  EXPECT_EQ(d.verdict().rfind("ENDED: rank 1 ended first, without finalizing (killed or crashed)", 0), 0u) << d.verdict();
  EXPECT_NE(d.verdict().find("[cause: rank 1's resources]"), std::string::npos) << d.verdict();
}

// Profiler API v1 to v3 (NCCL 2.23 to 2.26) tell neither a communicator's
// size nor our rank in it, and give no completions. Rank 1 skips AllReduce
// #4 and goes on into Broadcast #4; rank 0 waits in AllReduce #4 until its
// watchdog aborts. Whoever else may belong to the communicator, a member
// that never issued what another waits in is a finding, not "no problem".
TEST(DiagnoseE2E, SkipIsFoundWithoutCommunicatorSizes) {
  const std::string dir = TempDir();
  for (int rank = 0; rank < 2; ++rank) {
    testing::TraceBuilder b(TwoRankSpec(700, rank, 2, 0x6));
    const int w = b.AddCommFromEvent(0xabc, kSec);
    for (uint64_t k = 0; k < 4; ++k) {
      b.Coll(w, "AllReduce", k, 1024, 2 * kSec + k * 100 * kMs, testing::kNever);
      b.Coll(w, "Broadcast", k, 1024, 2 * kSec + k * 100 * kMs + 10 * kMs, testing::kNever);
    }
    if (rank == 0) b.Coll(w, "AllReduce", 4, 1024, 2 * kSec + 400 * kMs, testing::kNever);
    b.Coll(w, "Broadcast", 4, 1024, 2 * kSec + 410 * kMs, testing::kNever);
    b.Heartbeats(kSec, 12 * kSec);
    b.Finalize(12 * kSec, true);  // the watchdog's abort
    ASSERT_TRUE(b.WriteTo(dir + "/" + b.FileName()));
  }
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
  report::Diagnosis d = Diagnose(m);
  std::cout << FormatText(d);
  ASSERT_GE(d.findings_size(), 1) << d.verdict();
  EXPECT_EQ(ExitStatus(d), 3) << d.verdict();  // the sizes stay unknown
  EXPECT_NE(d.verdict().find("HANG: rank 1 never joined AllReduce #4"), std::string::npos) << d.verdict();
  EXPECT_EQ(d.verdict().rfind("INCOMPLETE EVIDENCE (", 0), 0u) << d.verdict();
}

// Without kernel channels in its mask NCCL (2.26 and later) does not count
// a call it captured into a CUDA graph: the next call takes the same number,
// and so does each replay. A graph with proxy operations (the network) runs
// its plan per replay from CUDA's host-callback thread (no launch of its own
// there: NO_COMPLETION_NO_LAUNCH with completions from CUDA events; seen
// with PyTorch 2.11, testdata/torch/graph-replay-events-4r); one without
// (NVLink, shared memory) starts its ops once, at the capture, after a
// launch into the capture (NO_COMPLETION_GRAPH).
enum class Numbered { kReplays, kCapturedOnce, kRepeatTracked };
// How the job goes on after the graph.
enum class Then {
  kHealthy,        // the next call (#1, counted) and #2, finalized
  kRank1SkipsLast, // rank 1 never issues #2
  kRank1SkipsNext, // rank 1 never issues the next call, nor anything after it
  kNothing,        // no rank issues anything after the graph, and none finalizes (killed)
  kRank1Unfinalized,  // as kHealthy, but rank 1 never finalizes (killed after its last call)
  kRank1NotClean,     // as kHealthy, but rank 1's finalize says not every communicator was
};
std::string GraphJob(Numbered how, Then then) {
  const std::string dir = TempDir();
  for (int rank = 0; rank < 2; ++rank) {
    testing::TraceBuilder b(TwoRankSpec(720, rank, 5, 0x806));
    const int w = b.AddComm(0xabe, "world", 2, rank, kSec);
    testing::OpOpts event;
    event.from_event = true;
    testing::OpOpts graph;
    if (how != Numbered::kRepeatTracked) {
      graph.completion_tracked = false;
      graph.no_completion = how == Numbered::kReplays ? trace::NO_COMPLETION_NO_LAUNCH : trace::NO_COMPLETION_GRAPH;
    }
    const uint64_t t = 2 * kSec;
    b.Coll(w, "AllReduce", 0, 1024, t, static_cast<int64_t>(t + 5 * kMs), event);
    // #1 captured: once at the capture, or once per replay (twice).
    for (int k = 0; k < (how == Numbered::kCapturedOnce ? 1 : 2); ++k)
      b.Coll(w, "AllReduce", 1, 1024, t + (10 + k * 10) * kMs,
             how == Numbered::kRepeatTracked ? static_cast<int64_t>(t + (15 + k * 10) * kMs) : testing::kNever, graph);
    const bool skip_next = then == Then::kRank1SkipsNext;
    if (then != Then::kNothing && !(rank == 1 && skip_next))  // the next call
      b.Coll(w, "AllReduce", 1, 1024, t + 40 * kMs, skip_next ? testing::kNever : static_cast<int64_t>(t + 45 * kMs),
             event);
    const bool skip_last = then == Then::kRank1SkipsLast;
    const bool all_calls = then == Then::kHealthy || then == Then::kRank1Unfinalized || then == Then::kRank1NotClean;
    if (all_calls || (skip_last && rank == 0))
      b.Coll(w, "AllReduce", 2, 1024, t + 50 * kMs, skip_last ? testing::kNever : static_cast<int64_t>(t + 55 * kMs),
             event);
    const bool killed = then == Then::kRank1Unfinalized && rank == 1;
    b.Heartbeats(kSec, killed ? 6 * kSec : 12 * kSec);
    if (then != Then::kNothing && !killed)
      b.Finalize(12 * kSec, all_calls && !(then == Then::kRank1NotClean && rank == 1));
    EXPECT_TRUE(b.WriteTo(dir + "/" + b.FileName()));
  }
  return dir;
}

// GraphJob's model in `m`, and its diagnosis, printed.
report::Diagnosis DiagnoseGraphJob(Numbered how, Then then, Model* m) {
  std::string err;
  EXPECT_TRUE(BuildModel({GraphJob(how, then)}, LoadOptions(), m, &err)) << err;
  report::Diagnosis d = Diagnose(*m);
  std::cout << FormatText(d);
  return d;
}

constexpr char kGraphReason[] =
    "ranks 0,1 ran NCCL calls captured into CUDA graphs, which NCCL does not number apart from the next call "
    "(AllReduce #1 on comm 'world' (2 ranks) held by several operations), so those operations cannot be matched "
    "across ranks";

TEST(DiagnoseE2E, GraphNumbersAreNamedNotDamage) {
  for (Numbered how : {Numbered::kReplays, Numbered::kCapturedOnce}) {
    Model m;
    report::Diagnosis d = DiagnoseGraphJob(how, Then::kHealthy, &m);
    for (const Proc& p : m.procs) {
      EXPECT_FALSE(p.damaged) << p.path;
      EXPECT_EQ(p.graph_repeats, how == Numbered::kReplays ? 2u : 1u) << p.path;
    }
    EXPECT_EQ(ExitStatus(d), 3) << d.verdict();
    EXPECT_EQ(d.verdict().rfind(std::string("INCOMPLETE: no problem found in the 2 processes given, but ") + kGraphReason,
                                0),
              0u)
        << d.verdict();
    // The one gap `check --allow-incomplete=cuda-graphs` accepts, alone.
    ASSERT_EQ(d.incomplete_kinds_size(), d.incomplete_size());
    EXPECT_EQ(d.incomplete_size(), 1) << d.verdict();
    EXPECT_EQ(d.incomplete_kinds(0), report::INCOMPLETE_CUDA_GRAPHS);
  }
}

// A process that ended without finalizing every communicator may have
// stopped inside a graph's operation, whose end NCCL does not report: a
// second gap, which no gate option accepts, even though every call NCCL
// counted completed. One killed outright is a finding of its own.
TEST(DiagnoseE2E, AGraphJobWithARankNotFinalizedIsNeverOnlyAGraphGap) {
  for (Numbered how : {Numbered::kReplays, Numbered::kCapturedOnce}) {
    Model killed_m;
    report::Diagnosis killed = DiagnoseGraphJob(how, Then::kRank1Unfinalized, &killed_m);
    ASSERT_GE(killed.findings_size(), 1) << killed.verdict();
    EXPECT_EQ(killed.findings(0).severity(), report::SEVERITY_ERROR) << killed.verdict();
    EXPECT_NE(killed.verdict().find("DEAD: rank 1 stopped without finalizing"), std::string::npos) << killed.verdict();

    Model m;
    report::Diagnosis d = DiagnoseGraphJob(how, Then::kRank1NotClean, &m);
    EXPECT_EQ(ExitStatus(d), 3) << d.verdict();
    ASSERT_EQ(d.incomplete_kinds_size(), d.incomplete_size());
    ASSERT_EQ(d.incomplete_size(), 2) << d.verdict();
    EXPECT_EQ(d.incomplete(0), kGraphReason);
    EXPECT_EQ(d.incomplete_kinds(0), report::INCOMPLETE_CUDA_GRAPHS);
    EXPECT_EQ(d.incomplete(1),
              "rank 1 ended without finalizing every communicator, in a job that ran NCCL calls captured into "
              "CUDA graphs, whose ends NCCL does not report: whether one of them hung is unknown");
    EXPECT_EQ(d.incomplete_kinds(1), report::INCOMPLETE_OTHER);
    EXPECT_NE(d.verdict().find(d.incomplete(1)), std::string::npos) << d.verdict();

    // The same from a per-node summary that let the graph's operations go.
    const std::string dir = GraphJob(how, Then::kRank1NotClean);
    const std::string summary = dir + "/node.ncclsummary";
    std::ostringstream sout, serr, out, err;
    ASSERT_EQ(RunCli({"ncclwatch", "summarize", "--window", "1", "-o", summary, dir}, sout, serr), 0) << serr.str();
    EXPECT_EQ(RunCli({"ncclwatch", "diagnose", "--format=json", summary}, out, err), 3) << err.str();
    report::Diagnosis from_summary;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out.str(), &from_summary).ok()) << out.str();
    ASSERT_EQ(from_summary.incomplete_kinds_size(), 2) << from_summary.verdict();
    EXPECT_EQ(from_summary.incomplete_kinds(0), report::INCOMPLETE_CUDA_GRAPHS);
    EXPECT_EQ(from_summary.incomplete(1), d.incomplete(1));
  }
}

TEST(DiagnoseE2E, ARepeatedNumberOfATrackedOperationIsDamage) {
  Model m;
  report::Diagnosis d = DiagnoseGraphJob(Numbered::kRepeatTracked, Then::kHealthy, &m);
  for (const Proc& p : m.procs) {
    EXPECT_TRUE(p.damaged) << p.path;
    EXPECT_EQ(p.graph_repeats, 0u) << p.path;
  }
  EXPECT_EQ(ExitStatus(d), 3) << d.verdict();
  EXPECT_NE(d.verdict().find("file is damaged at offset"), std::string::npos) << d.verdict();
}

TEST(DiagnoseE2E, AHangAfterGraphsIsFoundAndSaysWhatItRestsOn) {
  Model m;
  report::Diagnosis d = DiagnoseGraphJob(Numbered::kReplays, Then::kRank1SkipsLast, &m);
  EXPECT_EQ(ExitStatus(d), 3) << d.verdict();
  EXPECT_EQ(d.verdict().rfind(std::string("INCOMPLETE EVIDENCE (") + kGraphReason + "): ", 0), 0u) << d.verdict();
  EXPECT_NE(d.verdict().find("rank 1 never joined AllReduce #2"), std::string::npos) << d.verdict();
}

// The call after the captured ones takes their number: a rank that
// captured or replayed them but never issued that call did not join it.
TEST(DiagnoseE2E, AHangAtTheNumberAGraphSharesIsFound) {
  for (Numbered how : {Numbered::kReplays, Numbered::kCapturedOnce}) {
    Model m;
    report::Diagnosis d = DiagnoseGraphJob(how, Then::kRank1SkipsNext, &m);
    EXPECT_EQ(ExitStatus(d), 3) << d.verdict();
    EXPECT_EQ(d.verdict().rfind(std::string("INCOMPLETE EVIDENCE (") + kGraphReason + "): HANG: rank 1 never joined "
                                "AllReduce #1 on comm 'world' (2 ranks); rank 0 waited",
                                0),
              0u)
        << d.verdict();
    EXPECT_NE(d.verdict().find("rank 1 left cleanly after AllReduce #1 (from a CUDA graph)"), std::string::npos)
        << d.verdict();
  }
}

// A job killed while its last calls were a graph's: nothing proves them
// finished, whether or not a rank repeated their number.
TEST(DiagnoseE2E, AJobKilledAfterItsGraphIsNeverOk) {
  for (Numbered how : {Numbered::kReplays, Numbered::kCapturedOnce}) {
    Model m;
    report::Diagnosis d = DiagnoseGraphJob(how, Then::kNothing, &m);
    EXPECT_NE(ExitStatus(d), 0) << d.verdict();
    EXPECT_EQ(d.verdict().find("OK"), std::string::npos) << d.verdict();
    EXPECT_NE(d.verdict().find("AllReduce #1"), std::string::npos) << d.verdict();
  }
}

// Profiler API v1 to v3 number no point-to-point operation (the plugin
// writes 0: it does not know the communicator's size). Seen on NCCL 2.24.3
// and 2.26.6 at 4 ranks: every file read as damaged at its first Send. The
// loader numbers them in call order per peer and direction, as the plugin
// does from v4, so a ring of sends and receives matches and damages nothing.
TEST(DiagnoseE2E, PointToPointOfApiV3IsNumberedNotDamaged) {
  const std::string dir = TempDir();
  for (int rank = 0; rank < 2; ++rank) {
    testing::TraceBuilder b(TwoRankSpec(710, rank, 3, 0x6));
    const int w = b.AddCommFromEvent(0xabd, kSec);
    for (uint64_t k = 0; k < 3; ++k) {
      b.Send(w, 1 - rank, 1024, 2 * kSec + k * 100 * kMs, testing::kNever);
      b.Recv(w, 1 - rank, 1024, 2 * kSec + k * 100 * kMs + kMs, testing::kNever);
    }
    b.Heartbeats(kSec, 3 * kSec);
    b.Finalize(3 * kSec, true);
    ASSERT_TRUE(b.WriteTo(dir + "/" + b.FileName()));
  }
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
  for (const Proc& p : m.procs) EXPECT_FALSE(p.damaged) << p.path;
  std::map<std::pair<uint32_t, bool>, std::vector<uint64_t>> seqs;  // (proc, recv) -> seqs
  for (const Op& o : m.ops) seqs[{o.proc, o.fn == Func::kRecv}].push_back(o.seq);
  for (const auto& [k, v] : seqs) EXPECT_EQ(v, (std::vector<uint64_t>{1, 2, 3}));
  report::Diagnosis d = Diagnose(m);
  EXPECT_EQ(d.verdict().find("damaged"), std::string::npos) << d.verdict();
}

TEST(DiagnoseE2E, HealthyJobOnTwoHostsWithClockErrors) {
  JobSpec spec;
  spec.nranks = 4;
  spec.ranks_per_host = 2;
  spec.ncolls = 20;
  spec.funcs = {"AllReduce", "AllGather"};
  spec.rank_hook = [](int rank, RankPlan& r) { r.realtime_error_ns = rank >= 2 ? 3 * kMs : 0; };
  std::string dir;
  report::Diagnosis d = RunJob(spec, &dir);
  EXPECT_EQ(d.findings_size(), 0) << FormatText(d);
  EXPECT_EQ(ExitStatus(d), 0);
  EXPECT_EQ(d.verdict().substr(0, 3), "OK:");
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"ncclwatch", "diagnose", dir}, out, err), 0) << err.str();
}

TEST(DiagnoseE2E, IdleRankNeverJoins) {
  JobSpec spec;
  spec.nranks = 4;
  spec.ncolls = 10;
  spec.stuck_sec = 5;
  spec.rank_hook = [&](int rank, RankPlan& r) {
    if (rank == 3) {
      r.idle_after_ns = static_cast<int64_t>(spec.first_op_ns + 5 * spec.step_ns + kMs);
      r.end = testing::RankEnd::kNone;
    }
  };
  std::string dir;
  report::Diagnosis d = RunJob(spec, &dir);
  ASSERT_GE(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).kind(), report::MISSING_RANK) << FormatText(d);
  EXPECT_EQ(Names(d.findings(0)), std::vector<std::string>{"rank 3"});
  EXPECT_EQ(d.findings(0).seq(), 6u);  // NCCL's seq counts from 0: the 7th collective
  EXPECT_EQ(d.findings(0).fates(0), report::FATE_IDLE) << FormatText(d);
  EXPECT_NE(d.verdict().find("HANG: rank 3 never joined AllReduce #6 on comm 'world' (4 ranks); ranks 0,1,2 waited"),
            std::string::npos)
      << d.verdict();
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"ncclwatch", "diagnose", "--format=json", dir}, out, err), 1) << err.str();
  report::Diagnosis back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out.str(), &back).ok());
  EXPECT_EQ(back.verdict(), d.verdict());
  std::ostringstream tout, terr;
  EXPECT_EQ(RunCli({"ncclwatch", "diagnose", dir}, tout, terr), 1);
  EXPECT_EQ(tout.str().substr(0, tout.str().find('\n')), d.verdict());
}

TEST(DiagnoseE2E, RankDiesMidJob) {
  JobSpec spec;
  spec.nranks = 4;
  spec.ncolls = 10;
  spec.stuck_sec = 5;
  spec.rank_hook = [&](int rank, RankPlan& r) {
    if (rank == 2) r.dies_at_ns = static_cast<int64_t>(spec.first_op_ns + 4 * spec.step_ns + kMs);
  };
  report::Diagnosis d = RunJob(spec);
  ASSERT_GE(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(Names(d.findings(0)), std::vector<std::string>{"rank 2"}) << FormatText(d);
  // Its records of #1-#4 were lost with the kill, but the others completed them: it died after #4.
  EXPECT_EQ(d.findings(0).seq(), 5u);
  EXPECT_NE(d.verdict().find("rank 2 died after AllReduce #4"), std::string::npos) << d.verdict();
  EXPECT_NE(d.findings(0).evidence(0).text().find("its file lacks #1-#4, which the others completed"), std::string::npos)
      << d.findings(0).evidence(0).text();
  bool dead = false;
  for (const auto& f : d.findings()) dead |= f.kind() == report::DEAD_RANK;
  EXPECT_TRUE(dead) << FormatText(d);
}

TEST(DiagnoseE2E, CountMismatch) {
  JobSpec spec;
  spec.nranks = 4;
  spec.ncolls = 6;
  spec.stuck_sec = 5;
  spec.op_hook = [](int rank, int k, OpPlan& p) {
    if (rank == 1 && k == 3) {
      p.count = 7;
      p.never_completes = true;
    }
  };
  report::Diagnosis d = RunJob(spec);
  ASSERT_GE(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).kind(), report::MISMATCH) << FormatText(d);
  EXPECT_EQ(Names(d.findings(0)), std::vector<std::string>{"rank 1"});
  EXPECT_EQ(d.findings(0).seq(), 3u);
  EXPECT_NE(d.verdict().find("rank 1 called count 7 where ranks 0,2,3 called count 1,048,576"), std::string::npos)
      << d.verdict();
}

TEST(DiagnoseE2E, Straggler) {
  JobSpec spec;
  spec.nranks = 4;
  spec.ncolls = 20;
  spec.op_hook = [](int rank, int k, OpPlan& p) {
    if (rank == 2) p.start_ns += 4 * kMs;
  };
  report::Diagnosis d = RunJob(spec);
  ASSERT_EQ(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).kind(), report::STRAGGLER);
  EXPECT_EQ(Names(d.findings(0)), std::vector<std::string>{"rank 2"});
  EXPECT_EQ(d.severity(), report::SEVERITY_WARNING);
  EXPECT_EQ(ExitStatus(d), 1);
}

// A collective Match keeps one slot per rank present (Comm::slot_rank): a
// node's files of ranks 8 to 15 of 16, or every file but one, keep no
// slot for the ranks without one. The same model with one slot per rank up
// to the highest (how MatchOps kept them before) must read the same.
void OneSlotPerRank(Model* m) {
  for (Match& mt : m->matches) {
    const Comm& c = m->comms[mt.comm];
    if (mt.kind != OpKind::kColl || c.slot_rank.empty()) continue;
    std::vector<uint32_t> dense(static_cast<size_t>(c.slot_rank.back()) + 1, kNone);
    for (uint32_t oi : mt.ops)
      if (oi != kNone) dense[static_cast<size_t>(m->ops[oi].rank)] = oi;
    mt.ops = std::move(dense);
  }
  for (Comm& c : m->comms) c.slot_rank.clear();
}

TEST(DiagnoseE2E, RanksWithoutAFileKeepNoSlot) {
  JobSpec spec;
  spec.nranks = 16;
  spec.ncolls = 12;
  spec.stuck_sec = 5;
  spec.funcs = {"AllReduce", "Broadcast", "AllGather"};
  spec.op_hook = [](int rank, int k, OpPlan& p) {
    if (rank == 13 && k == 4) p.count = 7;  // a mismatch, completed anyway
    if (rank == 10) p.start_ns += 4 * kMs;  // a straggler
    if (rank == 15 && k == 11) p.skip = true;  // a hang: never issued
  };
  const std::string dir = TempDir();
  const std::vector<std::string> files = testing::WriteJob(BuildJob(spec), dir);
  ASSERT_EQ(files.size(), 16u);
  std::vector<std::string> high(files.begin() + 8, files.end());
  std::vector<std::string> all_but_3 = files;
  all_but_3.erase(all_but_3.begin() + 3);
  for (const auto& [name, inputs] : {std::make_pair("ranks 8-15", high), std::make_pair("all but rank 3", all_but_3)}) {
    Model m;
    std::string err;
    ASSERT_TRUE(BuildModel(inputs, LoadOptions(), &m, &err)) << err;
    ASSERT_FALSE(m.comms.empty());
    EXPECT_EQ(m.comms[0].slot_rank.size(), inputs.size()) << name;
    uint32_t world_colls = 0;
    for (const Match& mt : m.matches) {
      if (mt.kind != OpKind::kColl || mt.comm != 0) continue;
      ++world_colls;
      EXPECT_EQ(mt.ops.size(), inputs.size()) << name;
      EXPECT_FALSE(SlotsAreRanks(m, mt));
      for (uint32_t oi : mt.ops) {
        if (oi != kNone) {
          EXPECT_EQ(OpOfRank(m, mt, m.ops[oi].rank), oi) << name;
        }
      }
      EXPECT_EQ(OpOfRank(m, mt, 3), kNone) << name;
      EXPECT_EQ(OpOfRank(m, mt, 16), kNone) << name;
    }
    EXPECT_GT(world_colls, 0u) << name;
    const std::string sparse = FormatText(Diagnose(m));
    OneSlotPerRank(&m);
    EXPECT_EQ(FormatText(Diagnose(m)), sparse) << name;
    EXPECT_NE(sparse.find("MISMATCH"), std::string::npos) << name << "\n" << sparse;
  }
}

}  // namespace
}  // namespace ncclwatch::tools
