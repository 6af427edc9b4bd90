// Ranks that never joined a collective because they sit idle outside NCCL
// (idle_cause.h, p2p_peers.h): "cannot tell" with what would tell, and,
// with Flight Recorder's sends and receives, the rank that named the wrong
// peer. Synthetic files (tools/testing/trace_builder.h) with the calls a
// Flight Recorder join leaves in the model set by hand, and the GPU
// recordings of the fault through `ncclwatch diagnose`, with and without
// their dumps.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/cli.h"
#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"
#include "tools/model/semantics.h"
#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools {
namespace {

using testing::BuildJob;
using testing::JobOp;
using testing::JobSpec;
using testing::kMs;
using testing::kSec;
using testing::RankPlan;

bool Has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<std::string> Names(const google::protobuf::RepeatedPtrField<report::ProcRef>& refs) {
  std::vector<std::string> v;
  for (const report::ProcRef& r : refs) v.push_back(r.name());
  return v;
}

// Four ranks all-reduce three times; then rank 2 sends to rank 3, and ranks
// 2,3 broadcast from rank 2, which never completes. Ranks 0,1 are idle
// after the all-reduces: their send and receive, if any, left no record.
// `mask`: every rank's event mask.
JobSpec PeersJob(uint64_t mask) {
  JobSpec spec;
  spec.nranks = 4;
  spec.stuck_sec = 5;
  for (int k = 0; k < 3; ++k)
    spec.ops.push_back({0, "AllReduce", 1 << 20, -1, -1, 3 * kSec + static_cast<uint64_t>(k) * 10 * kMs, kMs, {}});
  spec.ops.push_back({0, "Send", 1 << 14, 2, 3, 3 * kSec + 40 * kMs, kMs, {}});
  JobOp bcast{0, "Broadcast", 1 << 16, -1, -1, 3 * kSec + 50 * kMs, kMs, {}};
  bcast.opts.root = 2;
  spec.ops.push_back(bcast);
  spec.rank_hook = [mask](int rank, RankPlan& r) {
    r.proc.event_mask = mask;
    if (rank <= 1) {
      r.idle_after_ns = static_cast<int64_t>(3 * kSec + 35 * kMs);
      r.end = testing::RankEnd::kNone;
    }
  };
  spec.op_hook = [](int, int k, testing::OpPlan& p) {
    if (k == 4) p.never_completes = true;
  };
  return spec;
}

Model Load(const JobSpec& spec) {
  const std::string dir = testing::NewTestDir("p2p_peers_test");
  testing::WriteJob(BuildJob(spec), dir);
  Model m;
  std::string err;
  EXPECT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
  return m;
}

uint32_t ProcOfRank(const Model& m, int32_t rank) { return m.comms[0].proc_of_rank[static_cast<size_t>(rank)]; }

// What JoinFlightRecorder leaves for a rank whose dump shows a send or
// receive after its last recorded collective.
void FrCall(Model* m, int32_t rank, bool recv, int32_t peer) {
  m->comms[0].process_group = "default_pg";
  Proc& p = m->procs[ProcOfRank(*m, rank)];
  p.fr_joined = true;
  FrP2pCall call;
  call.comm = 0;
  call.peer = peer;
  call.recv = recv;
  call.text = std::string(recv ? "nccl:recv " : "nccl:send ") + std::to_string(rank) + (recv ? "<-" : "->") +
              std::to_string(peer) + " #4 of group 'default_pg' (completed) from main() at train.py:10";
  p.fr_p2p.push_back(call);
}

report::Diagnosis DiagnoseIt(const Model& m) {
  report::Diagnosis d = Diagnose(m);
  std::cout << "---- " << ::testing::UnitTest::GetInstance()->current_test_info()->name() << "\n" << FormatText(d);
  return d;
}

TEST(P2pPeers, IdleRanksWithoutFlightRecorderCannotTell) {
  const Model m = Load(PeersJob(kMaskColl | kMaskP2p | kMaskKernelCh));
  const report::Diagnosis d = DiagnoseIt(m);
  ASSERT_GT(d.findings_size(), 0);
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(f.kind(), report::MISSING_RANK) << d.verdict();
  EXPECT_TRUE(Has(d.verdict(), "HANG: ranks 0,1 never joined Broadcast #0")) << d.verdict();
  EXPECT_TRUE(Has(d.verdict(), "[cause: cannot tell]")) << d.verdict();
  EXPECT_EQ(f.cause(), report::CAUSE_UNKNOWN);
  EXPECT_EQ(Names(f.culprits()), (std::vector<std::string>{"rank 0", "rank 1"}));
  // What would tell: the dumps, a Python stack, and the P2pApi event the
  // header shows off.
  EXPECT_TRUE(Has(f.cause_text(), "what would tell: Flight Recorder dumps (--fr")) << f.cause_text();
  EXPECT_TRUE(Has(f.cause_text(), "NCCLWATCH_ON_STUCK")) << f.cause_text();
  EXPECT_TRUE(Has(f.cause_text(), "NCCLWATCH_EVENTS=default,p2papi")) << f.cause_text();
  EXPECT_FALSE(Has(FormatText(d), "host was busy")) << FormatText(d);
}

TEST(P2pPeers, WouldTellNamesNoEventAlreadyOn) {
  const Model m = Load(PeersJob(kMaskColl | kMaskP2p | kMaskKernelCh | kMaskP2pApi));
  const report::Diagnosis d = DiagnoseIt(m);
  ASSERT_GT(d.findings_size(), 0);
  EXPECT_EQ(d.findings(0).cause(), report::CAUSE_UNKNOWN);
  EXPECT_FALSE(Has(d.findings(0).cause_text(), "p2papi")) << d.findings(0).cause_text();
}

TEST(P2pPeers, PeersThatNeverMeetNameTheRankThatChoseWrongly) {
  Model m = Load(PeersJob(kMaskColl | kMaskP2p | kMaskKernelCh));
  FrCall(&m, 0, /*recv=*/false, 1);
  FrCall(&m, 1, /*recv=*/true, 2);
  const report::Diagnosis d = DiagnoseIt(m);
  ASSERT_GT(d.findings_size(), 0);
  const report::Finding& f = d.findings(0);
  EXPECT_TRUE(Has(d.verdict(), "HANG: ranks 0,1 never joined Broadcast #0")) << d.verdict();
  EXPECT_TRUE(Has(d.verdict(), ": rank 1 receives from rank 2 while rank 0 sends to it and rank 2 sends to rank 3 "
                               "(point-to-point peers that never meet; NCCL connects a pair at its first call, "
                               "before the profiler sees an operation) [cause: program logic]"))
      << d.verdict();
  // Rank 1's receive names rank 2, which sent to rank 3: rank 1 is the one;
  // rank 0's send waits on it.
  EXPECT_EQ(Names(f.culprits()), std::vector<std::string>{"rank 1"});
  bool rank0_waits = false;
  for (const report::ProcRef& r : f.waiting()) rank0_waits |= r.name() == "rank 0";
  EXPECT_TRUE(rank0_waits) << FormatText(d);
  EXPECT_EQ(f.cause(), report::CAUSE_PROGRAM);
  EXPECT_FALSE(f.cause_evidence().empty());
  EXPECT_TRUE(Has(f.cause_text(), "rank 1 names the wrong peer")) << f.cause_text();
  // The evidence: each rank's call, Flight Recorder's for ranks 0,1, the
  // records of the pair that met.
  std::string ev;
  for (const report::Evidence& e : f.evidence()) ev += e.proc() + ": " + e.text() + "\n";
  EXPECT_TRUE(Has(ev, "rank 0: no NCCL record; Flight Recorder: nccl:send 0->1")) << ev;
  EXPECT_TRUE(Has(ev, "rank 1: no NCCL record; Flight Recorder: nccl:recv 1<-2")) << ev;
  EXPECT_TRUE(Has(ev, "rank 2: Send #1 to rank 3")) << ev;
  EXPECT_TRUE(Has(ev, "met rank 3's receive")) << ev;
}

TEST(P2pPeers, CallsThatPairUpClaimNothing) {
  Model m = Load(PeersJob(kMaskColl | kMaskP2p | kMaskKernelCh));
  FrCall(&m, 0, /*recv=*/false, 1);
  FrCall(&m, 1, /*recv=*/true, 0);
  const report::Diagnosis d = DiagnoseIt(m);
  ASSERT_GT(d.findings_size(), 0);
  EXPECT_EQ(d.findings(0).cause(), report::CAUSE_UNKNOWN) << d.verdict();
  EXPECT_FALSE(Has(d.verdict(), "never meet")) << d.verdict();
  // Flight Recorder was given: not advised again.
  EXPECT_FALSE(Has(d.findings(0).cause_text(), "--fr")) << d.findings(0).cause_text();
}

TEST(P2pPeers, WhereNoPeerMetAThirdRankBothAreNamed) {
  Model m = Load(PeersJob(kMaskColl | kMaskP2p | kMaskKernelCh));
  // Both send: neither's peer met anyone else, so either may be wrong.
  FrCall(&m, 0, /*recv=*/false, 1);
  FrCall(&m, 1, /*recv=*/false, 0);
  const report::Diagnosis d = DiagnoseIt(m);
  ASSERT_GT(d.findings_size(), 0);
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(f.cause(), report::CAUSE_PROGRAM) << d.verdict();
  EXPECT_EQ(Names(f.culprits()), (std::vector<std::string>{"rank 0", "rank 1"}));
  EXPECT_TRUE(Has(f.cause_text(), "the records cannot tell")) << f.cause_text();
}

// The recordings: PyTorch 2.11, NCCL 2.28.9, rank 1 receives from rank 2
// (testdata/torch/README.md, p2p-peer).
std::string Cli(const std::vector<std::string>& args, int want) {
  std::ostringstream out, err;
  std::vector<std::string> argv = {"ncclwatch", "diagnose"};
  argv.insert(argv.end(), args.begin(), args.end());
  EXPECT_EQ(RunCli(argv, out, err), want) << err.str();
  std::cout << out.str();
  return out.str();
}

TEST(P2pPeers, RecordedFaultNamesRankOneWithItsDumps) {
  for (const char* run : {"p2p-peer-events-4r", "p2p-peer-channels-8r"}) {
    SCOPED_TRACE(run);
    const std::string dir = std::string("testdata/torch/") + run;
    const std::string out = Cli({"--fr", dir + "/fr", dir}, 1);
    const std::string first = out.substr(0, out.find('\n'));
    EXPECT_TRUE(Has(first, "HANG: ranks 0,1 never joined Broadcast #4 on comm")) << first;
    EXPECT_TRUE(Has(first, "ranks 2,3 waited")) << first;
    EXPECT_TRUE(Has(first, ": rank 1 receives from rank 2 while rank 0 sends to it and rank 2 sends to rank 3 "
                           "(point-to-point peers that never meet"))
        << first;
    EXPECT_TRUE(Has(first, "[cause: program logic]")) << first;
    EXPECT_TRUE(Has(out, "rank 0: no NCCL record; Flight Recorder: nccl:send 0->1")) << out;
    EXPECT_TRUE(Has(out, "rank 2: Send #1 to rank 3")) << out;
  }
}

TEST(P2pPeers, RecordedFaultWithoutDumpsCannotTell) {
  for (const char* run : {"p2p-peer-events-4r", "p2p-peer-channels-8r"}) {
    SCOPED_TRACE(run);
    // The trace files alone: the folder holds the dumps too.
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(std::string("testdata/torch/") + run))
      if (e.path().extension() == ".ncclwatch") files.push_back(e.path().string());
    ASSERT_FALSE(files.empty());
    const std::string out = Cli(files, 1);
    const std::string first = out.substr(0, out.find('\n'));
    EXPECT_TRUE(Has(first, "HANG: ranks 0,1 never joined Broadcast #4 on comm")) << first;
    EXPECT_TRUE(Has(first, "[cause: cannot tell]")) << first;
    EXPECT_FALSE(Has(out, "host was busy")) << out;
    EXPECT_TRUE(Has(out, "what would tell: Flight Recorder dumps (--fr")) << out;
    EXPECT_TRUE(Has(out, "NCCLWATCH_EVENTS=default,p2papi")) << out;
  }
}

}  // namespace
}  // namespace ncclwatch::tools
