// The job's model from per-node summaries (summary_format.h), and from
// trace files read beside them: what diagnose, merge, stats, check and
// export read when a summary is among the inputs (job.h decides).
//
// Every process is a piece of evidence: a summary's SummaryProcess, or a
// trace file read whole beside the summaries, which lets nothing go (its
// records are fed from the FileWindow that read them, parsed once). The
// processes are screened as LoadModel screens files (one per process, one
// job), and each window is fed to one ModelLoader (BeginWindow), after
// settling what the summaries let go:
//  - for each communicator and collective function, an operation at or
//    below the highest seq any member let go is let go from every window
//    too when completed (Proc::settled_ops, so totals stay right); one not
//    completed there, while another rank let it go as completed, is a
//    conflict the summaries cannot settle: left out, and the verdict says
//    its evidence is incomplete, naming it and the larger --window that
//    would settle it (Proc::window_gap); never a guess. Point-to-point
//    operations alike, per sender, receiver and order (merge_feed.cc);
//  - the members' signature chains are compared at common checkpoints; the
//    first that differ where a window no longer holds the operations makes
//    the verdict incomplete, naming the ranks and the range of collectives;
//    where the windows hold them, diagnose's own finders name them
//    (merge_chains.cc);
//  - collectives a summary kept because they were asked for (summarize
//    --collectives, the second round of a chain mismatch) are fed like
//    window records where every member of their communicator holds the
//    range (as records it let go, or in its window), so the mismatch
//    finder names the operation; they are neither settled nor let go in
//    the totals, and the straggler counts skip them (Model::asked_ops;
//    merge_cuts.cc);
//  - each communicator's arrival samples (where no node held every rank)
//    are lined up at the positions of the largest stride among its members
//    (SampledPosition), where every member sampled the same collective
//    (function and seq) (Model::sampled), so that the straggler finder
//    judges the whole job, not the windows; a position some member lacks
//    is left out, and a communicator some member of which has no samples
//    gets none (merge_samples.cc).
//
// Thread safety: one thread.

#ifndef TOOLS_MODEL_SUMMARY_MERGE_H_
#define TOOLS_MODEL_SUMMARY_MERGE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "proto/summary.pb.h"
#include "tools/model/file_window.h"
#include "tools/model/model.h"

namespace ncclwatch::tools {

// One process's evidence.
struct SummaryPiece {
  // From a summary file: the whole record. From a trace file: its prefixes
  // (none let go), arrival samples and facts (window_summary.h), no records.
  summary::SummaryProcess sp;
  // A trace file's window, read whole: its records. Null for a summary's.
  std::unique_ptr<FileWindow> window;
  // The summary file it came from; "" for a trace file read whole. And
  // its record's index there (SummaryResult::records).
  std::string source;
  uint64_t record = 0;
  // Whether `sp` holds only what the merge reads before it feeds the
  // windows (summary_reread.h): the rest is read again just before this
  // piece is fed (Reread). `records`: how many window records it had.
  bool light = false;
  uint64_t records = 0;
};

// Reads again what a light piece let go (summary_reread.h), called just before
// piece `i` is fed, in the pieces' order. False when it cannot (the file
// changed or cannot be read since), with `error` ("" where the same cause
// was given for an earlier piece): the piece is then fed as it is, without
// its window, and the error makes the verdict incomplete.
using Reread = std::function<bool(size_t i, std::vector<SummaryPiece>* pieces, std::string* error)>;

// The model of `pieces` (replacing `*m`), with `errors` and `notes` met
// reading them. False with `error` when none can be used (several jobs, no
// process).
// `reread` is needed where a piece is light.
bool BuildModelFromPieces(std::vector<SummaryPiece> pieces, std::vector<std::string> errors,
                          std::vector<std::string> notes, const LoadOptions& opts, Model* m, std::string* error,
                          const Reread& reread = nullptr);

// The same over summaries' processes alone (tests, fuzzing). `sources`,
// when given, names per process the summary file it came from: where one
// process is given twice, the note says which copy was read.
bool BuildModelFromSummaries(std::vector<summary::SummaryProcess> procs, std::vector<std::string> errors,
                             std::vector<std::string> notes, const LoadOptions& opts, Model* m,
                             std::string* error, const std::vector<std::string>* sources = nullptr);

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_SUMMARY_MERGE_H_
