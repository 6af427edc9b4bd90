// The job's model from trace files and per-node summaries (summary.h),
// mixed: what diagnose, merge, stats, check and export read.
//
// Without a summary among the inputs this is BuildModel, unchanged. With
// one, every process goes through the same path: a trace file is read as
// a summary that lets nothing go, the processes are screened as LoadModel
// screens files (one per process, one job), and each window is fed to one
// ModelLoader (BeginWindow), after settling what the summaries let go:
//  - for each communicator and collective function, an operation at or
//    below the highest seq any member let go is let go from every window
//    too when completed (Proc::settled_ops, so totals stay right); one not
//    completed there, while another rank let it go as completed, is a
//    conflict the summaries cannot settle: left out, and the verdict says
//    its evidence is incomplete, naming it and the larger --window that
//    would settle it (Proc::window_gap); never a guess. Point-to-point
//    operations alike, per sender, receiver and order;
//  - the members' signature chains are compared at common checkpoints; the
//    first that differ where a window no longer holds the operations makes
//    the verdict incomplete, naming the ranks and the range of collectives;
//    where the windows hold them, diagnose's own finders name them;
//  - collectives a summary kept because they were asked for (summarize
//    --collectives, the second round of a chain mismatch) are fed like
//    window records where every member of their communicator holds the
//    range (as records it let go, or in its window), so the mismatch
//    finder names the operation; they are neither settled nor let go in
//    the totals, and the straggler counts skip them (Model::asked_ops);
//  - each communicator's arrival samples (ArrivalSamples, where no node
//    held every rank) are lined up at the positions of the largest stride
//    among its members (SampledPosition), where every member sampled the same collective
//    (function and seq) (Model::sampled), so that the straggler finder
//    judges the whole job, not the windows; a position some member lacks
//    is left out, and a communicator some member of which has no samples
//    gets none.
//
// Thread safety: one thread.

#ifndef TOOLS_SUMMARY_JOB_H_
#define TOOLS_SUMMARY_JOB_H_

#include <string>
#include <vector>

#include "tools/model/model.h"
#include "tools/model/collectives.h"
#include "tools/summary/summary.h"

namespace ncclwatch::tools {

// The second round's request (summarize --collectives, collectives.h):
// the ranges of `m`'s chain mismatches whose collectives the model does not
// hold yet (not ChainMismatch::asked), in pieces a request may ask; none
// when every mismatch is named.
std::vector<CollectiveRange> RefineRanges(const Model& m);

// Whether `path` is a summary file (by its first bytes, not its name).
bool IsSummaryFile(const std::string& path);

// BuildModel over `paths` (trace files, summaries, folders of either).
bool BuildJobModel(const std::vector<std::string>& paths, const LoadOptions& opts, Model* model, std::string* error);

// The same over processes already read (tests): summaries' and trace
// files' (SummarizeFile with window UINT64_MAX), and errors met reading them.
// `sources`, when given, names per process the summary file it came from
// ("" for a trace file read whole): where one process is given twice, the
// note says which copy was read.
bool BuildModelFromSummaries(std::vector<summary::SummaryProcess> procs, std::vector<std::string> errors,
                             std::vector<std::string> notes, const LoadOptions& opts, Model* model,
                             std::string* error, const std::vector<std::string>* sources = nullptr);

}  // namespace ncclwatch::tools

#endif  // TOOLS_SUMMARY_JOB_H_
