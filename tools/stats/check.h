// `ncclwatch check`: the CI gate. Compares a run's stats (tools/stats/stats.h)
// with a baseline made by `ncclwatch stats --format=json` (or several, one
// per run of the same job), row by row (same communicator key and size,
// function and size bucket), and fails on any `diagnose` finding of error
// severity.
//
// Each metric is judged on the samples of both sides (compare.h): the
// change of its statistic (median or p99) with a 98% bootstrap interval. It
// regresses when the interval excludes no change (one-sided, 1%) AND the
// change is worse than its tolerance, the effect-size floor. No limit
// widens with the baseline's spread: a row whose interval reaches a 1.5x
// regression without being significant is "noisy", reported and not
// judged. With several baseline runs (samples pooled), the floor rises by
// the spread of the statistic between them (each run's from the pooled
// one), and the interval must clear the spread itself, not just no
// change: a rerun differs from the pooled runs as they differ from it. A
// spread of 50% or more is "noisy" too, unless the change clears it.
//
// Metrics and default tolerances:
//   latency_p50  +10%    latency_p99  +20%    busbw  -10%
//   arrival      +10 ms  (per communicator rank: its median lateness)
// and, off unless given a tolerance: algbw, delay_p50, delay_p99, skew_p50,
// skew_p99. Bandwidths are judged as their latency (their samples are the
// latencies'); a bandwidth tolerance must be below 100%.
//
// Not failures (reported, and JUnit "skipped"), unless `strict`:
// - a baseline row the run does not have ("missing"), a "noisy" metric.
// - a row only in the run ("new").
// - a metric that cannot be compared: no value on one side, too few
//   samples, a baseline value of 0 or less, or latency/bandwidth measured
//   differently (GPU timestamps in one, CPU times in the other).
// - a metric better than the baseline by more than the tolerance
//   ("improved": time to refresh the baseline).
// A gate that judged nothing (every metric noisy or skipped) fails.

#ifndef TOOLS_STATS_CHECK_H_
#define TOOLS_STATS_CHECK_H_

#include <map>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "proto/report.pb.h"
#include "proto/stats.pb.h"

namespace ncclwatch::tools {

struct CheckOptions {
  std::map<std::string, double> tolerance_pct;  // metric -> percent; metrics absent are not compared
  bool strict = false;                          // missing rows fail
  // A row's metrics are compared only where the baseline and the run both
  // have at least this many samples (100 for a p99): a bootstrap of fewer
  // sees too few distinct medians.
  uint32_t min_samples = 10;
  // Kinds of incomplete evidence (Diagnosis.incomplete_kinds) that do not
  // fail the gate: said on the PASS line, never silently. Only
  // INCOMPLETE_CUDA_GRAPHS can be named (--allow-incomplete=cuda-graphs).
  std::set<report::IncompleteKind> allow_incomplete;
};

// The defaults above.
CheckOptions DefaultCheckOptions();
// Every metric name `check` knows, in report order.
std::vector<std::string> CheckMetrics();
// "metric=pct" ("latency_p50=15", "busbw=5%"), "metric=off", or several of
// them separated by commas; false with `error` otherwise.
bool ParseTolerance(const std::string& arg, CheckOptions* opts, std::string* error);
// The names --allow-incomplete takes ("cuda-graphs"), comma-separated or
// one per element; false with `error` naming the known ones otherwise.
bool ParseAllowIncomplete(const std::vector<std::string>& args, CheckOptions* opts, std::string* error);

struct CheckResult {
  std::vector<stats::CheckItem> items;          // one per (row, metric), then missing and new rows
  std::vector<report::Finding> findings;        // diagnose's, all severities
  int regressed = 0, missing = 0, added = 0, skipped = 0, improved = 0, ok = 0, noisy = 0;
  uint32_t baseline_runs = 1;
  // What the run's numbers rest on (stats::Stats.notes): summaries' sketches.
  std::vector<std::string> run_notes;
  int error_findings = 0;
  std::string diagnose_verdict;                 // diagnose's first line, said again when it fails the gate
  bool strict = false;                          // CheckOptions::strict: missing and noisy fail
  // Diagnosis.incomplete: the run's evidence is incomplete or damaged,
  // less what CheckOptions::allow_incomplete accepts, which goes to
  // `accepted_incomplete` with its kind.
  std::vector<std::string> incomplete;
  std::vector<std::pair<report::IncompleteKind, std::string>> accepted_incomplete;
  std::set<report::IncompleteKind> allow_incomplete;  // CheckOptions::allow_incomplete
  int judged() const { return regressed + improved + ok; }
  // Regressions, error findings, incomplete evidence, nothing judged (a
  // gate that judged nothing has not passed), missing and noisy if strict.
  bool failed() const;
};

// Compares `run` with `baseline`, or with the runs of `baselines` pooled.
CheckResult CompareStats(const stats::Stats& baseline, const stats::Stats& run, const CheckOptions& opts);
CheckResult CompareStats(const std::vector<stats::Stats>& baselines, const stats::Stats& run,
                         const CheckOptions& opts);
// Adds diagnose's findings (fails on those of error severity) and why its
// evidence is incomplete (fails, unless of an allowed kind).
void AddFindings(const report::Diagnosis& d, CheckResult* r);

// The readable report: "PASS" or "FAIL: why" on the first line, then what
// regressed (and what was skipped, missing, improved) and the findings.
void PrintCheck(const CheckResult& r, const CheckOptions& opts, std::ostream& out);

// The same as JSON (proto/stats.proto CheckReport).
stats::CheckReport CheckReportOf(const CheckResult& r);

// JUnit XML: suite "stats" with one testcase per row and metric (and per
// missing/new row), suite "diagnose" with one per independent finding (one
// passing case when there is none; consequences are not cases), suite
// "check" with two cases that are errors when the gate could not judge
// (incomplete evidence, nothing judged). The XML has a failure or an error
// exactly when the gate fails. Test names are stable from run to run: what
// and where, never a measured value.
std::string JUnitXml(const CheckResult& r, const CheckOptions& opts);

// When `check` cannot judge at all (exit 2): a baseline unreadable or
// refused (baseline_check.h), or traces that yield no model. `error` says
// which file and why. Every report asked for says so, as the text report's
// standard error does, so that a CI system reading only the JSON or the
// JUnit file sees the gate fail, never a green or empty result: a
// CheckReport of verdict "UNUSABLE INPUT: `error`" and exit_status 2, and
// JUnit XML whose one case ("check", "input usable") is an error.
stats::CheckReport UnusableCheckReport(const std::string& error);
std::string UnusableJUnitXml(const std::string& error);

}  // namespace ncclwatch::tools

#endif  // TOOLS_STATS_CHECK_H_
