#include "tools/stats/check.h"

#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <tuple>

#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"
#include "tools/stats/stats.h"
#include "tools/stats/text.h"

namespace ncclwatch::tools {
namespace {

// A p99 needs this many samples to be more than the largest of them.
constexpr uint32_t kMinTailSamples = 100;

// Percent from a row's p50 to its p99: how much the baseline itself varied.
double Spread(double p50, double p99) { return p50 > 0 && p99 > p50 ? (p99 - p50) / p50 * 100.0 : 0; }
double LatencySpread(const stats::StatRow& r) {
  return r.has_latency_p50_us() && r.has_latency_p99_us() ? Spread(r.latency_p50_us(), r.latency_p99_us()) : 0;
}

struct MetricDef {
  const char* name;
  bool higher_is_worse;
  bool depends_on_timing;  // measured from GPU or CPU times (StatRow.timing)
  const char* unit;
  std::function<bool(const stats::StatRow&)> has;
  std::function<double(const stats::StatRow&)> get;
  bool tail = false;  // a p99: compared only with kMinTailSamples on both sides
  bool skew = false;  // counted in skew samples, not latency samples
  // The baseline's own spread, in percent (medians and what derives from them).
  std::function<double(const stats::StatRow&)> spread;
};

#define NCCLWATCH_METRIC(n, field, worse, timed, unit, tail, skew, spread)                      \
  MetricDef {                                                                                   \
    n, worse, timed, unit, [](const stats::StatRow& r) { return r.has_##field(); },            \
        [](const stats::StatRow& r) { return r.field(); }, tail, skew, spread                   \
  }

const std::vector<MetricDef>& Metrics() {
  static const std::vector<MetricDef> kMetrics = {
      NCCLWATCH_METRIC("latency_p50", latency_p50_us, true, true, "us", false, false, LatencySpread),
      NCCLWATCH_METRIC("latency_p99", latency_p99_us, true, true, "us", true, false, nullptr),
      NCCLWATCH_METRIC("algbw", algbw_gbps, false, true, "GB/s", false, false, LatencySpread),
      NCCLWATCH_METRIC("busbw", busbw_gbps, false, true, "GB/s", false, false, LatencySpread),
      NCCLWATCH_METRIC("delay_p50", delay_p50_us, true, false, "us", false, false,
                       [](const stats::StatRow& r) { return Spread(r.delay_p50_us(), r.delay_p99_us()); }),
      NCCLWATCH_METRIC("delay_p99", delay_p99_us, true, false, "us", true, false, nullptr),
      NCCLWATCH_METRIC("skew_p50", skew_p50_us, true, false, "us", false, true,
                       [](const stats::StatRow& r) { return Spread(r.skew_p50_us(), r.skew_p99_us()); }),
      NCCLWATCH_METRIC("skew_p99", skew_p99_us, true, false, "us", true, true, nullptr),
  };
  return kMetrics;
}
#undef NCCLWATCH_METRIC

uint32_t SamplesOf(const MetricDef& m, const stats::StatRow& r) { return m.skew ? r.skew_samples() : r.samples(); }

const MetricDef* FindMetric(const std::string& name) {
  for (const MetricDef& m : Metrics())
    if (name == m.name) return &m;
  return nullptr;
}

// The communicator's size is part of the key: a row of an 8-rank job says
// nothing about a 4-rank one.
using Key = std::tuple<std::string, int32_t, std::string, int32_t>;
Key KeyOf(const stats::StatRow& r) { return Key(r.comm(), r.nranks(), r.func(), r.bucket_log2()); }

stats::CheckItem ItemFor(const stats::StatRow& r) {
  stats::CheckItem it;
  it.set_comm(r.comm());
  it.set_func(r.func());
  it.set_bucket(r.bucket());
  it.set_bucket_log2(r.bucket_log2());
  return it;
}

std::string Fmt(double v, const char* fmt) {
  char buf[64];
  snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string Value(const stats::CheckItem& it, bool baseline) {
  const bool has = baseline ? it.has_baseline() : it.has_current();
  if (!has) return "-";
  const MetricDef* m = FindMetric(it.metric());
  return Fmt(baseline ? it.baseline() : it.current(), "%.2f") + (m ? std::string(" ") + m->unit : "");
}

std::string Change(const stats::CheckItem& it) {
  return it.has_change_pct() ? Fmt(it.change_pct(), "%+.1f%%") : "-";
}

std::string Limit(const stats::CheckItem& it) {
  const MetricDef* m = FindMetric(it.metric());
  if (m == nullptr) return "-";
  return Fmt(m->higher_is_worse ? it.tolerance_pct() : -it.tolerance_pct(), "%+.1f%%");
}

std::string RowName(const stats::CheckItem& it) {
  return it.comm() + " " + it.func() + " " + it.bucket();
}

// One line saying what the item is about.
std::string Describe(const stats::CheckItem& it) {
  if (it.status() == "missing" || it.status() == "new") return RowName(it) + ": " + it.note();
  std::string s = RowName(it) + " " + it.metric() + ": " + Value(it, true) + " -> " + Value(it, false);
  if (it.has_change_pct()) s += " (" + Change(it) + ", limit " + Limit(it) + ")";
  if (!it.note().empty()) s += "; " + it.note();
  return s;
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

const char* SeverityName(report::Severity s) {
  switch (s) {
    case report::SEVERITY_ERROR: return "ERROR";
    case report::SEVERITY_WARNING: return "WARNING";
    case report::SEVERITY_INFO: return "INFO";
    default: return "OK";
  }
}

}  // namespace

bool CheckResult::failed() const {
  return regressed > 0 || error_findings > 0 || !incomplete.empty() || compared() == 0 || (strict && missing > 0);
}

CheckOptions DefaultCheckOptions() {
  CheckOptions o;
  o.tolerance_pct = {{"latency_p50", 10.0}, {"latency_p99", 20.0}, {"busbw", 10.0}};
  return o;
}

std::vector<std::string> CheckMetrics() {
  std::vector<std::string> v;
  for (const MetricDef& m : Metrics()) v.push_back(m.name);
  return v;
}

bool ParseTolerance(const std::string& arg, CheckOptions* opts, std::string* error) {
  std::stringstream ss(arg);
  std::string part;
  bool any = false;
  while (std::getline(ss, part, ',')) {
    if (part.empty()) continue;
    any = true;
    const size_t eq = part.find('=');
    const std::string metric = part.substr(0, eq);
    if (eq == std::string::npos || FindMetric(metric) == nullptr) {
      std::string names;
      for (const std::string& n : CheckMetrics()) names += (names.empty() ? "" : ", ") + n;
      *error = "--tolerance wants METRIC=PCT with METRIC one of " + names + "; got '" + part + "'";
      return false;
    }
    std::string v = part.substr(eq + 1);
    if (v == "off") {
      opts->tolerance_pct.erase(metric);
      continue;
    }
    if (!v.empty() && v.back() == '%') v.pop_back();
    char* end = nullptr;
    const double pct = v.empty() ? NAN : strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(pct) || pct < 0) {
      *error = "--tolerance " + metric + ": '" + part.substr(eq + 1) + "' is not a percentage >= 0 (or 'off')";
      return false;
    }
    opts->tolerance_pct[metric] = pct;
  }
  if (!any) {
    *error = "--tolerance wants METRIC=PCT";
    return false;
  }
  return true;
}

CheckResult CompareStats(const stats::Stats& baseline, const stats::Stats& run, const CheckOptions& opts) {
  CheckResult res;
  std::map<Key, const stats::StatRow*> current;
  for (const stats::StatRow& r : run.rows()) current.emplace(KeyOf(r), &r);
  std::map<Key, const stats::StatRow*> base;
  for (const stats::StatRow& r : baseline.rows()) base.emplace(KeyOf(r), &r);

  std::vector<stats::CheckItem> missing, added;
  for (const auto& [key, b] : base) {
    auto it = current.find(key);
    if (it == current.end()) {
      stats::CheckItem item = ItemFor(*b);
      item.set_status("missing");
      item.set_note("in the baseline (" + std::to_string(b->calls()) + " calls), not in this run");
      missing.push_back(std::move(item));
      continue;
    }
    const stats::StatRow& c = *it->second;
    for (const MetricDef& m : Metrics()) {
      auto tol = opts.tolerance_pct.find(m.name);
      if (tol == opts.tolerance_pct.end()) continue;
      if (!m.has(*b)) continue;  // nothing to hold the run to
      stats::CheckItem item = ItemFor(*b);
      item.set_metric(m.name);
      item.set_tolerance_pct(tol->second);
      item.set_baseline(m.get(*b));
      if (m.has(c)) item.set_current(m.get(c));
      if (!item.has_current()) {
        item.set_status("skipped");
        item.set_note("no value in this run");
      } else if (const uint32_t need = m.tail ? std::max(opts.min_samples, kMinTailSamples) : opts.min_samples;
                 SamplesOf(m, *b) < need || SamplesOf(m, c) < need) {
        // A p99 of fewer than 100 samples is their maximum: one outlier.
        item.set_status("skipped");
        item.set_note("too few samples to compare (" + std::to_string(SamplesOf(m, *b)) + " in the baseline, " +
                      std::to_string(SamplesOf(m, c)) + " in this run; at least " + std::to_string(need) + ")");
      } else if (m.depends_on_timing && b->timing() != c.timing()) {
        item.set_status("skipped");
        item.set_note("not comparable: timing from " + b->timing() + " in the baseline, " + c.timing() + " in this run");
      } else if (!(item.baseline() > 0)) {
        item.set_status("skipped");
        item.set_note("baseline value is not positive");
      } else {
        const double change = (item.current() - item.baseline()) / item.baseline() * 100.0;
        item.set_change_pct(change);
        // The baseline's own spread widens the limit of a median: a run whose
        // median moved less than the baseline's p50-to-p99 distance is within
        // what the baseline itself did.
        double limit = tol->second;
        const double spread = m.spread ? m.spread(*b) : 0;
        if (spread > limit) {
          limit = spread;
          item.set_note("limit widened to the baseline's own spread (p50 to p99)");
        }
        item.set_tolerance_pct(limit);
        const double worse = m.higher_is_worse ? change : -change;
        if (worse > limit) item.set_status("regressed");
        else if (worse < -limit) item.set_status("improved");
        else item.set_status("ok");
      }
      res.items.push_back(std::move(item));
    }
  }
  for (const auto& [key, c] : current) {
    if (base.count(key)) continue;
    stats::CheckItem item = ItemFor(*c);
    item.set_status("new");
    item.set_note("in this run (" + std::to_string(c->calls()) + " calls), not in the baseline");
    added.push_back(std::move(item));
  }
  for (auto& i : missing) res.items.push_back(std::move(i));
  for (auto& i : added) res.items.push_back(std::move(i));
  for (const stats::CheckItem& i : res.items) {
    const std::string& s = i.status();
    if (s == "regressed") ++res.regressed;
    else if (s == "improved") ++res.improved;
    else if (s == "skipped") ++res.skipped;
    else if (s == "missing") ++res.missing;
    else if (s == "new") ++res.added;
    else ++res.ok;
  }
  res.strict = opts.strict;
  return res;
}

void AddFindings(const report::Diagnosis& d, CheckResult* r) {
  for (const report::Finding& f : d.findings()) {
    r->findings.push_back(f);
    if (f.severity() == report::SEVERITY_ERROR) ++r->error_findings;
  }
  r->incomplete.assign(d.incomplete().begin(), d.incomplete().end());
  r->diagnose_verdict = d.verdict();
}

namespace {

std::string Verdict(const CheckResult& r, const CheckOptions& opts) {
  if (!r.failed()) {
    // A warning (a straggler) does not fail the gate, but it is said, as
    // diagnose says it.
    const bool warned = !r.findings.empty();
    return "PASS: " + std::to_string(r.compared()) + " metric(s) within tolerance, no diagnose error" +
           (warned ? "; diagnose warns: " + r.diagnose_verdict : std::string());
  }
  std::vector<std::string> why;
  if (r.regressed) why.push_back(std::to_string(r.regressed) + " metric(s) regressed");
  // The gate says what diagnose says, word for word: one answer for one job.
  if (r.error_findings)
    why.push_back(std::to_string(r.error_findings) + " diagnose finding(s) of error severity (" + r.diagnose_verdict + ")");
  if (!r.incomplete.empty()) why.push_back("the evidence is incomplete (" + r.incomplete.front() + ")");
  if (r.compared() == 0)
    why.push_back("nothing was compared: no row of the baseline has a metric this run can be held to (" +
                  std::to_string(r.skipped) + " skipped, " + std::to_string(r.missing) + " missing)");
  if (opts.strict && r.missing) why.push_back(std::to_string(r.missing) + " baseline row(s) missing (--strict)");
  std::string s;
  for (const std::string& w : why) s += (s.empty() ? "" : "; ") + w;
  return "FAIL: " + s;
}

}  // namespace

void PrintCheck(const CheckResult& r, const CheckOptions& opts, std::ostream& out) {
  out << Verdict(r, opts) << "\n\n";
  int compared = 0;
  for (const stats::CheckItem& i : r.items)
    if (!i.metric().empty()) ++compared;
  out << "compared " << compared << " metric(s): " << r.regressed << " regressed, " << r.ok << " ok, " << r.improved
      << " improved, " << r.skipped << " skipped; " << r.missing << " baseline row(s) missing from the run, "
      << r.added << " new row(s)\n";
  std::string tols;
  for (const std::string& m : CheckMetrics()) {
    auto t = opts.tolerance_pct.find(m);
    if (t != opts.tolerance_pct.end()) tols += (tols.empty() ? "" : ", ") + m + " " + Fmt(t->second, "%g") + "%";
  }
  out << "tolerances: " << (tols.empty() ? "none" : tols) << "\n";

  auto table_of = [&](const std::vector<std::string>& statuses) {
    Table t;
    t.Add({"status", "comm", "func", "size", "metric", "baseline", "run", "change", "limit", "note"});
    for (const std::string& st : statuses)
      for (const stats::CheckItem& i : r.items)
        if (i.status() == st)
          t.Add({i.status(), Printable(i.comm()), Printable(i.func()), i.bucket(), i.metric().empty() ? "-" : i.metric(),
                 Value(i, true), Value(i, false), Change(i), i.metric().empty() ? "-" : Limit(i), i.note()});
    return t;
  };
  Table regressed = table_of({"regressed"});
  if (!regressed.empty()) {
    out << "\nREGRESSED:\n";
    regressed.Print(out, "  ");
  }
  std::vector<std::string> other = {"missing", "skipped", "improved", "new"};
  Table rest = table_of(other);
  if (!rest.empty()) {
    out << "\nnot failing" << (opts.strict ? " (except missing rows: --strict)" : "") << ":\n";
    rest.Print(out, "  ");
  }
  out << "\ndiagnose: " << r.findings.size() << " finding(s), " << r.error_findings << " of error severity\n";
  for (const report::Finding& f : r.findings)
    out << "  " << SeverityName(f.severity()) << " " << report::FindingKind_Name(f.kind()) << ": "
        << Printable(f.summary()) << "\n";
  for (const std::string& w : r.incomplete) out << "  incomplete evidence: " << Printable(w) << "\n";
}

std::string JUnitXml(const CheckResult& r, const CheckOptions& opts) {
  std::ostringstream stats_cases, diag_cases;
  int stats_tests = 0, stats_failures = 0, stats_skipped = 0;
  for (const stats::CheckItem& i : r.items) {
    ++stats_tests;
    const std::string classname = "stats." + i.comm() + "." + i.func() + "." + i.bucket();
    const std::string name = i.metric().empty() ? "row" : i.metric();
    stats_cases << "    <testcase classname=\"" << XmlEscape(classname) << "\" name=\"" << XmlEscape(name)
                << "\" time=\"0\"";
    const std::string& st = i.status();
    const bool fail = st == "regressed" || (st == "missing" && opts.strict);
    const bool skip = !fail && (st == "missing" || st == "new" || st == "skipped");
    const std::string what = Describe(i);
    if (fail) {
      ++stats_failures;
      stats_cases << ">\n      <failure type=\"" << XmlEscape(st) << "\" message=\"" << XmlEscape(what) << "\">"
                  << XmlEscape(what) << "</failure>\n    </testcase>\n";
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
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"ncclwatch check\" tests=\"" << stats_tests + diag_tests << "\" failures=\""
    << stats_failures + diag_failures << "\" errors=\"0\" skipped=\"" << stats_skipped << "\">\n";
  x << "  <testsuite name=\"stats\" tests=\"" << stats_tests << "\" failures=\"" << stats_failures
    << "\" errors=\"0\" skipped=\"" << stats_skipped << "\" time=\"0\">\n"
    << stats_cases.str() << "  </testsuite>\n";
  x << "  <testsuite name=\"diagnose\" tests=\"" << diag_tests << "\" failures=\"" << diag_failures
    << "\" errors=\"0\" skipped=\"0\" time=\"0\">\n"
    << diag_cases.str() << "  </testsuite>\n";
  x << "</testsuites>\n";
  return x.str();
}

}  // namespace ncclwatch::tools
