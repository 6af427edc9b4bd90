// JUnitXml (check.h): the gate's result for a CI system.

#include <sstream>
#include <string>
#include <vector>

#include "tools/stats/check.h"
#include "tools/stats/check_internal.h"
#include "tools/text/safe_text.h"

namespace ncclwatch::tools {

using namespace check_internal;  // NOLINT: the implementation's own parts

std::string JUnitXml(const CheckResult& r, const CheckOptions& opts) {
  (void)opts;
  std::ostringstream stats_cases, diag_cases, gate_cases;
  int stats_tests = 0, stats_failures = 0, stats_skipped = 0;
  for (const stats::CheckItem& i : r.items) {
    ++stats_tests;
    const std::string classname =
        i.has_rank() ? "stats." + i.comm() + ".rank " + std::to_string(i.rank())
                     : "stats." + i.comm() + "." + i.func() + "." + i.bucket();
    const std::string name = i.metric().empty() ? "row" : i.metric();
    stats_cases << "    <testcase classname=\"" << XmlEscape(classname) << "\" name=\"" << XmlEscape(name)
                << "\" time=\"0\"";
    const std::string& st = i.status();
    const bool fail = ItemFails(i, r.strict);
    const bool skip = !fail && (st == "missing" || st == "new" || st == "skipped" || st == "noisy");
    const std::string what = Describe(i);
    if (fail) {
      ++stats_failures;
      stats_cases << ">\n      <failure type=\"" << XmlEscape(st) << "\" message=\"" << XmlEscape(st + ": " + what)
                  << "\">" << XmlEscape(what) << "</failure>\n    </testcase>\n";
    } else if (skip) {
      ++stats_skipped;
      stats_cases << ">\n      <skipped message=\"" << XmlEscape(st + ": " + what) << "\"/>\n    </testcase>\n";
    } else {
      stats_cases << ">\n      <system-out>" << XmlEscape(st + ": " + what) << "</system-out>\n    </testcase>\n";
    }
  }
  int diag_tests = 0, diag_failures = 0;
  for (const report::Finding& f : r.findings) {
    ++diag_tests;
    // What and where, no measured value: CI history follows the case.
    std::string name = report::FindingKind_Name(f.kind());
    if (!f.comm().empty()) name += " " + f.func() + " #" + std::to_string(f.seq()) + " on " + f.comm();
    for (const report::ProcRef& p : f.culprits()) name += (&p == &f.culprits(0) ? " by " : ",") + p.name();
    std::string detail = f.summary();
    for (const report::Evidence& e : f.evidence()) detail += "\n" + (e.proc().empty() ? "" : e.proc() + ": ") + e.text();
    diag_cases << "    <testcase classname=\"diagnose." << XmlEscape(report::FindingKind_Name(f.kind())) << "\" name=\""
               << XmlEscape(name) << "\" time=\"0\">\n";
    if (f.severity() == report::SEVERITY_ERROR) {
      ++diag_failures;
      diag_cases << "      <failure type=\"" << SeverityName(f.severity()) << "\" message=\"" << XmlEscape(f.summary())
                 << "\">" << XmlEscape(detail) << "</failure>\n";
    } else {
      diag_cases << "      <system-out>" << SeverityName(f.severity()) << ": " << XmlEscape(detail) << "</system-out>\n";
    }
    diag_cases << "    </testcase>\n";
  }
  if (r.findings.empty()) {
    ++diag_tests;
    diag_cases << "    <testcase classname=\"diagnose\" name=\"no findings\" time=\"0\"/>\n";
  }
  // The gate itself: two cases of stable names, errors when it could not
  // judge (a gate that judged nothing has not passed; neither has one on
  // incomplete evidence), so that no FAIL reads as green in CI.
  int gate_errors = 0, gate_skipped = 0;
  auto gate_case = [&](const char* name, const std::string& error, const std::string& skipped = "") {
    gate_cases << "    <testcase classname=\"check\" name=\"" << name << "\" time=\"0\"";
    if (error.empty() && skipped.empty()) {
      gate_cases << "/>\n";
      return;
    }
    if (error.empty()) {
      // Accepted incomplete evidence: not checked, and said so.
      ++gate_skipped;
      gate_cases << ">\n      <skipped message=\"" << XmlEscape(skipped) << "\"/>\n    </testcase>\n";
      return;
    }
    ++gate_errors;
    gate_cases << ">\n      <error type=\"gate\" message=\"" << XmlEscape(error) << "\">" << XmlEscape(error)
               << "</error>\n    </testcase>\n";
  };
  gate_case("evidence complete", r.incomplete.empty() ? "" : "the evidence is incomplete: " + r.incomplete.front(),
            r.accepted_incomplete.empty()
                ? ""
                : "not checked (--allow-incomplete=" + AllowName(r.accepted_incomplete.front().first) +
                      "): " + r.accepted_incomplete.front().second);
  std::vector<std::string> errors = GateErrors(r);
  gate_case("something judged", r.judged() == 0 ? errors.back() : "");
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  // Jenkins' junit-10.xsd allows no `skipped` on <testsuites>: each suite
  // counts its own.
  x << "<testsuites name=\"ncclwatch check\" tests=\"" << stats_tests + diag_tests + 2 << "\" failures=\""
    << stats_failures + diag_failures << "\" errors=\"" << gate_errors << "\" time=\"0\">\n";
  x << "  <testsuite name=\"stats\" tests=\"" << stats_tests << "\" failures=\"" << stats_failures
    << "\" errors=\"0\" skipped=\"" << stats_skipped << "\" time=\"0\">\n"
    << stats_cases.str() << "  </testsuite>\n";
  x << "  <testsuite name=\"diagnose\" tests=\"" << diag_tests << "\" failures=\"" << diag_failures
    << "\" errors=\"0\" skipped=\"0\" time=\"0\">\n"
    << diag_cases.str() << "  </testsuite>\n";
  x << "  <testsuite name=\"check\" tests=\"2\" failures=\"0\" errors=\"" << gate_errors
    << "\" skipped=\"" << gate_skipped << "\" time=\"0\">\n"
    << gate_cases.str() << "  </testsuite>\n";
  x << "</testsuites>\n";
  return x.str();
}

std::string UnusableJUnitXml(const std::string& error) {
  const std::string message = XmlEscape("unusable input: " + error);
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<testsuites name=\"ncclwatch check\" tests=\"1\" failures=\"0\" errors=\"1\" time=\"0\">\n"
    << "  <testsuite name=\"check\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\"0\">\n"
    << "    <testcase classname=\"check\" name=\"input usable\" time=\"0\">\n"
    << "      <error type=\"unusable input\" message=\"" << message << "\">" << message << "</error>\n"
    << "    </testcase>\n"
    << "  </testsuite>\n"
    << "</testsuites>\n";
  return x.str();
}

}  // namespace ncclwatch::tools
