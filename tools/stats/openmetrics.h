// `ncclwatch stats --format=openmetrics`: the per-row figures in the
// OpenMetrics text format (openmetrics.io), for a metrics store that keeps
// their history (Prometheus' text parser reads it).
//
// One metric family per figure, named ncclwatch_<figure>_<unit> with its
// `# TYPE`, `# UNIT` (where it has one) and `# HELP`; labels comm, nranks,
// func and size (the bucket: "1 MiB") on row figures, comm, nranks and rank
// on arrival figures; times in seconds, bandwidths in bytes per second;
// counts are counters (`_total`). Ends with `# EOF`. A figure a row lacks
// (no bandwidth for an unknown datatype) is left out, not written as NaN.
//
// The same figures in the Prometheus text format (0.0.4), which
// node_exporter's textfile collector, the Pushgateway and `promtool check
// metrics` read: no `# UNIT` and no `# EOF`, and a counter's TYPE and HELP
// name its `_total` sample. With a job id, every sample carries it as the
// label job_id (not `job`, which Prometheus sets to the scrape's own job).

#ifndef TOOLS_STATS_OPENMETRICS_H_
#define TOOLS_STATS_OPENMETRICS_H_

#include <ostream>
#include <string>

#include "proto/stats.pb.h"

namespace ncclwatch::tools {

enum class MetricsText { kOpenMetrics, kPrometheus };

struct MetricsOptions {
  MetricsText text = MetricsText::kOpenMetrics;
  std::string job_id;  // the job_id label on every sample; empty: none
};

void WriteOpenMetrics(const stats::Stats& s, std::ostream& out, const MetricsOptions& opts = {});

}  // namespace ncclwatch::tools

#endif  // TOOLS_STATS_OPENMETRICS_H_
