// MISSING_RANK and STUCK_IN_PROGRESS: an operation some rank never joined,
// and one every rank joined that never finished.

#include "tools/diagnose/finders.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

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

}  // namespace

std::vector<Ranked> FindMissingAndStuck(const Ctx& c, const std::vector<uint64_t>& mismatch_seq) {
  const Model& m = c.m;
  std::vector<Ranked> out;
  for (uint32_t ci = 0; ci < m.comms.size(); ++ci) {
    const Comm& comm = m.comms[ci];
    bool stuck_found = false;
    for (uint32_t mi : c.colls_of_comm[ci]) {
      const Match& mt = m.matches[mi];
      auto present = Present(m, mt);
      if (present.empty()) continue;
      std::vector<uint32_t> absent, no_file;  // procs / comm ranks
      bool hole = false;
      for (int32_t r = 0; r < comm.nranks; ++r) {
        if (OpOfRank(m, mt, r) != kNone) continue;
        if (!c.HasFile(ci, r)) {
          no_file.push_back(static_cast<uint32_t>(r));
          continue;
        }
        uint32_t pr = comm.proc_of_rank[r];
        auto it = c.last_seq[pr].find(SeqKey(ci, MatchFunc(m, mt)));
        if (it != c.last_seq[pr].end() && it->second >= mt.seq) hole = true;  // lost records, not absence
        else absent.push_back(pr);
      }
      // Hung: every unfinished op hung, or in a window (unknown) while
      // another rank's is hung: a window neither proves nor vetoes.
      bool completed = false, hung = true, any_hung = false, stuck_named = false;
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
        if (c.Hung(oi)) any_hung = true;
        else if (!InWindow(op)) hung = false;
        if (c.stuck_ops.count(oi)) stuck_named = true;
        waited = std::min(waited, c.WaitSec(op));
      }
      if (unfinished.empty()) continue;
      hung = hung && any_hung;
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
          moved_on = moved_on && later && c.oldest_inflight[pr] != kNone;
        }
        if (moved_on) {
          Finding f;
          f.set_kind(report::MISMATCH);
          SetComm(c, ci, &f);
          f.set_func(func);
          f.set_seq(mt.seq);
          SetOp(mt, &f);
          f.set_waited_sec(waited);
          for (uint32_t pr : waiting) *f.add_culprits() = c.Ref(pr, ci);
          for (uint32_t pr : absent) *f.add_waiting() = c.Ref(pr, ci);
          f.set_summary("MISMATCH: " + c.Names(waiting) + " issued an extra " + opname + " on " + c.CommLabel(ci) +
                        " that " + c.Names(absent) + " never issued; they went on past it (" + Dur(waited) + ")");
          for (uint32_t oi : unfinished)
            AddEvidence(&f, c.Name(m.ops[oi].proc),
                        "issued " + opname + " at " + At(c.T(m.ops[oi].start_ns)) + ", never completed");
          for (uint32_t pr : absent) {
            const Op& b = m.ops[c.oldest_inflight[pr]];
            AddEvidence(&f, c.Name(pr), "never issued it; waits in " + c.OpName(b) + " on " + c.CommLabel(b.comm) +
                                             " since " + At(c.T(b.start_ns)));
          }
          Emit(&out, EarliestStart(m, ops), std::move(f));
          break;
        }
      }
      if ((!absent.empty() || (!no_file.empty() && !hole)) && !completed && hung) {
        // 1. Missing rank.
        Finding f;
        f.set_kind(report::MISSING_RANK);
        SetComm(c, ci, &f);
        f.set_func(func);
        f.set_seq(mt.seq);
        SetOp(mt, &f);
        f.set_waited_sec(waited);
        std::string fates;
        // A rank whose file is damaged before the operation is not known to
        // have missed it: named in the evidence, never a culprit.
        std::vector<uint32_t> unknown;
        bool all_wait_elsewhere = !absent.empty();
        for (uint32_t pr : absent) {
          FateInfo fi = FateOf(c, pr, ci, &mt.seq, MatchFunc(m, mt));
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
        for (uint32_t r : no_file) nf.push_back("comm rank " + std::to_string(r));
        for (uint32_t pr : unknown) {
          absent.erase(std::find(absent.begin(), absent.end(), pr));
          nf.push_back(c.Name(pr) + " (file damaged)");
        }
        if (absent.empty()) {
          for (uint32_t r : no_file) {
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
        const bool no_majority = all_wait_elsewhere && unknown.empty() && no_file.empty() &&
                                 !waiting.empty() && waiting.size() <= absent.size();
        if (no_majority) {
          for (uint32_t pr : waiting) *f.add_culprits() = c.Ref(pr, ci);
        } else {
          for (uint32_t pr : waiting) *f.add_waiting() = c.Ref(pr, ci);
        }
        std::string sum;
        if (no_majority && waiting.size() < absent.size()) {
          // Fewer ranks issued it than did not: most likely those few issued
          // one too many, so the line starts from them. Still both are named:
          // the records of "the others skipped it" are the same.
          const std::string few = waiting.size() == 1 ? c.Names(waiting) + " alone" : "only " + c.Names(waiting);
          sum = "HANG: " + few + " issued " + opname + " on " + c.CommLabel(ci) + " and waited " + Dur(waited) + "; " +
                c.Names(absent) +
                " never joined it; " + fates + " (" + c.Names(waiting) + " issued one too many, or " +
                c.Names(absent) + " skipped it: the records cannot tell which; both are named)";
        } else if (!absent.empty()) {
          sum = "HANG: " + c.Names(absent) + " never joined " + opname + " on " + c.CommLabel(ci) + "; " +
                c.Names(waiting) + " waited " + Dur(waited) + "; " + fates;
          if (no_majority)
            sum += " (no majority: either " + c.Names(absent) + " skipped it or " + c.Names(waiting) +
                   " issued one too many; both are named)";
        } else {
          sum = "HANG: " + opname + " on " + c.CommLabel(ci) + " never completed; " + c.Names(waiting) + " waited " +
                Dur(waited) + "; the missing " + RankList(nf) +
                (unknown.empty() ? " gave no trace file" : ": no readable record of whether they joined");
        }
        f.set_summary(sum);
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        double wlo = 1e300, whi = 0;
        for (uint32_t oi : unfinished) {
          lo = std::min(lo, m.ops[oi].start_ns);
          hi = std::max(hi, m.ops[oi].start_ns);
          wlo = std::min(wlo, c.WaitSec(m.ops[oi]));
          whi = std::max(whi, c.WaitSec(m.ops[oi]));
        }
        AddEvidence(&f, c.Names(waiting),
                    "in " + opname + " since " + At(c.T(lo)) + (hi - lo > 10000000 ? " to " + At(c.T(hi)) : "") +
                        ", waited " + Dur(wlo) + (whi - wlo > 0.05 ? " to " + Dur(whi) : "") +
                        (stuck_named ? "; stuck reports name it" : ""));
        if (!absent.empty() && !nf.empty())
          AddEvidence(&f, RankList(nf), "no trace file or a damaged one: cannot tell whether it joined");
        Emit(&out, EarliestStart(m, ops), std::move(f));
        break;
      }
      if (absent.empty() && no_file.empty() && hung) {
        // 4. Stuck in progress; a mismatch at or before this op explains it
        // instead. One per communicator; the scan goes on, since a later
        // collective that a rank skipped (found above) is the better answer:
        // a rank that skipped one races ahead and hangs first in the next.
        if (mismatch_seq[ci] != 0 && mismatch_seq[ci] <= mt.seq) break;
        if (stuck_found) continue;
        stuck_found = true;
        Finding f;
        f.set_kind(report::STUCK_IN_PROGRESS);
        SetComm(c, ci, &f);
        f.set_func(func);
        f.set_seq(mt.seq);
        SetOp(mt, &f);
        f.set_waited_sec(waited);
        std::vector<uint32_t> finished;
        for (auto& [r, oi] : present)
          if (m.ops[oi].state == OpState::kCompleted) finished.push_back(m.ops[oi].proc);
        for (uint32_t pr : waiting) *f.add_culprits() = c.Ref(pr, ci);
        std::string first_stall;
        std::vector<uint32_t> no_report, gpu_not_started, gpu_started, gpu_window;
        std::string windows;  // "rank 2's GPU is somewhere in AllReduce #1..#5", for the summary
        for (uint32_t oi : unfinished) {
          const Op& op = m.ops[oi];
          int64_t rt = kNoTime;
          const StuckOp* s = StuckOf(c, oi, &rt);
          if (s == nullptr) {
            no_report.push_back(op.proc);
            continue;
          }
          std::string line;
          if (s->gpu == 1) {
            // Completions from CUDA events: the event recorded before its
            // kernel has not completed, so the stream is still busy with
            // earlier work.
            gpu_not_started.push_back(op.proc);
            line = "its GPU never started it: earlier work on its stream has not finished";
            if (const StuckOp* w = WindowBefore(c, oi))
              line += " (somewhere in " + WindowName(c, *w) +
                      ", launched without CUDA events of their own: which one is not known)";
          } else if (s->gpu == 2) {
            gpu_started.push_back(op.proc);
            line = "its GPU started it and has not finished it";
          } else if (s->gpu == 3) {
            // Sampled events: its launch recorded none of its own. The GPU is
            // somewhere in the window, or past it: never this op alone.
            gpu_window.push_back(op.proc);
            const std::string w = WindowName(c, *s);
            line = "its GPU is somewhere in " + w +
                   " on its stream, or past it: those launches recorded no CUDA event of their own "
                   "(NCCLWATCH_EVENT_INTERVAL_US), so whether it reached this one is not known";
            if (gpu_window.size() <= 3)
              windows += "; " + c.Name(op.proc) + "'s GPU is somewhere in " + w + " (events sampled)";
          } else if (m.procs[op.proc].event_completions) {
            // CUDA events without an answer: no event before its kernel
            // (NCCLWATCH_START_EVENTS=0), or its pair taken over by later
            // launches. No channel counts either.
            line = "whether its GPU reached it is not known";
          } else {
            line = "kernel channels " + std::to_string(s->kernel_started) + " started, " +
                   std::to_string(s->kernel_stopped) + " stopped of " + std::to_string(s->nchannels);
          }
          if (s->proxy_started > 0)
            line += "; proxy ops " + std::to_string(s->proxy_stopped) + " of " + std::to_string(s->proxy_started) + " done";
          for (const ProxyState& x : s->proxy) {
            if (x.stopped || x.last_step >= x.nsteps) continue;
            report::StalledTransfer* st = f.add_stalled();
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
            if (first_stall.empty()) first_stall = c.Name(op.proc) + ": " + ProxyLine(c, ci, x);
          }
          AddEvidence(&f, c.Name(op.proc), line);
        }
        if (!no_report.empty()) {
          double stuck_sec = m.procs[no_report[0]].stuck_sec;
          AddEvidence(&f, c.Names(no_report),
                      "in flight " + Dur(waited) + "; no stuck report" +
                          (stuck_sec > 0 ? " (NCCLWATCH_STUCK_SEC=" + Printf("%g", stuck_sec) + " not reached)" : " (stuck reports off)"));
        }
        if (!finished.empty()) AddEvidence(&f, c.Names(finished), "completed it");
        std::string sum = "STUCK: " + opname + " on " + c.CommLabel(ci) + " was issued by every rank and never finished on " +
                          (finished.empty() ? "any (" + c.Names(waiting) + ")" : c.Names(waiting)) + " (in flight " +
                          Dur(waited) + ")";
        if (!gpu_not_started.empty()) {
          // The ranks whose GPU never reached the operation hold the others,
          // which started it and wait inside it for them.
          sum += gpu_not_started.size() == 1 ? "; " + c.Names(gpu_not_started) + "'s GPU never started it"
                                             : "; the GPUs of " + c.Names(gpu_not_started) + " never started it";
          if (!gpu_started.empty())
            sum += "; " + c.Names(gpu_started) + (gpu_started.size() == 1 ? " started it and waits" : " started it and wait");
          // Only when others did start it: where no GPU did, earlier work
          // holds them all, and this names no one new.
          if (!gpu_started.empty()) {
            f.clear_culprits();
            for (uint32_t pr : gpu_not_started) *f.add_culprits() = c.Ref(pr, ci);
            for (uint32_t pr : gpu_started) *f.add_waiting() = c.Ref(pr, ci);
          }
        }
        sum += windows;
        if (!first_stall.empty()) sum += "; " + first_stall;
        if (!gpu_not_started.empty() && !gpu_started.empty()) {
          f.set_cause(report::CAUSE_RESOURCES);
          f.set_cause_text(c.Names(gpu_not_started) + "'s GPU was busy with earlier work on its stream");
        } else if (!gpu_window.empty() && first_stall.empty()) {
          f.set_cause(report::CAUSE_UNKNOWN);
          f.set_cause_text(c.Names(gpu_window) + "'s GPU is somewhere in a window of operations launched without "
                           "CUDA events of their own (NCCLWATCH_EVENT_INTERVAL_US): which one holds it is not known");
        } else if (!first_stall.empty()) {
          f.set_cause(report::CAUSE_NETWORK);
          f.set_cause_text("the network: a transfer stopped while both ranks were in the operation (" + first_stall + ")");
        } else {
          f.set_cause(report::CAUSE_UNKNOWN);
          f.set_cause_text("cannot tell a busy GPU from the network: stuck reports with CUDA-event completions "
                           "(NCCLWATCH_COMPLETIONS=events) or proxy steps (NCCLWATCH_EVENTS=default,proxyop,proxystep) would");
        }
        f.set_summary(sum);
        Emit(&out, EarliestStart(m, ops), std::move(f));
      }
    }
  }
  return out;
}

}  // namespace ncclwatch::tools::diagnose_internal
