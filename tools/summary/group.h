// A group's summary: node summaries (or groups' summaries) gathered into
// one, so that a job of many nodes is diagnosed from a few files, each
// made where its nodes' summaries are (a step of the job's launcher).
//
// A group summary is a summary like a node's, in the same format: its
// header says how many node summaries it stands for (SummaryHeader.nodes)
// and carries what reading them could not give (read_errors), and its
// processes are the inputs' processes after the reader's checks
// (checksums, shapes, counts and chains: summary_format.h,
// summary_checks.h), each cut to the group's window (SummaryHeader.window,
// smaller than a node's: kGroupWindow) by the rule its node applied
// (window_summary.h RewindowProcess): the operations the rule lets go at
// the group's window leave the window for their communicator's prefix,
// exactly as a node summarizing at that window would have let them go;
// what is over the whole file (stats rows, arrival digests and samples)
// stays. A process the rule cannot be applied to again (damaged, cut for
// the cap, a chain without its last checkpoint) stays as its node wrote
// it: nothing is guessed; so does one its node let go nothing of
// (group.cc says why). So diagnose of a group summary reads what
// diagnose of its nodes' summaries at the group's window would, and gives
// the same verdict; a record the checks refused is a read error there and
// here alike, and the verdict says INCOMPLETE. A second round (summarize
// --collectives on the nodes) is gathered again the same way.
//
// What the processes share is written once: EncodeSummary lets a group's
// process refer to an earlier record for the checkpoints its chain has in
// common with another member's, and for its arrival samples where another
// member sampled the same collectives (all but the times:
// summary_sharing.h), and every reader puts them back on read. So each
// process read from a group is, field for field, the one given here, and
// the group grows with what differs between its ranks, not with their
// count. What a group lets go is only what RewindowProcess lets go.
//
// Contract: reads its inputs two at a time, each cut to the group's window
// before the next are read, so memory is the group's processes and two
// inputs. Thread safety: one thread (ReadSummaryFiles joins its own).

#ifndef TOOLS_SUMMARY_GROUP_H_
#define TOOLS_SUMMARY_GROUP_H_

#include <stdint.h>

#include <string>
#include <vector>

#include "tools/model/summary_format.h"

namespace ncclwatch::tools {

// The window of a group summary when `summarize --window` is not given:
// the smallest at which group summaries give their nodes' findings, every
// one's kind and culprits (testdata_test on every recording; rewindow_test
// on the CI reruns and a synthetic job of 32 ranks, whose nodes let
// operations go). At 2, the synthetic job's hang names another last
// operation of the idle rank (a send and a receive done at one instant);
// at 4 none differs. A process its node let go nothing of stays whole
// (group.cc): cut, a short job's straggler or hang turns INCOMPLETE.
inline constexpr uint64_t kGroupWindow = 4;

// The processes of the summary files `summaries` added to `out` (which
// may already hold trace files' processes: `trace_nodes` 1, else 0), each
// cut to `window` operations where kept at more, its header made a
// group's. `listing_errors`: what could not be read before
// (paths, trace files), carried in the header before the summaries' own.
// A process given twice (same trace path) is read once, said in a note.
// False with `error` when no process at all results.
bool AddSummaries(const std::vector<std::string>& summaries, const std::vector<std::string>& listing_errors,
                  uint32_t trace_nodes, uint64_t window, SummaryResult* out, std::string* error);

}  // namespace ncclwatch::tools

#endif  // TOOLS_SUMMARY_GROUP_H_
