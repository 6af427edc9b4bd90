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
