// What every finder of `ncclwatch diagnose` shares: the model with the
// facts derived from it once (the liveness judgement, tools/model/liveness.h,
// the oldest operation in flight per process and each communicator's
// collectives in order), the verdict order of findings, and what a rank that
// never joined did instead (FateOf).
//
// A Ctx is built on one thread, by its constructor, and is const from then
// on: every finder reads it through a const reference and returns what it
// found. What one finder tells a later one (FindMismatches's first
// disagreeing collective per communicator) is returned by the earlier and
// passed to the later by Diagnose, which runs them in a fixed order.
//
// Thread safety: a Ctx is immutable once made; any number of threads may
// read it.

#ifndef TOOLS_DIAGNOSE_CONTEXT_H_
#define TOOLS_DIAGNOSE_CONTEXT_H_

#include <stdint.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "proto/report.pb.h"
#include "tools/diagnose/options.h"
#include "tools/diagnose/format.h"
#include "tools/model/liveness.h"
#include "tools/model/model.h"
#include "tools/model/semantics.h"

namespace ncclwatch::tools::diagnose_internal {

using report::Diagnosis;
using report::Finding;
using report::ProcRef;

struct Ctx {
  const Model& m;
  const DiagnoseOptions& o;
  // The one judgement of every operation (tools/liveness.h), and the facts
  // it rests on, which the finders read too.
  const Liveness live;
  const int64_t t0, t_end;
  const std::vector<bool>& dead;
  const std::vector<std::map<uint64_t, uint64_t>>& last_seq;  // per proc: SeqKey -> highest seq issued
  const std::set<uint32_t>& stuck_ops;                        // ops a stuck report names
  const std::vector<bool>& unfinished;                        // per op: proven never finished
  // Per proc: its oldest operation not finished (Liveness::Unfinished), kNone.
  const std::vector<uint32_t> oldest_inflight;
  // Per comm: its collective matches, by earliest enqueue: the first one
  // that hung is the one to explain.
  const std::vector<std::vector<uint32_t>> colls_of_comm;

  Ctx(const Model& model, const DiagnoseOptions& opts);
  Ctx(const Ctx&) = delete;
  Ctx& operator=(const Ctx&) = delete;

  double T(int64_t ns) const { return ns == kNoTime ? 0.0 : static_cast<double>(ns - t0) / 1e9; }
  std::string Name(uint32_t proc) const { return ProcName(m, proc); }
  const std::string& Str(uint16_t id) const { return m.Str(id); }

  bool HasFile(uint32_t comm, int32_t rank) const { return tools::HasFile(m, comm, rank); }
  int64_t FinalizeOf(uint32_t proc, uint32_t comm) const { return tools::FinalizeOf(m, proc, comm); }
  int32_t RankIn(uint32_t proc, uint32_t comm) const {
    for (const CommMember& mem : m.comms[comm].members)
      if (mem.proc == proc) return mem.rank;
    return -1;
  }
  double WaitSec(const Op& op) const { return tools::WaitSec(m, op); }
  bool Hung(uint32_t oi) const { return live.Hung(oi); }
  std::string CommLabel(uint32_t comm) const { return "comm " + m.comms[comm].Label(); }
  // "AllReduce #12", "Send #3 to rank 2"; with the caller's tag where it
  // gave one (NCCL 2.31+): "AllReduce #12 (tag 4711)"; and where its record
  // says NCCL started it for a plan captured into a CUDA graph (FromGraph):
  // "AllReduce #12 (from a CUDA graph)".
  std::string OpName(const Op& op) const {
    std::string f = Str(op.func).empty() ? std::string("operation") : Str(op.func);
    std::string tag;
    if (&op >= m.ops.data() && &op < m.ops.data() + m.ops.size()) {
      const uint32_t oi = static_cast<uint32_t>(&op - m.ops.data());
      const uint64_t t = m.user_tags.empty() ? 0 : UserTag(m, oi);
      if (t != 0) tag = " (tag " + std::to_string(t) + ")";
      if (FromGraph(m, oi)) tag += " (from a CUDA graph)";
    }
    if (op.kind == OpKind::kColl) return f + " #" + std::to_string(op.seq) + tag;
    const Comm& c = m.comms[op.comm];
    std::string peer = HasFile(op.comm, op.peer_or_root) ? Name(c.proc_of_rank[op.peer_or_root])
                                                          : "comm rank " + std::to_string(op.peer_or_root);
    return f + " #" + std::to_string(op.seq) + (IsRecv(op.fn) ? " from " : " to ") + peer + tag;
  }
  // OpName, marking also an operation that shares its number with the next
  // call because NCCL did not count it (captured, or replayed: MatchOps
  // leaves it out of that number's match).
  std::string OpNameOf(uint32_t oi) const {
    const Op& op = m.ops[oi];
    return OpName(op) +
           (!FromGraph(m, oi) && op.match == kNone && GraphLike(m, oi) ? " (from a CUDA graph)" : "");
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

void SetComm(const Ctx& c, uint32_t comm, Finding* f);
// The finding's operation (Finding.op): a Model::ops index, or the first
// side a match has.
void SetOp(uint32_t op, Finding* f);
void SetOp(const Match& mt, Finding* f);
void AddEvidence(Finding* f, const std::string& proc, const std::string& text);

// The kind of cause a finding's evidence points to, and the only way a
// finder names one. A cause other than CAUSE_UNKNOWN says what it rests on
// (`evidence`, Finding.cause_evidence: the records that show it); "cannot
// tell" says in `text` what would tell, and needs no evidence.
void SetCause(Finding* f, report::Cause cause, const std::string& text, const std::string& evidence = "");
// A cause named without the records that show it becomes "cannot tell":
// run on every finding once its finder is done. Finders never rely on it
// (cause_test walks every kind of finding).
void BackCause(Finding* f);

// A finding with its place in the verdict order.
struct Ranked {
  int precedence;
  int64_t when;  // the operation's earliest start (or the event's time)
  Finding f;
  // A STRAGGLER judged from the arrivals summaries sampled across the
  // whole job (Model::sampled), not from their windows: it stands.
  bool sampled = false;
};

// Adds a finding in its place in the verdict order (by kind, then time).
void Emit(std::vector<Ranked>* out, int64_t when, Finding f);

// The earliest enqueue among `ops` (0 when none is known).
int64_t EarliestStart(const Model& m, const std::vector<uint32_t>& ops);

struct FateInfo {
  report::Fate fate = report::FATE_UNSPECIFIED;
  std::string brief;     // for the summary: "left cleanly after #11"
  std::string evidence;  // for the evidence line
};

// A process's last operation (on `comm`, or any), with when it was enqueued
// or completed: "AllReduce #11 completed at 3.20 s".
std::string LastOpText(const Ctx& c, uint32_t proc, uint32_t comm);
// The latest collective on `comm` that every other rank completed but
// `proc`'s file lacks: a collective completes only once every rank joined,
// so `proc` issued it, and its file lost the record (kNone: none).
// `start`: its latest enqueue among the others.
uint32_t ProvenLastColl(const Ctx& c, uint32_t proc, uint32_t comm, int64_t* start);
// When `proc`'s file ends before the latest collective the others prove it
// joined (on `comm`, or on any of its communicators with kNone): "; its file
// lacks its last records: the others completed AllReduce #3 with it ...",
// and `after` becomes " after AllReduce #3". Else "".
std::string LostTail(const Ctx& c, uint32_t proc, uint32_t comm, std::string* after);
// What a rank that never issued an operation on `comm` did instead.
// `missing_seq`: the collective it never joined (the others completed every
// earlier one, so it took part in them even where its file lost the records).
FateInfo FateOf(const Ctx& c, uint32_t proc, uint32_t comm, const uint64_t* missing_seq = nullptr,
                uint16_t missing_func = 0);

// What would tell a host busy outside NCCL from a program that called
// something else, for the idle ranks `procs` ("Flight Recorder dumps (--fr,
// ...), a Python stack (...) or ..."): never dumps already given, nor an
// event their headers show was on. `p2p`: also the API event of a send or
// receive that never reached launch, where it could have been recorded.
std::string IdleWouldTell(const Ctx& c, const std::vector<uint32_t>& procs, bool p2p);
// Whether Flight Recorder dumps were joined to the model (a communicator
// carries its process group).
bool FlightRecorderGiven(const Model& m);

// "send to rank 2 never completed on channel 3": a stalled proxy transfer.
std::string ProxyLine(const Ctx& c, uint32_t comm, const ProxyState& x);
// The evidence of one rank's stuck report for op `oi` (latest report naming it).
const StuckOp* StuckOf(const Ctx& c, uint32_t oi, int64_t* report_time);
// A stuck report's window (GPU_IN_WINDOW, sampled events): "AllReduce
// #3..#7", or "AllReduce #3 to Broadcast #1" across functions. The GPU is
// somewhere in it or past it: never name one of its operations alone.
std::string WindowName(const Ctx& c, const StuckOp& s);

}  // namespace ncclwatch::tools::diagnose_internal

#endif  // TOOLS_DIAGNOSE_CONTEXT_H_
