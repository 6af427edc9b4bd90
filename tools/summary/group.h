// A group's summary: node summaries (or groups' summaries) gathered into
// one, so that a job of many nodes is diagnosed from a few files, each
// made where its nodes' summaries are (a step of the job's launcher).
//
// A group summary is a summary like a node's, in the same format: its
// header says how many node summaries it stands for (SummaryHeader.nodes)
// and carries what reading them could not give (read_errors), and its
// processes are the inputs' processes, each as its node wrote it, after
// the reader's checks (checksums, shapes, counts and chains:
// summary_format.h, summary_checks.h). So diagnose of a group summary
// reads what diagnose of its nodes' summaries would, and gives the same
// verdict; a record the checks refused is a read error there and here
// alike, and the verdict says INCOMPLETE. A second round (summarize
// --collectives on the nodes) is gathered again the same way.
//
// Contract: holds every input's parsed processes at once (a group's are
// what the group summary writes). Thread safety: one thread.

#ifndef TOOLS_SUMMARY_GROUP_H_
#define TOOLS_SUMMARY_GROUP_H_

#include <stdint.h>

#include <string>
#include <vector>

#include "tools/model/summary_format.h"

namespace ncclwatch::tools {

// The processes of the summary files `summaries` added to `out` (which
// may already hold trace files' processes: `trace_nodes` 1, else 0), its
// header made a group's. `listing_errors`: what could not be read before
// (paths, trace files), carried in the header before the summaries' own.
// A process given twice (same trace path) is read once, said in a note.
// False with `error` when no process at all results.
bool AddSummaries(const std::vector<std::string>& summaries, const std::vector<std::string>& listing_errors,
                  uint32_t trace_nodes, SummaryResult* out, std::string* error);

}  // namespace ncclwatch::tools

#endif  // TOOLS_SUMMARY_GROUP_H_
