#include "tools/model/liveness.h"

#include <algorithm>

#include "tools/model/semantics.h"

namespace ncclwatch::tools {
namespace {

// Liveness::unfinished: which operations provably never finished, from who
// issued what. Three rules, applied until nothing changes:
//  1. A rank never issued its side (it has a file, is not dead, since a dead
//     rank's file may have lost its last records, and issued nothing at or
//     past that sequence number, else a record was dropped): the others' sides
//     never finished (a collective needs every rank; a send, its receive).
//  2. NCCL runs one communicator's kernels in issue order on each rank: after
//     an unfinished operation, that rank's later ones on the communicator
//     never even started.
//  3. An operation that never started held back those that need its data:
//     every other rank of an all-reduce, all-gather or reduce-scatter (or an
//     unknown function); the others of a broadcast or scatter from it as root;
//     the root of a reduce or gather it feeds; the receive of its send.
// A completed operation (tracked) is never marked.
void MarkUnfinished(const Model& m, Liveness* c) {
  c->unfinished.assign(m.ops.size(), false);
  std::vector<bool> never_started(m.ops.size(), false);
  std::vector<uint32_t> work;  // newly never-started ops, for rule 3
  auto mark = [&](uint32_t oi) {
    if (oi == kNone || c->unfinished[oi] || m.ops[oi].state == OpState::kCompleted) return;
    c->unfinished[oi] = true;
    // Rule 2.
    const Op& op = m.ops[oi];
    const std::vector<uint32_t>& ops = m.procs[op.proc].ops;
    for (size_t k = op.index + 1; k < ops.size(); ++k) {
      const uint32_t later = ops[k];
      if (m.ops[later].comm != op.comm || m.ops[later].state == OpState::kCompleted) continue;
      if (never_started[later]) break;  // and every one after it
      never_started[later] = true;
      c->unfinished[later] = true;
      work.push_back(later);
    }
  };
  auto never_issued = [&](uint32_t comm, int32_t rank, uint64_t seq, uint16_t func, bool coll) {
    if (!HasFile(m, comm, rank)) return false;
    const uint32_t pr = m.comms[comm].proc_of_rank[rank];
    if (c->dead[pr]) return false;
    if (!coll) return true;
    auto it = c->last_seq[pr].find(SeqKey(comm, func));
    return it == c->last_seq[pr].end() || it->second < seq;
  };
  // Rule 1.
  for (const Match& mt : m.matches) {
    if (mt.comm >= m.comms.size()) continue;
    bool missing = false;
    if (mt.kind == OpKind::kColl) {
      const uint16_t func = MatchFunc(m, mt);
      for (int32_t r = 0; r < m.comms[mt.comm].nranks && !missing; ++r)
        if (HasFile(m, mt.comm, r) && OpOfRank(m, mt, r) == kNone) missing = never_issued(mt.comm, r, mt.seq, func, true);
    } else if (mt.ops.size() == 2 && (mt.ops[0] == kNone) != (mt.ops[1] == kNone)) {
      missing = never_issued(mt.comm, mt.ops[0] == kNone ? mt.src : mt.dst, mt.seq, 0, false);
    }
    if (!missing) continue;
    for (uint32_t oi : mt.ops) mark(oi);
  }
  // Rule 3, and rule 2 again for what it marks.
  while (!work.empty()) {
    const uint32_t oi = work.back();
    work.pop_back();
    const Op& op = m.ops[oi];
    if (op.match == kNone || op.match >= m.matches.size()) continue;
    const Match& mt = m.matches[op.match];
    if (mt.kind == OpKind::kP2p) {
      if (mt.ops.size() == 2 && mt.ops[0] == oi) mark(mt.ops[1]);  // a send that never started
      continue;
    }
    const bool from_root = FlowOf(op.fn) == RootFlow::kFromRoot;
    const bool to_root = FlowOf(op.fn) == RootFlow::kToRoot;
    const int32_t root = op.peer_or_root;
    for (size_t s = 0; s < mt.ops.size(); ++s) {
      const uint32_t other = mt.ops[s];
      if (other == kNone || other == oi) continue;
      if (from_root) {
        if (op.rank == root) mark(other);
      } else if (to_root) {
        if (RankOfSlot(m, mt, s) == root && op.rank != root) mark(other);
      } else {
        mark(other);
      }
    }
  }
}

// An operation without a completion in its file, recorded before the file
// counted completions it may lack (Op::completion_maybe_lost), may have
// completed. Not judged by how long its process waited: in flight or hung
// only where MarkUnfinished proves it never finished.
// The same for one that NCCL's mask may not have let complete in the file
// (Op::mask_unseen: a change took away the completion source).
bool CompletionMayBeLost(const Op& op) {
  // An operation whose launch recorded no event of its own (sampled events)
  // waits for a later launch's event: without one, its state is unknown.
  return op.state == OpState::kInFlight && (op.completion_maybe_lost || op.mask_unseen || op.without_event) &&
         !op.ended_by_abort;
}

}  // namespace

bool HasFile(const Model& m, uint32_t comm, int32_t rank) {
  const Comm& c = m.comms[comm];
  return rank >= 0 && static_cast<size_t>(rank) < c.proc_of_rank.size() && c.proc_of_rank[rank] != kNone;
}

int64_t FinalizeOf(const Model& m, uint32_t proc, uint32_t comm) {
  for (const CommMember& mem : m.comms[comm].members)
    if (mem.proc == proc) return mem.finalize_ns;
  return kNoTime;
}

double WaitSec(const Model& m, const Op& op) {
  const Proc& p = m.procs[op.proc];
  if (p.last_ns == kNoTime || op.start_ns == kNoTime) return 0;
  int64_t until = p.last_ns;
  const int64_t fin = FinalizeOf(m, op.proc, op.comm);
  if (fin != kNoTime && fin < until) until = fin;
  return static_cast<double>(until - op.start_ns) / 1e9;
}

uint16_t MatchFunc(const Model& m, const Match& mt) {
  for (uint32_t oi : mt.ops)
    if (oi != kNone) return m.ops[oi].func;
  return 0;
}

Liveness JudgeLiveness(const Model& m, const LivenessOptions& o) {
  Liveness c;
  c.t0 = INT64_MAX;
  c.t_end = INT64_MIN;
  for (const Proc& p : m.procs) {
    if (p.first_ns != kNoTime) c.t0 = std::min(c.t0, p.first_ns);
    if (p.last_ns != kNoTime) c.t_end = std::max(c.t_end, p.last_ns);
  }
  if (c.t0 == INT64_MAX) c.t0 = 0;
  if (c.t_end == INT64_MIN) c.t_end = c.t0;

  const size_t np = m.procs.size();
  c.dead.assign(np, false);
  for (size_t pi = 0; pi < np; ++pi) {
    const Proc& p = m.procs[pi];
    if (p.finalized || p.last_ns == kNoTime || p.damaged_end) continue;
    const double hb = (p.heartbeat_ms > 0 ? p.heartbeat_ms : 1000) / 1e3;
    const double limit = std::max(o.dead_heartbeats * hb, o.dead_min_sec);
    c.dead[pi] = static_cast<double>(c.t_end - p.last_ns) / 1e9 > limit;
  }

  c.last_seq.assign(np, {});
  for (size_t pi = 0; pi < np; ++pi)
    for (uint32_t oi : m.procs[pi].ops) {
      const Op& op = m.ops[oi];
      if (op.kind != OpKind::kColl) continue;
      // A graph-like operation left out of its number's match shares that
      // number with the next call NCCL counts (MatchOps): it says only that
      // the calls before that number were issued.
      uint64_t seq = op.seq;
      if (op.match == kNone && GraphLike(m, oi)) {
        if (seq == 0) continue;
        --seq;
      }
      uint64_t& s = c.last_seq[pi][SeqKey(op.comm, op.func)];
      s = std::max(s, seq);
    }
  MarkUnfinished(m, &c);
  for (size_t pi = 0; pi < np; ++pi)
    for (const StuckReport& r : m.procs[pi].stucks)
      for (const StuckOp& s : r.ops) {
        if (s.op != kNone) {
          c.stuck_ops.insert(s.op);
          continue;
        }
        // NCCL numbers collectives per communicator AND function: Broadcast
        // #1 is not AllReduce #1 (StuckNames).
        for (uint32_t oi : m.procs[pi].ops)
          if (StuckNames(s, m, oi)) c.stuck_ops.insert(oi);
      }

  c.of_op.assign(m.ops.size(), OpLiveness::kUnknown);
  for (uint32_t oi = 0; oi < m.ops.size(); ++oi) {
    const Op& op = m.ops[oi];
    OpLiveness& v = c.of_op[oi];
    if (op.state == OpState::kCompleted) {
      v = OpLiveness::kFinished;
    } else if (op.state == OpState::kUntracked && !c.unfinished[oi]) {
      v = OpLiveness::kUnknown;  // a long wait proves nothing, nor does a finalize
    } else if (CompletionMayBeLost(op) && !c.unfinished[oi]) {
      v = OpLiveness::kUnknown;  // nor a missing completion the file may have lost
    } else if (c.dead[op.proc] && op.state == OpState::kInFlight) {
      v = OpLiveness::kHung;  // it died inside
    } else {
      v = WaitSec(m, op) >= o.min_wait_sec || c.stuck_ops.count(oi) > 0 ? OpLiveness::kHung : OpLiveness::kInFlight;
    }
  }
  return c;
}

}  // namespace ncclwatch::tools
