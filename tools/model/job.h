// The job's model from whatever the user gives: trace files, per-node
// summaries (summary_format.h), or both mixed; what diagnose, merge, stats,
// check and export read.
//
// Without a summary among the inputs this is BuildModel: every trace file
// straight into one ModelLoader. With one, every process is a piece of
// evidence merged by BuildModelFromPieces (summary_merge.h): a summary's
// processes as they are, and each trace file read once, whole (a FileWindow
// that lets nothing go, its records parsed as read), with its arrival
// samples and the facts of its whole file (damage, a cut tail) from a
// model of the trace files read beside them.
//
// Thread safety: one thread (summaries are parsed on two: summary_format.h).

#ifndef TOOLS_MODEL_JOB_H_
#define TOOLS_MODEL_JOB_H_

#include <string>
#include <vector>

#include "tools/model/collectives.h"
#include "tools/model/model.h"

namespace ncclwatch::tools {

// BuildModel over `paths` (trace files, summaries, folders of either).
bool BuildJobModel(const std::vector<std::string>& paths, const LoadOptions& opts, Model* model, std::string* error);

// Whether `path` is a summary file (by its first bytes, not its name).
bool IsSummaryFile(const std::string& path);

// The second round's request (summarize --collectives, collectives.h):
// the ranges of `m`'s chain mismatches whose collectives the model does not
// hold yet (not ChainMismatch::asked), in pieces a request may ask; none
// when every mismatch is named.
std::vector<CollectiveRange> RefineRanges(const Model& m);

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_JOB_H_
