#include "tools/diagnose/context.h"

#include <algorithm>
#include <string>
#include <vector>

namespace ncclwatch::tools::diagnose_internal {
namespace {

int Precedence(report::FindingKind k) {
  switch (k) {
    case report::WAIT_CYCLE: return 0;
    case report::ORDER_MISMATCH: return 1;
    case report::MISMATCH: return 2;
    case report::MISSING_RANK: return 3;
    case report::UNMATCHED_P2P: return 4;
    case report::DEAD_RANK: return 5;
    case report::STUCK_IN_PROGRESS: return 6;
    case report::STRAGGLER: return 7;
    default: return 8;
  }
}

// Ctx::unfinished: which operations provably never finished, from who
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
void MarkUnfinished(Ctx* c) {
  const Model& m = c->m;
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
    if (!c->HasFile(comm, rank)) return false;
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
        if (static_cast<size_t>(r) >= mt.ops.size() || mt.ops[r] == kNone)
          missing = never_issued(mt.comm, r, mt.seq, func, true);
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
    for (size_t r = 0; r < mt.ops.size(); ++r) {
      const uint32_t other = mt.ops[r];
      if (other == kNone || other == oi) continue;
      if (from_root) {
        if (op.rank == root) mark(other);
      } else if (to_root) {
        if (static_cast<int32_t>(r) == root && op.rank != root) mark(other);
      } else {
        mark(other);
      }
    }
  }
}

}  // namespace

// The function of a match's ops (every op of a collective match has it).
uint16_t MatchFunc(const Model& m, const Match& mt) {
  for (uint32_t oi : mt.ops)
    if (oi != kNone) return m.ops[oi].func;
  return 0;
}

void SetComm(const Ctx& c, uint32_t comm, Finding* f) {
  const Comm& cm = c.m.comms[comm];
  f->set_comm(cm.Label());
  f->set_comm_name(cm.name);
  f->set_comm_hash(cm.hash);
  f->set_comm_nranks(cm.nranks);
}

void AddEvidence(Finding* f, const std::string& proc, const std::string& text) {
  report::Evidence* e = f->add_evidence();
  e->set_proc(proc);
  e->set_text(text);
}

void Emit(std::vector<Ranked>* out, int64_t when, Finding f) {
  f.set_severity(f.kind() == report::STRAGGLER ? report::SEVERITY_WARNING : report::SEVERITY_ERROR);
  int prec = 2 * Precedence(f.kind());
  // A rank missing because it waits in another communicator is explained by
  // that communicator's finding: it comes after missing ranks that left, died or idle.
  if (f.kind() == report::MISSING_RANK && f.fates_size() > 0 &&
      std::all_of(f.fates().begin(), f.fates().end(), [](int x) { return x == report::FATE_WAITS_ELSEWHERE; }))
    ++prec;
  out->push_back({prec, when, std::move(f)});
}

void Prepare(Ctx* c) {
  const Model& m = c->m;
  c->t0 = INT64_MAX;
  c->t_end = INT64_MIN;
  for (const Proc& p : m.procs) {
    if (p.first_ns != kNoTime) c->t0 = std::min(c->t0, p.first_ns);
    if (p.last_ns != kNoTime) c->t_end = std::max(c->t_end, p.last_ns);
  }
  if (c->t0 == INT64_MAX) c->t0 = 0;
  if (c->t_end == INT64_MIN) c->t_end = c->t0;

  const size_t np = m.procs.size();
  c->dead.assign(np, false);
  for (size_t pi = 0; pi < np; ++pi) {
    const Proc& p = m.procs[pi];
    if (p.finalized || p.last_ns == kNoTime) continue;
    const double hb = (p.heartbeat_ms > 0 ? p.heartbeat_ms : 1000) / 1e3;
    const double limit = std::max(c->o.dead_heartbeats * hb, c->o.dead_min_sec);
    c->dead[pi] = static_cast<double>(c->t_end - p.last_ns) / 1e9 > limit;
  }

  c->last_seq.assign(np, {});
  for (size_t pi = 0; pi < np; ++pi)
    for (uint32_t oi : m.procs[pi].ops) {
      const Op& op = m.ops[oi];
      if (op.kind == OpKind::kColl) {
        uint64_t& s = c->last_seq[pi][SeqKey(op.comm, op.func)];
        s = std::max(s, op.seq);
      }
    }
  MarkUnfinished(c);
  c->oldest_inflight.assign(np, kNone);
  for (size_t pi = 0; pi < np; ++pi) {
    for (uint32_t oi : m.procs[pi].ops) {
      const Op& op = m.ops[oi];
      // In flight when the file ends, or when its communicator was finalized
      // (an abort: a clean destroy waits for its operations). Untracked: only
      // where proven unfinished (MarkUnfinished).
      const bool in_flight =
          op.state == OpState::kInFlight || (op.state == OpState::kUntracked && c->unfinished[oi]);
      if (in_flight && c->oldest_inflight[pi] == kNone) c->oldest_inflight[pi] = oi;
    }
    for (const StuckReport& r : m.procs[pi].stucks)
      for (const StuckOp& s : r.ops) {
        if (s.op != kNone) {
          c->stuck_ops.insert(s.op);
          continue;
        }
        for (uint32_t oi : m.procs[pi].ops) {
          const Op& op = m.ops[oi];
          if (op.kind == OpKind::kColl && op.comm == s.comm && op.seq == s.seq) c->stuck_ops.insert(oi);
        }
      }
  }

  c->colls_of_comm.assign(m.comms.size(), {});
  for (uint32_t mi = 0; mi < m.matches.size(); ++mi) {
    const Match& mt = m.matches[mi];
    if (mt.kind == OpKind::kColl && mt.comm < m.comms.size()) c->colls_of_comm[mt.comm].push_back(mi);
  }
  // Each communicator's collectives by earliest enqueue: the first one that
  // hung is the one to explain.
  std::vector<int64_t> first_start(m.matches.size(), INT64_MAX);
  for (uint32_t mi = 0; mi < m.matches.size(); ++mi)
    for (uint32_t oi : m.matches[mi].ops)
      if (oi != kNone) first_start[mi] = std::min(first_start[mi], m.ops[oi].start_ns);
  for (auto& list : c->colls_of_comm)
    std::stable_sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) { return first_start[a] < first_start[b]; });

  c->mismatch_seq.assign(m.comms.size(), 0);
}


std::vector<std::pair<int32_t, uint32_t>> Present(const Match& mt) {
  std::vector<std::pair<int32_t, uint32_t>> v;
  for (size_t r = 0; r < mt.ops.size(); ++r)
    if (mt.ops[r] != kNone) v.push_back({static_cast<int32_t>(r), mt.ops[r]});
  return v;
}

int64_t EarliestStart(const Model& m, const std::vector<uint32_t>& ops) {
  int64_t t = INT64_MAX;
  for (uint32_t oi : ops)
    if (oi != kNone && m.ops[oi].start_ns != kNoTime) t = std::min(t, m.ops[oi].start_ns);
  return t == INT64_MAX ? 0 : t;
}

std::string LastOpText(const Ctx& c, uint32_t proc, uint32_t comm) {
  const Proc& p = c.m.procs[proc];
  for (auto it = p.ops.rbegin(); it != p.ops.rend(); ++it) {
    const Op& op = c.m.ops[*it];
    if (comm != kNone && op.comm != comm) continue;
    std::string s = c.OpName(op);
    if (comm == kNone) s += " on " + c.CommLabel(op.comm);
    if (op.state == OpState::kCompleted && op.done_ns != kNoTime) return s + " completed at " + At(c.T(op.done_ns));
    if (op.state == OpState::kCompleted) return s + " enqueued at " + At(c.T(op.start_ns)) + ", completed";
    return s + " enqueued at " + At(c.T(op.start_ns));
  }
  return "none";
}

// What a rank that never issued an operation on `comm` did instead.
// `missing_seq`: the collective it never joined (the others completed every

FateInfo FateOf(const Ctx& c, uint32_t proc, uint32_t comm, const uint64_t* missing_seq, uint16_t missing_func) {
  FateInfo f;
  const Proc& p = c.m.procs[proc];
  // " after #11" (its last collective there), " after Recv #1 from rank 0", or nothing.
  std::string after;
  for (auto it = p.ops.rbegin(); it != p.ops.rend(); ++it) {
    const Op& op = c.m.ops[*it];
    if (op.comm != comm) continue;
    after = " after " + c.OpName(op);
    break;
  }
  std::string lost;
  if (missing_seq != nullptr && *missing_seq > 0) {
    auto ls = c.last_seq[proc].find(SeqKey(comm, missing_func));
    const bool has_any = ls != c.last_seq[proc].end();
    const uint64_t prev = *missing_seq - 1;
    if (!has_any || ls->second < prev) {
      bool completed_prev = false;
      for (uint32_t mi : c.colls_of_comm[comm])
        if (c.m.matches[mi].seq == prev && MatchFunc(c.m, c.m.matches[mi]) == missing_func)
          for (uint32_t oi : c.m.matches[mi].ops)
            completed_prev |= oi != kNone && c.m.ops[oi].state == OpState::kCompleted;
      if (completed_prev) {
        after = " after " + c.Str(missing_func) + " #" + std::to_string(prev);
        lost = "; its file lacks #" + (has_any ? std::to_string(ls->second + 1) : std::string("0")) +
               (has_any && ls->second + 1 == prev ? "" : "-#" + std::to_string(prev)) +
               ", which the others completed (records lost at its end)";
      }
    }
  }
  const std::string last_op = "last op on it: " + LastOpText(c, proc, comm);
  const int64_t fin = c.FinalizeOf(proc, comm);
  const uint32_t busy = c.oldest_inflight[proc];
  if (c.dead[proc]) {
    const double silent = static_cast<double>(c.t_end - p.last_ns) / 1e9;
    f.fate = report::FATE_DIED;
    f.brief = "died" + after + " (silent for the last " + Dur(silent) + ")";
    f.evidence = "died: last sign of life at " + At(c.T(p.last_ns)) + ", " + Dur(silent) +
                 " before the job's last record, no finalize; " + last_op;
    if (busy != kNone) f.evidence += "; it was in " + c.OpName(c.m.ops[busy]) + " on " + c.CommLabel(c.m.ops[busy].comm);
    if (p.cut_tail) f.evidence += "; its file ends mid-record (killed)";
    f.evidence += lost;
  } else if (busy != kNone && c.m.ops[busy].comm != comm) {
    const Op& b = c.m.ops[busy];
    f.fate = report::FATE_WAITS_ELSEWHERE;
    f.brief = "waits in " + c.OpName(b) + " on " + c.CommLabel(b.comm);
    f.evidence = "waits in " + c.OpName(b) + " on " + c.CommLabel(b.comm) + " since " + At(c.T(b.start_ns)) + " (" +
                 Dur(c.WaitSec(b)) + "); " + last_op;
    if (c.FinalizeOf(proc, b.comm) != kNoTime)
      f.evidence += "; aborted at " + At(c.T(c.FinalizeOf(proc, b.comm)));
  } else if (busy != kNone) {
    const Op& b = c.m.ops[busy];
    f.fate = report::FATE_WAITS_ELSEWHERE;
    f.brief = "is still in " + c.OpName(b);
    f.evidence = "is still in " + c.OpName(b) + " of the same communicator since " + At(c.T(b.start_ns));
  } else if (fin != kNoTime || p.finalized) {
    f.fate = report::FATE_LEFT_CLEANLY;
    f.brief = "left cleanly" + after;
    f.evidence = "left cleanly: " + last_op;
    if (fin != kNoTime) f.evidence += "; CommFinalize at " + At(c.T(fin));
    if (p.finalized) f.evidence += std::string("; process finalized") + (p.clean ? "" : " (not every communicator)") +
                                   " at " + At(c.T(p.last_ns));
  } else {
    f.fate = report::FATE_IDLE;
    f.brief = "is alive but idle outside NCCL" + after;
    f.evidence = "alive (";
    f.evidence += p.heartbeats > 0 ? "heartbeats until " + At(c.T(p.last_heartbeat_ns)) : "records until " + At(c.T(p.last_ns));
    f.evidence += ") with no NCCL operation in flight: busy or blocked outside NCCL; " + last_op;
    const std::string any = LastOpText(c, proc, kNone);
    if (any != "none" && any.find(" on " + c.CommLabel(comm)) == std::string::npos)
      f.evidence += "; its last op anywhere: " + any;
  }
  if (f.fate != report::FATE_DIED) f.evidence += lost;
  return f;
}

std::string ProxyLine(const Ctx& c, uint32_t comm, const ProxyState& x) {
  return std::string(x.is_send ? "send to " : "receive from ") + c.PeerName(comm, x.peer) +
         " never completed on channel " + std::to_string(x.channel);
}

// The evidence of one rank's stuck report for op `oi` (latest report naming it).
const StuckOp* StuckOf(const Ctx& c, uint32_t oi, int64_t* report_time) {
  const Op& op = c.m.ops[oi];
  const Proc& p = c.m.procs[op.proc];
  for (auto r = p.stucks.rbegin(); r != p.stucks.rend(); ++r)
    for (const StuckOp& s : r->ops)
      if (s.op == oi || (s.op == kNone && op.kind == OpKind::kColl && s.comm == op.comm && s.seq == op.seq)) {
        *report_time = r->time_ns;
        return &s;
      }
  return nullptr;
}

}  // namespace ncclwatch::tools::diagnose_internal
