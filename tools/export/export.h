// `ncclwatch export`: the job as a Chrome trace (Trace Event Format, JSON
// object form), for ui.perfetto.dev and chrome://tracing.
//
// Layout:
// - one process per traced process: pid = Model::procs index, named
//   "rank N (host:pid)" ("host:pid" when the launcher gave no rank);
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
//   what was in flight.
// Times are microseconds (floating) on the aligned timeline (AlignClocks),
// since the earliest record of any file (otherData.origin_ns says when, in
// ns of CLOCK_REALTIME as aligned).
//
// The JSON is printed from proto/stats.proto's ChromeTrace by protobuf's
// encoder: strings are escaped by it, and names that are not valid UTF-8
// have their bad bytes replaced by U+FFFD first.

#ifndef TOOLS_EXPORT_EXPORT_H_
#define TOOLS_EXPORT_EXPORT_H_

#include <ostream>
#include <string>
#include <vector>

#include "proto/stats.pb.h"
#include "tools/model/model.h"

namespace ncclwatch::tools {

stats::ChromeTrace BuildChromeTrace(const Model& m);

// Compact JSON: {"traceEvents":[...],"displayTimeUnit":"ns","otherData":{...}}.
std::string ChromeTraceJson(const stats::ChromeTrace& t);


}  // namespace ncclwatch::tools

#endif  // TOOLS_EXPORT_EXPORT_H_
