#include "tools/stats/check.h"

#include <google/protobuf/repeated_field.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tools/stats/check_internal.h"
#include "tools/stats/compare.h"

namespace ncclwatch::tools {

using namespace check_internal;  // NOLINT: the implementation's own parts

namespace {

// A p99 needs this many samples to be more than the largest of them.
constexpr uint32_t kMinTailSamples = 100;
// And this many baseline runs: the slowest samples of one run move
// together (its iterations, its ranks, the synchronizations between them),
// so resampling them gives no interval for its p99; the spread between runs
// does. A rerun of a real benchmark job failed at +33% on its p99 with an
// interval of zero width, judged from one run against one.
constexpr size_t kMinTailRuns = 3;
// A row whose interval reaches this change (in latency terms: 1.5x slower)
// without being significant cannot tell the regression the gate promises
// to catch from noise: NOISY.
constexpr double kNoisyRatio = 0.5;
// The same for arrival rows, in multiples of their floor.
constexpr double kNoisyArrivalFloors = 5.0;

const google::protobuf::RepeatedField<double>& SamplesOf(Source s, const stats::StatRow& r) {
  return s == Source::kDelay ? r.delay_us() : s == Source::kSkew ? r.skew_us() : r.latency_us();
}

// A row's samples as the bootstrap takes them: at most kMaxRowSamples, as
// `stats` keeps them. A baseline made otherwise may hold millions, and the
// bootstrap's cost is its resamples times their number (8 M samples took
// hours); their evenly spaced quantiles keep the distribution's shape.
std::vector<double> Bounded(const google::protobuf::RepeatedField<double>& s) {
  std::vector<double> v(s.begin(), s.end());
  return v.size() > kMaxRowSamples ? SketchSamples(std::move(v), kMaxRowSamples) : v;
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

// A percent change of a latency-like quantity shown as the change of its
// reciprocal (a bandwidth): +50% latency is -33.3% bandwidth.
double AsBandwidth(double latency_pct) { return (1.0 / (1.0 + latency_pct / 100.0) - 1.0) * 100.0; }

// Judges one metric of one row: the pooled samples of the baseline's runs
// against the run's. `per_run` holds each baseline run's samples (for the
// spread between runs), `floor` and `noisy` are in effect units (percent,
// or us for kDifference), latency terms. `base_units`, `cur_units`: the
// independent draws each side holds (CompareSamples; 0: every sample).
void Judge(const std::vector<std::vector<double>>& per_run, const std::vector<double>& current, double percentile,
           Effect effect, double floor, double noisy, stats::CheckItem* item, size_t base_units = 0,
           size_t cur_units = 0) {
  std::vector<double> pooled;
  for (const auto& r : per_run) pooled.insert(pooled.end(), r.begin(), r.end());
  SampleComparison c;
  if (!CompareSamples(pooled, current, percentile, effect, BootstrapOptions(), &c, base_units, cur_units)) {
    item->set_status("skipped");
    item->set_note("baseline value is not positive");
    return;
  }
  const double scale = effect == Effect::kRatio ? 100.0 : 1.0;
  const double e = c.effect * scale, lo = c.low * scale, hi = c.high * scale;
  item->set_change_pct(e);
  if (percentile > 50 && std::fabs(e) > 1e-9 && hi - lo <= 1e-9 * std::fabs(e)) {
    // A tail that moved, yet every resample gave the same change: its few
    // slowest samples repeat one value, so the resampling shows no spread
    // that the tail has between runs: no judgment. (A median on samples
    // of one value each side is certain, and judged.)
    item->set_status("skipped");
    item->set_note("the resampled statistic never moved (an interval of zero width): its samples cannot tell");
    return;
  }
  // An interval is shown only where the resamples moved: every resample
  // giving one value (a median of zeros, say) is certain, judged, and shown
  // without an interval, never as one of zero width.
  if (hi - lo > 1e-9 * std::max(1.0, std::fabs(e))) {
    item->set_change_low_pct(lo);
    item->set_change_high_pct(hi);
  }
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
  // A change regresses when its interval is beyond what a rerun did (the
  // spread: with one baseline run, no change at all) and the change itself
  // is beyond the limit. Its interval clear of no change alone is not
  // enough: a rerun of a real job went +16.4% [+5.3%, +93.6%] against
  // baseline runs 6.2% apart and a limit of +16.2%, where the job's own
  // times had every row within 1.1x. A change clear of a wide spread is
  // judged all the same: a row slowed 3x against runs 95% apart is no
  // noise.
  if (lo > spread && e > limit) {
    item->set_status("regressed");
  } else if (hi < -spread && e < -limit) {
    item->set_status("improved");
  } else if (spread >= noisy) {
    item->set_status("noisy");
    item->set_note("the baseline's runs differ by " + Fmt(spread, effect == Effect::kRatio ? "%.1f%%" : "%.1f us") +
                   " from one another");
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

}  // namespace

bool CheckResult::failed() const {
  return regressed > 0 || error_findings > 0 || !incomplete.empty() || judged() == 0 ||
         (strict && (missing > 0 || noisy > 0));
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
      size_t base_runs = 0;
      for (const stats::StatRow* r : runs) base_runs += r != nullptr;
      for (const stats::StatRow* r : runs) {
        if (r == nullptr) continue;
        const auto& s = SamplesOf(m.source, *r);
        per_run.push_back(Bounded(s));
        base_n += static_cast<uint32_t>(s.size());
      }
      const auto& cs = SamplesOf(m.source, c);
      const std::vector<double> cur = Bounded(cs);
      item.set_baseline_samples(base_n);
      item.set_current_samples(static_cast<uint32_t>(cs.size()));
      const uint32_t need = m.tail ? std::max(opts.min_samples, kMinTailSamples) : opts.min_samples;
      bool timing_differs = false;
      if (m.timed)
        for (const stats::StatRow* r : runs) timing_differs |= r != nullptr && r->timing() != c.timing();
      if (!item.has_current()) {
        item.set_status("skipped");
        item.set_note("no value in this run");
      } else if (base_n < need || static_cast<uint32_t>(cs.size()) < need) {
        // A p99 of fewer than 100 samples is their maximum: one outlier.
        item.set_status("skipped");
        item.set_note("too few samples to compare (" + std::to_string(base_n) + " in the baseline, " +
                      std::to_string(cs.size()) + " in this run; at least " + std::to_string(need) + ")");
      } else if (timing_differs) {
        item.set_status("skipped");
        item.set_note("not comparable: timing from " + b->timing() + " in the baseline, " + c.timing() + " in this run");
      } else if (m.tail && base_runs < kMinTailRuns) {
        item.set_status("skipped");
        item.set_note("a p99 is judged against a baseline of " + std::to_string(kMinTailRuns) +
                      " runs or more (one --baseline each; " + std::to_string(base_runs) +
                      " given): one run's slowest samples move together, so their spread is not the p99's");
      } else {
        // Judged in latency terms; a bandwidth's tolerance (a drop) becomes
        // the latency growth that gives it.
        const double floor = m.bandwidth ? (1.0 / (1.0 - tol->second / 100.0) - 1.0) * 100.0 : tol->second;
        // A latency sample is one rank's share of a collective, and a
        // collective's ranks end it together: the independent draws are
        // its calls (StatRow.calls), not its samples; fewer where a rank's
        // neighbouring calls move together (StatRow.independent_calls).
        auto draws = [](const stats::StatRow& r) -> size_t {
          return r.has_independent_calls() ? std::min(r.independent_calls(), r.calls()) : r.calls();
        };
        size_t base_calls = 0;
        for (const stats::StatRow* r : runs)
          if (r != nullptr) base_calls += draws(*r);
        const bool by_call = m.source == Source::kLatency && base_calls > 0 && draws(c) > 0;
        Judge(per_run, cur, m.percentile, Effect::kRatio, floor, kNoisyRatio * 100.0, &item,
              by_call ? base_calls : 0, by_call ? draws(c) : 0);
        if (m.bandwidth && item.has_change_pct()) {
          const double lo = item.change_low_pct(), hi = item.change_high_pct();
          item.set_change_pct(AsBandwidth(item.change_pct()));
          if (item.has_change_low_pct()) {
            item.set_change_low_pct(AsBandwidth(hi));
            item.set_change_high_pct(AsBandwidth(lo));
          }
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
        per_run.push_back(Bounded(r->lateness_us()));
        base_n += static_cast<uint32_t>(r->lateness_us_size());
      }
      const std::vector<double> cur = Bounded(c.lateness_us());
      item.set_baseline_samples(base_n);
      item.set_current_samples(static_cast<uint32_t>(c.lateness_us_size()));
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

}  // namespace ncclwatch::tools
