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
    case report::LATE_RANK: return 3;  // with MISSING_RANK: the earlier explains the later
    case report::MISSING_RANK: return 3;
    case report::UNMATCHED_P2P: return 4;
    case report::DEAD_RANK: return 5;
    case report::STUCK_IN_PROGRESS: return 6;
    case report::JOB_ENDED: return 7;  // an error; found only when no other error is
    case report::STRAGGLER: return 8;
    default: return 9;
  }
}

// Per process, its oldest operation in flight when the file ends, or when
// its communicator was finalized (an abort: a clean destroy waits for its
// operations); without completion tracking, only where proven unfinished
// (tools/model/liveness.h). kNone: none.
std::vector<uint32_t> OldestInFlight(const Model& m, const Liveness& live) {
  std::vector<uint32_t> oldest(m.procs.size(), kNone);
  for (size_t pi = 0; pi < m.procs.size(); ++pi) {
    for (uint32_t oi : m.procs[pi].ops) {
      if (live.Unfinished(oi) && oldest[pi] == kNone) oldest[pi] = oi;
    }
  }
  return oldest;
}

// Each communicator's collective matches by earliest enqueue: the first one
// that hung is the one to explain.
std::vector<std::vector<uint32_t>> CollectivesByComm(const Model& m) {
  std::vector<std::vector<uint32_t>> colls(m.comms.size());
  for (uint32_t mi = 0; mi < m.matches.size(); ++mi) {
    const Match& mt = m.matches[mi];
    if (mt.kind == OpKind::kColl && mt.comm < m.comms.size()) colls[mt.comm].push_back(mi);
  }
  std::vector<int64_t> first_start(m.matches.size(), INT64_MAX);
  for (uint32_t mi = 0; mi < m.matches.size(); ++mi)
    for (uint32_t oi : m.matches[mi].ops)
      if (oi != kNone) first_start[mi] = std::min(first_start[mi], m.ops[oi].start_ns);
  for (auto& list : colls)
    std::stable_sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) { return first_start[a] < first_start[b]; });
  return colls;
}

}  // namespace


void SetComm(const Ctx& c, uint32_t comm, Finding* f) {
  const Comm& cm = c.m.comms[comm];
  f->set_comm(cm.Label());
  f->set_comm_name(cm.name);
  f->set_comm_hash(cm.hash);
  f->set_comm_nranks(cm.nranks);
}

void SetOp(uint32_t op, Finding* f) { f->set_op(op == kNone ? 0 : uint64_t{op} + 1); }

void SetOp(const Match& mt, Finding* f) {
  for (uint32_t oi : mt.ops)
    if (oi != kNone) return SetOp(oi, f);
  f->set_op(0);
}

void AddEvidence(Finding* f, const std::string& proc, const std::string& text) {
  report::Evidence* e = f->add_evidence();
  e->set_proc(proc);
  e->set_text(text);
}

void SetCause(Finding* f, report::Cause cause, const std::string& text, const std::string& evidence) {
  f->set_cause(cause);
  f->set_cause_text(text);
  if (cause == report::CAUSE_UNKNOWN) f->clear_cause_evidence();
  else f->set_cause_evidence(evidence);
}

void BackCause(Finding* f) {
  if (f->cause() == report::CAUSE_UNKNOWN || f->cause() == report::CAUSE_UNSPECIFIED ||
      !f->cause_evidence().empty())
    return;
  SetCause(f, report::CAUSE_UNKNOWN,
           "cannot tell: no record shows the cause first named (" + f->cause_text() +
               "); what would tell: the records that show it, named in the evidence below");
}

void Emit(std::vector<Ranked>* out, int64_t when, Finding f) {
  f.set_severity(f.kind() == report::STRAGGLER ? report::SEVERITY_WARNING : report::SEVERITY_ERROR);
  int prec = 2 * Precedence(f.kind());
  // A rank missing because it waits in another communicator is explained by
  // that communicator's finding: it comes after missing ranks that left, died or idle.
  // So does one that can name no rank (their files are missing or damaged).
  if (f.kind() == report::MISSING_RANK &&
      std::all_of(f.fates().begin(), f.fates().end(), [](int x) { return x == report::FATE_WAITS_ELSEWHERE; }))
    ++prec;
  out->push_back({prec, when, std::move(f), false});
}

Ctx::Ctx(const Model& model, const DiagnoseOptions& opts)
    : m(model),
      o(opts),
      live(JudgeLiveness(model, opts)),
      t0(live.t0),
      t_end(live.t_end),
      dead(live.dead),
      last_seq(live.last_seq),
      stuck_ops(live.stuck_ops),
      unfinished(live.unfinished),
      oldest_inflight(OldestInFlight(model, live)),
      colls_of_comm(CollectivesByComm(model)) {}

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
    std::string s = c.OpNameOf(*it);
    if (comm == kNone) s += " on " + c.CommLabel(op.comm);
    if (op.state == OpState::kCompleted && op.done_ns != kNoTime) return s + " completed at " + At(c.T(op.done_ns));
    if (op.state == OpState::kCompleted) return s + " enqueued at " + At(c.T(op.start_ns)) + ", completed";
    return s + " enqueued at " + At(c.T(op.start_ns));
  }
  return "none";
}

uint32_t ProvenLastColl(const Ctx& c, uint32_t proc, uint32_t comm, int64_t* start) {
  const int32_t rank = c.RankIn(proc, comm);
  if (rank < 0) return kNone;
  uint32_t best = kNone;
  int64_t best_start = kNoTime;
  for (uint32_t mi : c.colls_of_comm[comm]) {
    const Match& mt = c.m.matches[mi];
    // Where a slot is not a rank, a rank below the highest has none: not all.
    if (!SlotsAreRanks(c.m, mt) || static_cast<size_t>(rank) >= mt.ops.size() ||
        mt.ops[static_cast<size_t>(rank)] != kNone)
      continue;
    bool all = mt.ops.size() > 1;
    int64_t t = kNoTime;
    for (size_t r = 0; r < mt.ops.size() && all; ++r) {
      if (r == static_cast<size_t>(rank)) continue;
      const uint32_t oi = mt.ops[r];
      all = oi != kNone && c.m.ops[oi].state == OpState::kCompleted && !c.m.ops[oi].completion_lost;
      if (all) t = std::max(t, c.m.ops[oi].start_ns);
    }
    if (all && t > best_start) best = mi, best_start = t;
  }
  if (start != nullptr) *start = best_start;
  return best;
}

std::string LostTail(const Ctx& c, uint32_t proc, uint32_t comm, std::string* after) {
  std::vector<uint32_t> comms;
  if (comm != kNone) comms.push_back(comm);
  else
    for (uint32_t ci = 0; ci < c.m.comms.size(); ++ci)
      if (c.RankIn(proc, ci) >= 0) comms.push_back(ci);
  uint32_t best = kNone;
  int64_t best_start = kNoTime;
  for (uint32_t ci : comms) {
    int64_t t = kNoTime;
    const uint32_t mi = ProvenLastColl(c, proc, ci, &t);
    if (mi != kNone && t > best_start) best = mi, best_start = t;
  }
  if (best == kNone) return "";
  // Only when it lies beyond what the file shows.
  for (uint32_t oi : c.m.procs[proc].ops)
    if ((comm == kNone || c.m.ops[oi].comm == comm) && c.m.ops[oi].start_ns >= best_start) return "";
  const Match& mt = c.m.matches[best];
  const std::string name = c.Str(MatchFunc(c.m, mt)) + " #" + std::to_string(mt.seq);
  const std::string where = comm == kNone ? " on " + c.CommLabel(mt.comm) : std::string();
  if (after != nullptr) *after = " after " + name + where;
  return "; its file lacks its last records: the others completed " + name + where +
         " with it (records lost at its end)";
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
    after = " after " + c.OpNameOf(*it);
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
  // Where its file ends before what the others prove it did, say so, as
  // every finding about it does (one story for one rank).
  if (lost.empty() && c.dead[proc]) lost = LostTail(c, proc, kNone, &after);
  const std::string last_op = "last op on it: " + LastOpText(c, proc, comm);
  const int64_t fin = c.FinalizeOf(proc, comm);
  const uint32_t busy = c.oldest_inflight[proc];
  if (p.damaged_end) {
    f.fate = report::FATE_FILE_DAMAGED;
    f.brief = "cannot be followed: its file is damaged from offset " + std::to_string(p.damaged_at);
    f.evidence = "its file is damaged from offset " + std::to_string(p.damaged_at) +
                 ": what it did after that cannot be read; " + last_op;
  } else if (c.dead[proc]) {
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

bool FlightRecorderGiven(const Model& m) {
  for (const Comm& comm : m.comms)
    if (!comm.process_group.empty()) return true;
  return false;
}

std::string IdleWouldTell(const Ctx& c, const std::vector<uint32_t>& procs, bool p2p) {
  std::vector<std::string> would;
  if (!FlightRecorderGiven(c.m))
    would.push_back("Flight Recorder dumps (--fr; PyTorch writes them with TORCH_NCCL_DUMP_ON_TIMEOUT=1), "
                    "which name the call each rank is in");
  would.push_back("a Python stack of " + std::string(procs.size() == 1 ? "it" : "each") +
                  " (py-spy dump while it hangs, or NCCLWATCH_ON_STUCK='py-spy dump --pid %p')");
  // The P2pApi event comes with profiler API v5 (NCCL 2.28); advised only
  // where some rank could have recorded it and did not.
  bool could = false;
  for (uint32_t pr : procs) {
    const Proc& p = c.m.procs[pr];
    could |= p.api_version >= 5 && (p.event_mask & kMaskP2pApi) == 0;
  }
  if (p2p && could)
    would.push_back("possibly the API event of a send or receive that never reached launch "
                    "(NCCLWATCH_EVENTS=default,p2papi)");
  std::string s;
  for (size_t i = 0; i < would.size(); ++i) s += (i == 0 ? "" : i + 1 == would.size() ? " or " : ", ") + would[i];
  return s;
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
      if (StuckNames(s, c.m, oi)) {
        *report_time = r->time_ns;
        return &s;
      }
  return nullptr;
}

std::string WindowName(const Ctx& c, const StuckOp& s) {
  if (s.window_first == kNone || s.window_last == kNone) return "a window of operations launched without events";
  const Op& a = c.m.ops[s.window_first];
  const Op& b = c.m.ops[s.window_last];
  if (s.window_first == s.window_last) return c.OpName(a);
  if (a.kind == OpKind::kColl && b.kind == OpKind::kColl && a.func == b.func)
    return c.OpName(a) + "..#" + std::to_string(b.seq);
  return c.OpName(a) + " to " + c.OpName(b);
}

}  // namespace ncclwatch::tools::diagnose_internal
