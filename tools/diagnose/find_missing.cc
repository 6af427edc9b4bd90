#include "tools/diagnose/find_missing.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "tools/diagnose/idle_cause.h"

namespace ncclwatch::tools::diagnose_internal {
namespace {

// In flight after its stream's last event (sampled events, Op::without_event):
// its state is unknown, so it neither proves a hang nor vetoes one that the
// other ranks' operations prove.
bool InWindow(const Op& op) { return op.state == OpState::kInFlight && op.without_event; }

// For an op whose GPU never started it: the window the same stuck report
// puts its communicator's GPU work in before it (sampled events), or null.
// The GPU is held somewhere there; the report does not say where.
const StuckOp* WindowBefore(const Ctx& c, uint32_t oi) {
  const Op& op = c.m.ops[oi];
  const Proc& p = c.m.procs[op.proc];
  for (auto r = p.stucks.rbegin(); r != p.stucks.rend(); ++r) {
    bool names = false;
    for (const StuckOp& s : r->ops) names |= StuckNames(s, c.m, oi);
    if (!names) continue;
    const StuckOp* best = nullptr;
    for (const StuckOp& s : r->ops) {
      if (s.gpu != 3 || s.window_last == kNone) continue;
      const Op& last = c.m.ops[s.window_last];
      if (last.comm != op.comm || last.start_ns > op.start_ns || s.window_last == oi) continue;
      if (best == nullptr || c.m.ops[best->window_last].start_ns < last.start_ns) best = &s;
    }
    return best;
  }
  return nullptr;
}

// One collective of a communicator as these finders see it: who issued it,
// who did not, and whether those that did wait in it.
struct Seen {
  uint32_t comm = kNone;
  const Match* mt = nullptr;
  std::vector<std::pair<int32_t, uint32_t>> present;  // Present(): (comm rank, op)
  std::vector<uint32_t> absent;   // processes with a file that never issued it
  std::vector<uint32_t> no_file;  // comm ranks without a file
  bool hole = false;              // a file lost its record (it issued a later one): not absence
  bool completed = false;         // some rank completed it
  // Hung: every unfinished op hung, or in a window (unknown) while another
  // rank's is hung: a window neither proves nor vetoes.
  bool hung = false;
  bool stuck_named = false;       // a stuck report names one of its ops
  double waited = 0;              // the shortest wait among the unfinished
  std::vector<uint32_t> ops, waiting, unfinished;  // ops, their waiting processes, unfinished ops
  std::string func, opname;       // "AllReduce", "AllReduce #12"
};

// Who issued collective `mt` of communicator `ci`, who did not, and who waits.
Seen See(const Ctx& c, uint32_t ci, const Match& mt) {
  const Model& m = c.m;
  const Comm& comm = m.comms[ci];
  Seen s;
  s.comm = ci;
  s.mt = &mt;
  s.present = Present(m, mt);
  if (s.present.empty()) return s;
  for (int32_t r = 0; r < comm.nranks; ++r) {
    if (OpOfRank(m, mt, r) != kNone) continue;
    if (!c.HasFile(ci, r)) {
      s.no_file.push_back(static_cast<uint32_t>(r));
      continue;
    }
    uint32_t pr = comm.proc_of_rank[r];
    auto it = c.last_seq[pr].find(SeqKey(ci, MatchFunc(m, mt)));
    if (it != c.last_seq[pr].end() && it->second >= mt.seq) s.hole = true;  // lost records, not absence
    else s.absent.push_back(pr);
  }
  bool hung = true, any_hung = false;
  double waited = 1e300;
  for (auto& [r, oi] : s.present) {
    const Op& op = m.ops[oi];
    s.ops.push_back(oi);
    if (op.state == OpState::kCompleted) {
      s.completed = true;
      continue;
    }
    s.unfinished.push_back(oi);
    s.waiting.push_back(op.proc);
    if (c.Hung(oi)) any_hung = true;
    else if (!InWindow(op)) hung = false;
    if (c.stuck_ops.count(oi)) s.stuck_named = true;
    waited = std::min(waited, c.WaitSec(op));
  }
  s.hung = hung && any_hung;
  s.waited = waited == 1e300 ? 0 : waited;
  s.func = m.Str(m.ops[s.present[0].second].func);
  // As the ranks in it name it: with its caller's tag, and marked where NCCL
  // started it for a CUDA graph's replay.
  s.opname = c.OpName(m.ops[s.present[0].second]);
  return s;
}

// A finding about `s`'s collective, with its communicator, function, seq,
// operation and wait.
Finding About(const Ctx& c, const Seen& s, report::FindingKind kind) {
  Finding f;
  f.set_kind(kind);
  SetComm(c, s.comm, &f);
  f.set_func(s.func);
  f.set_seq(s.mt->seq);
  SetOp(*s.mt, &f);
  f.set_waited_sec(s.waited);
  return f;
}

// An extra collective: issued by a minority while the majority, which never
// issued it, went on and waits in a later operation of this communicator.
// The minority is the odd one out. False where the others did not go on.
bool ExtraCollective(const Ctx& c, const Seen& s, Finding* out) {
  const Model& m = c.m;
  // Moved on: each of them issued a later operation on this communicator.
  int64_t issued_at = INT64_MAX;
  for (uint32_t oi : s.unfinished) issued_at = std::min(issued_at, m.ops[oi].start_ns);
  bool moved_on = true;
  for (uint32_t pr : s.absent) {
    bool later = false;
    for (uint32_t oi : m.procs[pr].ops) later |= m.ops[oi].comm == s.comm && m.ops[oi].start_ns > issued_at;
    moved_on = moved_on && later && c.oldest_inflight[pr] != kNone;
  }
  if (!moved_on) return false;
  Finding f = About(c, s, report::MISMATCH);
  for (uint32_t pr : s.waiting) *f.add_culprits() = c.Ref(pr, s.comm);
  for (uint32_t pr : s.absent) *f.add_waiting() = c.Ref(pr, s.comm);
  f.set_summary("MISMATCH: " + c.Names(s.waiting) + " issued an extra " + s.opname + " on " + c.CommLabel(s.comm) +
                " that " + c.Names(s.absent) + " never issued; they went on past it (" + Dur(s.waited) + ")");
  for (uint32_t oi : s.unfinished)
    AddEvidence(&f, c.Name(m.ops[oi].proc),
                "issued " + s.opname + " at " + At(c.T(m.ops[oi].start_ns)) + ", never completed");
  for (uint32_t pr : s.absent) {
    const Op& b = m.ops[c.oldest_inflight[pr]];
    AddEvidence(&f, c.Name(pr), "never issued it; waits in " + c.OpName(b) + " on " + c.CommLabel(b.comm) +
                                     " since " + At(c.T(b.start_ns)));
  }
  *out = std::move(f);
  return true;
}

// The collectives of `ci` in the order `proc` issued them: their functions.
std::vector<uint16_t> CallsOf(const Model& m, uint32_t proc, uint32_t ci) {
  std::vector<uint16_t> out;
  for (uint32_t oi : m.procs[proc].ops)
    if (m.ops[oi].comm == ci && m.ops[oi].kind == OpKind::kColl) out.push_back(m.ops[oi].func);
  return out;
}

// Communicators made with `ci` by one split (PyTorch's new_group of every
// pair, NCCL's ncclCommSplit): the same name and size, members apart, all
// of them in one larger communicator (their parent), and the same calls so
// far on their first ranks. The trace holds no parent's hash, so these
// stand for it.
std::vector<uint32_t> Siblings(const Ctx& c, uint32_t ci) {
  const Model& m = c.m;
  const Comm& a = m.comms[ci];
  std::vector<uint32_t> out;
  if (a.nranks < 2 || a.size_guessed || a.members.empty()) return out;
  auto has = [](const Comm& k, uint32_t pr) {
    for (const CommMember& mem : k.members)
      if (mem.proc == pr) return true;
    return false;
  };
  for (uint32_t cj = 0; cj < m.comms.size(); ++cj) {
    const Comm& b = m.comms[cj];
    if (cj == ci || b.nranks != a.nranks || b.name != a.name || b.size_guessed ||
        static_cast<int32_t>(b.members.size()) != b.nranks)
      continue;
    bool apart = true;
    for (const CommMember& mem : b.members) apart = apart && !has(a, mem.proc);
    if (!apart) continue;
    bool parent = false;
    for (const Comm& k : m.comms) {
      if (k.nranks <= a.nranks) continue;
      bool all = true;
      for (const CommMember& mem : a.members) all = all && has(k, mem.proc);
      for (const CommMember& mem : b.members) all = all && has(k, mem.proc);
      parent |= all;
    }
    if (!parent) continue;
    std::vector<uint16_t> x = CallsOf(m, a.members[0].proc, ci), y = CallsOf(m, b.members[0].proc, cj);
    const size_t n = std::min(x.size(), y.size());
    if (n == 0 || !std::equal(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n), y.begin())) continue;
    out.push_back(cj);
  }
  return out;
}

// How sibling communicators vote where a collective has no majority: a
// sibling whose every rank issued as many of its function as the ranks
// in it did sides with them; as many as the ranks that never joined, with
// those. The evidence lines say which voted, and how.
struct Vote {
  int for_waiting = 0, for_absent = 0;
  std::vector<std::string> lines;
};

Vote SiblingVote(const Ctx& c, const Seen& s, const std::vector<uint32_t>& absent) {
  const Model& m = c.m;
  Vote v;
  const uint16_t func = MatchFunc(m, *s.mt);
  // The highest seq of `func` every one of `procs` issued on `ci` (-1: none).
  auto upto = [&](const std::vector<uint32_t>& procs, uint32_t ci) {
    int64_t lo = INT64_MAX;
    for (uint32_t pr : procs) {
      auto it = c.last_seq[pr].find(SeqKey(ci, func));
      lo = std::min<int64_t>(lo, it == c.last_seq[pr].end() ? -1 : static_cast<int64_t>(it->second));
    }
    return procs.empty() ? int64_t{-1} : lo;
  };
  const int64_t w = static_cast<int64_t>(s.mt->seq), a = upto(absent, s.comm);
  for (uint32_t cj : Siblings(c, s.comm)) {
    std::vector<uint32_t> members;
    for (const CommMember& mem : m.comms[cj].members) members.push_back(mem.proc);
    const int64_t got = upto(members, cj);
    const bool with_w = got == w, with_a = got == a && a != w;
    v.for_waiting += with_w;
    v.for_absent += with_a;
    const std::string issued = got < 0 ? "issued no " + c.Str(func)
                                       : "every rank issued " + c.Str(func) + " up to #" + std::to_string(got);
    v.lines.push_back(c.CommLabel(cj) + ", made with it (same size and parent, the same calls so far): " + issued +
                      (with_w   ? ", as " + c.Names(s.waiting) + " did: it votes that " + c.Names(absent) + " skipped it"
                       : with_a ? ", as " + c.Names(absent) + " did: it votes that " + c.Names(s.waiting) +
                                      " issued one too many"
                                : ", as neither side did: no vote"));
  }
  return v;
}

// The summary of a MISSING_RANK finding. `absent`: the ranks that never
// joined, less those whose files are damaged; `fates`: what each did
// instead; `nf`: the ranks without a readable file, `damaged` when some of
// them have a damaged one; `no_majority`: as many ranks issued it as did
// not (both sides are named).
std::string MissingSummary(const Ctx& c, const Seen& s, const std::vector<uint32_t>& absent, const std::string& fates,
                           const std::vector<std::string>& nf, bool damaged, bool no_majority) {
  const std::string where = c.CommLabel(s.comm);
  if (no_majority && s.waiting.size() < absent.size()) {
    // Fewer ranks issued it than did not: most likely those few issued
    // one too many, so the line starts from them. Still both are named:
    // the records of "the others skipped it" are the same.
    const std::string few = s.waiting.size() == 1 ? c.Names(s.waiting) + " alone" : "only " + c.Names(s.waiting);
    return "HANG: " + few + " issued " + s.opname + " on " + where + " and waited " + Dur(s.waited) + "; " +
           c.Names(absent) + " never joined it; " + fates + " (" + c.Names(s.waiting) + " issued one too many, or " +
           c.Names(absent) + " skipped it: the records cannot tell which; both are named)";
  }
  if (!absent.empty()) {
    std::string sum = "HANG: " + c.Names(absent) + " never joined " + s.opname + " on " + where + "; " +
                      c.Names(s.waiting) + " waited " + Dur(s.waited) + "; " + fates;
    if (no_majority)
      sum += " (no majority: either " + c.Names(absent) + " skipped it or " + c.Names(s.waiting) +
             " issued one too many; both are named)";
    return sum;
  }
  return "HANG: " + s.opname + " on " + where + " never completed; " + c.Names(s.waiting) + " waited " +
         Dur(s.waited) + "; the missing " + RankList(nf) +
         (!damaged ? " gave no trace file" : ": no readable record of whether they joined");
}

// The ranks in `s`'s collective issued one too many, as the sibling
// communicators' votes say: they are the culprits, the ranks that never
// joined wait. `f`: the finding so far, its evidence kept.
Finding ExtraBySiblings(const Ctx& c, const Seen& s, const std::vector<uint32_t>& absent, Finding f) {
  f.clear_culprits();
  f.clear_fates();
  for (uint32_t pr : s.waiting) *f.add_culprits() = c.Ref(pr, s.comm);
  for (uint32_t pr : absent) *f.add_waiting() = c.Ref(pr, s.comm);
  f.set_summary("HANG: " + c.Names(s.waiting) + " issued " + s.opname + " on " + c.CommLabel(s.comm) + " and waited " +
                Dur(s.waited) + "; " + c.Names(absent) + " never joined it; the communicators made with it issued as "
                "many as " + c.Names(absent) + ": " + c.Names(s.waiting) + " issued one too many");
  for (uint32_t oi : s.unfinished)
    AddEvidence(&f, c.Name(c.m.ops[oi].proc), "in " + s.opname + " since " + At(c.T(c.m.ops[oi].start_ns)) +
                                                  ", waited " + Dur(c.WaitSec(c.m.ops[oi])));
  SetCause(&f, report::CAUSE_PROGRAM,
           "program logic: " + c.Names(s.waiting) + " issued one collective more than " + c.Names(absent) +
               " and the communicators made with it",
           "the communicators made with it count their calls as " + c.Names(absent) + " do (the lines below)");
  return f;
}

// MISSING_RANK: ranks that never issued the collective the others wait in,
// each with what it did instead.
Finding MissingRank(const Ctx& c, const Seen& s) {
  const Model& m = c.m;
  const uint32_t ci = s.comm;
  Finding f = About(c, s, report::MISSING_RANK);
  std::string fates;
  // A rank whose file is damaged before the operation is not known to
  // have missed it: named in the evidence, never a culprit.
  std::vector<uint32_t> absent = s.absent, unknown;
  bool all_wait_elsewhere = !absent.empty();
  for (uint32_t pr : absent) {
    FateInfo fi = FateOf(c, pr, ci, &s.mt->seq, MatchFunc(m, *s.mt));
    all_wait_elsewhere = all_wait_elsewhere && fi.fate == report::FATE_WAITS_ELSEWHERE;
    AddEvidence(&f, c.Name(pr), fi.evidence);
    if (fi.fate == report::FATE_FILE_DAMAGED) {
      unknown.push_back(pr);
      continue;
    }
    *f.add_culprits() = c.Ref(pr, ci);
    f.add_fates(fi.fate);
    fates += (fates.empty() ? "" : ", ") + c.Name(pr) + " " + fi.brief;
  }
  std::vector<std::string> nf;
  for (uint32_t r : s.no_file) nf.push_back("comm rank " + std::to_string(r));
  for (uint32_t pr : unknown) {
    absent.erase(std::find(absent.begin(), absent.end(), pr));
    nf.push_back(c.Name(pr) + " (file damaged)");
  }
  if (absent.empty()) {
    for (uint32_t r : s.no_file) {
      ProcRef* pr = f.add_culprits();
      pr->set_name("comm rank " + std::to_string(r));
      pr->set_launcher_rank(-1);
      pr->set_comm_rank(static_cast<int32_t>(r));
      f.add_fates(report::FATE_NO_FILE);
    }
  }
  // No majority: as many ranks issued it as did not, and those that did
  // not are alive and waiting in another operation. A rank that skipped
  // it and a rank that issued one too many leave the same records
  // (with two ranks: 'skip' and 'extra' look alike), so both sides are
  // named, as for a mismatch without a majority.
  bool no_majority = all_wait_elsewhere && unknown.empty() && s.no_file.empty() && !s.waiting.empty() &&
                     s.waiting.size() <= absent.size();
  if (no_majority) {
    // Sibling communicators, made by the same split and called alike,
    // count as ranks of this one: the side they agree with is the majority.
    const Vote v = SiblingVote(c, s, absent);
    for (const std::string& line : v.lines) AddEvidence(&f, "", line);
    if (v.for_waiting > 0 && v.for_absent == 0) no_majority = false;
    if (v.for_absent > 0 && v.for_waiting == 0) return ExtraBySiblings(c, s, absent, std::move(f));
  }
  for (uint32_t pr : s.waiting) *(no_majority ? f.add_culprits() : f.add_waiting()) = c.Ref(pr, ci);
  f.set_summary(MissingSummary(c, s, absent, fates, nf, !unknown.empty(), no_majority));
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  double wlo = 1e300, whi = 0;
  for (uint32_t oi : s.unfinished) {
    lo = std::min(lo, m.ops[oi].start_ns);
    hi = std::max(hi, m.ops[oi].start_ns);
    wlo = std::min(wlo, c.WaitSec(m.ops[oi]));
    whi = std::max(whi, c.WaitSec(m.ops[oi]));
  }
  AddEvidence(&f, c.Names(s.waiting),
              "in " + s.opname + " since " + At(c.T(lo)) + (hi - lo > 10000000 ? " to " + At(c.T(hi)) : "") +
                  ", waited " + Dur(wlo) + (whi - wlo > 0.05 ? " to " + Dur(whi) : "") +
                  (s.stuck_named ? "; stuck reports name it" : ""));
  if (!absent.empty() && !nf.empty())
    AddEvidence(&f, RankList(nf), "no trace file or a damaged one: cannot tell whether it joined");
  if (s.completed) {
    // A rooted collective some ranks completed (see FindMissingAndStuck):
    // those that went on wait in a later operation here, for the same ranks.
    std::vector<uint32_t> done;
    for (auto& [r, oi] : s.present)
      if (m.ops[oi].state == OpState::kCompleted) done.push_back(m.ops[oi].proc);
    AddEvidence(&f, c.Names(done),
                "completed it: its data reached them from root " + std::to_string(m.ops[s.ops[0]].peer_or_root) +
                    " without passing the ranks that never joined");
    for (uint32_t pr : done)
      if (c.oldest_inflight[pr] != kNone && m.ops[c.oldest_inflight[pr]].comm == ci) *f.add_waiting() = c.Ref(pr, ci);
  }
  if (!no_majority && !absent.empty())
    ExplainAbsent(c, ci, "HANG: " + c.Names(absent) + " never joined " + s.opname + " on " + c.CommLabel(ci) + "; " +
                             c.Names(s.waiting) + " waited " + Dur(s.waited),
                  &f);
  return f;
}

// What the stuck reports say of the ranks that never finished a collective
// every rank issued: which GPUs never started it, which started it, which
// are somewhere in a window of operations launched without events, and the
// first transfer that stalled.
struct StuckSeen {
  std::vector<uint32_t> no_report, gpu_not_started, gpu_started, gpu_window;
  std::string windows;      // "; rank 2's GPU is somewhere in AllReduce #1..#5 (events sampled)"
  std::string first_stall;  // "rank 1: send to rank 2 never completed on channel 3"
  int stall_rank = -1;      // StallRank of first_stall
  double stall_done = 2;    // the fraction of its steps first_stall had done
  uint32_t stall_proc = kNone;     // the rank of first_stall
  uint32_t stall_peer = kNone;     // its peer's process (kNone: no file)
  bool stall_gpu_started = false;  // the stalled rank's GPU started the operation
};

// Which stalled transfer names the hang best. In a ring every rank's
// transfers stall once one link stops, but only the receive across that
// link still waits on the network (posted, no data: RecvPosted, RecvWait);
// the others' receives got their data and wait on their own GPU
// (RecvGPUWait, RecvFlushWait), which waits on the ring upstream. Seen on
// NCCL 2.28.9 with one rank's sends stopped: that rank's peer alone was in
// RecvWait. Where several receives wait on the network (a longer ring
// drains behind the stopped link), the one with the least of its steps
// done is nearest the stop: the others received more before their
// upstream ran dry.
int StallRank(const ProxyState& x) {
  if (!x.is_send && (x.last_state == 10 || x.last_state == 4)) return 2;
  if (!x.is_send && (x.last_state == 12 || x.last_state == 11)) return 0;
  return 1;
}

// One unfinished op's stuck report: its evidence line, its stalled
// transfers (added to `f`), and what it tells of its GPU (into `seen`).
std::string StuckLine(const Ctx& c, uint32_t ci, uint32_t oi, const StuckOp& s, int64_t rt, Finding* f,
                      StuckSeen* seen) {
  const Op& op = c.m.ops[oi];
  std::string line;
  if (s.gpu == 1) {
    // Completions from CUDA events: the event recorded before its
    // kernel has not completed, so the stream is still busy with
    // earlier work.
    seen->gpu_not_started.push_back(op.proc);
    line = "its GPU never started it: earlier work on its stream has not finished";
    if (const StuckOp* w = WindowBefore(c, oi))
      line += " (somewhere in " + WindowName(c, *w) +
              ", launched without CUDA events of their own: which one is not known)";
  } else if (s.gpu == 2) {
    seen->gpu_started.push_back(op.proc);
    line = "its GPU started it and has not finished it";
  } else if (s.gpu == 3) {
    // Sampled events: its launch recorded none of its own. The GPU is
    // somewhere in the window, or past it: never this op alone.
    seen->gpu_window.push_back(op.proc);
    const std::string w = WindowName(c, s);
    line = "its GPU is somewhere in " + w +
           " on its stream, or past it: those launches recorded no CUDA event of their own "
           "(NCCLWATCH_EVENT_INTERVAL_US), so whether it reached this one is not known";
    if (seen->gpu_window.size() <= 3)
      seen->windows += "; " + c.Name(op.proc) + "'s GPU is somewhere in " + w + " (events sampled)";
  } else if (c.m.procs[op.proc].event_completions) {
    // CUDA events without an answer: no event before its kernel
    // (NCCLWATCH_START_EVENTS=0), or its pair taken over by later
    // launches. No channel counts either.
    line = "whether its GPU reached it is not known";
  } else {
    line = "kernel channels " + std::to_string(s.kernel_started) + " started, " + std::to_string(s.kernel_stopped) +
           " stopped of " + std::to_string(s.nchannels);
  }
  if (s.proxy_started > 0)
    line += "; proxy ops " + std::to_string(s.proxy_stopped) + " of " + std::to_string(s.proxy_started) + " done";
  for (const ProxyState& x : s.proxy) {
    if (x.stopped || x.last_step >= x.nsteps) continue;
    report::StalledTransfer* st = f->add_stalled();
    st->set_proc(c.Name(op.proc));
    st->set_channel(x.channel);
    st->set_peer(c.PeerName(ci, x.peer));
    st->set_peer_comm_rank(x.peer);
    st->set_is_send(x.is_send);
    st->set_last_step(x.last_step);
    st->set_nsteps(x.nsteps);
    st->set_last_state(StateName(x.last_state));
    const double idle = x.last_update_ns == kNoTime ? 0 : static_cast<double>(rt - x.last_update_ns) / 1e9;
    st->set_idle_sec(idle);
    line += "; " + ProxyLine(c, ci, x) + " (step " + std::to_string(x.last_step) + " of " +
            std::to_string(x.nsteps) + ", " + StateName(x.last_state) + ", idle " + Dur(idle) + ")";
    const double done = x.nsteps == 0 ? 0 : static_cast<double>(x.last_step) / x.nsteps;
    if (StallRank(x) > seen->stall_rank || (StallRank(x) == seen->stall_rank && done < seen->stall_done)) {
      seen->stall_rank = StallRank(x);
      seen->stall_done = done;
      seen->first_stall = c.Name(op.proc) + ": " + ProxyLine(c, ci, x);
      seen->stall_proc = op.proc;
      seen->stall_peer = c.HasFile(ci, x.peer) ? c.m.comms[ci].proc_of_rank[x.peer] : kNone;
      // Started: CUDA events say so, or a kernel channel did (channel
      // counts are written only without events).
      seen->stall_gpu_started = s.gpu == 2 || (s.gpu == 0 && s.kernel_started > 0);
    }
  }
  return line;
}

// What would tell a busy GPU from the network for the ranks `procs`, of
// what their headers show was off: never advise a setting already on.
std::string StuckWouldTell(const Ctx& c, const std::vector<uint32_t>& procs) {
  bool events = true, steps = true, reports = true;
  for (uint32_t pr : procs) {
    const Proc& p = c.m.procs[pr];
    events = events && (p.event_completions || p.api_version < 5);
    steps = steps && (p.event_mask & kMaskProxyStep) != 0;
    reports = reports && !p.stucks.empty();
  }
  std::vector<std::string> would;
  if (!reports) would.push_back("a stuck report from every rank (NCCLWATCH_STUCK_SEC below the wait)");
  if (!events) would.push_back("completions from CUDA events (NCCLWATCH_COMPLETIONS=events)");
  if (!steps) would.push_back("proxy steps (NCCLWATCH_EVENTS=default,proxyop,proxystep)");
  if (would.empty())
    would.push_back("NCCL's own log of the transfer (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=NET) and the hosts' "
                    "network error counters");
  std::string s;
  for (size_t i = 0; i < would.size(); ++i) s += (i == 0 ? "" : i + 1 == would.size() ? " or " : ", ") + would[i];
  return s;
}

// The kind of cause the stuck reports point to, said on `f`. The network
// only where the evidence shows it: every rank of the operation alive, the
// stalled rank's GPU started it, and a transfer between two named ranks
// not progressing; a GPU that never started it while others did is its
// rank's resources; anything else cannot tell, with what would.
void StuckCause(const Ctx& c, const Seen& s, const StuckSeen& seen, Finding* f) {
  std::vector<uint32_t> procs;
  for (auto& [r, oi] : s.present) procs.push_back(c.m.ops[oi].proc);
  if (!seen.gpu_not_started.empty() && !seen.gpu_started.empty()) {
    SetCause(f, report::CAUSE_RESOURCES, c.Names(seen.gpu_not_started) + "'s GPU was busy with earlier work on its stream",
             "stuck reports: " + c.Names(seen.gpu_not_started) + "'s GPU never started it, " +
                 c.Names(seen.gpu_started) + "'s did");
    return;
  }
  if (!seen.gpu_window.empty() && seen.first_stall.empty()) {
    SetCause(f, report::CAUSE_UNKNOWN,
             "cannot tell: " + c.Names(seen.gpu_window) +
                 "'s GPU is somewhere in a window of operations launched without CUDA events of their own, and "
                 "which one holds it is not known; what would tell: events at every launch "
                 "(NCCLWATCH_EVENT_INTERVAL_US=0)");
    return;
  }
  bool alive = true;
  for (uint32_t pr : procs) alive = alive && !c.dead[pr];
  const bool named = seen.stall_peer != kNone && !c.dead[seen.stall_peer];
  if (!seen.first_stall.empty() && alive && named && seen.stall_gpu_started) {
    SetCause(f, report::CAUSE_NETWORK,
             "the network: every rank of it alive, " + c.Name(seen.stall_proc) +
                 "'s GPU in it, and a transfer between two named ranks stopped (" + seen.first_stall + ")",
             "stuck reports: " + seen.first_stall + "; heartbeats of every rank of it");
    return;
  }
  std::string why = "a busy GPU and the network leave the same records here";
  if (!seen.first_stall.empty() && !alive) why = "a rank of it is dead, which stops its transfers too";
  else if (!seen.first_stall.empty() && !named) why = "the stalled transfer's peer has no trace file to show it alive";
  else if (!seen.first_stall.empty()) why = "whether " + c.Name(seen.stall_proc) + "'s GPU started it is not known";
  SetCause(f, report::CAUSE_UNKNOWN, "cannot tell: " + why + "; what would tell: " + StuckWouldTell(c, procs));
}

// STUCK_IN_PROGRESS: a collective every rank issued that never finished on
// some, with what their stuck reports say.
Finding StuckInProgress(const Ctx& c, const Seen& s) {
  const Model& m = c.m;
  const uint32_t ci = s.comm;
  Finding f = About(c, s, report::STUCK_IN_PROGRESS);
  std::vector<uint32_t> finished;
  for (auto& [r, oi] : s.present)
    if (m.ops[oi].state == OpState::kCompleted) finished.push_back(m.ops[oi].proc);
  for (uint32_t pr : s.waiting) *f.add_culprits() = c.Ref(pr, ci);
  StuckSeen seen;
  for (uint32_t oi : s.unfinished) {
    int64_t rt = kNoTime;
    const StuckOp* stuck = StuckOf(c, oi, &rt);
    if (stuck == nullptr) {
      seen.no_report.push_back(m.ops[oi].proc);
      continue;
    }
    const std::string line = StuckLine(c, ci, oi, *stuck, rt, &f, &seen);
    AddEvidence(&f, c.Name(m.ops[oi].proc), line);
  }
  if (!seen.no_report.empty()) {
    double stuck_sec = m.procs[seen.no_report[0]].stuck_sec;
    AddEvidence(&f, c.Names(seen.no_report),
                "in flight " + Dur(s.waited) + "; no stuck report" +
                    (stuck_sec > 0 ? " (NCCLWATCH_STUCK_SEC=" + Printf("%g", stuck_sec) + " not reached)"
                                   : " (stuck reports off)"));
  }
  if (!finished.empty()) AddEvidence(&f, c.Names(finished), "completed it");
  std::string sum = "STUCK: " + s.opname + " on " + c.CommLabel(ci) + " was issued by every rank and never finished on " +
                    (finished.empty() ? "any (" + c.Names(s.waiting) + ")" : c.Names(s.waiting)) + " (in flight " +
                    Dur(s.waited) + ")";
  if (!seen.gpu_not_started.empty()) {
    // The ranks whose GPU never reached the operation hold the others,
    // which started it and wait inside it for them.
    sum += seen.gpu_not_started.size() == 1 ? "; " + c.Names(seen.gpu_not_started) + "'s GPU never started it"
                                            : "; the GPUs of " + c.Names(seen.gpu_not_started) + " never started it";
    // Only when others did start it: where no GPU did, earlier work
    // holds them all, and this names no one new.
    if (!seen.gpu_started.empty()) {
      sum += "; " + c.Names(seen.gpu_started) +
             (seen.gpu_started.size() == 1 ? " started it and waits" : " started it and wait");
      f.clear_culprits();
      for (uint32_t pr : seen.gpu_not_started) *f.add_culprits() = c.Ref(pr, ci);
      for (uint32_t pr : seen.gpu_started) *f.add_waiting() = c.Ref(pr, ci);
    }
  }
  sum += seen.windows;
  if (!seen.first_stall.empty()) sum += "; " + seen.first_stall;
  StuckCause(c, s, seen, &f);
  f.set_summary(sum);
  return f;
}

// The match of the earlier collective of `s`'s communicator that every
// rank absent from `s` is still inside (its oldest operation not finished),
// or kNone: a rank held there never issued `s`'s collective because it has
// not got past the earlier one, not because it went on without it.
uint32_t HeldByEarlier(const Ctx& c, const Seen& s) {
  const Model& m = c.m;
  if (s.absent.empty() || !s.no_file.empty()) return kNone;
  uint32_t held = kNone;
  for (uint32_t pr : s.absent) {
    const uint32_t oi = c.oldest_inflight[pr];
    if (oi == kNone || c.dead[pr]) return kNone;
    const Op& b = m.ops[oi];
    if (b.comm != s.comm || b.kind != OpKind::kColl || b.match == kNone) return kNone;
    if (held != kNone && held != b.match) return kNone;
    // Held means it has not got past it: a rank that enqueued later
    // collectives of this communicator behind it (NCCL runs them in order)
    // did get past the call, and its missing one is a skipped call.
    const std::vector<uint32_t>& mine = m.procs[pr].ops;
    for (auto it = mine.rbegin(); it != mine.rend() && *it != oi; ++it) {
      const Op& later = m.ops[*it];
      if (later.comm == s.comm && later.kind == OpKind::kColl && later.seq > b.seq) return kNone;
    }
    held = b.match;
  }
  if (held == kNone || held == static_cast<uint32_t>(s.mt - m.matches.data())) return kNone;
  // Earlier: every rank in `s` issued the held collective before it (a
  // rank that skipped one and raced ahead is inside a later one instead).
  for (auto& [r, oi] : s.present) {
    const uint32_t h = OpOfRank(m, m.matches[held], r);
    if (h == kNone || m.ops[h].start_ns >= m.ops[oi].start_ns) return kNone;
  }
  return held;
}

// On the earlier collective's finding: the ranks that finished it and wait
// in the next one, which the held ranks have not reached.
void HeldEvidence(const Ctx& c, const Seen& s, Finding* f) {
  AddEvidence(f, c.Names(s.waiting),
              "wait in " + s.opname + " since " + At(c.T(c.m.ops[s.unfinished[0]].start_ns)) + ", which " +
                  c.Names(s.absent) + ", still in this one, has not issued: blocked behind it");
}

}  // namespace

std::vector<Ranked> FindMissingAndStuck(const Ctx& c, const std::vector<uint64_t>& mismatch_seq) {
  const Model& m = c.m;
  std::vector<Ranked> out;
  for (uint32_t ci = 0; ci < m.comms.size(); ++ci) {
    bool stuck_found = false;
    for (uint32_t mi : c.colls_of_comm[ci]) {
      const Match& mt = m.matches[mi];
      const Seen s = See(c, ci, mt);
      if (s.present.empty() || s.unfinished.empty()) continue;
      if (!s.absent.empty() && s.absent.size() > s.waiting.size() && !s.completed && s.hung) {
        Finding f;
        if (ExtraCollective(c, s, &f)) {
          Emit(&out, EarliestStart(m, s.ops), std::move(f));
          break;
        }
      }
      // A rooted collective can complete on the ranks whose part of it
      // does not pass through a rank that never joined (a Broadcast's
      // ring from its root: seen with NCCL 2.28, ranks 4-7 completing
      // #4 that ranks 0,1 never issued while ranks 2,3 waited in it).
      // The ranks that wait in it still wait for the absent ones.
      const bool open = !s.completed || IsRooted(m.ops[s.present[0].second].fn);
      if ((!s.absent.empty() || (!s.no_file.empty() && !s.hole)) && open && s.hung) {
        // A rank still inside an earlier collective of this communicator
        // never went on without this one: the hang is the earlier one's.
        const uint32_t held = HeldByEarlier(c, s);
        if (held != kNone) {
          const Seen e = See(c, ci, m.matches[held]);
          if (!stuck_found && !e.unfinished.empty()) {
            Finding f = StuckInProgress(c, e);
            HeldEvidence(c, s, &f);
            Emit(&out, EarliestStart(m, e.ops), std::move(f));
          } else {
            for (Ranked& r : out)
              if (r.f.kind() == report::STUCK_IN_PROGRESS && r.f.comm_hash() == m.comms[ci].hash) HeldEvidence(c, s, &r.f);
          }
          break;
        }
        Emit(&out, EarliestStart(m, s.ops), MissingRank(c, s));
        break;
      }
      if (s.absent.empty() && s.no_file.empty() && s.hung) {
        // A mismatch at or before this op explains it instead. One per
        // communicator; the scan goes on, since a later collective that a
        // rank skipped (found above) is the better answer: a rank that
        // skipped one races ahead and hangs first in the next.
        if (mismatch_seq[ci] != 0 && mismatch_seq[ci] <= mt.seq) break;
        if (stuck_found) continue;
        stuck_found = true;
        Emit(&out, EarliestStart(m, s.ops), StuckInProgress(c, s));
      }
    }
  }
  return out;
}

}  // namespace ncclwatch::tools::diagnose_internal
