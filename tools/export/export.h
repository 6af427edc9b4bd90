// `ncclwatch export --format=json`: the job as a Chrome trace (Trace Event
// Format, JSON object form), for chrome://tracing and ui.perfetto.dev, of
// what the Timeline (timeline.h) says to draw.
//
// Encoding: one process per traced process (pid = Model::procs index),
// named "rank N (host:pid)"; one thread per track (tid from 1); each slice a
// complete event ("ph":"X"); each stuck report an instant ("ph":"i",
// process scope); each flow step a flow event ("ph" s, t, f; "cat":"match";
// "id" the match's; bound to the slice it sits on, "bp":"e") at its slice's
// start, so the steps of one flow go forward in time: "s" on the earliest
// arrival, "t" on each later one, "f" on the last. Times are microseconds
// (floating) since the job's origin (otherData.origin_ns says when, in ns of
// CLOCK_REALTIME as aligned).
//
// Streamed: events are written as each process's are made, so memory is
// the model's and not the output's (BENCHMARKS.md). But a browser holds the
// whole file as one string: past 512 MiB (about 745,000 operations)
// open the Perfetto format instead (perfetto.h), or cut the job with
// --from/--to/--ranks. Events are in no global time order; both viewers
// sort. Strings are escaped and their invalid UTF-8 replaced by U+FFFD.
//
// Thread safety: each call is independent.

#ifndef TOOLS_EXPORT_EXPORT_H_
#define TOOLS_EXPORT_EXPORT_H_

#include <ostream>

#include "tools/export/timeline.h"
#include "tools/model/model.h"

namespace ncclwatch::tools {

// Writes {"traceEvents":[...],"displayTimeUnit":"ns","otherData":{...}}.
ExportCounts WriteChromeTrace(const Model& m, const ExportOptions& opts, std::ostream& out);
inline ExportCounts WriteChromeTrace(const Model& m, std::ostream& out) { return WriteChromeTrace(m, ExportOptions(), out); }

}  // namespace ncclwatch::tools

#endif  // TOOLS_EXPORT_EXPORT_H_
