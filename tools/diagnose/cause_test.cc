// The kind of cause each verdict names, end to end from synthetic trace
// files (tools/testing/trace_builder.h): a rank still inside an earlier
// collective of the same communicator, sibling communicators voting where a
// pair has no majority, and a job that sat idle outside NCCL.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <iostream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"
#include "tools/model/semantics.h"
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

std::string TempDir() { return testing::NewTestDir("cause_test"); }

report::Diagnosis RunJob(const JobSpec& spec) {
  std::string dir = TempDir();
  testing::WriteJob(BuildJob(spec), dir);
  Model m;
  std::string err;
  EXPECT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
  report::Diagnosis d = Diagnose(m);
  std::cout << "---- " << ::testing::UnitTest::GetInstance()->current_test_info()->name() << "\n" << FormatText(d);
  return d;
}

std::vector<std::string> Culprits(const report::Finding& f) {
  std::vector<std::string> v;
  for (const auto& r : f.culprits()) v.push_back(r.name());
  return v;
}

bool Has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Rank 0's AllReduce #4 never completes: its receive from rank 3 on channel
// 0 stalls (proxy events on). Ranks 1-3 completed #4 and wait in #5, which
// rank 0, still inside #4, never issued.
JobSpec EarlierCollectiveJob(bool proxy, bool stall) {
  JobSpec spec;
  spec.nranks = 4;
  spec.ncolls = 6;
  spec.rank_hook = [proxy](int, RankPlan& r) {
    if (proxy) r.proc.event_mask |= kMaskProxyOp | kMaskProxyStep;
  };
  spec.op_hook = [proxy, stall](int rank, int k, OpPlan& p) {
    if (rank != 0) return;
    if (k == 4) {
      p.never_completes = true;
      p.opts.progress.kernel_channels_started = 2;
      if (proxy) {
        p.opts.progress.proxy_ops_started = 2;
        p.opts.progress.proxy_ops_stopped = 1;
        testing::ProxySpec x;
        x.channel = 0;
        x.peer = 3;
        x.is_send = false;
        x.nsteps = 8;
        x.last_step = stall ? 3 : 8;
        p.opts.progress.proxy.push_back(x);
      }
    }
    if (k == 5) p.skip = true;
  };
  return spec;
}

TEST(CauseTest, ARankStillInAnEarlierCollectiveIsThatCollectivesHang) {
  report::Diagnosis d = RunJob(EarlierCollectiveJob(/*proxy=*/true, /*stall=*/true));
  ASSERT_GT(d.findings_size(), 0);
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(f.kind(), report::STUCK_IN_PROGRESS) << d.verdict();
  EXPECT_EQ(f.seq(), 4u) << d.verdict();
  EXPECT_TRUE(Has(d.verdict(), "STUCK: AllReduce #4")) << d.verdict();
  EXPECT_TRUE(Has(d.verdict(), "rank 0: receive from rank 3 never completed on channel 0")) << d.verdict();
  EXPECT_FALSE(Has(d.verdict(), "went on without")) << d.verdict();
  EXPECT_FALSE(Has(f.cause_text(), "went on without")) << f.cause_text();
  EXPECT_EQ(Culprits(f), std::vector<std::string>{"rank 0"});
  // Every host alive, rank 0's GPU started it, a named pair's transfer
  // stalled: the network, from that evidence.
  EXPECT_EQ(f.cause(), report::CAUSE_NETWORK) << f.cause_text();
  EXPECT_TRUE(Has(d.verdict(), "[cause: the network]")) << d.verdict();
  // The hang of #5 on ranks 1-3 is blocked behind it, not a finding.
  for (const report::Finding& g : d.findings()) EXPECT_NE(g.kind(), report::MISSING_RANK) << g.summary();
}

TEST(CauseTest, WithoutAStalledTransferTheEarlierCollectiveCannotTell) {
  // Default capture: completions from CUDA events, no proxy events.
  JobSpec spec = EarlierCollectiveJob(/*proxy=*/false, /*stall=*/false);
  spec.event_completions = true;
  spec.rank_hook = [](int, RankPlan& r) {
    r.proc.completion_source = trace::COMPLETION_SOURCE_CUDA_EVENTS;
    r.proc.completions = "events";
  };
  spec.op_hook = [](int rank, int k, OpPlan& p) {
    if (rank != 0) return;
    if (k == 4) {
      p.never_completes = true;
      p.opts.progress.gpu = 2;  // its GPU started it
    }
    if (k == 5) p.skip = true;
  };
  report::Diagnosis d = RunJob(spec);
  ASSERT_GT(d.findings_size(), 0);
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(f.kind(), report::STUCK_IN_PROGRESS) << d.verdict();
  EXPECT_EQ(f.seq(), 4u) << d.verdict();
  EXPECT_EQ(f.cause(), report::CAUSE_UNKNOWN) << f.cause_text();
  // Completions came from CUDA events already: never advised again; the
  // proxy steps that were off are.
  EXPECT_FALSE(Has(f.cause_text(), "NCCLWATCH_COMPLETIONS=events")) << f.cause_text();
  EXPECT_TRUE(Has(f.cause_text(), "proxystep")) << f.cause_text();
}

// Pairs {0,1} and {2,3} (one split of the world: same name and size) each
// all-reduce, then the world does, four steps; rank 3 skips its pair's
// last all-reduce and waits in the world's, which rank 2, held in the
// pair's, never gets to. Two ranks, one on each side: `siblings` says how
// the pair {0,1} counted.
enum class Siblings { kAgreeWithRank2, kAgreeWithRank3, kNone };

JobSpec PairSkipJob(Siblings sib) {
  JobSpec spec;
  spec.nranks = 4;
  spec.comms = {{"world", 0, {0, 1, 2, 3}}, {"pair", 0, {0, 1}}, {"pair", 0, {2, 3}}};
  if (sib == Siblings::kNone) spec.comms[1].name = "other";
  const int steps = 4;
  for (int k = 0; k < steps; ++k) {
    const uint64_t t = 3 * kSec + static_cast<uint64_t>(k) * 30 * kMs;
    spec.ops.push_back({1, "AllReduce", 1 << 20, -1, -1, t, kMs, {}});
    spec.ops.push_back({2, "AllReduce", 1 << 20, -1, -1, t + 10 * kMs, kMs, {}});
    spec.ops.push_back({0, "AllReduce", 1 << 20, -1, -1, t + 20 * kMs, kMs, {}});
  }
  const int last_pair01 = 3 * (steps - 1), last_pair23 = last_pair01 + 1, last_world = last_pair01 + 2;
  spec.op_hook = [=](int rank, int k, OpPlan& p) {
    if (k == last_pair23 && rank == 3) p.skip = true;
    // The world's last all-reduce waits behind rank 2's pair on its GPU.
    if (k == last_world) p.never_completes = true;
    if (k == last_pair01 && sib == Siblings::kAgreeWithRank3) p.skip = true;
  };
  return spec;
}

TEST(CauseTest, SiblingCommunicatorsVoteWhereAPairHasNoMajority) {
  report::Diagnosis d = RunJob(PairSkipJob(Siblings::kAgreeWithRank2));
  ASSERT_GT(d.findings_size(), 0);
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(f.kind(), report::MISSING_RANK) << d.verdict();
  EXPECT_EQ(Culprits(f), std::vector<std::string>{"rank 3"}) << d.verdict();
  EXPECT_TRUE(Has(d.verdict(), "HANG: rank 3 never joined AllReduce #3 on comm 'pair'")) << d.verdict();
  EXPECT_FALSE(Has(d.verdict(), "no majority")) << d.verdict();
  EXPECT_EQ(f.cause(), report::CAUSE_PROGRAM) << f.cause_text();
  bool voted = false;
  for (const report::Evidence& e : f.evidence())
    voted |= Has(e.text(), "comm 'pair' {0,1}") && Has(e.text(), "it votes that rank 3 skipped it");
  EXPECT_TRUE(voted) << FormatText(d);
}

TEST(CauseTest, ASiblingThatCountsLikeTheAbsentRankNamesTheOtherOne) {
  report::Diagnosis d = RunJob(PairSkipJob(Siblings::kAgreeWithRank3));
  ASSERT_GT(d.findings_size(), 0);
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(Culprits(f), std::vector<std::string>{"rank 2"}) << d.verdict();
  EXPECT_TRUE(Has(d.verdict(), "rank 2 issued one too many")) << d.verdict();
}

TEST(CauseTest, WithoutSiblingsThePairKeepsItsHedge) {
  report::Diagnosis d = RunJob(PairSkipJob(Siblings::kNone));
  ASSERT_GT(d.findings_size(), 0);
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(Culprits(f), (std::vector<std::string>{"rank 3", "rank 2"})) << d.verdict();
  EXPECT_TRUE(Has(d.verdict(), "no majority")) << d.verdict();
}

report::Diagnosis RunDir(const std::string& dir, Model* m) {
  std::string err;
  EXPECT_TRUE(BuildModel({dir}, LoadOptions(), m, &err)) << dir << ": " << err;
  return Diagnose(*m);
}

// The first finding of `kind`, root or blocked behind it; null if none.
const report::Finding* OfKind(const report::Diagnosis& d, report::FindingKind kind) {
  for (const report::Finding& f : d.findings())
    if (f.kind() == kind) return &f;
  for (const report::Finding& f : d.consequences())
    if (f.kind() == kind) return &f;
  return nullptr;
}

// Every "NCCLWATCH_X=value" a line advises that the processes' headers
// show was already on, and Flight Recorder dumps where they were given.
std::vector<std::string> AdvisedButOn(const std::string& text, const Model& m) {
  bool events = !m.procs.empty(), steps = !m.procs.empty(), p2papi = !m.procs.empty(), fr = false;
  for (const Proc& p : m.procs) {
    events = events && p.event_completions;
    steps = steps && (p.event_mask & kMaskProxyStep) != 0;
    p2papi = p2papi && (p.event_mask & kMaskP2pApi) != 0;
  }
  for (const Comm& c : m.comms) fr |= !c.process_group.empty();
  std::vector<std::string> out;
  std::regex setting("NCCLWATCH_[A-Z_]+=[^ );,]+");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), setting); it != std::sregex_iterator(); ++it) {
    const std::string s = it->str();
    if ((s == "NCCLWATCH_COMPLETIONS=events" && events) || (Has(s, "proxystep") && steps) ||
        (Has(s, "p2papi") && p2papi))
      out.push_back(s);
  }
  if (fr && Has(text, "--fr")) out.push_back("--fr");
  return out;
}

// Every kind of finding, from a recording or a synthetic job: its cause is
// named, a cause other than "cannot tell" rests on evidence lines of the
// ranks it blames (or, for the network, on a stalled transfer), and
// "cannot tell" says what would tell, naming no setting already on.
TEST(CauseTest, EveryFindingKindsCauseRestsOnEvidence) {
  const std::string dir = TempDir();
  mkdir((dir + "/stuck").c_str(), 0700);
  mkdir((dir + "/dead").c_str(), 0700);
  testing::WriteJob(BuildJob(EarlierCollectiveJob(/*proxy=*/true, /*stall=*/true)), dir + "/stuck");
  JobSpec dead;
  dead.nranks = 4;
  dead.ncolls = 20;
  dead.rank_hook = [](int rank, RankPlan& r) {
    if (rank == 2) r.dies_at_ns = 3 * kSec + 55 * kMs;
  };
  testing::WriteJob(BuildJob(dead), dir + "/dead");
  const std::map<report::FindingKind, std::vector<std::string>> cases = {
      {report::MISSING_RANK,
       {"testdata/torch/exception-channels-4r", "testdata/gpu/host-stuck", "testdata/torch/p2p-peer-events-4r"}},
      {report::MISMATCH, {"testdata/torch/count-channels-4r"}},
      {report::ORDER_MISMATCH, {"testdata/torch/swap-completes-channels-4r"}},
      {report::STUCK_IN_PROGRESS, {dir + "/stuck", "testdata/gpu-events/gpu-blocked"}},
      {report::UNMATCHED_P2P, {"testdata/gpu/send-no-recv"}},
      {report::DEAD_RANK, {dir + "/dead"}},
      {report::WAIT_CYCLE, {"testdata/gpu/cross-wait"}},
      {report::STRAGGLER, {"testdata/torch/straggler-channels-4r"}},
      {report::JOB_ENDED, {"testdata/torch/kill-channels-4r", "testdata/torch/os-exit-channels-8r"}},
      {report::LATE_RANK, {"testdata/torch/idle-channels-4r", "testdata/torch/gpu-busy-channels-4r"}},
  };
  const google::protobuf::EnumDescriptor* kinds = report::FindingKind_descriptor();
  for (int i = 0; i < kinds->value_count(); ++i) {
    const auto kind = static_cast<report::FindingKind>(kinds->value(i)->number());
    if (kind == report::FINDING_KIND_UNSPECIFIED) continue;
    auto it = cases.find(kind);
    ASSERT_NE(it, cases.end()) << "no case for " << kinds->value(i)->name();
    for (const std::string& path : it->second) {
      SCOPED_TRACE(kinds->value(i)->name() + " in " + path);
      Model m;
      report::Diagnosis d = RunDir(path, &m);
      const report::Finding* f = OfKind(d, kind);
      ASSERT_NE(f, nullptr) << FormatText(d);
      ASSERT_NE(f->cause(), report::CAUSE_UNSPECIFIED) << f->summary();
      ASSERT_FALSE(f->cause_text().empty()) << f->summary();
      // No finder names a cause without the records it rests on, so none
      // is turned into "cannot tell" behind its back (BackCause).
      EXPECT_FALSE(Has(f->cause_text(), "no record shows the cause first named")) << f->cause_text();
      if (f->cause() != report::CAUSE_UNKNOWN) {
        EXPECT_FALSE(f->cause_evidence().empty()) << f->cause_text();
      }
      if (f->cause() == report::CAUSE_UNKNOWN) {
        // "cannot tell: why; ... tell(s)": what would tell follows.
        EXPECT_EQ(f->cause_text().rfind("cannot tell", 0), 0u) << f->cause_text();
        EXPECT_NE(f->cause_text().find("tell", 11), std::string::npos) << f->cause_text();
        EXPECT_TRUE(AdvisedButOn(f->cause_text(), m).empty()) << f->cause_text();
        continue;
      }
      if (f->cause() == report::CAUSE_NETWORK) {
        EXPECT_GT(f->stalled_size(), 0) << f->summary();
        continue;
      }
      // Its blamed ranks (blocked findings keep them among the waiting).
      std::vector<std::string> blamed;
      for (const report::ProcRef& r : f->culprits()) blamed.push_back(r.name());
      if (blamed.empty())
        for (const report::ProcRef& r : f->waiting()) blamed.push_back(r.name());
      bool backed = false;
      for (const report::Evidence& e : f->evidence())
        for (const std::string& b : blamed) backed |= e.proc() == b || Has(e.proc(), b.substr(b.rfind(' ') + 1));
      EXPECT_TRUE(backed) << FormatText(d);
    }
  }
}

}  // namespace
}  // namespace ncclwatch::tools
