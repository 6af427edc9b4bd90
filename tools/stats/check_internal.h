// What the parts of `ncclwatch check` (check.h) share: the metrics it
// knows, and how an item of the report is named and judged failing.
//
// Thread safety: constant tables and functions of their arguments.

#ifndef TOOLS_STATS_CHECK_INTERNAL_H_
#define TOOLS_STATS_CHECK_INTERNAL_H_

#include <functional>
#include <string>
#include <vector>

#include "proto/report.pb.h"
#include "proto/stats.pb.h"
#include "tools/stats/check.h"

namespace ncclwatch::tools::check_internal {

// Which samples of a row a metric reads.
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
  bool tail = false;         // a p99: compared only with 100 samples on both sides (check.cc)
  bool timed = true;         // measured from GPU or CPU times (StatRow.timing)
  // The row's own value of what is shown (bandwidths: at the median).
  std::function<bool(const stats::StatRow&)> has;
  std::function<double(const stats::StatRow&)> get;
};

// Every metric but arrival, in report order.
const std::vector<MetricDef>& Metrics();
// The metric named `name`, or null (arrival has no MetricDef).
const MetricDef* FindMetric(const std::string& name);

// Each communicator rank's median lateness: judged from RankRow, not StatRow.
inline constexpr char kArrival[] = "arrival";

// `v` through printf's `fmt` (one double).
std::string Fmt(double v, const char* fmt);
// The --allow-incomplete name of `kind` ("cuda-graphs"), or its enum name.
std::string AllowName(report::IncompleteKind kind);

// One line saying what the item is about: its row, metric, values and change.
std::string Describe(const stats::CheckItem& it);
// Whether an item fails the gate.
bool ItemFails(const stats::CheckItem& i, bool strict);
// Why the gate could not judge the run: JUnit errors, not failures.
std::vector<std::string> GateErrors(const CheckResult& r);
// "ERROR", "WARNING", "INFO", "OK".
const char* SeverityName(report::Severity s);

}  // namespace ncclwatch::tools::check_internal

#endif  // TOOLS_STATS_CHECK_INTERNAL_H_
