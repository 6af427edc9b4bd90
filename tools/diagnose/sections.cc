#include "tools/diagnose/sections.h"

#include <algorithm>
#include <string>
#include <vector>

namespace ncclwatch::tools::diagnose_internal {

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
        const uint32_t oi = OpOfRank(m, mt, r);
        if (oi == kNone) {
          all = false;
          break;
        }
        const Op& op = m.ops[oi];
        if (op.state != OpState::kCompleted) all = false;
        else done = std::max(done, op.done_ns);
      }
      if (!all) continue;
      ++n;
      if (n == 1 || mt.seq >= p->last_completed_seq()) {
        p->set_last_completed_seq(mt.seq);
        p->set_last_completed_func(m.Str(m.ops[Present(m, mt)[0].second].func));
        p->set_t_last_completed_sec(c.T(done));
      }
    }
    p->set_completed_everywhere(n + comm.settled_colls);
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
        // The op as the findings and merge name it (a p2p op's number is its
        // order between the pair, not the report's NCCL counter).
        std::string line = so.op != kNone && so.op < m.ops.size()
                               ? c.OpName(m.ops[so.op])
                               : (m.Str(so.func).empty() ? std::string("operation") : m.Str(so.func)) + " #" +
                                     std::to_string(so.seq);
        if (so.comm != kNone) line += " on " + c.CommLabel(so.comm);
        line += " for " + Dur(static_cast<double>(so.age_ns) / 1e9);
        // Completions from CUDA events say whether the GPU reached it;
        // kernel channels, how far it got.
        if (so.gpu == 1) line += "; its GPU had not started it";
        else if (so.gpu == 2) line += "; its GPU had started it";
        else if (so.gpu == 3)
          line += "; its GPU was somewhere in " + WindowName(c, so) +
                  " or past it (launched without CUDA events of their own: not known where)";
        else if (m.procs[pi].event_completions)
          line += "; whether its GPU had reached it is not known";
        else
          line += "; kernel channels " + std::to_string(so.kernel_started) + " started, " +
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
  for (const std::string& n : m.notes) add(report::InputIssue::DUPLICATE_FILE, "", n);
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
                      (p.drops.last_write_error.empty() ? "" : " (" + WriteErrorMeaning(p.drops.last_write_error) + ")"));
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
              " never completed in the file, but did: a later operation on the same communicator completed (NCCL "
              "did not deliver a kernel-channel event), or its stuck report saw every kernel channel stop (the "
              "completion record was lost)");
    for (const MaskChange& mc : p.mask_changes) {
      const std::string lost = MaskChangeLoss(mc);
      std::string text = "NCCL's event mask changed at " + At(c.T(mc.time_ns)) + " from " +
                         EventMaskNames(mc.old_mask) + " to " + EventMaskNames(mc.new_mask) + " (" +
                         Printf("0x%llx to 0x%llx", static_cast<unsigned long long>(mc.old_mask),
                                static_cast<unsigned long long>(mc.new_mask)) +
                         "; NCCL 2.31's RAS sets it for the whole job): ";
      if (lost.empty()) {
        text += "nothing the verdict needs was taken away";
      } else {
        text += "it stopped " + lost;
        if (mc.LostSource() || mc.damaged)
          text += "; operations enqueued from " + At(c.T(mc.since_ns)) +
                  " have no completion and are not judged hung for want of one";
      }
      add(report::InputIssue::MASK_CHANGE, name, text);
    }
    const size_t unproven = static_cast<size_t>(std::count_if(p.ops.begin(), p.ops.end(), [&](uint32_t oi) {
      return m.ops[oi].state == OpState::kInFlight && m.ops[oi].without_event;
    }));
    if (unproven > 0)
      add(report::InputIssue::NO_COMPLETION, name,
          Plural(unproven, "operation", "operations") +
              " launched without CUDA events of their own (NCCLWATCH_EVENT_INTERVAL_US) end the file in flight: "
              "no later launch on their stream proved them complete, so whether they finished is not known, and "
              "they are not judged hung (stuck reports name the window the GPU was in)");
    if (!p.ops.empty() && std::all_of(p.ops.begin(), p.ops.end(),
                                      [&](uint32_t oi) { return m.ops[oi].state == OpState::kUntracked; }))
      add(report::InputIssue::NO_COMPLETION, name,
          "completion not tracked (profiler API v" + std::to_string(p.api_version) +
              " or no kernel events captured): an operation counts as unfinished only where a rank never issued "
              "its side, so a hang inside an operation every rank issued is not seen");
  }
  uint64_t settled = 0;
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    const Proc& p = m.procs[pi];
    settled += p.settled_ops;
    if (p.cut_ops > 0)
      add(report::InputIssue::WINDOW, c.Name(pi),
          "watch let go of its " + Plural(p.cut_ops, "earliest operation", "earliest operations") +
              " before every rank had finished them (--window-ops): what came before is partial evidence");
  }
  if (settled > 0)
    add(report::InputIssue::WINDOW, "",
        "watch kept a recent window: it let go of " + Plural(settled, "operation", "operations") +
            " once every rank of their communicator had finished them; they count in the totals");
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

}  // namespace ncclwatch::tools::diagnose_internal
