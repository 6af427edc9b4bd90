#include "tools/stats/check.h"

#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <tuple>

#include <google/protobuf/repeated_field.h>

#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"
#include "tools/stats/compare.h"
#include "tools/stats/stats.h"
#include "tools/stats/text.h"

namespace ncclwatch::tools {
namespace {

// A p99 needs this many samples to be more than the largest of them.
constexpr uint32_t kMinTailSamples = 100;
// A row whose interval reaches this change (in latency terms: 1.5x slower)
// without being significant cannot tell the regression the gate promises
// to catch from noise: NOISY.
constexpr double kNoisyRatio = 0.5;
// The same for arrival rows, in multiples of their floor.
constexpr double kNoisyArrivalFloors = 5.0;

enum class Source { kLatency, kDelay, kSkew, kLateness };

// One metric: which samples, which percentile, and how it is shown. Every
// metric is judged in latency terms (higher is worse); a bandwidth is shown
// as one (bytes over the latency), its change the latency's reciprocal.
struct MetricDef {
  const char* name;
  Source source;
  double percentile;
  const char* unit;
  bool bandwidth = false;
  bool tail = false;         // a p99: compared only with kMinTailSamples on both sides
  bool timed = true;         // measured from GPU or CPU times (StatRow.timing)
  // The row's own value of what is shown (bandwidths: at the median).
  std::function<bool(const stats::StatRow&)> has;
  std::function<double(const stats::StatRow&)> get;
};

#define NCCLWATCH_METRIC(n, src, p, unit, bw, tail, timed, field)                                          \
  MetricDef {                                                                                               \
    n, src, p, unit, bw, tail, timed, [](const stats::StatRow& r) { return r.has_##field(); },              \
        [](const stats::StatRow& r) { return r.field(); }                                                   \
  }

const std::vector<MetricDef>& Metrics() {
  static const std::vector<MetricDef> kMetrics = {
      NCCLWATCH_METRIC("latency_p50", Source::kLatency, 50, "us", false, false, true, latency_p50_us),
      NCCLWATCH_METRIC("latency_p99", Source::kLatency, 99, "us", false, true, true, latency_p99_us),
      NCCLWATCH_METRIC("algbw", Source::kLatency, 50, "GB/s", true, false, true, algbw_gbps),
      NCCLWATCH_METRIC("busbw", Source::kLatency, 50, "GB/s", true, false, true, busbw_gbps),
      NCCLWATCH_METRIC("delay_p50", Source::kDelay, 50, "us", false, false, false, delay_p50_us),
      NCCLWATCH_METRIC("delay_p99", Source::kDelay, 99, "us", false, true, false, delay_p99_us),
      NCCLWATCH_METRIC("skew_p50", Source::kSkew, 50, "us", false, false, false, skew_p50_us),
      NCCLWATCH_METRIC("skew_p99", Source::kSkew, 99, "us", false, true, false, skew_p99_us),
  };
  return kMetrics;
}
#undef NCCLWATCH_METRIC

constexpr char kArrival[] = "arrival";

const google::protobuf::RepeatedField<double>& SamplesOf(Source s, const stats::StatRow& r) {
  return s == Source::kDelay ? r.delay_us() : s == Source::kSkew ? r.skew_us() : r.latency_us();
}

const MetricDef* FindMetric(const std::string& name) {
  for (const MetricDef& m : Metrics())
    if (name == m.name) return &m;
  return nullptr;
}

// The communicator's size is part of the key: a row of an 8-rank job says
// nothing about a 4-rank one.
using Key = std::tuple<std::string, int32_t, std::string, int32_t>;
Key KeyOf(const stats::StatRow& r) { return Key(r.comm(), r.nranks(), r.func(), r.bucket_log2()); }
Key KeyOf(const stats::RankRow& r) { return Key(r.comm(), r.nranks(), "", r.rank()); }

stats::CheckItem ItemFor(const stats::StatRow& r) {
  stats::CheckItem it;
  it.set_comm(r.comm());
  it.set_func(r.func());
  it.set_bucket(r.bucket());
  it.set_bucket_log2(r.bucket_log2());
  return it;
}

stats::CheckItem ItemFor(const stats::RankRow& r) {
  stats::CheckItem it;
  it.set_comm(r.comm());
  it.set_rank(r.rank());
  return it;
}

std::string Fmt(double v, const char* fmt) {
  char buf[64];
  snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

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

// One line saying what the item is about.
std::string Describe(const stats::CheckItem& it) {
  if (it.status() == "missing" || it.status() == "new") return RowName(it) + ": " + it.note();
  std::string s = RowName(it) + " " + it.metric() + ": " + Value(it, true) + " -> " + Value(it, false);
  if (it.has_change_pct()) s += " (" + Change(it) + ", limit " + Limit(it) + ")";
  if (!it.note().empty()) s += "; " + it.note();
  return s;
}

// A percent change of a latency-like quantity shown as the change of its
// reciprocal (a bandwidth): +50% latency is -33.3% bandwidth.
double AsBandwidth(double latency_pct) { return (1.0 / (1.0 + latency_pct / 100.0) - 1.0) * 100.0; }

// Judges one metric of one row: the pooled samples of the baseline's runs
// against the run's. `per_run` holds each baseline run's samples (for the
// spread between runs), `floor` and `noisy` are in effect units (percent,
// or us for kDifference), latency terms.
void Judge(const std::vector<std::vector<double>>& per_run, const std::vector<double>& current, double percentile,
           Effect effect, double floor, double noisy, stats::CheckItem* item) {
  std::vector<double> pooled;
  for (const auto& r : per_run) pooled.insert(pooled.end(), r.begin(), r.end());
  SampleComparison c;
  if (!CompareSamples(pooled, current, percentile, effect, BootstrapOptions(), &c)) {
    item->set_status("skipped");
    item->set_note("baseline value is not positive");
    return;
  }
  const double scale = effect == Effect::kRatio ? 100.0 : 1.0;
  const double e = c.effect * scale, lo = c.low * scale, hi = c.high * scale;
  item->set_change_pct(e);
  item->set_change_low_pct(lo);
  item->set_change_high_pct(hi);
  // Several runs: the statistic moved from run to run by up to `spread`
  // from the pooled one; a change within it is what a rerun does, so the
  // floor rises by it (bounded: a spread past the NOISY limit makes the row
  // NOISY).
  double spread = 0;
  if (per_run.size() > 1)
    for (const auto& r : per_run) {
      if (r.empty()) continue;
      std::vector<double> v = r;
      const double stat = PercentileOf(&v, percentile);
      const double d = effect == Effect::kRatio ? (stat / c.baseline - 1.0) * 100.0 : stat - c.baseline;
      spread = std::max(spread, std::fabs(d));
    }
  const double limit = floor + spread;
  item->set_tolerance_pct(limit);
  if (spread >= noisy) {
    item->set_status("noisy");
    item->set_note("the baseline's runs differ by " + Fmt(spread, effect == Effect::kRatio ? "%.1f%%" : "%.1f us") +
                   " from one another");
  } else if (lo > 0 && e > limit) {
    item->set_status("regressed");
  } else if (hi < 0 && e < -limit) {
    item->set_status("improved");
  } else if (hi > std::max(noisy, limit)) {
    item->set_status("noisy");
    item->set_note("not significant, but the interval reaches " +
                   Fmt(hi, effect == Effect::kRatio ? "%+.1f%%" : "%+.1f us") + ": too noisy to judge");
  } else {
    item->set_status("ok");
  }
  if (spread > 0 && item->status() != "noisy")
    item->set_note("limit raised by the baseline's run-to-run spread (" +
                   Fmt(spread, effect == Effect::kRatio ? "%.1f%%" : "%.1f us") + ")");
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
  return regressed > 0 || error_findings > 0 || !incomplete.empty() || judged() == 0 ||
         (strict && (missing > 0 || noisy > 0));
}

CheckOptions DefaultCheckOptions() {
  CheckOptions o;
  o.tolerance_pct = {{"latency_p50", 10.0}, {"latency_p99", 20.0}, {"busbw", 10.0}, {kArrival, 10000.0}};
  return o;
}

std::vector<std::string> CheckMetrics() {
  std::vector<std::string> v;
  for (const MetricDef& m : Metrics()) v.push_back(m.name);
  v.push_back(kArrival);
  return v;
}

namespace {

// --allow-incomplete's names, each with the kind it accepts.
constexpr std::pair<const char*, report::IncompleteKind> kAllowable[] = {
    {"cuda-graphs", report::INCOMPLETE_CUDA_GRAPHS},
};

std::string AllowName(report::IncompleteKind kind) {
  for (const auto& [name, k] : kAllowable)
    if (k == kind) return name;
  return report::IncompleteKind_Name(kind);
}

}  // namespace

bool ParseAllowIncomplete(const std::vector<std::string>& args, CheckOptions* opts, std::string* error) {
  for (const std::string& arg : args) {
    std::stringstream ss(arg);
    std::string part;
    while (std::getline(ss, part, ',')) {
      if (part.empty()) continue;
      bool known = false;
      for (const auto& [name, kind] : kAllowable)
        if (part == name) {
          opts->allow_incomplete.insert(kind);
          known = true;
        }
      if (!known) {
        std::string names;
        for (const auto& [name, kind] : kAllowable) names += (names.empty() ? "" : ", ") + std::string(name);
        *error = "--allow-incomplete takes " + names +
                 " (operations captured into CUDA graphs, which cannot be matched across ranks); got '" + part + "'";
        return false;
      }
    }
  }
  return true;
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
    const bool arrival = metric == kArrival;
    const MetricDef* def = FindMetric(metric);
    if (eq == std::string::npos || (def == nullptr && !arrival)) {
      std::string names;
      for (const std::string& n : CheckMetrics()) names += (names.empty() ? "" : ", ") + n;
      *error = "--tolerance wants METRIC=PCT (arrival=TIME) with METRIC one of " + names + "; got '" + part + "'";
      return false;
    }
    std::string v = part.substr(eq + 1);
    if (v == "off") {
      opts->tolerance_pct.erase(metric);
      continue;
    }
    // Arrival is a time (a rank's lateness is about 0 in a healthy job, so a
    // percent of it means nothing): "500us", "5ms", or us.
    double unit = 1;
    if (arrival && v.size() > 2 && v.compare(v.size() - 2, 2, "ms") == 0) {
      unit = 1000;
      v.resize(v.size() - 2);
    } else if (arrival && v.size() > 2 && v.compare(v.size() - 2, 2, "us") == 0) {
      v.resize(v.size() - 2);
    } else if (!arrival && !v.empty() && v.back() == '%') {
      v.pop_back();
    }
    char* end = nullptr;
    const double value = v.empty() ? NAN : strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(value) || value < 0) {
      *error = "--tolerance " + metric + ": '" + part.substr(eq + 1) + "' is not " +
               (arrival ? "a time >= 0 ('500us', '5ms')" : "a percentage >= 0") + " (or 'off')";
      return false;
    }
    if (def != nullptr && def->bandwidth && value >= 100) {
      *error = "--tolerance " + metric + ": a bandwidth cannot drop by " + part.substr(eq + 1) +
               " (a limit of 100% or more never fails); give less than 100";
      return false;
    }
    opts->tolerance_pct[metric] = value * unit;
  }
  if (!any) {
    *error = "--tolerance wants METRIC=PCT";
    return false;
  }
  return true;
}

CheckResult CompareStats(const stats::Stats& baseline, const stats::Stats& run, const CheckOptions& opts) {
  return CompareStats(std::vector<stats::Stats>{baseline}, run, opts);
}

CheckResult CompareStats(const std::vector<stats::Stats>& baselines, const stats::Stats& run,
                         const CheckOptions& opts) {
  CheckResult res;
  res.baseline_runs = static_cast<uint32_t>(baselines.size());
  res.run_notes.assign(run.notes().begin(), run.notes().end());
  std::map<Key, const stats::StatRow*> current;
  for (const stats::StatRow& r : run.rows()) current.emplace(KeyOf(r), &r);
  // Each key's row in each baseline run (nullptr: that run lacks it).
  std::map<Key, std::vector<const stats::StatRow*>> base;
  for (size_t i = 0; i < baselines.size(); ++i)
    for (const stats::StatRow& r : baselines[i].rows()) {
      auto& v = base[KeyOf(r)];
      v.resize(baselines.size(), nullptr);
      v[i] = &r;
    }

  std::vector<stats::CheckItem> missing, added;
  for (const auto& [key, runs] : base) {
    const stats::StatRow* b = nullptr;  // the first run that has it: its values are shown
    for (const stats::StatRow* r : runs)
      if (b == nullptr && r != nullptr) b = r;
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
      std::vector<std::vector<double>> per_run;
      uint32_t base_n = 0;
      for (const stats::StatRow* r : runs) {
        if (r == nullptr) continue;
        const auto& s = SamplesOf(m.source, *r);
        per_run.emplace_back(s.begin(), s.end());
        base_n += static_cast<uint32_t>(s.size());
      }
      const auto& cs = SamplesOf(m.source, c);
      const std::vector<double> cur(cs.begin(), cs.end());
      item.set_baseline_samples(base_n);
      item.set_current_samples(static_cast<uint32_t>(cur.size()));
      const uint32_t need = m.tail ? std::max(opts.min_samples, kMinTailSamples) : opts.min_samples;
      bool timing_differs = false;
      if (m.timed)
        for (const stats::StatRow* r : runs) timing_differs |= r != nullptr && r->timing() != c.timing();
      if (!item.has_current()) {
        item.set_status("skipped");
        item.set_note("no value in this run");
      } else if (base_n < need || cur.size() < need) {
        // A p99 of fewer than 100 samples is their maximum: one outlier.
        item.set_status("skipped");
        item.set_note("too few samples to compare (" + std::to_string(base_n) + " in the baseline, " +
                      std::to_string(cur.size()) + " in this run; at least " + std::to_string(need) + ")");
      } else if (timing_differs) {
        item.set_status("skipped");
        item.set_note("not comparable: timing from " + b->timing() + " in the baseline, " + c.timing() + " in this run");
      } else {
        // Judged in latency terms; a bandwidth's tolerance (a drop) becomes
        // the latency growth that gives it.
        const double floor = m.bandwidth ? (1.0 / (1.0 - tol->second / 100.0) - 1.0) * 100.0 : tol->second;
        Judge(per_run, cur, m.percentile, Effect::kRatio, floor, kNoisyRatio * 100.0, &item);
        if (m.bandwidth && item.has_change_pct()) {
          const double lo = item.change_low_pct(), hi = item.change_high_pct();
          item.set_change_pct(AsBandwidth(item.change_pct()));
          item.set_change_low_pct(AsBandwidth(hi));
          item.set_change_high_pct(AsBandwidth(lo));
          item.set_tolerance_pct(-AsBandwidth(item.tolerance_pct()));
        }
      }
      res.items.push_back(std::move(item));
    }
  }
  // Each rank's arrival: a straggler is a rank that reaches the
  // collectives later than it did.
  auto arrival_tol = opts.tolerance_pct.find(kArrival);
  if (arrival_tol != opts.tolerance_pct.end()) {
    std::map<Key, const stats::RankRow*> cur_ranks;
    for (const stats::RankRow& r : run.ranks()) cur_ranks.emplace(KeyOf(r), &r);
    std::map<Key, std::vector<const stats::RankRow*>> base_ranks;
    for (const stats::Stats& s : baselines)
      for (const stats::RankRow& r : s.ranks()) base_ranks[KeyOf(r)].push_back(&r);
    for (const auto& [key, runs] : base_ranks) {
      auto it = cur_ranks.find(key);
      if (it == cur_ranks.end()) continue;  // the row of its communicator says it is missing
      const stats::RankRow& c = *it->second;
      stats::CheckItem item = ItemFor(c);
      for (const std::string& p : c.procs()) item.add_procs(p);
      item.set_metric(kArrival);
      item.set_tolerance_pct(arrival_tol->second);
      if (runs[0]->has_lateness_p50_us()) item.set_baseline(runs[0]->lateness_p50_us());
      if (c.has_lateness_p50_us()) item.set_current(c.lateness_p50_us());
      std::vector<std::vector<double>> per_run;
      uint32_t base_n = 0;
      for (const stats::RankRow* r : runs) {
        per_run.emplace_back(r->lateness_us().begin(), r->lateness_us().end());
        base_n += static_cast<uint32_t>(r->lateness_us_size());
      }
      const std::vector<double> cur(c.lateness_us().begin(), c.lateness_us().end());
      item.set_baseline_samples(base_n);
      item.set_current_samples(static_cast<uint32_t>(cur.size()));
      if (base_n < opts.min_samples || cur.size() < opts.min_samples) {
        item.set_status("skipped");
        item.set_note("too few samples to compare (" + std::to_string(base_n) + " in the baseline, " +
                      std::to_string(cur.size()) + " in this run; at least " + std::to_string(opts.min_samples) + ")");
      } else {
        Judge(per_run, cur, 50, Effect::kDifference, arrival_tol->second,
              std::max(kNoisyArrivalFloors * arrival_tol->second, 1.0), &item);
        if (item.has_change_pct()) {
          item.set_baseline(item.current() - item.change_pct());
        }
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
    else if (s == "noisy") ++res.noisy;
    else if (s == "skipped") ++res.skipped;
    else if (s == "missing") ++res.missing;
    else if (s == "new") ++res.added;
    else ++res.ok;
  }
  res.strict = opts.strict;
  res.allow_incomplete = opts.allow_incomplete;
  return res;
}

void AddFindings(const report::Diagnosis& d, CheckResult* r) {
  for (const report::Finding& f : d.findings()) {
    r->findings.push_back(f);
    if (f.severity() == report::SEVERITY_ERROR) ++r->error_findings;
  }
  r->incomplete.clear();
  r->accepted_incomplete.clear();
  for (int i = 0; i < d.incomplete_size(); ++i) {
    // A diagnosis without kinds (older JSON) has none to accept.
    const report::IncompleteKind kind = i < d.incomplete_kinds_size()
                                            ? static_cast<report::IncompleteKind>(d.incomplete_kinds(i))
                                            : report::INCOMPLETE_OTHER;
    if (kind != report::INCOMPLETE_OTHER && r->allow_incomplete.count(kind) > 0)
      r->accepted_incomplete.emplace_back(kind, d.incomplete(i));
    else
      r->incomplete.push_back(d.incomplete(i));
  }
  r->diagnose_verdict = d.verdict();
}

namespace {

// Why the gate could not judge the run: JUnit errors, not failures.
std::vector<std::string> GateErrors(const CheckResult& r) {
  std::vector<std::string> e;
  if (!r.incomplete.empty()) e.push_back("the evidence is incomplete (" + r.incomplete.front() + ")");
  if (r.judged() == 0)
    e.push_back("nothing was judged: no metric of the baseline could be compared with this run (" +
                std::to_string(r.noisy) + " noisy, " + std::to_string(r.skipped) + " skipped, " +
                std::to_string(r.missing) + " missing)");
  return e;
}

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
  if (r.regressed) why.push_back(std::to_string(r.regressed) + " metric(s) regressed");
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

// Whether an item fails the gate, and whether it is reported as skipped.
bool ItemFails(const stats::CheckItem& i, bool strict) {
  const std::string& st = i.status();
  return st == "regressed" || (strict && (st == "missing" || st == "noisy"));
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
  x << "<testsuites name=\"ncclwatch check\" tests=\"" << stats_tests + diag_tests + 2 << "\" failures=\""
    << stats_failures + diag_failures << "\" errors=\"" << gate_errors << "\" skipped=\""
    << stats_skipped + gate_skipped << "\" time=\"0\">\n";
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

}  // namespace ncclwatch::tools
