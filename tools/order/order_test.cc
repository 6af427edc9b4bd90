// The merged order against randomized jobs: whatever the clocks say, it must
// respect every rank's program order and every collective and send/recv
// dependency, place every operation exactly once, and report no cycle when a
// consistent schedule exists; a real order inversion is reported as a cycle.

#include "tools/order/order.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

namespace ncclwatch::tools {
namespace {

struct JobBuilder {
  Model m;
  std::map<std::tuple<uint32_t, uint16_t>, uint64_t> coll_seq;   // (comm, func) -> next seq
  std::map<std::tuple<uint32_t, int, int>, uint64_t> p2p_seq;     // (comm, src, dst) -> last
  explicit JobBuilder(int nranks) {
    for (int r = 0; r < nranks; ++r) {
      Proc p;
      p.host = "h";
      p.pid = 100 + r;
      p.launcher_rank = r;
      m.procs.push_back(p);
    }
  }
  uint32_t AddComm(const std::string& name, const std::vector<int>& procs) {
    Comm c;
    c.hash = 1000 + m.comms.size();
    c.name = name;
    c.nranks = static_cast<int>(procs.size());
    for (size_t i = 0; i < procs.size(); ++i) {
      c.members.push_back({static_cast<uint32_t>(procs[i]), static_cast<int32_t>(i), 0, kNoTime});
      c.proc_of_rank.push_back(static_cast<uint32_t>(procs[i]));
    }
    m.comms.push_back(c);
    return static_cast<uint32_t>(m.comms.size() - 1);
  }
  uint32_t AddOp(uint32_t comm, int rank, OpKind kind, const std::string& func, uint64_t seq, int peer, int64_t t) {
    Op o;
    o.proc = m.comms[comm].proc_of_rank[static_cast<size_t>(rank)];
    o.comm = comm;
    o.rank = rank;
    o.kind = kind;
    m.SetFunc(&o, func);
    o.seq = seq;
    o.peer_or_root = peer;
    o.start_ns = t;
    o.state = OpState::kCompleted;
    o.done_ns = t + 10;
    uint32_t oi = static_cast<uint32_t>(m.ops.size());
    m.ops.push_back(o);
    m.procs[o.proc].ops.push_back(oi);
    return oi;
  }
  void Coll(uint32_t comm, const std::string& func, const std::vector<int64_t>& t_of_rank) {
    uint64_t seq = coll_seq[{comm, m.Intern(func)}]++;
    for (int r = 0; r < m.comms[comm].nranks; ++r) AddOp(comm, r, OpKind::kColl, func, seq, 0, t_of_rank[r]);
  }
  void SendRecv(uint32_t comm, int src, int dst, int64_t ts, int64_t tr) {
    uint64_t n = ++p2p_seq[{comm, src, dst}];
    AddOp(comm, src, OpKind::kP2p, "Send", n, dst, ts);
    AddOp(comm, dst, OpKind::kP2p, "Recv", n, src, tr);
  }
  void Finish() {
    for (Proc& p : m.procs)
      for (uint32_t i = 0; i < p.ops.size(); ++i) m.ops[p.ops[i]].index = i;
    MatchOps(&m);
  }
};

// Checks the order against program order (with p2p runs unordered among themselves).
void CheckOrder(const Model& m, const GlobalOrder& g) {
  std::vector<size_t> pos_of_op(m.ops.size(), SIZE_MAX);
  for (size_t p = 0; p < g.nodes.size(); ++p)
    for (uint32_t oi : g.nodes[p]) {
      ASSERT_EQ(pos_of_op[oi], SIZE_MAX) << "op placed twice";
      pos_of_op[oi] = p;
    }
  for (size_t oi = 0; oi < m.ops.size(); ++oi) ASSERT_NE(pos_of_op[oi], SIZE_MAX) << "op missing";
  for (const Match& mt : m.matches) {
    std::set<size_t> where;
    for (uint32_t oi : mt.ops)
      if (oi != kNone) where.insert(pos_of_op[oi]);
    EXPECT_EQ(where.size(), 1u) << "a matched operation split over positions";
  }
  for (const Proc& p : m.procs) {
    for (size_t i = 0; i + 1 < p.ops.size(); ++i) {
      const Op& a = m.ops[p.ops[i]];
      const Op& b = m.ops[p.ops[i + 1]];
      bool same_group = a.kind == OpKind::kP2p && b.kind == OpKind::kP2p && a.comm == b.comm;
      if (same_group) continue;
      EXPECT_LT(pos_of_op[p.ops[i]], pos_of_op[p.ops[i + 1]]) << "program order broken on proc " << a.proc;
    }
  }
}

TEST(OrderTest, RandomJobsRespectEveryDependency) {
  for (int seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    const int nranks = 2 + static_cast<int>(rng() % 7);
    JobBuilder b(nranks);
    std::vector<int> all;
    for (int r = 0; r < nranks; ++r) all.push_back(r);
    uint32_t world = b.AddComm("world", all);
    std::vector<uint32_t> subs;
    for (int r = 0; r + 1 < nranks; r += 2) subs.push_back(b.AddComm("tp", {r, r + 1}));
    const char* funcs[] = {"AllReduce", "AllGather", "Broadcast", "ReduceScatter"};
    const int nops = 5 + static_cast<int>(rng() % 40);
    for (int k = 0; k < nops; ++k) {
      // Clocks that disagree with the true order by up to 3 steps.
      auto t = [&](int) { return int64_t{k} * 1000 + static_cast<int64_t>(rng() % 6000) - 3000; };
      int what = static_cast<int>(rng() % 3);
      if (what == 0 || subs.empty()) {
        std::vector<int64_t> ts;
        for (int r = 0; r < nranks; ++r) ts.push_back(t(r));
        b.Coll(world, funcs[rng() % 4], ts);
      } else if (what == 1) {
        uint32_t c = subs[rng() % subs.size()];
        b.Coll(c, funcs[rng() % 4], {t(0), t(1)});
      } else {
        int src = static_cast<int>(rng() % nranks), dst = static_cast<int>(rng() % nranks);
        if (src == dst) dst = (dst + 1) % nranks;
        b.SendRecv(world, src, dst, t(src), t(dst));
      }
    }
    // Program order is the order ops were added (the true schedule), not the clocks.
    b.Finish();
    GlobalOrder g = ComputeOrder(b.m);
    CheckOrder(b.m, g);
    EXPECT_TRUE(g.cycles.empty());
  }
}

TEST(OrderTest, SwappedOrderIsReportedAsACycle) {
  JobBuilder b(2);
  uint32_t world = b.AddComm("world", {0, 1});
  // Rank 0: AllReduce then AllGather; rank 1: AllGather then AllReduce.
  b.AddOp(world, 0, OpKind::kColl, "AllReduce", 0, 0, 100);
  b.AddOp(world, 0, OpKind::kColl, "AllGather", 0, 0, 200);
  b.AddOp(world, 1, OpKind::kColl, "AllGather", 0, 0, 110);
  b.AddOp(world, 1, OpKind::kColl, "AllReduce", 0, 0, 210);
  b.Finish();
  GlobalOrder g = ComputeOrder(b.m);
  ASSERT_EQ(g.nodes.size(), 2u);
  ASSERT_EQ(g.cycles.size(), 1u);
  EXPECT_EQ(g.cycles[0].size(), 2u);
  EXPECT_TRUE(g.in_cycle[0] && g.in_cycle[1]);
  report::MergeReport r = MergeReportOf(b.m, g);
  ASSERT_EQ(r.cycles_size(), 1);
  EXPECT_NE(r.cycles(0).find("different orders"), std::string::npos);
}

TEST(OrderTest, AMissingRankIsNamedAndTheRestStillOrdered) {
  JobBuilder b(3);
  uint32_t world = b.AddComm("world", {0, 1, 2});
  b.Coll(world, "AllReduce", {10, 11, 12});
  // #1 issued by ranks 0 and 1 only.
  b.AddOp(world, 0, OpKind::kColl, "AllReduce", 1, 0, 20);
  b.AddOp(world, 1, OpKind::kColl, "AllReduce", 1, 0, 21);
  b.Finish();
  b.m.ops.back().state = OpState::kInFlight;
  GlobalOrder g = ComputeOrder(b.m);
  report::MergeReport r = MergeReportOf(b.m, g);
  ASSERT_EQ(r.ops_size(), 2);
  EXPECT_EQ(r.ops(1).seq(), 1u);
  ASSERT_EQ(r.ops(1).missing_ranks_size(), 1);
  EXPECT_EQ(r.ops(1).missing_ranks(0), 2);
  EXPECT_EQ(r.ops(1).in_flight(), 1u);
  std::ostringstream text;
  PrintMergeText(r, text);
  EXPECT_NE(text.str().find("2 of 3 (no 2)"), std::string::npos) << text.str();
  // The files end with it in flight: no hang yet, as diagnose would say.
  EXPECT_EQ(r.ops(1).hung(), 0u);
  EXPECT_NE(text.str().find("IN FLIGHT on 1"), std::string::npos) << text.str();
  // Rank 1 lives on for 2 s waiting in it: a hang, as diagnose would say.
  b.m.procs[1].last_ns = 2'000'000'000;
  r = MergeReportOf(b.m, g);
  EXPECT_EQ(r.ops(1).hung(), 1u);
  std::ostringstream text2;
  PrintMergeText(r, text2);
  EXPECT_NE(text2.str().find("HUNG on 1"), std::string::npos) << text2.str();
}

}  // namespace
}  // namespace ncclwatch::tools
