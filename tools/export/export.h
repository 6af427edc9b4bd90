// `ncclwatch export`: the job as a Chrome trace (Trace Event Format, JSON
// object form), for ui.perfetto.dev and chrome://tracing.
//
// Layout:
// - one process per traced process: pid = Model::procs index, named
//   "rank N (host:pid)": the launcher's rank, else its rank in its largest
//   communicator (ProcName);
// - per communicator of that process, a CPU track named after it ("world",
//   or "comm 0x1234abcd" when unnamed) with each operation from enqueue start
//   to completion as the plugin saw it, and, when any of its operations has
//   GPU timing, a GPU track ("world (GPU)") with each kernel span (first
//   channel start to last stop);
// - operations that overlap on a track (the CPU enqueues ahead of the GPU)
//   go to extra lanes of that communicator ("world [2]"), since both viewers
//   want complete events ("ph":"X") on one thread to nest;
// - an operation in flight at the end of its file is drawn to the end of the
//   trace, named "AllReduce (STUCK)" with args.stuck = true; an operation
//   whose completion the capture could not see spans its enqueue only, with
//   args.completion = "not tracked";
// - each stuck report is an instant event ("ph":"i", process scope) listing
//   what was in flight;
// - an operation matched across ranks is linked by a flow ("ph" s/t/f,
//   "id" its match, "cat":"match") from its lowest rank's span to its
//   highest's.
// Times are microseconds (floating) on the aligned timeline (AlignClocks),
// since the earliest record of any file (otherData.origin_ns says when, in
// ns of CLOCK_REALTIME as aligned).
//
// Streamed: events are written as each process's are made, so memory is
// the model's and not the output's (BENCHMARKS.md). Events are in no global
// time order; both viewers sort. Strings are escaped and their invalid UTF-8
// replaced by U+FFFD.

#ifndef TOOLS_EXPORT_EXPORT_H_
#define TOOLS_EXPORT_EXPORT_H_

#include <ostream>
#include <string>
#include <vector>

#include "tools/model/model.h"

namespace ncclwatch::tools {

// Writes the trace as JSON: {"traceEvents":[...],"displayTimeUnit":"ns","otherData":{...}}.
void WriteChromeTrace(const Model& m, std::ostream& out);

}  // namespace ncclwatch::tools

#endif  // TOOLS_EXPORT_EXPORT_H_
