#include "tools/diagnose/diagnose.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tools/diagnose/context.h"
#include "tools/diagnose/finders.h"

namespace ncclwatch::tools {

using namespace diagnose_internal;  // NOLINT: the implementation's own parts

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

}  // namespace ncclwatch::tools
