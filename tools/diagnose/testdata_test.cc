// ncclwatch diagnose on every trace recorded on real GPUs (testdata/gpu/ and,
// without completions, testdata/gpu-ops/; each with one injected fault): the
// verdict, the operation and the culprit ranks, as their README.md state them.

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"

namespace ncclwatch::tools {
namespace {

struct Case {
  const char* scenario;
  int exit_status;
  std::vector<std::string> verdict_has;  // fragments of the first line, in order
  const char* dir = "testdata/gpu/";
  size_t nprocs = 4;
};

const Case kCases[] = {
    {"healthy", 0, {"OK: no problem found"}},
    {"skip", 1, {"HANG: rank 3 never joined AllReduce #4 on comm 'world' (4 ranks); ranks 0,1,2 waited"}},
    {"kill", 1, {"HANG: rank 1 never joined", "rank 1 died"}},
    {"straggler", 1, {"STRAGGLER: rank 0 arrived last"}},
    {"extra", 1, {"MISMATCH: rank 3 issued an extra AllReduce #5 on comm 'world' (4 ranks) that ranks 0,1,2 never issued"}},
    {"count", 1, {"MISMATCH: AllReduce #4 on comm 'world' (4 ranks): rank 3 called count 8,192 where ranks 0,1,2 called count 16,384"}},
    {"dtype", 1, {"MISMATCH: AllReduce #4 on comm 'world' (4 ranks): rank 3 called ncclFloat16 where ranks 0,1,2 called ncclFloat32"}},
    {"func", 1, {"MISMATCH: rank 3 issued Broadcast", "as #4 on comm 'world' (4 ranks)"}},
    {"root", 1, {"MISMATCH: Broadcast #4 on comm 'world' (4 ranks): rank 3 called root 1 where ranks 0,1,2 called root 0"}},
    {"swap", 1, {"ORDER MISMATCH: ranks 2,3 issued Broadcast #4 before AllReduce #4 on comm 'world' (4 ranks)"}},
    {"send-no-recv", 1, {"UNMATCHED P2P:", "rank 3's Send #5 to rank 0"}},
    {"host-stuck", 1, {"HANG: rank 3 never joined AllReduce #4 on comm 'world' (4 ranks)", "rank 3 is alive but idle outside NCCL"}},
    {"cross-wait", 1, {"DEADLOCK: rank 0 issued AllReduce #0 on comm 'tp' {0,1} (2 ranks) before AllReduce #4 on comm 'world' (4 ranks) where rank 1"}},
    {"net-stall", 1, {"HANG: rank 3 never joined AllReduce #4 on comm 'world' (4 ranks)", "rank 3 died"}},
    {"torch_skip", 1, {"HANG: rank 3 never joined AllReduce #4 on comm 0x", "(4 ranks); ranks 0,1,2 waited"}},
    // A CUDA graph's last replay, which rank 3 never launched, under kernel
    // channels: NCCL numbered each replay apart (testdata/torch/README.md).
    {"graph-hang-channels-4r", 1,
     {"HANG: rank 3 never joined AllReduce #8 (from a CUDA graph) on comm 0x", "ranks 0,1,2 waited",
      "rank 3 left cleanly after AllReduce #7 (from a CUDA graph) [cause: program logic]"},
     "testdata/torch/"},
    // testdata/gpu-ops: 2 ranks, NCCLWATCH_EVENTS=coll,p2p (no completions).
    {"healthy", 0, {"OK: no problem found"}, "testdata/gpu-ops/", 2},
    {"skip", 1, {"HANG: rank 1 never joined AllReduce #4 on comm 'world' (2 ranks); rank 0 waited"}, "testdata/gpu-ops/", 2},
    {"kill", 1, {"DEAD: rank 1 stopped without finalizing"}, "testdata/gpu-ops/", 2},
    {"send-no-recv", 1, {"UNMATCHED P2P:", "rank 1's Send #5 to rank 0"}, "testdata/gpu-ops/", 2},
    {"host-stuck", 1, {"HANG: rank 1 never joined AllReduce #4 on comm 'world' (2 ranks)", "rank 1 is alive but idle outside NCCL"},
     "testdata/gpu-ops/", 2},
    // testdata/gpu-events: 2 ranks, NCCLWATCH_COMPLETIONS=events (completions
    // from CUDA events at each kernel launch).
    {"healthy", 0, {"OK: no problem found"}, "testdata/gpu-events/", 2},
    {"skip", 1,
     {"HANG: rank 1 never joined AllReduce #4 on comm 'world' (2 ranks); rank 0 waited",
      "(no majority: either rank 1 skipped it or rank 0 issued one too many; both are named)"},
     "testdata/gpu-events/", 2},
    {"extra", 1,
     {"HANG: rank 0 never joined AllReduce #5 on comm 'world' (2 ranks); rank 1 waited",
      "(no majority: either rank 0 skipped it or rank 1 issued one too many; both are named)"},
     "testdata/gpu-events/", 2},
    {"kill", 1, {"HANG: rank 1 never joined AllGather #4 on comm 'tp' (2 ranks)", "rank 1 died"}, "testdata/gpu-events/", 2},
    {"gpu-blocked", 1,
     {"STUCK: AllReduce #4 on comm 'world' (2 ranks) was issued by every rank",
      "rank 1's GPU never started it; rank 0 started it and waits"},
     "testdata/gpu-events/", 2},
    {"torch_skip", 1, {"HANG: rank 1 never joined AllReduce #4 on comm 0x", "(2 ranks); rank 0 waited"},
     "testdata/gpu-events/", 2},
    // testdata/gpu-events4: 4 ranks on one GPU over sockets, the default
    // capture (completions from CUDA events).
    {"healthy", 0, {"OK: no problem found in 4 processes (5 communicators, 192 operations, 192 completed)"},
     "testdata/gpu-events4/"},
    {"skip", 1, {"HANG: rank 3 never joined AllReduce #4 on comm 'world' (4 ranks); ranks 0,1,2 waited"},
     "testdata/gpu-events4/"},
    {"kill", 1, {"ENDED: rank 1 ended first, without finalizing (killed or crashed)", "[cause: rank 1's resources]"},
     "testdata/gpu-events4/"},
    {"straggler", 1, {"STRAGGLER: rank 0 arrived last"}, "testdata/gpu-events4/"},
    {"extra", 1,
     {"HANG: rank 3 alone issued AllReduce #5 on comm 'world' (4 ranks) and waited",
      "ranks 0,1,2 never joined it", "(rank 3 issued one too many, or ranks 0,1,2 skipped it"},
     "testdata/gpu-events4/"},
    {"count", 1, {"MISMATCH: AllReduce #4 on comm 'world' (4 ranks): rank 3 called count 8,192"}, "testdata/gpu-events4/"},
    {"dtype", 1, {"MISMATCH: AllReduce #4 on comm 'world' (4 ranks): rank 3 called ncclFloat16"}, "testdata/gpu-events4/"},
    {"func", 1, {"MISMATCH: rank 3 issued Broadcast", "as #4 on comm 'world' (4 ranks)"}, "testdata/gpu-events4/"},
    {"root", 1, {"MISMATCH: Broadcast #4 on comm 'world' (4 ranks): rank 3 called root 1", "the results are wrong"},
     "testdata/gpu-events4/"},
    {"swap", 1, {"ORDER MISMATCH: ranks 2,3 issued Broadcast #4 before AllReduce #4 on comm 'world' (4 ranks)"},
     "testdata/gpu-events4/"},
    {"send-no-recv", 1, {"UNMATCHED P2P:", "rank 3's Send #5 to rank 0"}, "testdata/gpu-events4/"},
    {"host-stuck", 1, {"HANG: rank 3 never joined AllReduce #4", "rank 3 is alive but idle outside NCCL"},
     "testdata/gpu-events4/"},
    {"cross-wait", 1, {"DEADLOCK: rank 1 issued AllReduce #4 on comm 'world' (4 ranks) before AllReduce #0 on comm 'tp'"},
     "testdata/gpu-events4/"},
    // testdata/versions: 2 ranks, default capture, one NCCL release each.
    // 2.23.4 (API v1): communicators of unknown size, so never an OK.
    {"healthy", 3, {"INCOMPLETE: no problem found", "communicators of unknown size and members"}, "testdata/versions/2.23.4/", 2},
    // The sizes stay unknown, but one member waits in what the other never issued.
    {"skip", 3,
     {"INCOMPLETE EVIDENCE (", "communicators of unknown size and members", "HANG: pid 663@vm never joined AllReduce #4",
      "(size unknown, 2 given); pid 662@vm waited"},
     "testdata/versions/2.23.4/", 2},
    {"kill", 3, {"INCOMPLETE EVIDENCE", "DEAD: pid 721@vm stopped without finalizing"}, "testdata/versions/2.23.4/", 2},
    {"healthy", 0, {"OK: no problem found in 2 processes (4 communicators, 80 operations, 80 completed)"}, "testdata/versions/2.27.7/", 2},
    {"skip", 1, {"HANG: rank 1 never joined AllReduce #4 on comm 'world' (2 ranks); rank 0 waited"}, "testdata/versions/2.27.7/", 2},
    {"kill", 1, {"HANG: rank 1 never joined AllGather #4 on comm 'tp' (2 ranks)", "rank 1 died"}, "testdata/versions/2.27.7/", 2},
    {"healthy", 0, {"OK: no problem found in 2 processes (4 communicators, 64 operations, 64 completed)"}, "testdata/versions/2.29.7/", 2},
    {"skip", 1, {"HANG: rank 1 never joined AllReduce #4 on comm 'world' (2 ranks); rank 0 waited"}, "testdata/versions/2.29.7/", 2},
    {"kill", 1, {"HANG: rank 1 never joined AllGather #4 on comm 'tp' (2 ranks)", "rank 1 died"}, "testdata/versions/2.29.7/", 2},
    {"healthy", 0, {"OK: no problem found in 2 processes (4 communicators, 64 operations, 64 completed)"}, "testdata/versions/2.30.7/", 2},
    {"skip", 1, {"HANG: rank 1 never joined AllReduce #4 on comm 'world' (2 ranks); rank 0 waited"}, "testdata/versions/2.30.7/", 2},
    {"kill", 1, {"HANG: rank 1 never joined AllGather #4 on comm 'tp' (2 ranks)", "rank 1 died"}, "testdata/versions/2.30.7/", 2},
    // testdata/versions4: the same at 4 ranks, on 4 GPUs. In 2.27.7's skip,
    // rank 2's AllReduce #4 "completed" once ranks 0 and 1 had aborted, and
    // rank 2 went on to AllReduce #5 (match.cc, AbortedWithoutAMember).
    {"healthy", 0, {"OK: no problem found in 4 processes (5 communicators, 192 operations, 192 completed)"},
     "testdata/versions4/2.27.7/"},
    {"skip", 1,
     {"HANG: rank 3 never joined AllReduce #4 on comm 'world' (4 ranks); ranks 0,1,2 waited",
      "rank 3 waits in AllGather #4 on comm 'tp' {2,3}"},
     "testdata/versions4/2.27.7/"},
    {"kill", 1, {"HANG: rank 1 never joined AllGather #4 on comm 'tp' {0,1} (2 ranks)", "rank 1 died"},
     "testdata/versions4/2.27.7/"},
    {"healthy", 0, {"OK: no problem found in 4 processes (5 communicators, 160 operations, 160 completed)"},
     "testdata/versions4/2.29.7/"},
    {"skip", 1, {"HANG: rank 3 never joined AllReduce #4 on comm 'world' (4 ranks); ranks 0,1,2 waited"},
     "testdata/versions4/2.29.7/"},
    {"kill", 1, {"HANG: rank 1 never joined ReduceScatter #4 on comm 'dp' {1,3} (2 ranks)", "rank 1 died"},
     "testdata/versions4/2.29.7/"},
    {"healthy", 0, {"OK: no problem found in 4 processes (5 communicators, 160 operations, 160 completed)"},
     "testdata/versions4/2.30.7/"},
    {"skip", 1, {"HANG: rank 3 never joined AllReduce #4 on comm 'world' (4 ranks); ranks 0,1,2 waited"},
     "testdata/versions4/2.30.7/"},
    {"kill", 1, {"HANG: rank 1 never joined AllGather #4 on comm 'tp' {0,1} (2 ranks)", "rank 1 died"},
     "testdata/versions4/2.30.7/"},
    // Profiler API v2 and v3 (NCCL 2.24.3, 2.26.6): no sizes, no completions,
    // so never OK; the culprit is right all the same (rank 3: pid 1513 and
    // 1910; rank 1: pid 1636 and 2048, scenario.json).
    {"healthy", 3, {"INCOMPLETE: no problem found in the 4 processes given", "communicators of unknown size"},
     "testdata/versions4/2.24.3/"},
    {"skip", 3, {"INCOMPLETE EVIDENCE (", "HANG: pid 1513@vm never joined AllReduce #4", "pid 1513@vm is still in Broadcast #4"},
     "testdata/versions4/2.24.3/"},
    {"kill", 3, {"INCOMPLETE EVIDENCE (", "DEAD: pid 1636@vm stopped without finalizing"}, "testdata/versions4/2.24.3/"},
    {"healthy", 3, {"INCOMPLETE: no problem found in the 4 processes given", "communicators of unknown size"},
     "testdata/versions4/2.26.6/"},
    {"skip", 3, {"INCOMPLETE EVIDENCE (", "HANG: pid 1910@vm never joined AllReduce #4", "pid 1910@vm is still in Broadcast #4"},
     "testdata/versions4/2.26.6/"},
    {"kill", 3, {"INCOMPLETE EVIDENCE (", "DEAD: pid 2048@vm stopped without finalizing"}, "testdata/versions4/2.26.6/"},
    // testdata/gpu-events8: 8 ranks on one GPU over sockets, the default
    // capture; the fault rank is 7 (1 for kill, 0 for straggler, cross-wait).
    {"healthy", 0, {"OK: no problem found in 8 processes (7 communicators, 384 operations, 384 completed)"},
     "testdata/gpu-events8/", 8},
    {"skip", 1, {"HANG: rank 7 never joined AllReduce #4 on comm 'world' (8 ranks); ranks 0-6 waited",
                 "rank 7 waits in AllGather #4 on comm 'tp' {6,7}"}, "testdata/gpu-events8/", 8},
    {"kill", 1, {"ENDED: rank 1 ended first, without finalizing (killed or crashed)"}, "testdata/gpu-events8/", 8},
    {"straggler", 1, {"STRAGGLER: rank 0 arrived last"}, "testdata/gpu-events8/", 8},
    {"extra", 1,
     {"HANG: rank 7 alone issued AllReduce #5 on comm 'world' (8 ranks) and waited", "ranks 0-6 never joined it",
      "(rank 7 issued one too many, or ranks 0-6 skipped it"},
     "testdata/gpu-events8/", 8},
    {"count", 1, {"MISMATCH: AllReduce #4 on comm 'world' (8 ranks): rank 7 called count 8,192"}, "testdata/gpu-events8/", 8},
    {"dtype", 1, {"MISMATCH: AllReduce #4 on comm 'world' (8 ranks): rank 7 called ncclFloat16"}, "testdata/gpu-events8/", 8},
    {"func", 1, {"MISMATCH: rank 7 issued Broadcast", "as #4 on comm 'world' (8 ranks)"}, "testdata/gpu-events8/", 8},
    {"root", 1, {"MISMATCH: Broadcast #4 on comm 'world' (8 ranks): rank 7 called root 5", "the results are wrong"},
     "testdata/gpu-events8/", 8},
    {"swap", 1, {"ORDER MISMATCH: ranks 6,7 issued Broadcast #4 before AllReduce #4 on comm 'world' (8 ranks)"},
     "testdata/gpu-events8/", 8},
    {"send-no-recv", 1, {"UNMATCHED P2P:", "rank 7's Send #5 to rank 0"}, "testdata/gpu-events8/", 8},
    {"host-stuck", 1, {"HANG: rank 7 never joined AllReduce #4", "rank 7 is alive but idle outside NCCL"},
     "testdata/gpu-events8/", 8},
    {"cross-wait", 1, {"DEADLOCK: rank 0 issued AllReduce #0 on comm 'tp' {0,1} (2 ranks) before AllReduce #4"},
     "testdata/gpu-events8/", 8},
    // testdata/gpu-events4, recorded on 4 GPUs: the default capture.
    {"gpu-blocked", 1,
     {"STUCK: AllReduce #4 on comm 'world' (4 ranks) was issued by every rank",
      "rank 3's GPU never started it; ranks 0,1,2 started it and wait"},
     "testdata/gpu-events4/"},
    {"net-stall", 1, {"HANG: rank 3 never joined AllReduce #4 on comm 'world' (4 ranks)", "rank 3 died"},
     "testdata/gpu-events4/"},
};

class TestdataTest : public ::testing::TestWithParam<Case> {};

TEST_P(TestdataTest, VerdictNamesTheOperationAndTheCulprits) {
  const Case& c = GetParam();
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({std::string(c.dir) + c.scenario}, LoadOptions(), &m, &err)) << err;
  EXPECT_EQ(m.procs.size(), c.nprocs);
  auto d = Diagnose(m);
  size_t at = 0;
  for (const std::string& frag : c.verdict_has) {
    size_t p = d.verdict().find(frag, at);
    EXPECT_NE(p, std::string::npos) << "'" << frag << "' not in: " << d.verdict();
    if (p != std::string::npos) at = p + frag.size();
  }
  EXPECT_EQ(ExitStatus(d), c.exit_status) << d.verdict();
  // Each finding about an operation carries it (Finding.op): on the
  // finding's communicator, with its number.
  auto check_op = [&](const report::Finding& f) {
    if (f.comm_hash() == 0 || f.kind() == report::STRAGGLER || f.func().empty()) return;
    ASSERT_GT(f.op(), 0u) << f.summary();
    ASSERT_LE(f.op(), m.ops.size());
    const Op& op = m.ops[f.op() - 1];
    EXPECT_EQ(m.comms[op.comm].hash, f.comm_hash()) << f.summary();
    EXPECT_EQ(op.kind == OpKind::kP2p, f.p2p()) << f.summary();
    if (!f.p2p()) {
      EXPECT_EQ(op.seq, f.seq()) << f.summary();
    }
  };
  for (const report::Finding& f : d.findings()) check_op(f);
  for (const report::Finding& f : d.consequences()) check_op(f);
}

// Culprits name causes only: every finding's culprits, over the whole
// Diagnosis, are the ranks where the fault was injected. Operations hung
// behind the fault are consequences, whose ranks wait (a scheduler that
// drains the nodes named as culprits drains the right ones).
TEST(TestdataCulprits, OnlyTheInjectedRanksAreCulprits) {
  const std::vector<std::pair<std::string, std::set<std::string>>> expected = {
      {"testdata/gpu/skip", {"rank 3"}},          {"testdata/gpu/kill", {"rank 1"}},
      {"testdata/gpu/count", {"rank 3"}},
      {"testdata/gpu/host-stuck", {"rank 3"}},    {"testdata/gpu/net-stall", {"rank 3"}},
      {"testdata/gpu/torch_skip", {"rank 3"}},
      // An order broken by two sides of equal size: the records cannot tell
      // which side broke it, so both are named (cross-wait: rank 0 against
      // rank 1; swap: ranks 2,3 against ranks 0,1).
      {"testdata/gpu/cross-wait", {"rank 0", "rank 1"}},
      {"testdata/gpu/swap", {"rank 0", "rank 1", "rank 2", "rank 3"}},
      {"testdata/gpu/send-no-recv", {"rank 0", "rank 3"}},  // sizes disagree: both sides
      // Two ranks, one skipped: the records cannot tell it from the other
      // issuing one too many (testdata/gpu-events/extra), so both are named.
      {"testdata/gpu-events/skip", {"rank 0", "rank 1"}}, {"testdata/gpu-events/extra", {"rank 0", "rank 1"}},
      {"testdata/gpu-events/kill", {"rank 1"}},
      {"testdata/gpu-events/gpu-blocked", {"rank 1"}},
      {"testdata/versions4/2.27.7/skip", {"rank 3"}},
      {"testdata/gpu-events4/gpu-blocked", {"rank 3"}},
  };
  for (const auto& [dir, ranks] : expected) {
    Model m;
    std::string err;
    ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
    report::Diagnosis d = Diagnose(m);
    std::set<std::string> culprits;
    for (const report::Finding& f : d.findings())
      for (const report::ProcRef& p : f.culprits()) culprits.insert(p.name());
    EXPECT_EQ(culprits, ranks) << dir << ": " << d.verdict();
    for (const report::Finding& f : d.consequences()) EXPECT_EQ(f.culprits_size(), 0) << dir << ": " << f.summary();
    EXPECT_GT(d.consequences_size(), 0) << dir;
  }
}

// One story per rank: a rank whose file lost its last records (net-stall:
// SIGSTOPed, then killed) is said to have died after what the others prove
// it did, in every finding, never after the last record its file kept.
// Every release's files are whole: NCCL 2.24.3 and 2.26.6 (API v2, v3) once
// read as damaged at their first Send, numbered 0 by the plugin, which
// cannot number them without the communicator's size.
TEST(TestdataVersions, NoFileOfTheMatrixReadsAsDamaged) {
  for (const char* v : {"2.24.3", "2.26.6", "2.27.7", "2.29.7", "2.30.7"})
    for (const char* s : {"healthy", "skip", "kill"}) {
      const std::string dir = std::string("testdata/versions4/") + v + "/" + s;
      Model m;
      std::string err;
      ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
      for (const Proc& p : m.procs) EXPECT_FALSE(p.damaged) << dir << ": " << p.path;
    }
}

TEST(TestdataStory, ADeadRankIsDescribedOneWay) {
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({"testdata/gpu/net-stall"}, LoadOptions(), &m, &err)) << err;
  const std::string text = FormatText(Diagnose(m));
  for (const char* wrong : {"died after AllReduce #0", "last operation: AllGather #0", "died after AllGather #0"})
    EXPECT_EQ(text.find(wrong), std::string::npos) << wrong << " in:\n" << text;
  EXPECT_NE(text.find("rank 3 died after AllReduce #3"), std::string::npos) << text;
}

// A stuck report names an operation as the findings and merge do: a p2p
// op by its order between the pair, never NCCL's counter (#0).
TEST(TestdataStory, StuckReportsNameOperationsAsFindingsDo) {
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({"testdata/gpu/send-no-recv"}, LoadOptions(), &m, &err)) << err;
  const report::Diagnosis d = Diagnose(m);
  ASSERT_GT(d.stuck_reports_size(), 0);
  bool any_p2p = false;
  for (const report::StuckReportSummary& s : d.stuck_reports())
    for (const std::string& line : s.ops()) {
      EXPECT_EQ(line.find("Send #0"), std::string::npos) << line;
      EXPECT_EQ(line.find("Recv #0"), std::string::npos) << line;
      any_p2p |= line.rfind("Send #", 0) == 0 || line.rfind("Recv #", 0) == 0;
    }
  EXPECT_TRUE(any_p2p);
}

INSTANTIATE_TEST_SUITE_P(Gpu, TestdataTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string n = i.param.scenario;
                           if (std::string(i.param.dir) == "testdata/gpu-ops/") n = "ops_" + n;
                           if (std::string(i.param.dir) == "testdata/gpu-events/") n = "events_" + n;
                           if (std::string(i.param.dir) == "testdata/gpu-events4/") n = "events4_" + n;
                           if (std::string(i.param.dir) == "testdata/gpu-events8/") n = "events8_" + n;
                           for (const std::string prefix : {"testdata/versions/", "testdata/versions4/"}) {
                             if (std::string(i.param.dir).rfind(prefix, 0) != 0) continue;
                             std::string v = std::string(i.param.dir).substr(prefix.size());
                             v.pop_back();
                             for (char& ch : v)
                               if (ch == '.') ch = '_';
                             n = "nccl" + v + (prefix.size() == 19 ? "_4r_" : "_") + n;
                           }
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace ncclwatch::tools
