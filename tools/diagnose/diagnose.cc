#include "tools/diagnose/diagnose.h"

#include "tools/order.h"
#include "tools/semantics.h"

#include <google/protobuf/util/json_util.h>
#include <stdarg.h>
#include <stdio.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <utility>

namespace ncclwatch::tools {
namespace {

using report::Diagnosis;
using report::Finding;
using report::ProcRef;

// NCCL counts seqNumber per communicator and function: a collective's
// sequence is keyed by both.
uint64_t SeqKey(uint32_t comm, uint16_t func) { return uint64_t{comm} << 16 | func; }

// The function of a match's ops (every op of a collective match has it).
uint16_t MatchFunc(const Model& m, const Match& mt) {
  for (uint32_t oi : mt.ops)
    if (oi != kNone) return m.ops[oi].func;
  return 0;
}

// ------------------------------------------------------------ formatting

std::string Printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Printf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0) return "";
  if (static_cast<size_t>(n) < sizeof(buf)) return std::string(buf, static_cast<size_t>(n));
  std::string s(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, fmt);
  vsnprintf(&s[0], s.size(), fmt, ap);
  va_end(ap);
  s.resize(static_cast<size_t>(n));
  return s;
}

// A duration: "10.0 s", "12.3 ms", "45 us".
std::string Dur(double sec) {
  const double a = std::fabs(sec);
  if (a >= 100) return Printf("%.0f s", sec);
  if (a >= 1) return Printf("%.1f s", sec);
  if (a >= 1e-3) return Printf("%.1f ms", sec * 1e3);
  return Printf("%.0f us", sec * 1e6);
}

// A moment on the job's timeline (seconds since job start).
std::string At(double t) { return Printf("%.2f s", t); }

std::string Thousands(uint64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

std::string Plural(uint64_t n, const char* one, const char* many) {
  return Thousands(n) + " " + (n == 1 ? one : many);
}

// "rank 3", "ranks 0,1,2", "ranks 0-7,9"; names that are not "rank N" are listed as they are.
std::string RankList(const std::vector<std::string>& names) {
  if (names.empty()) return "no rank";
  std::vector<long> nums;
  for (const std::string& n : names) {
    if (n.compare(0, 5, "rank ") != 0) {
      nums.clear();
      break;
    }
    char* end = nullptr;
    long v = strtol(n.c_str() + 5, &end, 10);
    if (end == nullptr || *end != '\0') {
      nums.clear();
      break;
    }
    nums.push_back(v);
  }
  if (nums.size() != names.size()) {
    std::string out;
    for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
    return out;
  }
  std::sort(nums.begin(), nums.end());
  nums.erase(std::unique(nums.begin(), nums.end()), nums.end());
  std::string out = nums.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < nums.size();) {
    size_t j = i;
    while (j + 1 < nums.size() && nums[j + 1] == nums[j] + 1) ++j;
    if (i > 0) out += ',';
    if (j - i >= 3) {
      out += std::to_string(nums[i]) + "-" + std::to_string(nums[j]);
    } else {
      for (size_t k = i; k <= j; ++k) out += (k > i ? "," : "") + std::to_string(nums[k]);
    }
    i = j + 1;
  }
  return out;
}

std::string StateName(uint32_t s) {
  switch (s) {
    case 0: return "SendPosted";
    case 1: return "SendRemFifoWait";
    case 2: return "SendTransmitted";
    case 3: return "SendDone";
    case 4: return "RecvPosted";
    case 5: return "RecvReceived";
    case 6: return "RecvTransmitted";
    case 7: return "RecvDone";
    case 8: return "SendGPUWait";
    case 9: return "SendWait";
    case 10: return "RecvWait";
    case 11: return "RecvFlushWait";
    case 12: return "RecvGPUWait";
    case 19: return "InProgress";
    case 20: return "SendPeerWait";
    default: return "state " + std::to_string(s);
  }
}

// ------------------------------------------------------------ context

struct Ctx {
  const Model& m;
  const DiagnoseOptions& o;
  int64_t t0 = 0, t_end = 0;
  std::vector<bool> dead;
  std::vector<uint32_t> oldest_inflight;              // per proc: oldest kInFlight op, kNone
  // Per proc: (comm << 16 | func) -> highest collective seq issued. NCCL
  // counts seqNumber per communicator and function.
  std::vector<std::map<uint64_t, uint64_t>> last_seq;
  std::vector<std::vector<uint32_t>> colls_of_comm;    // coll matches by comm, by earliest enqueue
  std::set<uint32_t> stuck_ops;                        // ops a stuck report names
  // Per op: proven never to have finished, from enqueue records alone
  // (MarkUnfinished). What decides for operations without completion tracking.
  std::vector<bool> unfinished;
  std::vector<uint64_t> mismatch_seq;                  // per comm: first disagreeing seq (0: none)

  Ctx(const Model& model, const DiagnoseOptions& opts) : m(model), o(opts) {}

  double T(int64_t ns) const { return ns == kNoTime ? 0.0 : static_cast<double>(ns - t0) / 1e9; }
  std::string Name(uint32_t proc) const { return ProcName(m, proc); }
  const std::string& Str(uint16_t id) const { return m.Str(id); }

  bool HasFile(uint32_t comm, int32_t rank) const {
    const Comm& c = m.comms[comm];
    return rank >= 0 && static_cast<size_t>(rank) < c.proc_of_rank.size() && c.proc_of_rank[rank] != kNone;
  }
  int64_t FinalizeOf(uint32_t proc, uint32_t comm) const {
    for (const CommMember& mem : m.comms[comm].members)
      if (mem.proc == proc) return mem.finalize_ns;
    return kNoTime;
  }
  int32_t RankIn(uint32_t proc, uint32_t comm) const {
    for (const CommMember& mem : m.comms[comm].members)
      if (mem.proc == proc) return mem.rank;
    return -1;
  }
  // Seconds the op's process waited after enqueuing it: until its last sign
  // of life, or until its communicator was finalized (an abort, when the op
  // was still in flight: NCCL calls the profiler's finalize from
  // ncclCommAbort too, as a framework's watchdog does).
  double WaitSec(const Op& op) const {
    const Proc& p = m.procs[op.proc];
    if (p.last_ns == kNoTime || op.start_ns == kNoTime) return 0;
    int64_t until = p.last_ns;
    const int64_t fin = FinalizeOf(op.proc, op.comm);
    if (fin != kNoTime && fin < until) until = fin;
    return static_cast<double>(until - op.start_ns) / 1e9;
  }
  bool Hung(uint32_t oi) const {
    const Op& op = m.ops[oi];
    if (op.state == OpState::kCompleted) return false;
    // Without completion tracking, a long wait proves nothing (the op may
    // have finished long ago), nor does a finalize (an abort looks the same
    // as a clean destroy): only MarkUnfinished's proof does.
    if (op.state == OpState::kUntracked && !unfinished[oi]) return false;
    if (dead[op.proc] && op.state == OpState::kInFlight) return true;  // it died inside
    return WaitSec(op) >= o.min_wait_sec || stuck_ops.count(oi) > 0;
  }
  std::string CommLabel(uint32_t comm) const { return "comm " + m.comms[comm].Label(); }
  // "AllReduce #12", "Send #3 to rank 2".
  std::string OpName(const Op& op) const {
    std::string f = Str(op.func).empty() ? std::string("operation") : Str(op.func);
    if (op.kind == OpKind::kColl) return f + " #" + std::to_string(op.seq);
    const Comm& c = m.comms[op.comm];
    std::string peer = HasFile(op.comm, op.peer_or_root) ? Name(c.proc_of_rank[op.peer_or_root])
                                                          : "comm rank " + std::to_string(op.peer_or_root);
    return f + " #" + std::to_string(op.seq) + (IsRecv(op.fn) ? " from " : " to ") + peer;
  }
  std::string PeerName(uint32_t comm, int32_t rank) const {
    return HasFile(comm, rank) ? Name(m.comms[comm].proc_of_rank[rank]) : "comm rank " + std::to_string(rank);
  }
  ProcRef Ref(uint32_t proc, uint32_t comm = kNone) const {
    ProcRef r;
    const Proc& p = m.procs[proc];
    r.set_name(Name(proc));
    r.set_launcher_rank(p.launcher_rank);
    r.set_comm_rank(comm == kNone ? -1 : RankIn(proc, comm));
    r.set_host(p.host);
    r.set_pid(p.pid);
    r.set_file(p.path);
    return r;
  }
  std::string Names(const std::vector<uint32_t>& procs) const {
    std::vector<std::string> n;
    for (uint32_t p : procs) n.push_back(Name(p));
    return RankList(n);
  }
};

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

// A finding with its place in the verdict order.
struct Ranked {
  int precedence;
  int64_t when;  // the operation's earliest start (or the event's time)
  Finding f;
};

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

// ------------------------------------------------------------ preparation

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

// The ops of a collective match, by comm rank (only ranks with an op).
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

// ------------------------------------------------------------ fates

struct FateInfo {
  report::Fate fate = report::FATE_UNSPECIFIED;
  std::string brief;     // for the summary: "left cleanly after #11"
  std::string evidence;  // for the evidence line
};

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
// earlier one, so it took part in them even where its file lost the records).
FateInfo FateOf(const Ctx& c, uint32_t proc, uint32_t comm, const uint64_t* missing_seq = nullptr,
               uint16_t missing_func = 0) {
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

// ------------------------------------------------------------ 2, 3: mismatch, order

struct Sig {
  uint16_t func = 0, datatype = 0;
  uint64_t count = 0;
  int32_t root = 0;
  bool rooted = false;
  bool operator<(const Sig& o) const {
    return std::tie(func, datatype, count, root, rooted) < std::tie(o.func, o.datatype, o.count, o.root, o.rooted);
  }
  bool operator==(const Sig& o) const { return !(*this < o) && !(o < *this); }
};

Sig SigOf(const Ctx& c, const Op& op, bool rooted) {
  Sig s;
  s.func = op.func;
  s.datatype = op.datatype;
  s.count = op.count;
  s.rooted = rooted;
  s.root = rooted ? op.peer_or_root : 0;
  return s;
}

std::string SigText(const Ctx& c, const Sig& s, bool func, bool count, bool dtype, bool root) {
  std::vector<std::string> parts;
  if (func) parts.push_back(c.Str(s.func).empty() ? "an unnamed operation" : c.Str(s.func));
  if (count) parts.push_back("count " + Thousands(s.count));
  if (dtype) parts.push_back(c.Str(s.datatype).empty() ? "no datatype" : c.Str(s.datatype));
  if (root && s.rooted) parts.push_back("root " + std::to_string(s.root));
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " " : "") + parts[i];
  return out;
}

std::string SigShort(const Ctx& c, const Sig& s) {
  std::string out = c.Str(s.func) + "(" + Thousands(s.count);
  if (!c.Str(s.datatype).empty()) out += " " + c.Str(s.datatype);
  if (s.rooted) out += ", root " + std::to_string(s.root);
  return out + ")";
}

void FindMismatches(Ctx* c, std::vector<Ranked>* out) {
  const Model& m = c->m;
  for (uint32_t ci = 0; ci < m.comms.size(); ++ci) {
    const std::vector<uint32_t>& ms = c->colls_of_comm[ci];
    // Rooted-ness by the majority function, so a differing root is compared only where it matters.
    for (size_t idx = 0; idx < ms.size(); ++idx) {
      const Match& mt = m.matches[ms[idx]];
      auto present = Present(mt);
      if (present.size() < 2) continue;
      std::map<uint16_t, int> funcs;
      for (auto& [r, oi] : present) ++funcs[m.ops[oi].func];
      uint16_t maj_func = std::max_element(funcs.begin(), funcs.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
      const bool rooted = IsRooted(FuncFromName(c->Str(maj_func)));
      std::map<Sig, std::vector<int32_t>> groups;
      for (auto& [r, oi] : present) groups[SigOf(*c, m.ops[oi], rooted)].push_back(r);
      if (groups.size() < 2) continue;
      c->mismatch_seq[ci] = mt.seq;

      // The majority: the strictly largest group.
      std::vector<std::pair<Sig, std::vector<int32_t>>> g(groups.begin(), groups.end());
      std::stable_sort(g.begin(), g.end(), [](auto& a, auto& b) { return a.second.size() > b.second.size(); });
      const bool majority = g[0].second.size() > g[1].second.size();
      const Sig ref = g[0].first;
      const int32_t ref_rank = g[0].second[0];
      auto proc_of = [&](int32_t r) { return m.comms[ci].proc_of_rank[r]; };
      auto names_of = [&](const std::vector<int32_t>& rs) {
        std::vector<uint32_t> ps;
        for (int32_t r : rs) ps.push_back(proc_of(r));
        return c->Names(ps);
      };
      // Signatures from #seq onwards on one rank, by seq (stops at the first hole).
      auto window = [&](int32_t rank, size_t n) {
        std::vector<Sig> w;
        for (size_t j = idx; j < ms.size() && w.size() < n; ++j) {
          const Match& x = m.matches[ms[j]];
          if (x.seq != mt.seq + w.size()) break;
          if (static_cast<size_t>(rank) >= x.ops.size() || x.ops[rank] == kNone) break;
          w.push_back(SigOf(*c, m.ops[x.ops[rank]], rooted));
        }
        return w;
      };
      // Order: is each odd group's window a permutation of the reference's?
      const size_t wmax = static_cast<size_t>(std::max(2, c->o.order_window));
      const std::vector<Sig> ref_w = window(ref_rank, wmax);
      size_t order_len = 0;  // the shortest permutation window that fits every group
      bool permuted = true;
      for (size_t gi = 1; gi < g.size() && permuted; ++gi) {
        std::vector<Sig> w = window(g[gi].second[0], wmax);
        size_t found = 0;
        for (size_t len = 2; len <= std::min(w.size(), ref_w.size()); ++len) {
          std::vector<Sig> a(w.begin(), w.begin() + len), b(ref_w.begin(), ref_w.begin() + len);
          std::sort(a.begin(), a.end());
          std::sort(b.begin(), b.end());
          if (a == b) {
            found = len;
            break;
          }
        }
        if (found == 0) permuted = false;
        order_len = std::max(order_len, found);
      }
      // Skipped or extra operation: the odd rank's sequence is the reference's
      // shifted by `shift` (> 0: it skipped that many; < 0: it issued extra ones).
      int shift = 0;
      std::vector<Sig> odd_w = majority && g.size() == 2 ? window(g[1].second[0], wmax) : std::vector<Sig>();
      if (majority && g.size() == 2 && !(odd_w.size() > 1 && ref_w.size() > 1 && odd_w[1] == ref_w[1])) {
        const std::vector<Sig>& w = odd_w;
        for (int sh = 1; sh <= 3 && shift == 0; ++sh)
          for (int sign : {1, -1}) {
            const std::vector<Sig>& a = sign > 0 ? w : ref_w;  // a[i] == b[i + sh]
            const std::vector<Sig>& b = sign > 0 ? ref_w : w;
            if (b.size() <= static_cast<size_t>(sh)) continue;
            const size_t n = std::min(a.size(), b.size() - sh);
            if (n < 1 || (n < 2 && a.size() > 1)) continue;
            bool ok = true;
            for (size_t i = 0; i < n && ok; ++i) ok = a[i] == b[i + sh];
            if (ok) {
              shift = sign * sh;
              break;
            }
          }
      }
      // A swap restores agreement after its window; a skip does not.
      if (permuted && shift != 0) {
        for (size_t gi = 1; gi < g.size(); ++gi) {
          std::vector<Sig> w = window(g[gi].second[0], wmax);
          for (size_t i = order_len; i < std::min({w.size(), ref_w.size(), order_len + 2}); ++i)
            if (!(w[i] == ref_w[i])) permuted = false;
        }
      }
      // Later disagreeing positions on this comm (consequences, counted).
      size_t later = 0;
      for (size_t j = idx + 1; j < ms.size(); ++j) {
        std::set<Sig> s;
        for (auto& [r, oi] : Present(m.matches[ms[j]])) s.insert(SigOf(*c, m.ops[oi], rooted));
        if (s.size() > 1) ++later;
      }

      Finding f;
      SetComm(*c, ci, &f);
      f.set_func(c->Str(ref.func));
      f.set_seq(mt.seq);
      std::vector<int32_t> culprit_ranks, agree_ranks;
      for (size_t gi = majority ? 1 : 0; gi < g.size(); ++gi)
        culprit_ranks.insert(culprit_ranks.end(), g[gi].second.begin(), g[gi].second.end());
      if (majority) agree_ranks = g[0].second;
      std::sort(culprit_ranks.begin(), culprit_ranks.end());
      for (int32_t r : culprit_ranks) *f.add_culprits() = c->Ref(proc_of(r), ci);
      for (int32_t r : agree_ranks) *f.add_waiting() = c->Ref(proc_of(r), ci);
      const std::string where = c->CommLabel(ci);
      const std::string no_maj = majority ? "" : " (no majority: every side is named)";
      if (permuted && order_len >= 2) {
        f.set_kind(report::ORDER_MISMATCH);
        auto seq_text = [&](int32_t rank) {
          std::vector<Sig> w = window(rank, order_len);
          std::string s;
          for (size_t i = 0; i < w.size(); ++i) s += (i ? " then " : "") + SigShort(*c, w[i]);
          return s;
        };
        std::string sum = "ORDER MISMATCH: " + where + " #" + std::to_string(mt.seq) + "-#" +
                          std::to_string(mt.seq + order_len - 1) + ": ";
        for (size_t gi = majority ? 1 : 0; gi < g.size(); ++gi)
          sum += (gi > (majority ? 1u : 0u) ? "; " : "") + names_of(g[gi].second) + " issued " + seq_text(g[gi].second[0]);
        if (majority) sum += " where " + names_of(g[0].second) + " issued " + seq_text(ref_rank);
        f.set_summary(sum + no_maj);
        for (auto& grp : g) AddEvidence(&f, names_of(grp.second), "#" + std::to_string(mt.seq) + ": " + seq_text(grp.second[0]));
      } else if (shift != 0) {
        f.set_kind(report::MISMATCH);
        const int n = std::abs(shift);
        std::string ops;
        const std::vector<Sig> ref_ops = window(ref_rank, static_cast<size_t>(n));
        const std::vector<Sig> odd_ops = window(g[1].second[0], static_cast<size_t>(n));
        const std::vector<Sig>& list = shift > 0 ? ref_ops : odd_ops;
        for (size_t i = 0; i < list.size(); ++i) ops += (i ? ", " : "") + SigShort(*c, list[i]);
        const std::string odd = names_of(g[1].second), maj = names_of(g[0].second);
        const std::string upto = "#" + std::to_string(mt.seq + n - 1);
        const std::string range = "#" + std::to_string(mt.seq) + (n > 1 ? "-" + upto : "");
        if (shift > 0)
          f.set_summary("MISMATCH: " + odd + " skipped " + ops + " " + range + " on " + where + ": its #" +
                        std::to_string(mt.seq) + " is the #" + std::to_string(mt.seq + n) + " of " + maj);
        else
          f.set_summary("MISMATCH: " + odd + " issued " + ops + " as " + range + " on " + where + ", which " + maj +
                        " never issued: its #" + std::to_string(mt.seq + n) + " is their #" + std::to_string(mt.seq));
        for (auto& grp : g) AddEvidence(&f, names_of(grp.second), "from #" + std::to_string(mt.seq) + ": " + [&] {
          std::vector<Sig> w = window(grp.second[0], 4);
          std::string t;
          for (size_t i = 0; i < w.size(); ++i) t += (i ? ", " : "") + SigShort(*c, w[i]);
          return t;
        }());
      } else {
        f.set_kind(report::MISMATCH);
        // Which fields differ, from the reference.
        bool dfunc = false, dcount = false, ddtype = false, droot = false;
        for (size_t gi = 1; gi < g.size(); ++gi) {
          dfunc |= g[gi].first.func != ref.func;
          dcount |= g[gi].first.count != ref.count;
          ddtype |= g[gi].first.datatype != ref.datatype;
          droot |= g[gi].first.root != ref.root;
        }
        const bool show_count = dcount || dfunc;
        std::string sum = "MISMATCH: " + c->Str(ref.func) + " #" + std::to_string(mt.seq) + " on " + where + ": ";
        for (size_t gi = majority ? 1 : 0; gi < g.size(); ++gi)
          sum += (gi > (majority ? 1u : 0u) ? "; " : "") + names_of(g[gi].second) + " called " +
                 SigText(*c, g[gi].first, dfunc || !majority, show_count, ddtype, droot);
        if (majority)
          sum += " where " + names_of(g[0].second) + " called " + SigText(*c, ref, dfunc, show_count, ddtype, droot);
        f.set_summary(sum + no_maj);
        for (size_t gi = 1; gi <= g.size(); ++gi)  // the odd ones out first, the majority last
          for (int32_t r : g[gi % g.size()].second) {
            const auto& grp = g[gi % g.size()];
            const Op& op = m.ops[mt.ops[r]];
            AddEvidence(&f, c->Name(proc_of(r)),
                        SigShort(*c, grp.first) + " enqueued at " + At(c->T(op.start_ns)) +
                            (op.state == OpState::kCompleted ? ", completed" : ", never completed"));
          }
      }
      if (later > 0) AddEvidence(&f, "", Plural(later, "later position", "later positions") + " of this communicator disagree too");
      std::vector<uint32_t> ops;
      for (auto& pr : present) ops.push_back(pr.second);
      Emit(out, EarliestStart(m, ops), std::move(f));
      break;  // later positions follow from this one
    }
  }
}

// ------------------------------------------------------------ 1, 4: missing rank, stuck

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

void FindMissingAndStuck(Ctx* c, std::vector<Ranked>* out) {
  const Model& m = c->m;
  for (uint32_t ci = 0; ci < m.comms.size(); ++ci) {
    const Comm& comm = m.comms[ci];
    bool stuck_found = false;
    for (uint32_t mi : c->colls_of_comm[ci]) {
      const Match& mt = m.matches[mi];
      auto present = Present(mt);
      if (present.empty()) continue;
      std::vector<uint32_t> absent, no_file;  // procs / comm ranks
      bool hole = false;
      for (int32_t r = 0; r < comm.nranks; ++r) {
        if (static_cast<size_t>(r) < mt.ops.size() && mt.ops[r] != kNone) continue;
        if (!c->HasFile(ci, r)) {
          no_file.push_back(static_cast<uint32_t>(r));
          continue;
        }
        uint32_t pr = comm.proc_of_rank[r];
        auto it = c->last_seq[pr].find(SeqKey(ci, MatchFunc(m, mt)));
        if (it != c->last_seq[pr].end() && it->second >= mt.seq) hole = true;  // lost records, not absence
        else absent.push_back(pr);
      }
      bool completed = false, hung = true, stuck_named = false;
      double waited = 1e300;
      std::vector<uint32_t> ops, waiting, unfinished;
      for (auto& [r, oi] : present) {
        const Op& op = m.ops[oi];
        ops.push_back(oi);
        if (op.state == OpState::kCompleted) {
          completed = true;
          continue;
        }
        unfinished.push_back(oi);
        waiting.push_back(op.proc);
        if (!c->Hung(oi)) hung = false;
        if (c->stuck_ops.count(oi)) stuck_named = true;
        waited = std::min(waited, c->WaitSec(op));
      }
      if (unfinished.empty()) continue;
      if (waited == 1e300) waited = 0;
      const std::string func = m.Str(m.ops[present[0].second].func);
      const std::string opname = (func.empty() ? "operation" : func) + " #" + std::to_string(mt.seq);

      // An extra collective: issued by a minority while the majority, which
      // never issued it, went on and waits in a later operation of this
      // communicator. The minority is the odd one out.
      if (!absent.empty() && absent.size() > waiting.size() && !completed && hung) {
        // Moved on: each of them issued a later operation on this communicator.
        int64_t issued_at = INT64_MAX;
        for (uint32_t oi : unfinished) issued_at = std::min(issued_at, m.ops[oi].start_ns);
        bool moved_on = true;
        for (uint32_t pr : absent) {
          bool later = false;
          for (uint32_t oi : m.procs[pr].ops) later |= m.ops[oi].comm == ci && m.ops[oi].start_ns > issued_at;
          moved_on = moved_on && later && c->oldest_inflight[pr] != kNone;
        }
        if (moved_on) {
          Finding f;
          f.set_kind(report::MISMATCH);
          SetComm(*c, ci, &f);
          f.set_func(func);
          f.set_seq(mt.seq);
          f.set_waited_sec(waited);
          for (uint32_t pr : waiting) *f.add_culprits() = c->Ref(pr, ci);
          for (uint32_t pr : absent) *f.add_waiting() = c->Ref(pr, ci);
          f.set_summary("MISMATCH: " + c->Names(waiting) + " issued an extra " + opname + " on " + c->CommLabel(ci) +
                        " that " + c->Names(absent) + " never issued; they went on past it (" + Dur(waited) + ")");
          for (uint32_t oi : unfinished)
            AddEvidence(&f, c->Name(m.ops[oi].proc),
                        "issued " + opname + " at " + At(c->T(m.ops[oi].start_ns)) + ", never completed");
          for (uint32_t pr : absent) {
            const Op& b = m.ops[c->oldest_inflight[pr]];
            AddEvidence(&f, c->Name(pr), "never issued it; waits in " + c->OpName(b) + " on " + c->CommLabel(b.comm) +
                                             " since " + At(c->T(b.start_ns)));
          }
          Emit(out, EarliestStart(m, ops), std::move(f));
          break;
        }
      }
      if ((!absent.empty() || (!no_file.empty() && !hole)) && !completed && hung) {
        // 1. Missing rank.
        Finding f;
        f.set_kind(report::MISSING_RANK);
        SetComm(*c, ci, &f);
        f.set_func(func);
        f.set_seq(mt.seq);
        f.set_waited_sec(waited);
        std::string fates;
        for (uint32_t pr : absent) {
          FateInfo fi = FateOf(*c, pr, ci, &mt.seq, MatchFunc(m, mt));
          *f.add_culprits() = c->Ref(pr, ci);
          f.add_fates(fi.fate);
          fates += (fates.empty() ? "" : ", ") + c->Name(pr) + " " + fi.brief;
          AddEvidence(&f, c->Name(pr), fi.evidence);
        }
        std::vector<std::string> nf;
        for (uint32_t r : no_file) nf.push_back("comm rank " + std::to_string(r));
        if (absent.empty()) {
          for (uint32_t r : no_file) {
            ProcRef* pr = f.add_culprits();
            pr->set_name("comm rank " + std::to_string(r));
            pr->set_launcher_rank(-1);
            pr->set_comm_rank(static_cast<int32_t>(r));
            f.add_fates(report::FATE_NO_FILE);
          }
        }
        for (uint32_t pr : waiting) *f.add_waiting() = c->Ref(pr, ci);
        std::string sum;
        if (!absent.empty()) {
          sum = "HANG: " + c->Names(absent) + " never joined " + opname + " on " + c->CommLabel(ci) + "; " +
                c->Names(waiting) + " waited " + Dur(waited) + "; " + fates;
        } else {
          sum = "HANG: " + opname + " on " + c->CommLabel(ci) + " never completed; " + c->Names(waiting) + " waited " +
                Dur(waited) + "; the missing " + RankList(nf) + " gave no trace file";
        }
        f.set_summary(sum);
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        double wlo = 1e300, whi = 0;
        for (uint32_t oi : unfinished) {
          lo = std::min(lo, m.ops[oi].start_ns);
          hi = std::max(hi, m.ops[oi].start_ns);
          wlo = std::min(wlo, c->WaitSec(m.ops[oi]));
          whi = std::max(whi, c->WaitSec(m.ops[oi]));
        }
        AddEvidence(&f, c->Names(waiting),
                    "in " + opname + " since " + At(c->T(lo)) + (hi - lo > 10000000 ? " to " + At(c->T(hi)) : "") +
                        ", waited " + Dur(wlo) + (whi - wlo > 0.05 ? " to " + Dur(whi) : "") +
                        (stuck_named ? "; stuck reports name it" : ""));
        if (!absent.empty() && !no_file.empty())
          AddEvidence(&f, RankList(nf), "no trace file: cannot tell whether it joined");
        Emit(out, EarliestStart(m, ops), std::move(f));
        break;
      }
      if (absent.empty() && no_file.empty() && hung) {
        // 4. Stuck in progress; a mismatch at or before this op explains it
        // instead. One per communicator; the scan goes on, since a later
        // collective that a rank skipped (found above) is the better answer:
        // a rank that skipped one races ahead and hangs first in the next.
        if (c->mismatch_seq[ci] != 0 && c->mismatch_seq[ci] <= mt.seq) break;
        if (stuck_found) continue;
        stuck_found = true;
        Finding f;
        f.set_kind(report::STUCK_IN_PROGRESS);
        SetComm(*c, ci, &f);
        f.set_func(func);
        f.set_seq(mt.seq);
        f.set_waited_sec(waited);
        std::vector<uint32_t> finished;
        for (auto& [r, oi] : present)
          if (m.ops[oi].state == OpState::kCompleted) finished.push_back(m.ops[oi].proc);
        for (uint32_t pr : waiting) *f.add_culprits() = c->Ref(pr, ci);
        std::string first_stall;
        std::vector<uint32_t> no_report;
        for (uint32_t oi : unfinished) {
          const Op& op = m.ops[oi];
          int64_t rt = kNoTime;
          const StuckOp* s = StuckOf(*c, oi, &rt);
          if (s == nullptr) {
            no_report.push_back(op.proc);
            continue;
          }
          std::string line = "kernel channels " + std::to_string(s->kernel_started) + " started, " +
                             std::to_string(s->kernel_stopped) + " stopped of " + std::to_string(s->nchannels);
          if (s->proxy_started > 0)
            line += "; proxy ops " + std::to_string(s->proxy_stopped) + " of " + std::to_string(s->proxy_started) + " done";
          for (const ProxyState& x : s->proxy) {
            if (x.stopped || x.last_step >= x.nsteps) continue;
            report::StalledTransfer* st = f.add_stalled();
            st->set_proc(c->Name(op.proc));
            st->set_channel(x.channel);
            st->set_peer(c->PeerName(ci, x.peer));
            st->set_peer_comm_rank(x.peer);
            st->set_is_send(x.is_send);
            st->set_last_step(x.last_step);
            st->set_nsteps(x.nsteps);
            st->set_last_state(StateName(x.last_state));
            const double idle = x.last_update_ns == kNoTime ? 0 : static_cast<double>(rt - x.last_update_ns) / 1e9;
            st->set_idle_sec(idle);
            line += "; " + ProxyLine(*c, ci, x) + " (step " + std::to_string(x.last_step) + " of " +
                    std::to_string(x.nsteps) + ", " + StateName(x.last_state) + ", idle " + Dur(idle) + ")";
            if (first_stall.empty()) first_stall = c->Name(op.proc) + ": " + ProxyLine(*c, ci, x);
          }
          AddEvidence(&f, c->Name(op.proc), line);
        }
        if (!no_report.empty()) {
          double stuck_sec = m.procs[no_report[0]].stuck_sec;
          AddEvidence(&f, c->Names(no_report),
                      "in flight " + Dur(waited) + "; no stuck report" +
                          (stuck_sec > 0 ? " (NCCLWATCH_STUCK_SEC=" + Printf("%g", stuck_sec) + " not reached)" : " (stuck reports off)"));
        }
        if (!finished.empty()) AddEvidence(&f, c->Names(finished), "completed it");
        std::string sum = "STUCK: " + opname + " on " + c->CommLabel(ci) + " was issued by every rank and never finished on " +
                          (finished.empty() ? "any (" + c->Names(waiting) + ")" : c->Names(waiting)) + " (in flight " +
                          Dur(waited) + ")";
        if (!first_stall.empty()) sum += "; " + first_stall;
        f.set_summary(sum);
        Emit(out, EarliestStart(m, ops), std::move(f));
      }
    }
  }
}

// ------------------------------------------------------------ 5: point-to-point

void FindP2p(Ctx* c, std::vector<Ranked>* out) {
  const Model& m = c->m;
  std::set<std::tuple<uint32_t, int32_t, int32_t>> reported;  // (comm, src, dst)
  std::vector<uint32_t> order;
  for (uint32_t mi = 0; mi < m.matches.size(); ++mi)
    if (m.matches[mi].kind == OpKind::kP2p) order.push_back(mi);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Match &x = m.matches[a], &y = m.matches[b];
    return std::tie(x.comm, x.src, x.dst, x.seq) < std::tie(y.comm, y.src, y.dst, y.seq);
  });
  for (uint32_t mi : order) {
    const Match& mt = m.matches[mi];
    auto key = std::make_tuple(mt.comm, mt.src, mt.dst);
    if (reported.count(key)) continue;
    const uint32_t send = mt.ops.size() > 0 ? mt.ops[0] : kNone;
    const uint32_t recv = mt.ops.size() > 1 ? mt.ops[1] : kNone;
    const std::string where = c->CommLabel(mt.comm);
    if (send != kNone && recv != kNone) {
      const Op &s = m.ops[send], &r = m.ops[recv];
      const int sb = DatatypeSize(c->Str(s.datatype)), rb = DatatypeSize(c->Str(r.datatype));
      const bool differ = (sb > 0 && rb > 0) ? s.count * sb != r.count * rb : (s.count != r.count || s.datatype != r.datatype);
      if (differ) {
        Finding f;
        f.set_kind(report::UNMATCHED_P2P);
        f.set_p2p(true);
        SetComm(*c, mt.comm, &f);
        f.set_func("Send");
        f.set_seq(mt.seq);
        *f.add_culprits() = c->Ref(s.proc, mt.comm);
        *f.add_culprits() = c->Ref(r.proc, mt.comm);
        auto size = [&](const Op& o) { return Thousands(o.count) + (c->Str(o.datatype).empty() ? "" : " x " + c->Str(o.datatype)); };
        f.set_summary("UNMATCHED P2P: sizes disagree on " + where + ": " + c->Name(s.proc) + "'s Send #" +
                      std::to_string(mt.seq) + " to " + c->Name(r.proc) + " carries " + size(s) + " but " + c->Name(r.proc) +
                      "'s Recv expects " + size(r));
        AddEvidence(&f, c->Name(s.proc), c->OpName(s) + ": " + size(s) + (s.state == OpState::kCompleted ? ", completed" : ", never completed"));
        AddEvidence(&f, c->Name(r.proc), c->OpName(r) + ": " + size(r) + (r.state == OpState::kCompleted ? ", completed" : ", never completed"));
        reported.insert(key);
        Emit(out, std::min(s.start_ns, r.start_ns), std::move(f));
      } else if (c->Hung(send) || c->Hung(recv)) {
        // Both sides posted, never finished: stuck in progress.
        Finding f;
        f.set_kind(report::STUCK_IN_PROGRESS);
        f.set_p2p(true);
        SetComm(*c, mt.comm, &f);
        f.set_func("Send");
        f.set_seq(mt.seq);
        double waited = 1e300;
        for (uint32_t oi : {send, recv}) {
          const Op& op = m.ops[oi];
          if (op.state == OpState::kCompleted) {
            AddEvidence(&f, c->Name(op.proc), c->OpName(op) + " completed");
            continue;
          }
          *f.add_culprits() = c->Ref(op.proc, mt.comm);
          waited = std::min(waited, c->WaitSec(op));
          AddEvidence(&f, c->Name(op.proc), c->OpName(op) + " in flight since " + At(c->T(op.start_ns)));
        }
        f.set_waited_sec(waited);
        f.set_summary("STUCK: Send #" + std::to_string(mt.seq) + " from " + c->Name(s.proc) + " to " + c->Name(r.proc) +
                      " on " + where + " was posted on both sides and never finished (in flight " + Dur(waited) + ")");
        reported.insert(key);
        Emit(out, std::min(s.start_ns, r.start_ns), std::move(f));
      }
      continue;
    }
    const uint32_t have = send != kNone ? send : recv;
    if (have == kNone || !c->Hung(have)) continue;
    const Op& op = m.ops[have];
    const bool is_send = have == send;
    const int32_t other_rank = is_send ? mt.dst : mt.src;
    Finding f;
    f.set_kind(report::UNMATCHED_P2P);
    f.set_p2p(true);
    SetComm(*c, mt.comm, &f);
    f.set_func(c->Str(op.func));
    f.set_seq(mt.seq);
    f.set_waited_sec(c->WaitSec(op));
    *f.add_waiting() = c->Ref(op.proc, mt.comm);
    std::string fate;
    if (c->HasFile(mt.comm, other_rank)) {
      const uint32_t other = m.comms[mt.comm].proc_of_rank[other_rank];
      FateInfo fi = FateOf(*c, other, mt.comm);
      *f.add_culprits() = c->Ref(other, mt.comm);
      f.add_fates(fi.fate);
      fate = "; " + c->Name(other) + " " + fi.brief;
      AddEvidence(&f, c->Name(other), fi.evidence);
    } else {
      ProcRef* pr = f.add_culprits();
      pr->set_name("comm rank " + std::to_string(other_rank));
      pr->set_launcher_rank(-1);
      pr->set_comm_rank(other_rank);
      f.add_fates(report::FATE_NO_FILE);
      fate = "; it gave no trace file";
    }
    const std::string other_name = c->PeerName(mt.comm, other_rank);
    std::string size = Thousands(op.count) + (c->Str(op.datatype).empty() ? "" : " x " + c->Str(op.datatype));
    f.set_summary("UNMATCHED P2P: " + c->Name(op.proc) + (is_send ? " sent " : " posted a receive of ") + size +
                  (is_send ? " to " : " from ") + other_name + " on " + where + " (" + c->Str(op.func) + " #" +
                  std::to_string(mt.seq) + " between them); " + other_name + " never posted the matching " +
                  (is_send ? "Recv" : "Send") + "; " + c->Name(op.proc) + " waited " + Dur(c->WaitSec(op)) + fate);
    AddEvidence(&f, c->Name(op.proc), c->OpName(op) + " enqueued at " + At(c->T(op.start_ns)) + ", never completed");
    reported.insert(key);
    Emit(out, op.start_ns, std::move(f));
  }
}

// ------------------------------------------------------------ 6: dead rank

void FindDead(Ctx* c, std::vector<Ranked>* out) {
  const Model& m = c->m;
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    if (!c->dead[pi]) continue;
    const Proc& p = m.procs[pi];
    const double silent = static_cast<double>(c->t_end - p.last_ns) / 1e9;
    Finding f;
    f.set_kind(report::DEAD_RANK);
    *f.add_culprits() = c->Ref(pi);
    f.set_t_last_sign_of_life_sec(c->T(p.last_ns));
    f.set_silent_sec(silent);
    std::string sum = "DEAD: " + c->Name(pi) + " stopped without finalizing at " + At(c->T(p.last_ns)) + " (" + Dur(silent) +
                      " before the job's last record)";
    const uint32_t busy = c->oldest_inflight[pi];
    if (busy != kNone) {
      const Op& b = m.ops[busy];
      SetComm(*c, b.comm, &f);
      f.set_func(c->Str(b.func));
      f.set_seq(b.seq);
      f.set_p2p(b.kind == OpKind::kP2p);
      std::vector<uint32_t> waiting;
      if (b.match != kNone)
        for (uint32_t oi : m.matches[b.match].ops)
          if (oi != kNone && oi != busy && m.ops[oi].state != OpState::kCompleted) waiting.push_back(m.ops[oi].proc);
      for (uint32_t w : waiting) *f.add_waiting() = c->Ref(w, b.comm);
      sum += ", inside " + c->OpName(b) + " on " + c->CommLabel(b.comm);
      if (!waiting.empty()) {
        double wait = 1e300;
        for (uint32_t oi : m.matches[b.match].ops)
          if (oi != kNone && oi != busy && m.ops[oi].state != OpState::kCompleted) wait = std::min(wait, c->WaitSec(m.ops[oi]));
        f.set_waited_sec(wait);
        sum += "; " + c->Names(waiting) + " wait in it (" + Dur(wait) + ")";
      }
    } else {
      sum += "; its last operation: " + LastOpText(*c, pi, kNone);
    }
    f.set_summary(sum);
    std::string ev = "last sign of life at " + At(c->T(p.last_ns));
    if (p.heartbeats > 0) ev += ", last heartbeat at " + At(c->T(p.last_heartbeat_ns)) + Printf(" (every %u ms)", p.heartbeat_ms);
    else ev += ", no heartbeat recorded";
    ev += "; no finalize";
    if (p.cut_tail) ev += "; its file ends mid-record (killed)";
    AddEvidence(&f, c->Name(pi), ev);
    Emit(out, p.last_ns, std::move(f));
  }
}

// ------------------------------------------------------------ 7: wait cycle

void FindCycles(Ctx* c, std::vector<Ranked>* out) {
  const Model& m = c->m;
  const size_t np = m.procs.size();
  // needs[p]: processes that p's oldest in-flight (hung) op waits for.
  std::vector<std::vector<uint32_t>> needs(np);
  for (uint32_t pi = 0; pi < np; ++pi) {
    const uint32_t oi = c->oldest_inflight[pi];
    if (oi == kNone || !c->Hung(oi)) continue;
    const Op& op = m.ops[oi];
    const Comm& comm = m.comms[op.comm];
    if (op.kind == OpKind::kColl) {
      if (op.match == kNone) continue;
      const Match& mt = m.matches[op.match];
      for (int32_t r = 0; r < comm.nranks; ++r)
        if ((static_cast<size_t>(r) >= mt.ops.size() || mt.ops[r] == kNone) && c->HasFile(op.comm, r))
          needs[pi].push_back(comm.proc_of_rank[r]);
    } else if (op.match != kNone) {
      const Match& mt = m.matches[op.match];
      if (mt.ops.size() == 2 && (mt.ops[0] == kNone || mt.ops[1] == kNone) && c->HasFile(op.comm, op.peer_or_root))
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
                        return c->Name(a) < c->Name(b);
                      }), cyc.end());
          Finding f;
          f.set_kind(report::WAIT_CYCLE);
          std::string sum = "DEADLOCK: ";
          int64_t when = INT64_MAX;
          for (size_t i = 0; i < cyc.size(); ++i) {
            const uint32_t a = cyc[i], b = cyc[(i + 1) % cyc.size()];
            const Op& op = m.ops[c->oldest_inflight[a]];
            if (i == 0) {
              SetComm(*c, op.comm, &f);
              f.set_func(c->Str(op.func));
              f.set_seq(op.seq);
            }
            when = std::min(when, op.start_ns);
            *f.add_culprits() = c->Ref(a);
            sum += (i == 0 ? "" : ", which ") + std::string(i == 0 ? c->Name(a) + " waits" : "waits") + " in " +
                   c->OpName(op) + " on " + c->CommLabel(op.comm) + " for " + c->Name(b);
            AddEvidence(&f, c->Name(a), "in " + c->OpName(op) + " on " + c->CommLabel(op.comm) + " since " +
                                            At(c->T(op.start_ns)) + " (" + Dur(c->WaitSec(op)) + "); " + c->Name(b) +
                                            " never issued it");
          }
          double waited = 1e300;
          for (uint32_t a : cyc) waited = std::min(waited, c->WaitSec(m.ops[c->oldest_inflight[a]]));
          f.set_waited_sec(waited);
          f.set_summary(sum + "; neither issued the other's operation (waited " + Dur(waited) + ")");
          Emit(out, when, std::move(f));
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
}

// ------------------------------------------------- 3 and 7: order cycles

// Ranks that issued the same operations in different orders make the merged
// order (order.h) cyclic. Among the operations of each cycle, the pair that
// ranks issued in opposite orders names the odd ranks out (the minority);
// within one communicator that is an order mismatch, across communicators a
// deadlock. Only cycles holding a hung operation are reported: on separate
// streams, a different order across communicators is harmless.
void FindOrderCycles(Ctx* c, std::vector<Ranked>* out) {
  const Model& m = c->m;
  // Only cycles holding a hung operation are reported: without one, the
  // whole order need not be computed.
  bool any_hung = false;
  for (uint32_t oi = 0; oi < m.ops.size() && !any_hung; ++oi) any_hung = c->Hung(oi);
  if (!any_hung) return;
  GlobalOrder g = ComputeOrder(m);
  if (g.cycles.empty()) return;
  std::vector<size_t> pos_of(m.ops.size(), SIZE_MAX);
  for (size_t p = 0; p < g.nodes.size(); ++p)
    for (uint32_t oi : g.nodes[p]) pos_of[oi] = p;
  for (const auto& cyc : g.cycles) {
    bool hung = false;
    for (size_t p : cyc)
      for (uint32_t oi : g.nodes[p]) hung |= c->Hung(oi);
    if (!hung || cyc.size() > 256) continue;
    std::set<size_t> in(cyc.begin(), cyc.end());
    // Each process's cycle operations in its program order.
    std::vector<std::vector<size_t>> seq(m.procs.size());
    for (uint32_t pi = 0; pi < m.procs.size(); ++pi)
      for (uint32_t oi : m.procs[pi].ops)
        if (in.count(pos_of[oi])) seq[pi].push_back(pos_of[oi]);
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
        if (c->mismatch_seq[a0.comm] != 0 || c->mismatch_seq[b0.comm] != 0) continue;
        std::vector<uint32_t> uv, vu;
        for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
          auto a = std::find(seq[pi].begin(), seq[pi].end(), u);
          auto b = std::find(seq[pi].begin(), seq[pi].end(), v);
          if (a == seq[pi].end() || b == seq[pi].end()) continue;
          (a < b ? uv : vu).push_back(pi);
        }
        if (uv.empty() || vu.empty()) continue;
        int64_t when = INT64_MAX;
        for (uint32_t oi : g.nodes[u]) when = std::min(when, m.ops[oi].start_ns);
        if (when < best_when) best_when = when, best_u = u, best_v = v, first_uv = uv, first_vu = vu;
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
    // "rank 3" / "ranks 2,3" from the processes' names.
    auto names = [&](const std::vector<uint32_t>& ps) {
      std::string s;
      for (size_t i = 0; i < ps.size(); ++i) s += (i ? "," : "") + c->Name(ps[i]).substr(c->Name(ps[i]).rfind(' ') + 1);
      return (ps.size() == 1 ? "rank " : "ranks ") + s;
    };
    auto opname = [&](const Op& o) { return c->OpName(o) + (one_comm ? "" : " on " + c->CommLabel(o.comm)); };
    const std::string a = opname(odd_uv ? ou : ov), b = opname(odd_uv ? ov : ou);
    double waited = 0;
    for (size_t p : {best_u, best_v})
      for (uint32_t oi : g.nodes[p])
        if (c->Hung(oi)) waited = std::max(waited, c->WaitSec(m.ops[oi]));
    Finding f;
    f.set_kind(one_comm ? report::ORDER_MISMATCH : report::WAIT_CYCLE);
    SetComm(*c, ou.comm, &f);
    f.set_func(c->Str(ou.func));
    f.set_seq(ou.seq);
    f.set_waited_sec(waited);
    for (uint32_t pi : odd) *f.add_culprits() = c->Ref(pi, ou.comm);
    for (uint32_t pi : rest) *f.add_waiting() = c->Ref(pi, ou.comm);
    std::string sum = one_comm ? "ORDER MISMATCH: " : "DEADLOCK: ";
    sum += names(odd) + " issued " + a + " before " + b + (one_comm ? " on " + c->CommLabel(ou.comm) : std::string()) +
           " where " + names(rest) + " issued " + b + " first";
    sum += majority ? "" : " (no majority)";
    sum += one_comm ? "; the collectives cannot match (waited " + Dur(waited) + ")"
                    : "; each waits for the other (waited " + Dur(waited) + ")";
    f.set_summary(sum);
    for (uint32_t pi : odd) AddEvidence(&f, c->Name(pi), "issued " + a + " then " + b);
    for (uint32_t pi : rest) AddEvidence(&f, c->Name(pi), "issued " + b + " then " + a);
    Emit(out, best_when, std::move(f));
  }
}

// ------------------------------------------------------------ 8: straggler

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void FindStragglers(Ctx* c, std::vector<Ranked>* out) {
  const Model& m = c->m;
  const size_t np = m.procs.size();
  std::vector<uint32_t> total(np, 0), late(np, 0);
  std::vector<std::vector<double>> lags(np);
  std::vector<std::map<uint32_t, uint32_t>> late_comm(np);
  const double thr = std::max(c->o.straggler_threshold_ms * 1e-3, 2 * m.alignment_error_ns / 1e9);
  for (const Match& mt : m.matches) {
    if (mt.kind != OpKind::kColl) continue;
    auto present = Present(mt);
    if (present.size() < 2 || static_cast<int32_t>(present.size()) < m.comms[mt.comm].nranks) continue;
    bool all_done = true;
    std::vector<double> starts, durs;
    for (auto& [r, oi] : present) {
      const Op& op = m.ops[oi];
      if (op.state != OpState::kCompleted || op.start_ns == kNoTime || op.done_ns == kNoTime) {
        all_done = false;
        break;
      }
      starts.push_back(static_cast<double>(op.start_ns) / 1e9);
      durs.push_back(static_cast<double>(op.done_ns - op.start_ns) / 1e9);
    }
    if (!all_done) continue;
    const double med = MedianOf(starts), dur = MedianOf(durs);
    size_t last = 0;
    for (size_t i = 0; i < present.size(); ++i) {
      const uint32_t pr = m.ops[present[i].second].proc;
      ++total[pr];
      lags[pr].push_back(starts[i] - med);
      if (starts[i] > starts[last]) last = i;
    }
    const double lag = starts[last] - med;
    if (lag > thr && lag > c->o.straggler_duration_fraction * dur) {
      const uint32_t pr = m.ops[present[last].second].proc;
      ++late[pr];
      ++late_comm[pr][mt.comm];
    }
  }
  for (uint32_t pi = 0; pi < np; ++pi) {
    if (total[pi] < static_cast<uint32_t>(std::max(1, c->o.straggler_min_collectives))) continue;
    const double frac = static_cast<double>(late[pi]) / total[pi];
    if (late[pi] == 0 || frac < c->o.straggler_min_fraction) continue;
    Finding f;
    f.set_kind(report::STRAGGLER);
    *f.add_culprits() = c->Ref(pi);
    report::StragglerStats* st = f.mutable_straggler();
    st->set_collectives(total[pi]);
    st->set_late(late[pi]);
    st->set_late_fraction(frac);
    const double med = MedianOf(lags[pi]);
    const double mx = *std::max_element(lags[pi].begin(), lags[pi].end());
    st->set_median_lag_ms(med * 1e3);
    st->set_max_lag_ms(mx * 1e3);
    if (late_comm[pi].size() == 1) SetComm(*c, late_comm[pi].begin()->first, &f);
    f.set_summary("STRAGGLER: " + c->Name(pi) + " arrived last at " + Thousands(late[pi]) + " of " +
                  Plural(total[pi], "collective", "collectives") + Printf(" (%.0f%%)", frac * 100) + ", a median " +
                  Dur(med) + " after the median rank (max " + Dur(mx) + ")");
    std::string comms;
    for (auto& [ci, n] : late_comm[pi]) comms += (comms.empty() ? "" : ", ") + c->CommLabel(ci) + ": " + Thousands(n);
    AddEvidence(&f, c->Name(pi), "late at: " + comms + "; threshold " + Dur(thr) + " and " +
                                     Printf("%.0f%%", c->o.straggler_duration_fraction * 100) + " of the collective's duration");
    Emit(out, 0, std::move(f));
  }
}

// ------------------------------------------------------------ context sections

void FillProgress(const Ctx& c, Diagnosis* d) {
  const Model& m = c.m;
  for (uint32_t ci = 0; ci < m.comms.size(); ++ci) {
    const Comm& comm = m.comms[ci];
    report::CommProgress* p = d->add_completed_before_hang();
    p->set_comm(comm.Label());
    p->set_comm_name(comm.name);
    p->set_comm_hash(comm.hash);
    p->set_nranks(comm.nranks);
    uint64_t n = 0;
    bool tracked = false;
    for (uint32_t mi : c.colls_of_comm[ci]) {
      const Match& mt = m.matches[mi];
      p->set_highest_seq_issued(std::max(p->highest_seq_issued(), mt.seq));
      for (uint32_t oi : mt.ops) tracked |= oi != kNone && m.ops[oi].state != OpState::kUntracked;
      bool all = true;
      int64_t done = INT64_MIN;
      for (int32_t r = 0; r < comm.nranks && all; ++r) {
        if (!c.HasFile(ci, r)) continue;
        if (static_cast<size_t>(r) >= mt.ops.size() || mt.ops[r] == kNone) {
          all = false;
          break;
        }
        const Op& op = m.ops[mt.ops[r]];
        if (op.state != OpState::kCompleted) all = false;
        else done = std::max(done, op.done_ns);
      }
      if (!all) continue;
      ++n;
      if (n == 1 || mt.seq >= p->last_completed_seq()) {
        p->set_last_completed_seq(mt.seq);
        p->set_last_completed_func(m.Str(m.ops[Present(mt)[0].second].func));
        p->set_t_last_completed_sec(c.T(done));
      }
    }
    p->set_completed_everywhere(n);
    p->set_completion_untracked(!tracked && !c.colls_of_comm[ci].empty());
  }
}

void FillStuckReports(const Ctx& c, Diagnosis* d) {
  const Model& m = c.m;
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi)
    for (const StuckReport& r : m.procs[pi].stucks) {
      report::StuckReportSummary* s = d->add_stuck_reports();
      s->set_proc(c.Name(pi));
      s->set_t_sec(c.T(r.time_ns));
      s->set_threshold_sec(r.threshold_sec);
      s->set_ops_in_flight(static_cast<uint32_t>(r.ops.size()));
      for (const StuckOp& so : r.ops) {
        std::string line = (m.Str(so.func).empty() ? std::string("operation") : m.Str(so.func)) + " #" + std::to_string(so.seq);
        if (so.comm != kNone) line += " on " + c.CommLabel(so.comm);
        line += " for " + Dur(static_cast<double>(so.age_ns) / 1e9) + "; kernel channels " + std::to_string(so.kernel_started) + " started, " +
                std::to_string(so.kernel_stopped) + " stopped of " + std::to_string(so.nchannels);
        int stalled = 0;
        for (const ProxyState& x : so.proxy)
          if (!x.stopped && x.last_step < x.nsteps) {
            if (stalled++ < 2)
              line += "; " + ProxyLine(c, so.comm == kNone ? 0 : so.comm, x) + " (step " + std::to_string(x.last_step) + "/" +
                      std::to_string(x.nsteps) + ", " + StateName(x.last_state) + ")";
          }
        if (stalled > 2) line += "; " + std::to_string(stalled - 2) + " more stalled transfers";
        s->add_ops(line);
      }
    }
}

void FillInput(const Ctx& c, Diagnosis* d) {
  const Model& m = c.m;
  auto add = [&](report::InputIssue::Kind k, const std::string& proc, const std::string& text) {
    report::InputIssue* i = d->add_input_issues();
    i->set_kind(k);
    i->set_proc(proc);
    i->set_text(text);
    return i;
  };
  for (const std::string& e : m.errors) add(report::InputIssue::UNUSABLE_FILE, "", e);
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    const Proc& p = m.procs[pi];
    const std::string name = c.Name(pi);
    for (const std::string& line : p.issues) {
      if (line.find("cut tail") != std::string::npos)
        add(report::InputIssue::CUT_TAIL, name, line + " (normal for a killed process)");
      else
        add(report::InputIssue::READ_ISSUE, name, line);
    }
    if (p.cut_tail && std::none_of(p.issues.begin(), p.issues.end(),
                                   [](const std::string& l) { return l.find("cut tail") != std::string::npos; }))
      add(report::InputIssue::CUT_TAIL, name, p.path + ": the file ends mid-record (normal for a killed process)");
    const uint64_t lost = p.drops.lost();
    if (lost > 0) {
      std::vector<std::string> why;
      if (p.drops.write_failed)
        why.push_back(Thousands(p.drops.write_failed) + " in failed writes" +
                      (p.drops.last_write_error.empty() ? "" : " (" + p.drops.last_write_error + ")"));
      if (p.drops.ring_full) why.push_back(Thousands(p.drops.ring_full) + " with a full record buffer");
      if (p.drops.pool_exhausted) why.push_back(Thousands(p.drops.pool_exhausted) + " with no free event handle");
      if (p.drops.no_thread_slot) why.push_back(Thousands(p.drops.no_thread_slot) + " from too many threads");
      std::string w;
      for (size_t i = 0; i < why.size(); ++i) w += (i ? ", " : "") + why[i];
      add(report::InputIssue::DROPS, name, name + " lost " + Plural(lost, "event", "events") + ": " + w)->set_lost_events(lost);
    }
    if (p.drops.completion_untracked > 0)
      add(report::InputIssue::LOST_COMPLETION, name,
          Thousands(p.drops.completion_untracked) +
              " operations recorded without completion tracking: every event handle was waiting for a completion "
              "(NCCL's proxy thread far behind)");
    const size_t implied = static_cast<size_t>(
        std::count_if(p.ops.begin(), p.ops.end(), [&](uint32_t oi) { return m.ops[oi].completion_lost; }));
    if (implied > 0)
      add(report::InputIssue::LOST_COMPLETION, name,
          Plural(implied, "operation", "operations") +
              " never completed in the file, but a later operation on the same communicator did, so they did too "
              "(NCCL did not deliver a kernel-channel event)");
    if (!p.ops.empty() && std::all_of(p.ops.begin(), p.ops.end(),
                                      [&](uint32_t oi) { return m.ops[oi].state == OpState::kUntracked; }))
      add(report::InputIssue::NO_COMPLETION, name,
          "completion not tracked (profiler API v" + std::to_string(p.api_version) +
              " or no kernel events captured): an operation counts as unfinished only where a rank never issued "
              "its side, so a hang inside an operation every rank issued is not seen");
  }
  for (uint32_t ci = 0; ci < m.comms.size(); ++ci) {
    const Comm& comm = m.comms[ci];
    std::vector<std::string> missing;
    for (int32_t r = 0; r < comm.nranks; ++r)
      if (!c.HasFile(ci, r)) missing.push_back(std::to_string(r));
    if (missing.empty()) continue;
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 16; ++i) list += (i ? "," : "") + missing[i];
    if (missing.size() > 16) list += ",...";
    add(report::InputIssue::MISSING_FILE, "",
        c.CommLabel(ci) + ": no trace file for " + (missing.size() == 1 ? "its rank " : "its ranks ") + list + " (" +
            std::to_string(comm.nranks - static_cast<int32_t>(missing.size())) + " of " + std::to_string(comm.nranks) +
            " given)");
  }
}

void FillClock(const Ctx& c, Diagnosis* d) {
  report::ClockAlignment* k = d->mutable_clock();
  k->set_method(c.m.alignment_method);
  k->set_error_ms(c.m.alignment_error_ns / 1e6);
  k->set_hosts(static_cast<uint32_t>(c.m.hosts.size()));
  const double e = c.m.alignment_error_ns / 1e6;
  k->set_quality(e <= 1 ? "good" : e <= 10 ? "fair" : "poor");
}

// A finding that rests on a record being absent (a rank that never joined,
// a skipped or extra collective, a send without its receive, an order) is
// weaker when that rank's plugin lost events: the record may be among them.
// Say so in the finding's summary (the verdict) and evidence.
void CaveatLostRecords(const Ctx& c, std::vector<Ranked>* found) {
  for (Ranked& r : *found) {
    const report::FindingKind k = r.f.kind();
    if (k != report::MISSING_RANK && k != report::MISMATCH && k != report::ORDER_MISMATCH &&
        k != report::UNMATCHED_P2P && k != report::WAIT_CYCLE)
      continue;
    std::vector<std::string> lossy;
    for (const ProcRef& ref : r.f.culprits()) {
      for (uint32_t pi = 0; pi < c.m.procs.size(); ++pi) {
        const Proc& p = c.m.procs[pi];
        if (p.path != ref.file() || p.drops.lost() == 0) continue;
        lossy.push_back(ref.name());
        AddEvidence(&r.f, ref.name(),
                    "its trace lost " + Plural(p.drops.lost(), "event", "events") +
                        " (full record buffer, no free event handle, failed writes): the record this finding "
                        "misses may be among them");
        break;
      }
    }
    if (lossy.empty()) continue;
    std::string names;
    for (size_t i = 0; i < lossy.size(); ++i) names += (i ? ", " : "") + lossy[i];
    r.f.set_summary(r.f.summary() + " (but " + names + " lost" +
                    " trace events: a record may be missing)");
  }
}

}  // namespace

// ------------------------------------------------------------ API

Diagnosis Diagnose(const Model& model, const DiagnoseOptions& opts) {
  Ctx c(model, opts);
  Prepare(&c);
  std::vector<Ranked> found;
  FindMismatches(&c, &found);  // first: stuck detection defers to it
  FindMissingAndStuck(&c, &found);
  FindP2p(&c, &found);
  FindDead(&c, &found);
  FindCycles(&c, &found);
  FindOrderCycles(&c, &found);
  FindStragglers(&c, &found);
  std::stable_sort(found.begin(), found.end(), [](const Ranked& a, const Ranked& b) {
    return std::tie(a.precedence, a.when) < std::tie(b.precedence, b.when);
  });

  CaveatLostRecords(c, &found);

  Diagnosis d;
  for (Ranked& r : found) {
    if (r.f.severity() > d.severity()) d.set_severity(r.f.severity());
    *d.add_findings() = std::move(r.f);
  }
  FillProgress(c, &d);
  FillStuckReports(c, &d);
  FillInput(c, &d);
  FillClock(c, &d);
  d.set_processes(static_cast<uint32_t>(model.procs.size()));
  d.set_communicators(static_cast<uint32_t>(model.comms.size()));
  d.set_operations(model.ops.size());
  d.set_t_end_sec(c.T(c.t_end));
  if (d.findings_size() > 0) {
    d.set_verdict(d.findings(0).summary());
  } else {
    uint64_t done = 0, open = 0;
    for (const Op& op : model.ops) {
      if (op.state == OpState::kCompleted) ++done;
      else if (op.state == OpState::kInFlight && c.FinalizeOf(op.proc, op.comm) == kNoTime) ++open;
    }
    std::string v = "OK: no problem found in " + Plural(model.procs.size(), "process", "processes") + " (" +
                    Plural(model.comms.size(), "communicator", "communicators") + ", " +
                    Plural(model.ops.size(), "operation", "operations") + ", " + Thousands(done) + " completed)";
    if (open > 0)
      v += "; " + Plural(open, "operation was", "operations were") + " in flight when the files end, for less than " +
           Dur(opts.min_wait_sec) + ": not a hang";
    d.set_verdict(v);
  }
  d.set_exit_status(ExitStatus(d));
  return d;
}

int ExitStatus(const Diagnosis& d) {
  if (d.exit_status() == 2) return 2;
  return d.findings_size() > 0 ? 1 : 0;
}

std::string FormatText(const Diagnosis& d) {
  std::ostringstream out;
  out << d.verdict() << "\n";
  const int kMaxEvidence = 16;
  auto evidence = [&](const Finding& f) {
    int n = 0;
    for (const report::Evidence& e : f.evidence()) {
      if (n++ == kMaxEvidence) {
        out << "    ... and " << (f.evidence_size() - kMaxEvidence) << " more (--format=json has all)\n";
        break;
      }
      out << "    " << (e.proc().empty() ? "" : e.proc() + ": ") << e.text() << "\n";
    }
  };
  if (d.findings_size() > 0) evidence(d.findings(0));
  if (d.findings_size() > 1) {
    out << "\nAlso found (" << d.findings_size() - 1 << "):\n";
    for (int i = 1; i < d.findings_size(); ++i) {
      const Finding& f = d.findings(i);
      out << "  " << (f.severity() == report::SEVERITY_WARNING ? "[warning] " : "") << f.summary() << "\n";
      evidence(f);
    }
  }
  if (d.findings_size() > 0 || d.exit_status() == 2) {
    bool any = false;
    for (const report::CommProgress& p : d.completed_before_hang()) {
      if (!any) out << "\nCompleted on every rank before the problem:\n";
      any = true;
      out << "  comm " << p.comm() << ": ";
      if (p.completion_untracked()) out << "completion not tracked";
      else if (p.completed_everywhere() == 0) out << "no collective completed on every rank";
      else
        out << p.last_completed_func() << " #" << p.last_completed_seq() << " at " << At(p.t_last_completed_sec()) << " ("
            << Plural(p.completed_everywhere(), "collective", "collectives") << ")";
      if (p.highest_seq_issued() > p.last_completed_seq() || p.completed_everywhere() == 0)
        out << "; highest issued #" << p.highest_seq_issued();
      out << "\n";
    }
  }
  if (d.stuck_reports_size() > 0) {
    out << "\nStuck reports (" << d.stuck_reports_size() << "):\n";
    int shown = 0;
    for (const report::StuckReportSummary& s : d.stuck_reports()) {
      if (shown++ == kMaxEvidence) {
        out << "  ... and " << d.stuck_reports_size() - kMaxEvidence << " more\n";
        break;
      }
      out << "  " << s.proc() << " at " << At(s.t_sec()) << " (threshold " << Dur(s.threshold_sec()) << "): "
          << Plural(s.ops_in_flight(), "operation", "operations") << " in flight\n";
      for (int i = 0; i < s.ops_size(); ++i) {
        if (i == 3) {
          out << "    ... and " << s.ops_size() - 3 << " more\n";
          break;
        }
        out << "    " << s.ops(i) << "\n";
      }
    }
  }
  if (d.input_issues_size() > 0) {
    out << "\nInput (" << d.input_issues_size() << "):\n";
    int shown = 0;
    for (const report::InputIssue& i : d.input_issues()) {
      if (shown++ == kMaxEvidence) {
        out << "  ... and " << d.input_issues_size() - kMaxEvidence << " more\n";
        break;
      }
      out << "  " << (i.proc().empty() || i.kind() == report::InputIssue::DROPS ? "" : i.proc() + ": ") << i.text() << "\n";
    }
  }
  if (d.has_clock()) {
    out << "\nClocks: " << d.clock().method() << "; collective end times agree within "
        << Dur(d.clock().error_ms() / 1e3) << " (median, " << d.clock().quality() << ")\n";
  }
  out << "Job: " << Plural(d.processes(), "process", "processes") << ", "
      << Plural(d.communicators(), "communicator", "communicators") << ", "
      << Plural(d.operations(), "operation", "operations") << ", " << Dur(d.t_end_sec()) << " from the first record to the last\n";
  return out.str();
}

std::string FormatJson(const Diagnosis& d) {
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.always_print_primitive_fields = true;
  std::string s;
  auto st = google::protobuf::util::MessageToJsonString(d, &s, o);
  if (!st.ok()) return "{}\n";
  return s;
}

namespace {
constexpr char kUsage[] =
    "usage: ncclwatch diagnose [--format=text|json] FILE|DIR...\n"
    "\n"
    "Reads every rank's trace file (a directory: every *.ncclwatch in it) and\n"
    "says what went wrong and who caused it. The first line is the verdict;\n"
    "then the evidence per rank, what completed before the problem, stuck\n"
    "reports, input issues and clock alignment.\n"
    "  --format=text   for people (default)\n"
    "  --format=json   the same content as a ncclwatch.report.Diagnosis message in JSON\n"
    "  --min-wait=SEC  an operation in flight this long is a hang (default 1)\n"
    "Exit status: 0 healthy, 1 a problem found (a straggler alone included),\n"
    "2 unusable input.\n";
}  // namespace

int RunDiagnose(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string format = "text";
  DiagnoseOptions opts;
  std::vector<std::string> inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      out << kUsage;
      return 0;
    } else if (a.compare(0, 9, "--format=") == 0) {
      format = a.substr(9);
    } else if (a == "--format" && i + 1 < args.size()) {
      format = args[++i];
    } else if (a == "--json") {
      format = "json";
    } else if (a.compare(0, 11, "--min-wait=") == 0) {
      char* end = nullptr;
      opts.min_wait_sec = strtod(a.c_str() + 11, &end);
      if (end == nullptr || *end != '\0' || !(opts.min_wait_sec >= 0)) {
        err << "ncclwatch diagnose: bad --min-wait '" << a.substr(11) << "'\n" << kUsage;
        return 2;
      }
    } else if (!a.empty() && a[0] == '-') {
      err << "ncclwatch diagnose: unknown option '" << a << "'\n" << kUsage;
      return 2;
    } else {
      inputs.push_back(a);
    }
  }
  if (format != "text" && format != "json") {
    err << "ncclwatch diagnose: unknown format '" << format << "' (text or json)\n";
    return 2;
  }
  if (inputs.empty()) {
    err << "ncclwatch diagnose: no trace file given\n" << kUsage;
    return 2;
  }
  Model model;
  std::string error;
  if (!BuildModel(inputs, LoadOptions(), &model, &error)) {
    err << "ncclwatch diagnose: " << error << "\n";
    if (format == "json") {
      Diagnosis d;
      d.set_verdict("UNUSABLE INPUT: " + error);
      d.set_exit_status(2);
      for (const std::string& e : model.errors) {
        report::InputIssue* i = d.add_input_issues();
        i->set_kind(report::InputIssue::UNUSABLE_FILE);
        i->set_text(e);
      }
      out << FormatJson(d);
    }
    return 2;
  }
  Diagnosis d = Diagnose(model, opts);
  out << (format == "json" ? FormatJson(d) : FormatText(d));
  return ExitStatus(d);
}

}  // namespace ncclwatch::tools
