// `ncclwatch export --format=perfetto`: the job in Perfetto's own trace
// format (protobuf; proto/perfetto_subset.proto holds the part we write),
// for ui.perfetto.dev and Perfetto's trace_processor, of what the Timeline
// (timeline.h) says to draw.
//
// Encoding: each process a process track (pid = Model::procs index + 1:
// Perfetto takes pid 0 for the kernel's idle task) named "rank N
// (host:pid)"; each of its tracks a child track of it; each slice a
// TYPE_SLICE_BEGIN and a TYPE_SLICE_END event on its track, the begin
// carrying the arguments (debug annotations) and the flow id (terminating
// on the flow's last slice: Perfetto orders a flow's steps by time, and
// the Timeline gives the earliest arrival the first); each stuck report an
// instant on the process track. Timestamps are ns since the job's origin.
// Every packet is on one sequence (trusted_packet_sequence_id 1), whose
// interned names (events, categories, argument names) are sent with the
// first packet that uses them.
//
// Streamed: each packet is written as it is made (Trace.packet, field 1,
// length-delimited, one after another), a process at a time, so memory is
// the model's and one process's layout, and a viewer reads the file in
// pieces: no limit of a browser's string length applies, unlike JSON.
//
// Thread safety: each call is independent.

#ifndef TOOLS_EXPORT_PERFETTO_H_
#define TOOLS_EXPORT_PERFETTO_H_

#include <ostream>

#include "tools/export/timeline.h"
#include "tools/model/model.h"

namespace ncclwatch::tools {

ExportCounts WritePerfettoTrace(const Model& m, const ExportOptions& opts, std::ostream& out);

}  // namespace ncclwatch::tools

#endif  // TOOLS_EXPORT_PERFETTO_H_
