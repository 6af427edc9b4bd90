#include "tools/diagnose/find_cycles.h"

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tools/order/order.h"

namespace ncclwatch::tools::diagnose_internal {

std::vector<Ranked> FindCycles(const Ctx& c) {
  const Model& m = c.m;
  std::vector<Ranked> out;
  const size_t np = m.procs.size();
  // needs[p]: processes that p's oldest in-flight (hung) op waits for.
  std::vector<std::vector<uint32_t>> needs(np);
  for (uint32_t pi = 0; pi < np; ++pi) {
    const uint32_t oi = c.oldest_inflight[pi];
    if (oi == kNone || !c.Hung(oi)) continue;
    const Op& op = m.ops[oi];
    const Comm& comm = m.comms[op.comm];
    if (op.kind == OpKind::kColl) {
      if (op.match == kNone) continue;
      const Match& mt = m.matches[op.match];
      for (int32_t r = 0; r < comm.nranks; ++r)
        if (c.HasFile(op.comm, r) && OpOfRank(m, mt, r) == kNone)
          needs[pi].push_back(comm.proc_of_rank[r]);
    } else if (op.match != kNone) {
      const Match& mt = m.matches[op.match];
      if (mt.ops.size() == 2 && (mt.ops[0] == kNone || mt.ops[1] == kNone) && c.HasFile(op.comm, op.peer_or_root))
        needs[pi].push_back(comm.proc_of_rank[op.peer_or_root]);
    }
  }
  // Find cycles by depth-first search; report each once (by its set of processes).
  std::vector<int> color(np, 0);  // 0 new, 1 on stack, 2 done
  std::vector<uint32_t> stack;
  std::set<std::set<uint32_t>> seen;
  std::function<void(uint32_t)> dfs = [&](uint32_t u) {
    color[u] = 1;
    stack.push_back(u);
    for (uint32_t v : needs[u]) {
      if (color[v] == 1) {
        auto it = std::find(stack.begin(), stack.end(), v);
        std::vector<uint32_t> cyc(it, stack.end());
        std::set<uint32_t> key(cyc.begin(), cyc.end());
        if (cyc.size() >= 2 && seen.insert(key).second) {
          // Start the description at the lowest-numbered process.
          std::rotate(cyc.begin(), std::min_element(cyc.begin(), cyc.end(), [&](uint32_t a, uint32_t b) {
                        return c.Name(a) < c.Name(b);
                      }), cyc.end());
          Finding f;
          f.set_kind(report::WAIT_CYCLE);
          std::string sum = "DEADLOCK: ";
          int64_t when = INT64_MAX;
          for (size_t i = 0; i < cyc.size(); ++i) {
            const uint32_t a = cyc[i], b = cyc[(i + 1) % cyc.size()];
            const Op& op = m.ops[c.oldest_inflight[a]];
            if (i == 0) {
              SetComm(c, op.comm, &f);
              f.set_func(c.Str(op.func));
              f.set_seq(op.seq);
              SetOp(c.oldest_inflight[a], &f);
            }
            when = std::min(when, op.start_ns);
            *f.add_culprits() = c.Ref(a);
            sum += (i == 0 ? "" : ", which ") + std::string(i == 0 ? c.Name(a) + " waits" : "waits") + " in " +
                   c.OpName(op) + " on " + c.CommLabel(op.comm) + " for " + c.Name(b);
            AddEvidence(&f, c.Name(a), "in " + c.OpName(op) + " on " + c.CommLabel(op.comm) + " since " +
                                            At(c.T(op.start_ns)) + " (" + Dur(c.WaitSec(op)) + "); " + c.Name(b) +
                                            " never issued it");
          }
          double waited = 1e300;
          for (uint32_t a : cyc) waited = std::min(waited, c.WaitSec(m.ops[c.oldest_inflight[a]]));
          f.set_waited_sec(waited);
          f.set_summary(sum + "; neither issued the other's operation (waited " + Dur(waited) + ")");
          Emit(&out, when, std::move(f));
        }
      } else if (color[v] == 0) {
        dfs(v);
      }
    }
    stack.pop_back();
    color[u] = 2;
  };
  for (uint32_t pi = 0; pi < np; ++pi)
    if (color[pi] == 0) dfs(pi);
  return out;
}

// Ranks that issued the same operations in different orders make the merged
// order (order.h) cyclic. Among the operations of each cycle, the pair that
// ranks issued in opposite orders names the odd ranks out (the minority);
// within one communicator that is an order mismatch, across communicators a
// deadlock. Only cycles holding a hung operation are reported: on separate
// streams, a different order across communicators is harmless.
std::vector<Ranked> FindOrderCycles(const Ctx& c, const std::vector<uint64_t>& mismatch_seq) {
  const Model& m = c.m;
  std::vector<Ranked> out;
  // Every cycle is judged, hung or not: two collectives issued in opposite
  // orders on one communicator may both complete (over the network NCCL
  // matched an AllGather against an AllReduce of the same bytes), and then
  // the results are wrong, which is worse than a hang. Across communicators
  // an order that completed is no fault: only a hung cycle is a deadlock.
  GlobalOrder g = ComputeOrder(m);
  if (g.cycles.empty()) return out;
  std::vector<size_t> pos_of(m.ops.size(), SIZE_MAX);
  for (size_t p = 0; p < g.nodes.size(); ++p)
    for (uint32_t oi : g.nodes[p]) pos_of[oi] = p;
  for (const auto& whole : g.cycles) {
    bool hung = false;
    for (size_t p : whole)
      for (uint32_t oi : g.nodes[p]) hung |= c.Hung(oi);
    // One collective issued out of turn early in a long job shifts every
    // later one against the others' (NCCL pairs collectives by their order
    // on the communicator): the whole job becomes one cycle. Its earliest
    // pair issued in opposite orders is among its earliest operations, so
    // only those are searched; any pair found is a real inversion.
    std::vector<size_t> cyc = whole;
    constexpr size_t kSearched = 128;
    if (cyc.size() > kSearched) {
      std::vector<std::pair<int64_t, size_t>> by_start;
      by_start.reserve(cyc.size());
      for (size_t p : cyc) {
        int64_t when = INT64_MAX;
        for (uint32_t oi : g.nodes[p])
          if (m.ops[oi].start_ns != kNoTime) when = std::min(when, m.ops[oi].start_ns);
        by_start.emplace_back(when, p);
      }
      std::partial_sort(by_start.begin(), by_start.begin() + kSearched, by_start.end());
      cyc.clear();
      for (size_t i = 0; i < kSearched; ++i) cyc.push_back(by_start[i].second);
    }
    // Each process's place of each searched operation in its program order
    // (SIZE_MAX: it has none of it).
    std::vector<size_t> slot(g.nodes.size(), SIZE_MAX);
    for (size_t i = 0; i < cyc.size(); ++i) slot[cyc[i]] = i;
    std::vector<uint32_t> members;  // processes holding a searched operation
    std::vector<std::vector<size_t>> place;
    for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
      std::vector<size_t> at;
      size_t n = 0;
      for (uint32_t oi : m.procs[pi].ops) {
        const size_t p = pos_of[oi];
        if (p == SIZE_MAX || slot[p] == SIZE_MAX) continue;
        if (at.empty()) at.assign(cyc.size(), SIZE_MAX);
        if (at[slot[p]] == SIZE_MAX) at[slot[p]] = n++;
      }
      if (at.empty()) continue;
      members.push_back(pi);
      place.push_back(std::move(at));
    }
    // The earliest pair issued in opposite orders.
    size_t best_u = SIZE_MAX, best_v = SIZE_MAX;
    std::vector<uint32_t> first_uv, first_vu;
    int64_t best_when = INT64_MAX;
    for (size_t i = 0; i < cyc.size(); ++i)
      for (size_t j = i + 1; j < cyc.size(); ++j) {
        const size_t u = cyc[i], v = cyc[j];
        // Collectives only: a send/recv shifted by an unmatched send is
        // FindP2p's; and a communicator with a mismatch explains its own shifts.
        const Op& a0 = m.ops[g.nodes[u][0]];
        const Op& b0 = m.ops[g.nodes[v][0]];
        if (a0.kind != OpKind::kColl || b0.kind != OpKind::kColl) continue;
        if (!hung && a0.comm != b0.comm) continue;
        if (mismatch_seq[a0.comm] != 0 || mismatch_seq[b0.comm] != 0) continue;
        std::vector<uint32_t> uv, vu;
        for (size_t k = 0; k < members.size(); ++k) {
          const size_t a = place[k][i], b = place[k][j];
          if (a == SIZE_MAX || b == SIZE_MAX) continue;
          (a < b ? uv : vu).push_back(members[k]);
        }
        if (uv.empty() || vu.empty()) continue;
        int64_t when = INT64_MAX;
        for (uint32_t oi : g.nodes[u]) when = std::min(when, m.ops[oi].start_ns);
        // Two operations of one communicator issued in opposite orders
        // explain a cycle better than a pair across communicators, whose
        // order follows from it (a swap on 'world' reorders it against
        // 'dp' too): the earliest such pair wins, else the earliest pair.
        const bool same = a0.comm == b0.comm;
        const bool best_same = best_u != SIZE_MAX && m.ops[g.nodes[best_u][0]].comm == m.ops[g.nodes[best_v][0]].comm;
        if ((same && !best_same) || (same == best_same && when < best_when))
          best_when = when, best_u = u, best_v = v, first_uv = uv, first_vu = vu;
      }
    if (best_u == SIZE_MAX) continue;
    const Op& ou = m.ops[g.nodes[best_u][0]];
    const Op& ov = m.ops[g.nodes[best_v][0]];
    const bool one_comm = ou.comm == ov.comm;
    // The odd ranks out: the smaller side (both sides when they are equal).
    const bool majority = first_uv.size() != first_vu.size();
    const std::vector<uint32_t>& odd = first_uv.size() < first_vu.size() ? first_uv : first_vu;
    const std::vector<uint32_t>& rest = &odd == &first_uv ? first_vu : first_uv;
    const bool odd_uv = &odd == &first_uv;
    auto opname = [&](const Op& o) { return c.OpName(o) + (one_comm ? "" : " on " + c.CommLabel(o.comm)); };
    const std::string a = opname(odd_uv ? ou : ov), b = opname(odd_uv ? ov : ou);
    double waited = 0;
    for (size_t p : {best_u, best_v})
      for (uint32_t oi : g.nodes[p])
        if (c.Hung(oi)) waited = std::max(waited, c.WaitSec(m.ops[oi]));
    Finding f;
    f.set_kind(one_comm ? report::ORDER_MISMATCH : report::WAIT_CYCLE);
    SetComm(c, ou.comm, &f);
    f.set_func(c.Str(ou.func));
    f.set_seq(ou.seq);
    SetOp(g.nodes[best_u][0], &f);
    f.set_waited_sec(waited);
    // Without a majority the records cannot tell which side broke the
    // order: every side is named, as a mismatch without majority names them.
    for (uint32_t pi : odd) *f.add_culprits() = c.Ref(pi, ou.comm);
    for (uint32_t pi : rest) *(majority ? f.add_waiting() : f.add_culprits()) = c.Ref(pi, ou.comm);
    std::string sum = one_comm ? "ORDER MISMATCH: " : "DEADLOCK: ";
    // Ranks in rank order and ranges ("ranks 0-16,18-23"), as every finding
    // names them: processes come in the order their files were named.
    sum += c.Names(odd) + " issued " + a + " before " + b +
           (one_comm ? " on " + c.CommLabel(ou.comm) : std::string()) + " where " + c.Names(rest) + " issued " + b +
           " first";
    sum += majority ? "" : " (no majority: every side is named)";
    // The pair's own state, not the cycle's: in a long cycle ending in a
    // hang, an early pair may have completed against each other.
    bool pair_hung = false;
    for (size_t p : {best_u, best_v})
      for (uint32_t oi : g.nodes[p]) pair_hung |= c.Hung(oi);
    if (!pair_hung && one_comm) {
      // Nothing waits: every op of both completed, or the files end first.
      bool done = true;
      for (size_t p : {best_u, best_v})
        for (uint32_t oi : g.nodes[p]) done = done && m.ops[oi].state == OpState::kCompleted && !m.ops[oi].ended_by_abort;
      f.set_completed(done);
      sum += done ? "; both completed on every rank, each against the other: their results are wrong"
                  : "; the collectives cannot match";
    } else {
      sum += one_comm ? "; the collectives cannot match (waited " + Dur(waited) + ")"
                      : "; each waits for the other (waited " + Dur(waited) + ")";
    }
    f.set_summary(sum);
    for (uint32_t pi : odd) AddEvidence(&f, c.Name(pi), "issued " + a + " then " + b);
    for (uint32_t pi : rest) AddEvidence(&f, c.Name(pi), "issued " + b + " then " + a);
    Emit(&out, best_when, std::move(f));
  }
  return out;
}

}  // namespace ncclwatch::tools::diagnose_internal
