#include "tools/diagnose/idle_cause.h"

#include <algorithm>
#include <string>
#include <vector>

#include "tools/diagnose/p2p_peers.h"

namespace ncclwatch::tools::diagnose_internal {
namespace {

// The process a finding's reference names (by its file), or kNone.
uint32_t ProcOf(const Ctx& c, const ProcRef& r) {
  for (uint32_t pr = 0; pr < c.m.procs.size(); ++pr)
    if (!r.file().empty() && c.m.procs[pr].path == r.file()) return pr;
  return kNone;
}

// Keeps the culprits (and their fates) whose process `keep` accepts; the
// others join the waiting.
template <typename Keep>
void KeepCulprits(Finding* f, Keep keep) {
  Finding was = *f;
  f->clear_culprits();
  f->clear_fates();
  for (int i = 0; i < was.culprits_size(); ++i) {
    if (keep(i)) {
      *f->add_culprits() = was.culprits(i);
      if (i < was.fates_size()) f->add_fates(was.fates(i));
    } else {
      *f->add_waiting() = was.culprits(i);
    }
  }
}

}  // namespace

void ExplainAbsent(const Ctx& c, uint32_t comm, const std::string& head, Finding* f) {
  if (f->culprits_size() == 0 || f->fates_size() != f->culprits_size()) return;
  std::vector<uint32_t> procs;
  for (const ProcRef& r : f->culprits()) {
    procs.push_back(ProcOf(c, r));
    if (procs.back() == kNone) return;
  }
  // Still inside an earlier collective of this communicator: held there.
  // Earlier as HeldByEarlier proves it: every rank in the finding's
  // collective issued that one before it (a rank that skipped one and
  // raced ahead is inside a later one instead).
  const Model& m = c.m;
  const uint32_t fop = f->op() == 0 || f->op() > m.ops.size() ? kNone : static_cast<uint32_t>(f->op() - 1);
  auto held = [&](int i) {
    const uint32_t b = c.oldest_inflight[procs[static_cast<size_t>(i)]];
    if (f->fates(i) != report::FATE_WAITS_ELSEWHERE || b == kNone || fop == kNone || m.ops[fop].match == kNone)
      return false;
    const Op& bop = m.ops[b];
    if (bop.comm != comm || bop.kind != OpKind::kColl || bop.match == kNone) return false;
    for (auto& [r, oi] : Present(m, m.matches[m.ops[fop].match])) {
      const uint32_t h = OpOfRank(m, m.matches[bop.match], r);
      if (h == kNone || m.ops[h].start_ns >= m.ops[oi].start_ns) return false;
    }
    return true;
  };
  std::vector<uint32_t> held_procs, idle;
  std::vector<bool> is_held;  // per culprit, before any moves
  bool other = false;
  for (int i = 0; i < f->culprits_size(); ++i) {
    is_held.push_back(held(i));
    if (is_held.back()) held_procs.push_back(procs[static_cast<size_t>(i)]);
    else if (f->fates(i) == report::FATE_IDLE) idle.push_back(procs[static_cast<size_t>(i)]);
    else other = true;
  }
  if (!held_procs.empty() && idle.empty() && !other) {
    SetCause(f, report::CAUSE_UNKNOWN,
             "cannot tell: " + c.Names(held_procs) + (held_procs.size() == 1 ? " is" : " are") +
                 " still inside an earlier operation of this communicator and never went on without this one; "
                 "what holds that operation holds this one, and its own finding tells");
    return;
  }
  if (other || idle.empty()) return;
  if (!held_procs.empty()) KeepCulprits(f, [&](int i) { return !is_held[static_cast<size_t>(i)]; });
  const PeersNeverMeet p = FindPeersNeverMeet(c, comm, idle);
  auto blamed = [&](uint32_t pr) { return std::find(p.culprits.begin(), p.culprits.end(), pr) != p.culprits.end(); };
  // A pairing that blames only ranks that joined makes no claim here.
  if (p.found && std::any_of(idle.begin(), idle.end(), blamed)) {
    // The ranks that named the wrong peer are the culprits; the others
    // wait on them.
    std::vector<uint32_t> now;
    for (const ProcRef& r : f->culprits()) now.push_back(ProcOf(c, r));
    KeepCulprits(f, [&](int i) { return blamed(now[static_cast<size_t>(i)]); });
    f->set_summary(head + ": " + p.sentence + " (" + kNeverMeetWhy + ")");
    for (const auto& [proc, text] : p.evidence) AddEvidence(f, proc, text);
    SetCause(f, report::CAUSE_PROGRAM, p.cause_text,
             "each rank's send or receive (Flight Recorder's where its NCCL records hold none) and whom it met "
             "(the lines below)");
    return;
  }
  SetCause(f, report::CAUSE_UNKNOWN,
           "cannot tell: " + c.Names(idle) + (idle.size() == 1 ? " is" : " are") +
               " alive with no NCCL operation in flight, and a host busy outside NCCL and a program that called "
               "something else (a send or receive whose peer never answers leaves no NCCL record: NCCL connects a "
               "pair at its first call, before the profiler sees an operation) leave the same records; what would "
               "tell: " + IdleWouldTell(c, idle, /*p2p=*/true));
}

}  // namespace ncclwatch::tools::diagnose_internal
