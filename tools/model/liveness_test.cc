#include "tools/model/liveness.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/model/model.h"

namespace ncclwatch::tools {
namespace {

int64_t Ns(double sec) { return static_cast<int64_t>(sec * 1e9); }

struct Job {
  Model m;
  uint32_t AddProc(double last_sec) {
    Proc p;
    p.heartbeat_ms = 1000;
    p.first_ns = 0;
    p.last_ns = Ns(last_sec);
    m.procs.push_back(p);
    return static_cast<uint32_t>(m.procs.size() - 1);
  }
  uint32_t AddComm(const std::vector<uint32_t>& procs) {
    Comm c;
    c.hash = 0x100 + m.comms.size();
    c.nranks = static_cast<int32_t>(procs.size());
    for (size_t r = 0; r < procs.size(); ++r) {
      c.members.push_back({procs[r], static_cast<int32_t>(r), 0, kNoTime});
      c.proc_of_rank.push_back(procs[r]);
    }
    m.comms.push_back(c);
    return static_cast<uint32_t>(m.comms.size() - 1);
  }
  uint32_t AddOp(uint32_t proc, uint32_t comm, int32_t rank, uint64_t seq, OpState state, double start_sec) {
    Op op;
    op.proc = proc;
    op.comm = comm;
    op.rank = rank;
    m.SetFunc(&op, "AllReduce");
    op.seq = seq;
    op.state = state;
    op.start_ns = Ns(start_sec);
    if (state == OpState::kCompleted) op.done_ns = Ns(start_sec + 0.01);
    op.index = static_cast<uint32_t>(m.procs[proc].ops.size());
    m.ops.push_back(op);
    m.procs[proc].ops.push_back(static_cast<uint32_t>(m.ops.size() - 1));
    return static_cast<uint32_t>(m.ops.size() - 1);
  }
};

TEST(Liveness, EachOperationGetsOneJudgement) {
  Job j;
  const uint32_t p0 = j.AddProc(10), p1 = j.AddProc(10), p2 = j.AddProc(10), dead = j.AddProc(2);
  const uint32_t world = j.AddComm({p0, p1, p2});
  const uint32_t pair = j.AddComm({p0, dead});
  const uint32_t untracked = j.AddComm({p1, p2});
  const uint32_t done = j.AddOp(p0, world, 0, 1, OpState::kCompleted, 0.1);
  const uint32_t long_wait = j.AddOp(p0, world, 0, 2, OpState::kInFlight, 1.0);   // waited 9 s
  const uint32_t short_wait = j.AddOp(p1, world, 1, 2, OpState::kInFlight, 9.5);  // waited 0.5 s
  const uint32_t died_inside = j.AddOp(dead, pair, 1, 1, OpState::kInFlight, 1.9);
  // Without completion tracking: rank 1 of `untracked` issued #1 and #2,
  // rank 0 only #1. #2 on rank 1 provably never finished; #1 proves nothing.
  const uint32_t no_proof = j.AddOp(p2, untracked, 1, 1, OpState::kUntracked, 0.5);
  j.AddOp(p1, untracked, 0, 1, OpState::kUntracked, 0.5);
  const uint32_t proven = j.AddOp(p2, untracked, 1, 2, OpState::kUntracked, 0.6);
  MatchOps(&j.m);

  const Liveness l = JudgeLiveness(j.m);
  EXPECT_EQ(l.of_op[done], OpLiveness::kFinished);
  EXPECT_EQ(l.of_op[long_wait], OpLiveness::kHung);
  EXPECT_EQ(l.of_op[short_wait], OpLiveness::kInFlight);
  EXPECT_TRUE(l.dead[dead]);
  EXPECT_FALSE(l.dead[p0]);
  EXPECT_EQ(l.of_op[died_inside], OpLiveness::kHung);
  EXPECT_EQ(l.of_op[no_proof], OpLiveness::kUnknown);
  EXPECT_TRUE(l.unfinished[proven]);
  EXPECT_EQ(l.of_op[proven], OpLiveness::kHung);

  // The wait that makes a hang is an option.
  LivenessOptions patient;
  patient.min_wait_sec = 20;
  EXPECT_EQ(JudgeLiveness(j.m, patient).of_op[long_wait], OpLiveness::kInFlight);
  // A stuck report naming it makes it a hang whatever the wait.
  StuckReport r;
  StuckOp s;
  s.op = short_wait;
  r.ops.push_back(s);
  j.m.procs[p1].stucks.push_back(r);
  EXPECT_EQ(JudgeLiveness(j.m).of_op[short_wait], OpLiveness::kHung);
}

// A stuck report whose file lacks the operation's record names it by
// communicator, function and seq: NCCL numbers each function apart, so
// Broadcast #1 in flight is not AllReduce #1, and an entry of a function
// the file never defined names nothing.
TEST(Liveness, AStuckReportNamesTheFunctionItsSeqBelongsTo) {
  Job j;
  const uint32_t p0 = j.AddProc(10), p1 = j.AddProc(10);
  const uint32_t world = j.AddComm({p0, p1});
  const uint32_t ar = j.AddOp(p0, world, 0, 1, OpState::kInFlight, 9.5);  // waited 0.5 s: not hung by its wait
  const uint32_t bc = j.AddOp(p0, world, 0, 1, OpState::kInFlight, 9.6);
  j.m.SetFunc(&j.m.ops[bc], "Broadcast");
  j.AddOp(p1, world, 1, 1, OpState::kInFlight, 9.5);
  MatchOps(&j.m);
  StuckReport r;
  StuckOp s;
  s.comm = world;
  s.seq = 1;
  s.func = j.m.Intern("Broadcast");
  r.ops.push_back(s);
  j.m.procs[p0].stucks.push_back(r);
  Liveness l = JudgeLiveness(j.m);
  EXPECT_EQ(l.stuck_ops, std::set<uint32_t>{bc});
  EXPECT_EQ(l.of_op[bc], OpLiveness::kHung);
  EXPECT_EQ(l.of_op[ar], OpLiveness::kInFlight);

  j.m.procs[p0].stucks[0].ops[0].func = 0;
  l = JudgeLiveness(j.m);
  EXPECT_TRUE(l.stuck_ops.empty());
  EXPECT_EQ(l.of_op[bc], OpLiveness::kInFlight);
}

}  // namespace
}  // namespace ncclwatch::tools
