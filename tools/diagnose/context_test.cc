// What every finder shares (context.h): the Ctx's derived facts, the
// verdict order of findings, and the names of operations.

#include "tools/diagnose/context.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/diagnose/test_job.h"

namespace ncclwatch::tools::diagnose_internal {
namespace {

using diagnose_testing::Job;

TEST(Context, OldestInFlightPerProcess) {
  Job j = diagnose_testing::MissingRankJob();  // ranks 0..2 in AllReduce #12 from 5 s
  const Model& m = j.Finish();
  const Ctx c(m, DiagnoseOptions());
  ASSERT_EQ(c.oldest_inflight.size(), 4u);
  for (uint32_t p = 0; p < 3; ++p) {
    ASSERT_NE(c.oldest_inflight[p], kNone);
    EXPECT_EQ(m.ops[c.oldest_inflight[p]].seq, 12u);
  }
  EXPECT_EQ(c.oldest_inflight[3], kNone);
}

TEST(Context, CollectivesByEarliestEnqueue) {
  Job j;
  j.Procs(2, 5.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1});
  uint32_t t = j.Comm("tp", 0x7, {0, 1});
  // #2 enqueued before #1 on 'world': the order is by time, not number.
  for (uint32_t p = 0; p < 2; ++p) {
    j.Coll(p, w, 1, "AllReduce", 1024, 0.3, 0.31);
    j.Coll(p, w, 2, "AllReduce", 1024, 0.1, 0.11);
    j.Coll(p, t, 1, "AllGather", 256, 0.2, 0.21);
  }
  const Model& m = j.Finish();
  const Ctx c(m, DiagnoseOptions());
  ASSERT_EQ(c.colls_of_comm.size(), 2u);
  ASSERT_EQ(c.colls_of_comm[w].size(), 2u);
  EXPECT_EQ(m.matches[c.colls_of_comm[w][0]].seq, 2u);
  EXPECT_EQ(m.matches[c.colls_of_comm[w][1]].seq, 1u);
  ASSERT_EQ(c.colls_of_comm[t].size(), 1u);
  EXPECT_EQ(m.matches[c.colls_of_comm[t][0]].comm, t);
}

TEST(Context, NamesOfOperations) {
  Job j;
  j.Procs(2, 5.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1});
  const uint32_t ar = j.Coll(0, w, 3, "AllReduce", 1024, 0.1, 0.2);
  const uint32_t send = j.P2p(0, w, "Send", 1, 2, 8, 0.3, 0.4);
  const uint32_t recv = j.P2p(1, w, "Recv", 0, 2, 8, 0.3, 0.4);
  const Model& m = j.Finish();
  const Ctx c(m, DiagnoseOptions());
  EXPECT_EQ(c.OpName(m.ops[ar]), "AllReduce #3");
  EXPECT_EQ(c.OpName(m.ops[send]), "Send #2 to rank 1");
  EXPECT_EQ(c.OpName(m.ops[recv]), "Recv #2 from rank 0");
  EXPECT_EQ(c.CommLabel(w), "comm 'world' (2 ranks)");
  EXPECT_EQ(c.PeerName(w, 5), "comm rank 5");
  EXPECT_EQ(c.Names({1, 0}), "ranks 0,1");
}

TEST(Context, EmitRanksByKindAndGivesSeverity) {
  std::vector<Ranked> out;
  Finding straggler;
  straggler.set_kind(report::STRAGGLER);
  Emit(&out, 1, straggler);
  Finding cycle;
  cycle.set_kind(report::WAIT_CYCLE);
  Emit(&out, 2, cycle);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].f.severity(), report::SEVERITY_WARNING);
  EXPECT_EQ(out[1].f.severity(), report::SEVERITY_ERROR);
  EXPECT_LT(out[1].precedence, out[0].precedence);
  // A missing rank that waits elsewhere comes after one that left.
  Finding elsewhere, left;
  elsewhere.set_kind(report::MISSING_RANK);
  elsewhere.add_fates(report::FATE_WAITS_ELSEWHERE);
  left.set_kind(report::MISSING_RANK);
  left.add_fates(report::FATE_LEFT_CLEANLY);
  Emit(&out, 0, elsewhere);
  Emit(&out, 0, left);
  EXPECT_GT(out[2].precedence, out[3].precedence);
}

// A cause names the records it rests on; one named without them reads
// "cannot tell", whatever its finder said.
TEST(Context, ACauseWithoutItsEvidenceBecomesCannotTell) {
  Finding backed;
  SetCause(&backed, report::CAUSE_PROGRAM, "program logic: x", "the records of each rank's call");
  BackCause(&backed);
  EXPECT_EQ(backed.cause(), report::CAUSE_PROGRAM);
  EXPECT_EQ(backed.cause_evidence(), "the records of each rank's call");

  Finding bare;
  SetCause(&bare, report::CAUSE_RESOURCES, "rank 1's host was busy");
  BackCause(&bare);
  EXPECT_EQ(bare.cause(), report::CAUSE_UNKNOWN);
  EXPECT_EQ(bare.cause_text().rfind("cannot tell: ", 0), 0u) << bare.cause_text();
  EXPECT_NE(bare.cause_text().find("rank 1's host was busy"), std::string::npos) << bare.cause_text();
  EXPECT_TRUE(bare.cause_evidence().empty());

  // A finder's own set_cause, past SetCause, is caught the same way.
  Finding direct;
  direct.set_cause(report::CAUSE_NETWORK);
  direct.set_cause_text("the network");
  BackCause(&direct);
  EXPECT_EQ(direct.cause(), report::CAUSE_UNKNOWN);

  // "cannot tell" needs no evidence and stays as it is.
  Finding unknown;
  SetCause(&unknown, report::CAUSE_UNKNOWN, "cannot tell: why; what would tell: that");
  BackCause(&unknown);
  EXPECT_EQ(unknown.cause_text(), "cannot tell: why; what would tell: that");
}

}  // namespace
}  // namespace ncclwatch::tools::diagnose_internal
