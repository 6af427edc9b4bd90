// `ncclwatch check`: the CI gate. Compares a run's stats (tools/stats/stats.h)
// with a baseline made by `ncclwatch stats --format=json`, row by row (same
// communicator key, function and size bucket), each metric within its
// tolerance, and fails on any `diagnose` finding of error severity.
//
// Metrics and default tolerances (percent of the baseline value):
//   latency_p50  +10%    latency_p99  +20%    busbw  -10%
// and, off unless given a tolerance: algbw, delay_p50, delay_p99, skew_p50,
// skew_p99. Latencies, delays and skews regress when they grow by more than
// the tolerance; bandwidths when they shrink by more.
//
// Not failures (reported, and JUnit "skipped"):
// - a baseline row the run does not have ("missing"): a shorter or different
//   workload is not a performance regression, and a run that hung is caught
//   by diagnose. `--strict` makes missing rows fail.
// - a row only in the run ("new").
// - a metric that cannot be compared: no value on one side, a baseline
//   value of 0 or less, or latency/bandwidth measured differently (GPU
//   timestamps in one, CPU times in the other).
// - a metric better than the baseline by more than the tolerance
//   ("improved": time to refresh the baseline).

#ifndef TOOLS_STATS_CHECK_H_
#define TOOLS_STATS_CHECK_H_

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "proto/report.pb.h"
#include "proto/stats.pb.h"

namespace ncclwatch::tools {

struct CheckOptions {
  std::map<std::string, double> tolerance_pct;  // metric -> percent; metrics absent are not compared
  bool strict = false;                          // missing rows fail
  // A row's metrics are compared only where the baseline and the run both
  // timed at least this many samples: a p99 of 4 samples is its maximum.
  uint32_t min_samples = 20;
};

// The defaults above.
CheckOptions DefaultCheckOptions();
// Every metric name `check` knows, in report order.
std::vector<std::string> CheckMetrics();
// "metric=pct" ("latency_p50=15", "busbw=5%"), "metric=off", or several of
// them separated by commas; false with `error` otherwise.
bool ParseTolerance(const std::string& arg, CheckOptions* opts, std::string* error);

struct CheckResult {
  std::vector<stats::CheckItem> items;          // one per (row, metric), then missing and new rows
  std::vector<report::Finding> findings;        // diagnose's, all severities
  int regressed = 0, missing = 0, added = 0, skipped = 0, improved = 0, ok = 0;
  int error_findings = 0;
  std::string diagnose_verdict;                 // diagnose's first line, said again when it fails the gate
  bool strict = false;                          // CheckOptions::strict: missing rows fail
  // Diagnosis.incomplete: the run's evidence is incomplete or damaged.
  std::vector<std::string> incomplete;
  int compared() const { return regressed + improved + ok; }
  // Regressions, error findings, incomplete evidence, nothing compared (a
  // gate that compared nothing has not passed), missing rows if strict.
  bool failed() const;
};

// Compares `run` with `baseline`.
CheckResult CompareStats(const stats::Stats& baseline, const stats::Stats& run, const CheckOptions& opts);
// Adds diagnose's findings (fails on those of error severity).
void AddFindings(const report::Diagnosis& d, CheckResult* r);

// The readable report: "PASS" or "FAIL: why" on the first line, then what
// regressed (and what was skipped, missing, improved) and the findings.
void PrintCheck(const CheckResult& r, const CheckOptions& opts, std::ostream& out);

// JUnit XML: suite "stats" with one testcase per row and metric (and per
// missing/new row), suite "diagnose" with one per independent finding (one
// passing case when there is none; consequences are not cases). Test names
// are stable from run to run: what and where, never a measured value.
std::string JUnitXml(const CheckResult& r, const CheckOptions& opts);


}  // namespace ncclwatch::tools

#endif  // TOOLS_STATS_CHECK_H_
