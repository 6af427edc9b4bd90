#include "tools/diagnose/diagnose.h"

#include <stdio.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <future>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "tools/diagnose/context.h"
#include "tools/diagnose/find_chain_mismatch.h"
#include "tools/diagnose/find_cycles.h"
#include "tools/diagnose/find_dead.h"
#include "tools/diagnose/find_ended.h"
#include "tools/diagnose/find_late.h"
#include "tools/diagnose/find_mismatch.h"
#include "tools/diagnose/find_missing.h"
#include "tools/diagnose/find_p2p.h"
#include "tools/diagnose/find_stragglers.h"
#include "tools/diagnose/sections.h"
#include "tools/diagnose/versions.h"
#include "tools/arrivals/counts.h"
#include "tools/arrivals/digest.h"
#include "tools/json.h"

namespace ncclwatch::tools {

using namespace arrivals;  // NOLINT: the straggler counts, made beside the finders

using namespace diagnose_internal;  // NOLINT: the implementation's own parts

namespace {

// One reason the evidence is incomplete, and its kind (what `check
// --allow-incomplete` may accept). Made from the text alone for kind OTHER,
// which most reasons are.
struct Gap {
  Gap(std::string t, report::IncompleteKind k = report::INCOMPLETE_OTHER)  // NOLINT: implicit on purpose
      : text(std::move(t)), kind(k) {}
  std::string text;
  report::IncompleteKind kind;
};
using Gaps = std::vector<Gap>;

// Why the evidence cannot carry a verdict on its own: what is missing,
// damaged or lost, one short reason each, the most telling first.
// `error_found`: a finding of error severity explains how the job ended.
Gaps Incomplete(const Ctx& c, bool error_found) {
  const Model& m = c.m;
  Gaps why;
  // Writes that failed (a full disk, a size limit) come first: they are
  // why a file may hold no communicator or operation, and the fix is not
  // in the job.
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    const Drops& d = m.procs[pi].drops;
    if (d.write_failed > 0)
      why.push_back(c.Name(pi) + " lost " + Plural(d.write_failed, "record", "records") + " in failed writes" +
                    (d.last_write_error.empty() ? "" : " (" + WriteErrorMeaning(d.last_write_error) + ")"));
  }
  if (m.comms.empty() || m.ops.empty())
    why.emplace_back(m.comms.empty() ? "the files hold no communicator" : "the files hold no operation");
  // Files missing: the communicator missing the most ranks, and the launcher's world.
  uint32_t worst = kNone;
  int32_t worst_missing = 0;
  for (uint32_t ci = 0; ci < m.comms.size(); ++ci) {
    int32_t missing = 0;
    for (int32_t r = 0; r < m.comms[ci].nranks; ++r) missing += !c.HasFile(ci, r);
    if (missing > worst_missing) worst = ci, worst_missing = missing;
  }
  if (worst != kNone) {
    const Comm& comm = m.comms[worst];
    std::string ranks;
    int32_t shown = 0;
    for (int32_t r = 0; r < comm.nranks && shown < 4; ++r)
      if (!c.HasFile(worst, r)) ranks += (shown++ ? "," : "") + std::to_string(r);
    if (worst_missing > shown) ranks += ",...";
    why.push_back("no file for " + std::string(worst_missing == 1 ? "rank " : "ranks ") + ranks + " of " +
                  c.CommLabel(worst) + " (" + std::to_string(comm.nranks - worst_missing) + " of " +
                  std::to_string(comm.nranks) + " given)");
  }
  int32_t world = -1;
  std::vector<int32_t> launcher_ranks;
  for (const Proc& p : m.procs) {
    world = std::max(world, p.launcher_world_size);
    if (p.launcher_rank >= 0) launcher_ranks.push_back(p.launcher_rank);
  }
  std::sort(launcher_ranks.begin(), launcher_ranks.end());
  launcher_ranks.erase(std::unique(launcher_ranks.begin(), launcher_ranks.end()), launcher_ranks.end());
  if (world > 0 && static_cast<int32_t>(launcher_ranks.size()) < world && worst == kNone)
    why.push_back(std::to_string(launcher_ranks.size()) + " of the launcher's " + std::to_string(world) +
                  " ranks given");
  // NCCL's profiler API v1 to v3 (NCCL 2.23 to 2.26) tell neither a
  // communicator's size nor our rank in it: who should have joined an
  // operation is unknown, so no "OK" may rest on it (seen on 2x H200 with
  // NCCL 2.23.4: a skipped all_reduce read as healthy).
  size_t unsized = 0;
  for (const Comm& comm : m.comms) {
    // A size NCCL gave as impossible is said below, member by member.
    bool nccl_impossible = false;
    for (const CommMember& mem : comm.members) nccl_impossible |= mem.nccl_impossible;
    unsized += !nccl_impossible && (comm.nranks <= 0 || comm.size_guessed);
  }
  if (unsized > 0)
    why.push_back(Plural(unsized, "communicator", "communicators") +
                  " of unknown size and members (profiler API v1 to v3 give neither)");
  // NCCL's own impossible init values (CommMember::nccl_impossible): no
  // damage, but that member's rank, and so who should have joined, is unknown.
  for (uint32_t ci = 0; ci < m.comms.size(); ++ci)
    for (const CommMember& mem : m.comms[ci].members)
      if (mem.nccl_impossible)
        why.push_back(c.Name(mem.proc) + ": NCCL gave " + c.CommLabel(ci) + " nranks " +
                      std::to_string(mem.nccl_nranks) + ", rank " + std::to_string(mem.nccl_rank) +
                      " (impossible), so the evidence for that communicator is incomplete");
  // The first error said: it names the file and the place (a summary's
  // record that failed its checks), which the first line must show.
  if (!m.errors.empty())
    why.push_back(Plural(m.errors.size(), "path", "paths") + " could not be read (" + m.errors[0] +
                  (m.errors.size() > 1 ? "; and more" : "") + ")");
  std::vector<uint32_t> cut;
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    const Proc& p = m.procs[pi];
    if (p.damaged)
      why.push_back(c.Name(pi) + "'s file is damaged at offset " + std::to_string(p.damaged_at));
    else if (p.cut_tail && !p.finalized)
      cut.push_back(pi);
    const uint64_t other_lost = p.drops.lost() - std::min(p.drops.lost(), p.drops.write_failed);
    if (other_lost > 0) why.push_back(c.Name(pi) + " lost " + Plural(other_lost, "event", "events"));
    if (p.cut_ops > 0)
      why.push_back("watch let go of " + Plural(p.cut_ops, "operation", "operations") + " of " + c.Name(pi) +
                    " before every rank had finished them");
    if (!p.window_gap.empty()) why.push_back(p.window_gap);
  }
  // Numbers NCCL gave again for CUDA graphs (Proc::graph_repeats): one
  // reason for every process, naming the first number.
  std::vector<uint32_t> repeated;
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi)
    if (m.procs[pi].graph_repeats > 0) repeated.push_back(pi);
  if (!repeated.empty()) {
    const Op& first = m.ops[m.procs[repeated[0]].graph_repeat_op];
    why.emplace_back(c.Names(repeated) +
                         " ran NCCL calls captured into CUDA graphs, which NCCL does not number apart from the next "
                         "call (" + c.OpName(first) + " on " + c.CommLabel(first.comm) +
                         " held by several operations), so those operations cannot be matched across ranks",
                     report::INCOMPLETE_CUDA_GRAPHS);
    // NCCL reports no end of a graph's operations. A process that finalized
    // every communicator did not stop inside one (a replay that hangs holds
    // the next call behind it on the stream, or the host at its next sync);
    // one that ended otherwise may have, unless a finding already says how
    // it ended: a gap the gate never accepts. Every process of the job is
    // asked, not only those whose graph operations are in view (a summary
    // or a window may have let them go).
    std::vector<uint32_t> unfinished;
    if (!error_found)
      for (uint32_t pi = 0; pi < m.procs.size(); ++pi)
        if (!(m.procs[pi].finalized && m.procs[pi].clean)) unfinished.push_back(pi);
    if (!unfinished.empty())
      why.push_back(c.Names(unfinished) + (unfinished.size() == 1 ? " ended" : " each ended") +
                    " without finalizing every communicator, in a job that ran NCCL calls captured into CUDA "
                    "graphs, whose ends NCCL does not report: whether one of them hung is unknown");
  }
  // NCCL's mask lost what a verdict needs (MaskChangeLoss): the same loss on
  // several processes (RAS sets the mask for the whole job) is one reason.
  std::map<std::string, std::pair<std::vector<uint32_t>, int64_t>> mask_loss;  // what -> (procs, earliest)
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi)
    for (const MaskChange& mc : m.procs[pi].mask_changes) {
      if (!mc.TakesAwayEvidence()) continue;
      auto& [procs, when] = mask_loss.try_emplace(MaskChangeLoss(mc), std::vector<uint32_t>{}, mc.time_ns).first->second;
      if (procs.empty() || procs.back() != pi) procs.push_back(pi);
      when = std::min(when, mc.time_ns);
    }
  for (const auto& [what, at] : mask_loss)
    why.push_back("NCCL's event mask stopped " + what + " on " + c.Names(at.first) + " at " + At(c.T(at.second)));
  // The plugin writes whole batches, so a killed process's file ends at one
  // (every GPU recording here), unless the kill cut a write short, which
  // happens to one process, not to its peers waiting in a collective.
  // Several files that end mid-record without a finalize were copied while
  // they were written: what came after is unknown, so how the job ended is too.
  if (cut.size() >= 2)
    why.push_back((cut.size() == 1 ? c.Name(cut[0]) + "'s file ends" : "the files of " + c.Names(cut) + " end") +
                  " mid-record without a finalize (copied while written?)");
  return why;
}

// Findings blocked behind the root cause (the first error finding). A rank
// is blocked when it causes the root or waits in it, or in an operation
// already found blocked. Then:
//  - a rank missing from an operation (MISSING_RANK, UNMATCHED_P2P) is a
//    consequence when every rank it blames is blocked: they never joined
//    because they were held;
//  - an operation every rank issued that never finished (STUCK_IN_PROGRESS)
//    is a consequence when one of its ranks causes the root (a dead rank
//    inside it), or when one is blocked and it was issued no earlier than
//    the root's operation, less `slack_ns` for clock alignment (one hung
//    before it cannot be waiting for it).
// DEAD_RANK, mismatches, cycles and stragglers are never consequences: they
// are causes in their own right.
std::vector<bool> Consequences(const std::vector<Ranked>& found, int64_t slack_ns) {
  std::vector<bool> out(found.size(), false);
  if (found.empty() || found[0].f.severity() != report::SEVERITY_ERROR) return out;
  const Finding& root = found[0].f;
  std::set<std::string> causes, blocked;
  for (const report::ProcRef& p : root.culprits()) causes.insert(p.name());
  blocked = causes;
  for (const report::ProcRef& p : root.waiting()) blocked.insert(p.name());
  const int64_t from = found[0].when - slack_ns;
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 1; i < found.size(); ++i) {
      const Finding& f = found[i].f;
      if (out[i]) continue;
      bool is = false;
      if (f.kind() == report::MISSING_RANK || f.kind() == report::UNMATCHED_P2P) {
        // The ranks that never joined come first, one fate each; without a
        // majority the ranks that did are named after them (one of them may
        // have issued one too many). Those held by the root cause have a
        // reason to be absent: the other reading falls with it.
        const int absent = f.kind() == report::MISSING_RANK && f.fates_size() > 0 ? f.fates_size() : f.culprits_size();
        is = absent > 0;
        for (int i = 0; i < absent && i < f.culprits_size(); ++i) is = is && blocked.count(f.culprits(i).name()) > 0;
      } else if (f.kind() == report::STUCK_IN_PROGRESS) {
        bool cause = false, held = false;
        for (const report::ProcRef& p : f.culprits()) {
          cause |= causes.count(p.name()) > 0;
          held |= blocked.count(p.name()) > 0;
        }
        is = cause || (held && found[i].when >= from);
      }
      if (!is) continue;
      out[i] = grew = true;
      for (const report::ProcRef& p : f.culprits()) blocked.insert(p.name());
      for (const report::ProcRef& p : f.waiting()) blocked.insert(p.name());
    }
  }
  return out;
}

// The kind of cause a finding's evidence points to, where its finder did
// not say (STUCK_IN_PROGRESS and JOB_ENDED do, from what they saw), with
// the records it rests on.
void AssignCause(Finding* f) {
  if (f->cause() != report::CAUSE_UNSPECIFIED) return;
  const std::string who = f->culprits_size() == 1 ? f->culprits(0).name() : std::string("the culprits");
  // "rank 3's", "the culprits'".
  const std::string whose = f->culprits_size() == 1 ? who + "'s" : who + "'";
  switch (f->kind()) {
    case report::MISMATCH:
    case report::ORDER_MISMATCH:
    case report::UNMATCHED_P2P:
      SetCause(f, report::CAUSE_PROGRAM, "program logic: the ranks called NCCL differently",
               "each rank's record of its call (the lines below)");
      return;
    case report::WAIT_CYCLE:
      SetCause(f, report::CAUSE_PROGRAM, "program logic: the ranks used their communicators in different orders",
               "each rank of the cycle waits in a communicator that a rank it waits for has not reached (the lines "
               "below)");
      return;
    case report::MISSING_RANK: {
      bool died = false, idle = false, unknown = false, other = false;
      for (int x : f->fates()) {
        died |= x == report::FATE_DIED;
        idle |= x == report::FATE_IDLE;
        unknown |= x == report::FATE_NO_FILE || x == report::FATE_FILE_DAMAGED || x == report::FATE_UNSPECIFIED;
        other |= x == report::FATE_LEFT_CLEANLY || x == report::FATE_WAITS_ELSEWHERE;
      }
      if (died) {
        SetCause(f, report::CAUSE_RESOURCES,
                 whose + " process died (killed, crashed or frozen); its log or the kernel log says which",
                 "its heartbeats stopped without a finalize (the lines below)");
      } else if (idle && !other) {
        SetCause(f, report::CAUSE_RESOURCES,
                 whose + " host was busy outside NCCL (a data loader, the GIL, a blocked thread); "
                         "a Python stack (py-spy, NCCLWATCH_ON_STUCK) tells where",
                 "alive with no NCCL operation in flight (the lines below)");
      } else if (other) {
        SetCause(f, report::CAUSE_PROGRAM, "program logic: " + who + " went on without it (a skipped or extra call)",
                 "it left cleanly or waits in another operation, never having issued this one (the lines below)");
      } else {
        SetCause(f, report::CAUSE_UNKNOWN,
                 unknown ? "cannot tell: " + whose + " file is missing or damaged; it would tell" : "cannot tell");
      }
      return;
    }
    case report::DEAD_RANK:
      SetCause(f, report::CAUSE_RESOURCES,
               whose + " process died (killed, crashed or frozen); its log or the kernel log says which",
               "its heartbeats stopped without a finalize (the lines below)");
      return;
    case report::STRAGGLER:
      SetCause(f, report::CAUSE_RESOURCES, who + " reaches collectives late: its host or GPU is slower or busier",
               "its arrival times at the collectives (the lines below)");
      return;
    default:
      SetCause(f, report::CAUSE_UNKNOWN, "cannot tell");
  }
}

// " [cause: program logic]": the end of the verdict line.
std::string CauseTag(const Finding& f) {
  switch (f.cause()) {
    case report::CAUSE_PROGRAM: return " [cause: program logic]";
    case report::CAUSE_RESOURCES: {
      const std::string who = f.culprits_size() == 1 ? f.culprits(0).name() + "'s" : std::string("the ranks'");
      return " [cause: " + who + " resources]";
    }
    case report::CAUSE_NETWORK: return " [cause: the network]";
    default: return " [cause: cannot tell]";
  }
}

std::string Reasons(const Gaps& why) {
  std::string s;
  for (size_t i = 0; i < why.size() && i < 2; ++i) s += (i ? "; " : "") + why[i].text;
  if (why.size() > 2) s += "; and " + std::to_string(why.size() - 2) + " more (Input)";
  return s;
}

// The straggler finders' counts (CountForStragglers), made on a thread of
// their own beside the other finders from a const model and a copy of the
// options: the thread holds no reference to anything that is not const,
// and what it makes is handed over when Join returns it. Where no thread
// can be had (a limit on the host), Join counts on the caller's. A
// destructor that runs before Join (the caller threw) waits for the thread.
class StragglerCounter {
 public:
  StragglerCounter(const Model& model, DiagnoseOptions opts) {
    auto count = [&model, opts] { return CountForStragglers(model, opts); };
    try {
      counts_ = std::async(std::launch::async, count);
    } catch (const std::system_error&) {
      counts_ = std::async(std::launch::deferred, count);
    }
  }
  StragglerCounter(const StragglerCounter&) = delete;
  StragglerCounter& operator=(const StragglerCounter&) = delete;
  StragglerCounts Join() { return counts_.get(); }

 private:
  std::future<StragglerCounts> counts_;
};

// Moves the findings of `more` to the end of `found`.
void Append(std::vector<Ranked>* found, std::vector<Ranked> more) {
  found->insert(found->end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
}

// Every finder in its turn (find_*.h), each reading what the earlier ones
// returned where it needs it; the findings in the verdict's order.
std::vector<Ranked> RunFinders(const Ctx& c, StragglerCounter* counter) {
  std::vector<Ranked> found;
  Mismatches mismatches = FindMismatches(c);  // first: stuck detection defers to it
  Append(&found, std::move(mismatches.found));
  Append(&found, FindMissingAndStuck(c, mismatches.first_seq));
  Append(&found, FindLate(c));
  Append(&found, FindP2p(c));
  Append(&found, FindDead(c));
  Append(&found, FindCycles(c));
  Append(&found, FindOrderCycles(c, mismatches.first_seq));
  // After those that can name an operation it places.
  ChainMismatches chains = FindChainMismatches(c, found);
  std::vector<Ranked> kept;
  for (size_t i = 0; i < found.size(); ++i)
    if (!chains.absorbed[i]) kept.push_back(std::move(found[i]));
  found = std::move(kept);
  Append(&found, std::move(chains.found));
  Append(&found, FindStragglers(c, counter->Join()));
  bool error_before = false;
  for (const Ranked& r : found) error_before |= r.f.severity() == report::SEVERITY_ERROR;
  Append(&found, FindEnded(c, error_before));  // last: only where nothing else explains it
  for (Ranked& r : found) {
    AssignCause(&r.f);
    BackCause(&r.f);
  }
  std::stable_sort(found.begin(), found.end(), [](const Ranked& a, const Ranked& b) {
    return std::tie(a.precedence, a.when) < std::tie(b.precedence, b.when);
  });
  return found;
}

// Summaries that let operations go keep no arrival times of them, unless
// every process's arrivals are whole (summaries' arrival digests,
// ArrivalsWhole) and no stuck report could name a late rank's victim the
// summaries let go (a LATE_RANK without one needs a 10 s wait, which a
// summary never lets go: summary.h kLateWaitNs).
bool ArrivalsUnjudged(const Model& model, const DiagnoseOptions& opts) {
  bool no_stuck = true;
  for (const Proc& p : model.procs) no_stuck = no_stuck && p.stucks.empty();
  return model.summary_let_go > 0 && !(ArrivalsWhole(model, opts) && no_stuck);
}

// Where arrivals are unjudged, a straggler among the windows is not the
// job's: without an error it goes, behind one it is told for what it is.
// A straggler the arrivals sampled across the job show stands either way.
void WindowStragglers(bool error_found, std::vector<Ranked>* found) {
  if (!error_found)
    found->erase(std::remove_if(found->begin(), found->end(),
                                [](const Ranked& r) { return r.f.kind() == report::STRAGGLER && !r.sampled; }),
                 found->end());
  for (Ranked& r : *found)
    if (r.f.kind() == report::STRAGGLER && !r.sampled)
      r.f.set_summary(r.f.summary() + " (over the summaries' windows only: the last operations of each rank)");
}

// The findings into `d`: the independent ones as findings, those blocked
// behind the root cause as consequences (their ranks wait: none of them
// caused it); `d`'s severity the highest.
void AddFindings(const Model& model, std::vector<Ranked> found, Diagnosis* d) {
  // Operations of one step are issued within microseconds of each other;
  // 10 ms, or four times the clock alignment's error, is generous.
  const int64_t slack_ns = std::max<int64_t>(10'000'000, static_cast<int64_t>(4 * model.alignment_error_ns));
  const std::vector<bool> blocked = Consequences(found, slack_ns);
  for (size_t i = 0; i < found.size(); ++i) {
    Finding& f = found[i].f;
    if (f.severity() > d->severity()) d->set_severity(f.severity());
    if (!blocked[i]) {
      *d->add_findings() = std::move(f);
      continue;
    }
    for (const report::ProcRef& p : f.culprits()) {
      bool listed = false;
      for (const report::ProcRef& w : f.waiting()) listed |= w.name() == p.name();
      if (!listed) *f.add_waiting() = p;
    }
    f.clear_culprits();
    f.clear_fates();
    *d->add_consequences() = std::move(f);
  }
}

// The verdict without a finding: what was looked at, and what holds.
// `operations`, `done`: the job's totals, with those a windowed reader let
// go (model.h), and of those how many completed.
std::string OkVerdict(const Ctx& c, uint64_t operations, uint64_t done) {
  const Model& model = c.m;
  uint64_t open = 0;
  for (const Op& op : model.ops) {
    if (op.state == OpState::kCompleted) ++done;
    else if (op.state == OpState::kInFlight && c.FinalizeOf(op.proc, op.comm) == kNoTime) ++open;
  }
  size_t unfinalized = 0;
  for (const Proc& p : model.procs) unfinalized += !p.finalized;
  std::string v = "OK: no problem found in " + Plural(model.procs.size(), "process", "processes") + " (" +
                  Plural(model.comms.size(), "communicator", "communicators") + ", " +
                  Plural(operations, "operation", "operations") + ", " + Thousands(done) + " completed)";
  if (c.o.live) {
    // While the job runs (watch): what holds so far.
    v = "OK so far: no problem found in " + v.substr(v.find(" in ") + 4);
    if (open > 0) v += "; " + Plural(open, "operation", "operations") + " in flight";
  } else if (unfinalized > 0) {
    // FindEnded let it pass: every operation had completed, no idle tail.
    v += "; " + Plural(unfinalized, "process", "processes") +
         " ended without finalizing, after every operation had completed";
  }
  return v;
}

// A verdict on incomplete or damaged evidence says so first, and is never
// OK. `gap`: summaries could not settle some processes' windows.
void SayIncomplete(const Ctx& c, bool error_found, bool arrivals_unjudged, bool gap, Diagnosis* d) {
  const Model& model = c.m;
  Gaps why = Incomplete(c, error_found);
  if (arrivals_unjudged && !error_found)
    why.push_back("the summaries let go " + Plural(model.summary_let_go, "operation", "operations") +
                  ", whose arrival times (stragglers, late ranks) are not judged");
  for (const Gap& w : why) {
    d->add_incomplete(w.text);
    d->add_incomplete_kinds(w.kind);
  }
  if (gap) {
    // What the summaries could not settle may be where the fault is: no
    // finding of the windows names a culprit.
    for (Finding& f : *d->mutable_findings()) {
      f.clear_culprits();
      f.clear_fates();
    }
    d->set_verdict("INCOMPLETE: the summaries cannot tell what went wrong: " + Reasons(why));
  } else if (!why.empty()) {
    if (d->findings_size() > 0) {
      d->set_verdict("INCOMPLETE EVIDENCE (" + Reasons(why) + "): " + d->verdict());
    } else {
      d->set_verdict("INCOMPLETE: no problem found in the " + Plural(model.procs.size(), "process", "processes") +
                     " given, but " + Reasons(why) + ": cannot tell whether the job was healthy");
    }
  }
}

}  // namespace

Diagnosis Diagnose(const Model& model, const DiagnoseOptions& opts) {
  // The straggler finders' counts beside the other finders (tools/arrivals/counts.h),
  // on one thread: a second (the host's and the GPU's counts apart) gained
  // nothing clear on two cores, and its heap added 0.2 GB to the peak at
  // 16,384 ranks.
  StragglerCounter counter(model, opts);
  const Ctx c(model, opts);
  std::vector<Ranked> found = RunFinders(c, &counter);
  CaveatLostRecords(c, &found);

  // Summaries that let operations go keep no arrival times of them: a
  // straggler among the windows is not the job's, and no error found means
  // no OK either (tools/model/job.h).
  bool error_found = false;
  for (const Ranked& r : found) error_found |= r.f.severity() == report::SEVERITY_ERROR;
  bool gap = false;
  for (const Proc& p : model.procs) gap |= !p.window_gap.empty();
  const bool arrivals_unjudged = ArrivalsUnjudged(model, opts);
  if (arrivals_unjudged) WindowStragglers(error_found, &found);

  Diagnosis d;
  AddFindings(model, std::move(found), &d);
  FillProgress(c, &d);
  FillStuckReports(c, &d);
  FillInput(c, &d);
  FillClock(c, &d);
  d.set_processes(static_cast<uint32_t>(model.procs.size()));
  for (std::string& line : VersionLines(model)) d.add_versions(std::move(line));
  d.set_communicators(static_cast<uint32_t>(model.comms.size()));
  // Operations a windowed reader let go count in the job's totals (model.h).
  uint64_t operations = model.ops.size(), done = 0;
  for (const Proc& p : model.procs) {
    operations += p.settled_ops + p.cut_ops;
    done += p.settled_completed;
  }
  d.set_operations(operations);
  d.set_t_end_sec(c.T(c.t_end));
  d.set_verdict(d.findings_size() > 0 ? d.findings(0).summary() + CauseTag(d.findings(0))
                                      : OkVerdict(c, operations, done));
  SayIncomplete(c, error_found, arrivals_unjudged, gap, &d);
  d.set_exit_status(ExitStatus(d));
  return d;
}

int ExitStatus(const Diagnosis& d) {
  if (d.exit_status() == 2) return 2;
  if (d.incomplete_size() > 0) return 3;
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
  if (d.findings_size() > 0) {
    if (!d.findings(0).cause_text().empty()) out << "    cause: " << d.findings(0).cause_text() << "\n";
    evidence(d.findings(0));
  }
  // NCCL's RAS view (watch --ras, diagnose --ras): beside the verdict, never in it.
  if (d.has_ras() && !d.ras().error().empty()) {
    out << "\n" << d.ras().error() << "\n";
  } else if (d.has_ras()) {
    out << "\nRAS (" << d.ras().source() << "):\n";
    for (const std::string& l : d.ras().lines()) out << "  " << l << "\n";
    for (const std::string& l : d.ras().versus_traces()) out << "  " << l << "\n";
  }
  if (d.consequences_size() > 0) {
    out << "\nBlocked behind it (" << d.consequences_size() << "):\n";
    for (const Finding& f : d.consequences()) out << "  " << f.summary() << "\n";
  }
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
  for (int i = 0; i < d.versions_size(); ++i) out << (i == 0 ? "Versions: " : "          ") << d.versions(i) << "\n";
  return out.str();
}

std::string FormatJson(const Diagnosis& d) {
  return ReportJson(d);
}

}  // namespace ncclwatch::tools
