#include "tools/diagnose/find_ended.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace ncclwatch::tools::diagnose_internal {

namespace {

// The latest moment an operation of `proc` shows activity (enqueue or completion).
int64_t LastActivity(const Model& m, uint32_t proc) {
  int64_t t = kNoTime;
  for (uint32_t oi : m.procs[proc].ops) {
    const Op& op = m.ops[oi];
    t = std::max({t, op.start_ns, op.done_ns});
  }
  return t;
}

// Whether another member of one of `proc`'s communicators issued more
// collectives there than `proc` did: it stopped issuing while they went on.
bool Behind(const Model& m, uint32_t proc, const std::vector<std::vector<uint32_t>>& colls_issued) {
  for (uint32_t ci = 0; ci < m.comms.size(); ++ci) {
    bool member = false;
    uint32_t mine = 0, most = 0;
    for (const CommMember& mem : m.comms[ci].members) {
      if (mem.proc >= m.procs.size()) continue;
      if (mem.proc == proc) member = true, mine = colls_issued[ci][mem.proc];
      else most = std::max(most, colls_issued[ci][mem.proc]);
    }
    if (member && most > mine) return true;
  }
  return false;
}

// "AllReduce #4 on comm 'world' (4 ranks)" for the oldest unfinished op of
// `proc`, or "".
std::string OldestUnfinished(const Ctx& c, uint32_t proc) {
  for (uint32_t oi : c.m.procs[proc].ops)
    if (c.live.Unfinished(oi) || c.m.ops[oi].state == OpState::kUntracked) {
      const Op& op = c.m.ops[oi];
      if (op.state == OpState::kUntracked && op.index + 1 != c.m.procs[proc].ops.size()) continue;
      return c.OpName(op) + " on " + c.CommLabel(op.comm);
    }
  return "";
}

// Every operation completed, and `unended` did not end well: an idle tail
// on every one of them is a hang outside NCCL (ENDING_IDLE); without one,
// the work was done (ENDING_UNFINALIZED). Nothing where a file was cut.
void EndedAfterTheWork(const Ctx& c, const std::vector<uint32_t>& unended, std::vector<Ranked>* out) {
  const Model& m = c.m;
  double idle_min = 1e300;
  int64_t last_act = kNoTime;
  for (uint32_t pi : unended) {
    const Proc& p = m.procs[pi];
    const int64_t act = LastActivity(m, pi);
    last_act = std::max(last_act, act);
    const double limit = std::max(c.o.ended_idle_sec, 3.0 * p.heartbeat_ms / 1e3);
    const double idle = act == kNoTime ? 0 : static_cast<double>(p.last_ns - act) / 1e9;
    idle_min = std::min(idle_min, idle >= limit ? idle : -1.0);
  }
  // A file that ends mid-record was copied while written (or cut): its
  // end says nothing of how the process ended, and the verdict already
  // says the evidence is incomplete.
  bool cut = false;
  for (uint32_t pi : unended) cut |= m.procs[pi].cut_tail;
  if (idle_min <= 0 && cut) return;
  Finding f;
  f.set_kind(report::JOB_ENDED);
  if (idle_min <= 0) {
    f.set_ending(report::ENDING_UNFINALIZED);
    int64_t t_first = INT64_MAX, t_last = INT64_MIN;
    for (uint32_t pi : unended) {
      t_first = std::min(t_first, m.procs[pi].last_ns);
      t_last = std::max(t_last, m.procs[pi].last_ns);
    }
    std::vector<uint32_t> finalized;
    for (uint32_t pi = 0; pi < m.procs.size(); ++pi)
      if (std::find(unended.begin(), unended.end(), pi) == unended.end()) finalized.push_back(pi);
    const std::string span = unended.size() > 1 ? " within " + Dur(static_cast<double>(t_last - t_first) / 1e9) +
                                                      " of " + At(c.T(t_first))
                                                : " at " + At(c.T(t_first));
    f.set_summary(
        finalized.empty()
            ? "ENDED: every rank ended" + span + " without finalizing, after every operation had completed (the last at " +
                  At(c.T(last_act)) + "): the job was cancelled or its node lost between collectives, or it " +
                  "exited without destroying its communicators (ncclCommDestroy; destroy_process_group in PyTorch)"
            : "ENDED: " + c.Names(unended) + " ended" + span + " without finalizing, after every operation had " +
                  "completed, while " + c.Names(finalized) + " finalized: ended at the end, crashed in teardown, " +
                  "or exited without destroying their communicators");
    for (uint32_t pi : unended)
      AddEvidence(&f, c.Name(pi), "last operation: " + LastOpText(c, pi, kNone) + "; ended at " +
                                       At(c.T(m.procs[pi].last_ns)) + ", no finalize");
    SetCause(&f, report::CAUSE_UNKNOWN,
             "cannot tell: the scheduler's log tells a cancel or a lost node; a job whose ranks destroy "
             "their communicators before they exit leaves a finalize in every file, and an OK here");
    Emit(out, last_act, std::move(f));
    return;
  }
  f.set_ending(report::ENDING_IDLE);
  for (uint32_t pi : unended) *f.add_culprits() = c.Ref(pi);
  f.set_waited_sec(idle_min);
  f.set_summary("ENDED: " + std::string(unended.size() == m.procs.size() ? "every rank" : c.Names(unended)) +
                " sat idle outside NCCL for at least " + Dur(idle_min) +
                " before the end, every operation completed (the last at " + At(c.T(last_act)) +
                "); no rank finalized: the job hung outside NCCL (a data loader, a store or barrier, "
                "communicator creation, a blocked thread) and was ended");
  for (uint32_t pi : unended)
    AddEvidence(&f, c.Name(pi), "last operation: " + LastOpText(c, pi, kNone) + "; last sign of life at " +
                                     At(c.T(m.procs[pi].last_ns)) + "; no finalize");
  // Every rank idle outside NCCL is what a busy host leaves, and what a
  // program waiting on itself leaves too (a store or barrier some rank
  // never reached, the creation of a communicator whose peer never came:
  // PyTorch makes a pair's at its first send or receive): nothing in the
  // files separates them.
  bool fr = false;
  for (const Comm& comm : m.comms) fr |= !comm.process_group.empty();
  SetCause(&f, report::CAUSE_UNKNOWN,
           std::string("cannot tell: a host busy outside NCCL and a program waiting on itself (a store or "
                       "barrier, communicator creation) leave the same records; what would tell: ") +
               (fr ? "" : "Flight Recorder dumps (--fr), or ") +
               "a Python stack of each rank (NCCLWATCH_ON_STUCK='py-spy dump --pid %p', or py-spy dump while it "
               "hangs)");
  Emit(out, last_act, std::move(f));
}

// Who stopped first, of a job whose work was in flight when it ended.
struct First {
  uint32_t proc = kNone;  // kNone: no one stopped first
  std::string why;        // why it is taken to be first
  std::vector<uint32_t> tied;  // behind ranks the records cannot order before or after it
};

// `by_end`: the processes whose end is known, by the end of their files.
First WhoEndedFirst(const Model& m, const std::vector<uint32_t>& by_end) {
  std::vector<std::vector<uint32_t>> colls_issued(m.comms.size(), std::vector<uint32_t>(m.procs.size(), 0));
  for (const Op& op : m.ops)
    if (op.kind == OpKind::kColl && op.comm < m.comms.size()) ++colls_issued[op.comm][op.proc];
  First first;
  // Behind ranks whose files end within a flush interval of the first's
  // cannot be told apart: a killed process's file ends up to one interval
  // before its death. Then every one of them is named, none alone.
  for (uint32_t pi : by_end) {
    if (!Behind(m, pi, colls_issued)) continue;
    if (first.proc == kNone) {
      first.proc = pi;
      first.why = "the others issued collectives it never did";
      continue;
    }
    const Proc& a = m.procs[first.proc];
    const int64_t tol = 1'000'000 * static_cast<int64_t>(std::max({a.flush_ms, m.procs[pi].flush_ms, 100u}));
    if (m.procs[pi].last_ns - a.last_ns <= tol) first.tied.push_back(pi);
  }
  // Unless its file ends clearly before every other one (the launcher ends
  // the rest together, 50 ms or more after the first death): a behind rank
  // that ended just after it was one of those the launcher ended.
  if (first.proc != kNone && !first.tied.empty()) {
    int64_t next = INT64_MAX;
    for (uint32_t pi : by_end)
      if (pi != first.proc) next = std::min(next, m.procs[pi].last_ns);
    if (next - m.procs[first.proc].last_ns >= 50'000'000) first.tied.clear();
  }
  if (first.proc == kNone && by_end.size() >= 2) {
    // Its file ends clearly before every other: more than two heartbeats
    // (a process writes at least one a heartbeat interval while it lives).
    const Proc& a = m.procs[by_end[0]];
    const Proc& b = m.procs[by_end[1]];
    const double gap = static_cast<double>(b.last_ns - a.last_ns) / 1e9;
    if (gap > std::max(2.0 * a.heartbeat_ms / 1e3, 1.0)) {
      first.proc = by_end[0];
      first.why = "its file ends " + Dur(gap) + " before any other";
    }
  }
  return first;
}

// The oldest unfinished operation of the first of `procs` that has one, or "".
std::string FirstUnfinished(const Ctx& c, const std::vector<uint32_t>& procs) {
  std::string in;
  for (uint32_t pi : procs)
    if (in.empty()) in = OldestUnfinished(c, pi);
  return in;
}

// ENDING_ONE_FIRST without a single culprit: several behind ranks whose
// files end closer than the records can order them.
void SeveralEndedFirst(const Ctx& c, const First& first, const std::vector<uint32_t>& by_end, Finding* f) {
  const Model& m = c.m;
  std::vector<uint32_t> firsts = {first.proc};
  firsts.insert(firsts.end(), first.tied.begin(), first.tied.end());
  std::sort(firsts.begin(), firsts.end(), [&](uint32_t a, uint32_t b) { return c.Name(a) < c.Name(b); });
  std::vector<uint32_t> rest;
  for (uint32_t pi : by_end)
    if (std::find(firsts.begin(), firsts.end(), pi) == firsts.end()) rest.push_back(pi);
  f->set_ending(report::ENDING_ONE_FIRST);
  for (uint32_t pi : firsts) *f->add_culprits() = c.Ref(pi);
  for (uint32_t pi : rest) *f->add_waiting() = c.Ref(pi);
  const double spread = static_cast<double>(m.procs[firsts.size() > 1 ? first.tied.back() : first.proc].last_ns -
                                            m.procs[first.proc].last_ns) / 1e9;
  const std::string in = FirstUnfinished(c, rest);
  f->set_summary("ENDED: one of " + c.Names(firsts) + " ended first, without finalizing, at " +
                 At(c.T(m.procs[first.proc].last_ns)) + "; both stopped issuing where the others went on, and their "
                 "files end within " + Dur(spread) + " of each other, closer than the records can order them; " +
                 (rest.empty() ? std::string("no other rank") : c.Names(rest)) + " ended after them without finishing" +
                 (in.empty() ? std::string() : ", in " + in) + ": the job was ended after one of them ended");
  for (uint32_t pi : firsts)
    AddEvidence(f, c.Name(pi), std::string(m.procs[pi].finalized ? "finalized" : "no finalize") +
                                   "; last sign of life at " + At(c.T(m.procs[pi].last_ns)) +
                                   "; last operation: " + LastOpText(c, pi, kNone));
  SetCause(f, report::CAUSE_UNKNOWN, "cannot tell which of " + c.Names(firsts) +
                                         " ended first, nor why: their logs (an exception, a signal, an exit) tell");
}

// ENDING_ONE_FIRST: one process ended first and the job was ended after it.
void OneEndedFirst(const Ctx& c, const First& first, const std::vector<uint32_t>& by_end, Finding* f) {
  const Model& m = c.m;
  const Proc& p = m.procs[first.proc];
  std::vector<uint32_t> rest;
  for (uint32_t pi : by_end)
    if (pi != first.proc) rest.push_back(pi);
  f->set_ending(report::ENDING_ONE_FIRST);
  *f->add_culprits() = c.Ref(first.proc);
  for (uint32_t pi : rest) *f->add_waiting() = c.Ref(pi);
  f->set_t_last_sign_of_life_sec(c.T(p.last_ns));
  const double after = static_cast<double>(m.procs[by_end.back()].last_ns - p.last_ns) / 1e9;
  f->set_silent_sec(after);
  const std::string how = p.finalized ? "its communicators finalized or aborted (the process exited by itself)"
                                      : "without finalizing (killed or crashed)";
  std::string sum = "ENDED: " + c.Name(first.proc) + " ended first, " + how + ", at " + At(c.T(p.last_ns)) +
                    "; last operation: " + LastOpText(c, first.proc, kNone);
  const std::string in = FirstUnfinished(c, rest);
  sum += "; " + (rest.empty() ? std::string("no other rank") : c.Names(rest)) + " ended " +
         (after > 0 ? "up to " + Dur(after) + " after it" : "with it") + " without finishing" +
         (in.empty() ? std::string() : ", in " + in) + ": the job was ended after " + c.Name(first.proc) + " ended";
  f->set_summary(sum);
  AddEvidence(f, c.Name(first.proc), std::string(p.finalized ? "finalized" : "no finalize") +
                                         "; last sign of life at " + At(c.T(p.last_ns)) + "; " + first.why +
                                         (p.cut_tail ? "; its file ends mid-record" : ""));
  for (uint32_t pi : rest) {
    const std::string u = OldestUnfinished(c, pi);
    AddEvidence(f, c.Name(pi), (u.empty() ? "nothing in flight" : "in " + u) + "; ended at " +
                                   At(c.T(m.procs[pi].last_ns)) +
                                   (m.procs[pi].finalized ? " (finalized: aborted)" : ", no finalize"));
  }
  if (p.finalized) {
    SetCause(f, report::CAUSE_PROGRAM,
             "program logic: " + c.Name(first.proc) + " exited by itself (an exception, exit()); its log says why",
             c.Name(first.proc) + " finalized its communicators and ended first, with operations in flight");
  } else {
    SetCause(f, report::CAUSE_RESOURCES,
             c.Name(first.proc) + "'s process was killed or crashed (the OOM killer, a signal, os._exit); "
                                  "its log or the kernel log says which",
             c.Name(first.proc) + "'s file ends first, without a finalize, with operations in flight");
  }
}

// ENDING_ALL_AT_ONCE: no rank stopped first.
void AllEndedAtOnce(const Ctx& c, const std::vector<uint32_t>& by_end, Finding* f) {
  const Model& m = c.m;
  f->set_ending(report::ENDING_ALL_AT_ONCE);
  const int64_t t_first = m.procs[by_end.front()].last_ns;
  const int64_t t_end = m.procs[by_end.back()].last_ns;
  uint64_t in_flight = 0;
  for (uint32_t oi = 0; oi < m.ops.size(); ++oi) in_flight += c.live.Unfinished(oi) || m.ops[oi].ended_by_abort;
  const std::string in = FirstUnfinished(c, by_end);
  f->set_summary("ENDED: every rank ended within " + Dur(static_cast<double>(t_end - t_first) / 1e9) + " of " +
                 At(c.T(t_first)) + " without finishing" +
                 (in_flight > 0 ? ", " + Plural(in_flight, "operation", "operations") + " in flight" : std::string()) +
                 (in.empty() ? std::string() : " (" + in + ")") +
                 "; no rank stopped first: the job was cancelled or its node lost, or these files were copied "
                 "while it ran");
  for (uint32_t pi : by_end) {
    const std::string u = OldestUnfinished(c, pi);
    AddEvidence(f, c.Name(pi), (u.empty() ? "nothing in flight" : "in " + u) + "; ended at " +
                                   At(c.T(m.procs[pi].last_ns)) +
                                   (m.procs[pi].finalized ? " (finalized)" : ", no finalize"));
  }
  SetCause(f, report::CAUSE_UNKNOWN,
           "cannot tell: the scheduler's log tells a cancel or a lost node, a later copy of the files tells "
           "a job still running");
}

}  // namespace

std::vector<Ranked> FindEnded(const Ctx& c, bool error_found) {
  const Model& m = c.m;
  std::vector<Ranked> out;
  if (c.o.live || m.procs.empty() || m.ops.empty()) return out;
  if (error_found) return out;  // a cause of its own is named

  const size_t np = m.procs.size();
  std::vector<bool> open(np, false);  // has an operation that never finished
  bool work_done = true;              // every operation known to have finished
  for (uint32_t oi = 0; oi < m.ops.size(); ++oi) {
    const Op& op = m.ops[oi];
    if (c.live.Unfinished(oi) || op.ended_by_abort) open[op.proc] = true, work_done = false;
    // Untracked, or in flight after its stream's last event (sampled
    // events): not known to have finished.
    if (op.state == OpState::kUntracked || (op.state == OpState::kInFlight && op.without_event)) work_done = false;
  }
  std::vector<uint32_t> unended;  // processes that did not end well
  for (uint32_t pi = 0; pi < np; ++pi) {
    const Proc& p = m.procs[pi];
    if (p.last_ns == kNoTime || p.damaged_end) continue;  // nothing known of its end
    if (!p.finalized || open[pi]) unended.push_back(pi);
  }
  if (unended.empty()) return out;
  if (work_done) {
    EndedAfterTheWork(c, unended, &out);
    return out;
  }

  // Work was in flight when the job ended. Who stopped first?
  std::vector<uint32_t> by_end;
  for (uint32_t pi = 0; pi < np; ++pi)
    if (m.procs[pi].last_ns != kNoTime && !m.procs[pi].damaged_end) by_end.push_back(pi);
  std::sort(by_end.begin(), by_end.end(),
            [&](uint32_t a, uint32_t b) { return m.procs[a].last_ns < m.procs[b].last_ns; });
  const First first = WhoEndedFirst(m, by_end);
  Finding f;
  f.set_kind(report::JOB_ENDED);
  int64_t when = kNoTime;
  if (first.proc != kNone && !first.tied.empty()) {
    SeveralEndedFirst(c, first, by_end, &f);
    when = m.procs[first.proc].last_ns;
  } else if (first.proc != kNone) {
    OneEndedFirst(c, first, by_end, &f);
    when = m.procs[first.proc].last_ns;
  } else {
    AllEndedAtOnce(c, by_end, &f);
    when = m.procs[by_end.front()].last_ns;
  }
  Emit(&out, when, std::move(f));
  return out;
}

}  // namespace ncclwatch::tools::diagnose_internal
