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

#ifndef TOOLS_STATS_OPENMETRICS_H_
#define TOOLS_STATS_OPENMETRICS_H_

#include <ostream>
#include <string>

#include "proto/stats.pb.h"

namespace ncclwatch::tools {

void WriteOpenMetrics(const stats::Stats& s, std::ostream& out);

// A label value escaped as OpenMetrics wants it: \ " and newline.
std::string OpenMetricsLabel(const std::string& v);

}  // namespace ncclwatch::tools

#endif  // TOOLS_STATS_OPENMETRICS_H_
