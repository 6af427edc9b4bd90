// The readable report of `ncclwatch check` and its JSON (check.h):
// PrintCheck, CheckReportOf.

#include <stdio.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tools/stats/check.h"
#include "tools/stats/check_internal.h"
#include "tools/text/safe_text.h"

namespace ncclwatch::tools {
namespace check_internal {
namespace {

bool IsArrival(const stats::CheckItem& it) { return it.metric() == kArrival; }

std::string Value(const stats::CheckItem& it, bool baseline) {
  const bool has = baseline ? it.has_baseline() : it.has_current();
  if (!has) return "-";
  const MetricDef* m = FindMetric(it.metric());
  return Fmt(baseline ? it.baseline() : it.current(), "%.2f") +
         (m ? std::string(" ") + m->unit : IsArrival(it) ? " us" : "");
}

// The change and its interval: "+12.0% [+3.1%, +20.5%]", or us for arrival.
std::string Change(const stats::CheckItem& it) {
  if (!it.has_change_pct()) return "-";
  const char* f = IsArrival(it) ? "%+.1f us" : "%+.1f%%";
  std::string s = Fmt(it.change_pct(), f);
  if (it.has_change_low_pct()) s += " [" + Fmt(it.change_low_pct(), f) + ", " + Fmt(it.change_high_pct(), f) + "]";
  return s;
}

std::string Limit(const stats::CheckItem& it) {
  if (IsArrival(it)) return Fmt(it.tolerance_pct(), "%+.1f us");
  const MetricDef* m = FindMetric(it.metric());
  if (m == nullptr) return "-";
  return Fmt(m->bandwidth ? -it.tolerance_pct() : it.tolerance_pct(), "%+.1f%%");
}

std::string Procs(const stats::CheckItem& it) {
  std::string s;
  for (const std::string& p : it.procs()) s += (s.empty() ? "" : ",") + p;
  return s;
}

std::string RowName(const stats::CheckItem& it) {
  if (it.has_rank())
    return it.comm() + " rank " + std::to_string(it.rank()) + (it.procs_size() ? " (" + Procs(it) + ")" : "");
  return it.comm() + " " + it.func() + " " + it.bucket();
}

class Table {
 public:
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.size() <= 1; }
  void Print(std::ostream& out, const std::string& indent) const {
    std::vector<size_t> w;
    for (const auto& r : rows_) {
      w.resize(std::max(w.size(), r.size()), 0);
      for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], DisplayWidth(r[i]));
    }
    for (const auto& r : rows_) {
      std::string line = indent;
      for (size_t i = 0; i < r.size(); ++i) {
        if (i > 0) line += "  ";
        line += r[i];
        if (i + 1 < r.size()) line += std::string(w[i] - DisplayWidth(r[i]), ' ');
      }
      out << line << "\n";
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace

std::string Fmt(double v, const char* fmt) {
  char buf[64];
  snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string Describe(const stats::CheckItem& it) {
  if (it.status() == "missing" || it.status() == "new") return RowName(it) + ": " + it.note();
  std::string s = RowName(it) + " " + it.metric() + ": " + Value(it, true) + " -> " + Value(it, false);
  if (it.has_change_pct()) s += " (" + Change(it) + ", limit " + Limit(it) + ")";
  if (!it.note().empty()) s += "; " + it.note();
  return s;
}

const char* SeverityName(report::Severity s) {
  switch (s) {
    case report::SEVERITY_ERROR: return "ERROR";
    case report::SEVERITY_WARNING: return "WARNING";
    case report::SEVERITY_INFO: return "INFO";
    default: return "OK";
  }
}

std::vector<std::string> GateErrors(const CheckResult& r) {
  std::vector<std::string> e;
  if (!r.incomplete.empty()) e.push_back("the evidence is incomplete (" + r.incomplete.front() + ")");
  if (r.judged() == 0)
    e.push_back("nothing was judged: no metric of the baseline could be compared with this run (" +
                std::to_string(r.noisy) + " noisy, " + std::to_string(r.skipped) + " skipped, " +
                std::to_string(r.missing) + " missing)");
  return e;
}

bool ItemFails(const stats::CheckItem& i, bool strict) {
  const std::string& st = i.status();
  return st == "regressed" || (strict && (st == "missing" || st == "noisy"));
}

}  // namespace check_internal

using namespace check_internal;  // NOLINT: the implementation's own parts

namespace {

std::string Verdict(const CheckResult& r) {
  if (!r.failed()) {
    // A warning (a straggler) does not fail the gate, but it is said, as
    // diagnose says it.
    const bool warned = !r.findings.empty();
    std::string v = "PASS: " + std::to_string(r.judged()) + " metric(s) judged, none regressed" +
                    (r.noisy ? "; " + std::to_string(r.noisy) + " too noisy to judge" : std::string()) +
                    ", no diagnose error" + (warned ? "; diagnose warns: " + r.diagnose_verdict : std::string());
    // What the pass does not cover, on its first line: no one reads a PASS
    // further.
    if (!r.accepted_incomplete.empty())
      v += "; not checked (--allow-incomplete=" + AllowName(r.accepted_incomplete.front().first) +
           "): " + r.accepted_incomplete.front().second;
    return v;
  }
  std::vector<std::string> why;
  // One regression by name, a late rank's arrival first (it names the
  // rank, the straggler): the FAIL line is what a CI log shows.
  if (r.regressed) {
    std::string first;
    for (const bool arrival : {true, false})
      for (const stats::CheckItem& i : r.items)
        if (first.empty() && i.status() == "regressed" && IsArrival(i) == arrival) first = Describe(i);
    why.push_back(std::to_string(r.regressed) + " metric(s) regressed" + (first.empty() ? "" : ", " + first) +
                  (r.regressed > 1 ? " and " + std::to_string(r.regressed - 1) + " more" : ""));
  }
  // The gate says what diagnose says, word for word: one answer for one job.
  if (r.error_findings)
    why.push_back(std::to_string(r.error_findings) + " diagnose finding(s) of error severity (" + r.diagnose_verdict + ")");
  for (const std::string& e : GateErrors(r)) why.push_back(e);
  if (r.strict && r.missing) why.push_back(std::to_string(r.missing) + " baseline row(s) missing (--strict)");
  if (r.strict && r.noisy) why.push_back(std::to_string(r.noisy) + " metric(s) too noisy to judge (--strict)");
  std::string s;
  for (const std::string& w : why) s += (s.empty() ? "" : "; ") + w;
  return "FAIL: " + s;
}

}  // namespace

void PrintCheck(const CheckResult& r, const CheckOptions& opts, std::ostream& out) {
  out << Verdict(r) << "\n\n";
  int compared = 0;
  for (const stats::CheckItem& i : r.items)
    if (!i.metric().empty()) ++compared;
  out << "compared " << compared << " metric(s): " << r.regressed << " regressed, " << r.ok << " ok, " << r.improved
      << " improved, " << r.noisy << " noisy, " << r.skipped << " skipped; " << r.missing
      << " baseline row(s) missing from the run, " << r.added << " new row(s); baseline of " << r.baseline_runs
      << " run(s)\n";
  std::string tols;
  for (const std::string& m : CheckMetrics()) {
    auto t = opts.tolerance_pct.find(m);
    if (t != opts.tolerance_pct.end())
      tols += (tols.empty() ? "" : ", ") + m + " " + Fmt(t->second, "%g") + (m == kArrival ? " us" : "%");
  }
  out << "tolerances: " << (tols.empty() ? "none" : tols)
      << "; a metric regresses when its 98% interval excludes no change and the change passes the tolerance\n";
  for (const std::string& n : r.run_notes) out << "run: " << n << "\n";

  auto table_of = [&](const std::vector<std::string>& statuses) {
    Table t;
    t.Add({"status", "comm", "func", "size", "metric", "baseline", "run", "change [interval]", "limit", "note"});
    for (const std::string& st : statuses)
      for (const stats::CheckItem& i : r.items)
        if (i.status() == st)
          t.Add({i.status(), Printable(i.comm()),
                 i.has_rank() ? "rank " + std::to_string(i.rank()) + (i.procs_size() ? " (" + Printable(Procs(i)) + ")" : "")
                              : Printable(i.func()),
                 i.bucket().empty() ? "-" : i.bucket(), i.metric().empty() ? "-" : i.metric(), Value(i, true),
                 Value(i, false), Change(i), i.metric().empty() ? "-" : Limit(i), i.note()});
    return t;
  };
  Table regressed = table_of({"regressed"});
  if (!regressed.empty()) {
    out << "\nREGRESSED:\n";
    regressed.Print(out, "  ");
  }
  Table rest = table_of({"noisy", "missing", "skipped", "improved", "new"});
  if (!rest.empty()) {
    out << "\nnot failing" << (opts.strict ? " (except noisy and missing: --strict)" : "") << ":\n";
    rest.Print(out, "  ");
  }
  out << "\ndiagnose: " << r.findings.size() << " finding(s), " << r.error_findings << " of error severity\n";
  for (const report::Finding& f : r.findings)
    out << "  " << SeverityName(f.severity()) << " " << report::FindingKind_Name(f.kind()) << ": "
        << Printable(f.summary()) << "\n";
  for (const std::string& w : r.incomplete) out << "  incomplete evidence: " << Printable(w) << "\n";
  for (const auto& [kind, w] : r.accepted_incomplete)
    out << "  incomplete evidence, accepted (--allow-incomplete=" << AllowName(kind) << "): " << Printable(w) << "\n";
}

stats::CheckReport CheckReportOf(const CheckResult& r) {
  stats::CheckReport rep;
  rep.set_verdict(Verdict(r));
  rep.set_passed(!r.failed());
  rep.set_exit_status(r.failed() ? 1 : 0);
  for (const stats::CheckItem& i : r.items) *rep.add_items() = i;
  rep.set_regressed(r.regressed);
  rep.set_noisy(r.noisy);
  rep.set_ok(r.ok);
  rep.set_improved(r.improved);
  rep.set_skipped(r.skipped);
  rep.set_missing(r.missing);
  rep.set_added(r.added);
  rep.set_baseline_runs(r.baseline_runs);
  for (const std::string& n : r.run_notes) rep.add_run_notes(SanitizeUtf8(n));
  for (const std::string& e : GateErrors(r)) rep.add_errors(SanitizeUtf8(e));
  for (const auto& [kind, w] : r.accepted_incomplete) rep.add_accepted_incomplete(SanitizeUtf8(AllowName(kind) + ": " + w));
  for (const report::Finding& f : r.findings)
    (f.severity() == report::SEVERITY_ERROR ? rep.add_diagnose_errors() : rep.add_diagnose_warnings())
        ->assign(SanitizeUtf8(f.summary()));
  return rep;
}

stats::CheckReport UnusableCheckReport(const std::string& error) {
  stats::CheckReport rep;
  rep.set_verdict(SanitizeUtf8("UNUSABLE INPUT: " + error));
  rep.set_passed(false);
  rep.set_exit_status(2);
  rep.add_errors(SanitizeUtf8(error));
  return rep;
}

}  // namespace ncclwatch::tools
