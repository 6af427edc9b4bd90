// ncclwatch summarize: the trace files of one node, or any set of ranks,
// reduced to what diagnose needs, so that one merge reads a small file per
// node instead of every rank's full trace.
//
// Each file's window is summarized by the rule the job's model shares
// (tools/model/window_summary.h: what is kept, what is let go and what of
// it stays as prefixes, chains and arrival samples), in the format every
// reader shares (tools/model/summary_format.h). What this producer adds:
// the facts of reading the whole file (damage, a cut tail, the whole-file
// checks) from a model of the node's files, every operation's timings as
// stats rows and the node's arrival digests (which need the analyses:
// tools/stats, tools/diagnose), and the cap on each process's bytes. The
// merge is tools/model/summary_merge.h.
//
// Contract: reads each file once (FileWindow::ReadWhole), its records
// going both to its window and to the node's model, whose whole-file
// checks give each summary its facts; memory is one file's window, the
// node's model and the summaries made so far (each bounded by the cap).
// Thread safety: one thread.

#ifndef TOOLS_SUMMARY_SUMMARY_H_
#define TOOLS_SUMMARY_SUMMARY_H_

#include <stdint.h>

#include <string>
#include <vector>

#include "proto/summary.pb.h"
#include "tools/model/arrival_samples.h"
#include "tools/model/collectives.h"
#include "tools/model/model.h"
#include "tools/model/summary_format.h"
#include "tools/model/window_summary.h"
#include "tools/summary/group.h"

namespace ncclwatch::tools {

// What to keep of each file (window, checkpoints, the collectives asked
// for: WindowSummaryOptions), of which job, and within how many bytes.
struct SummarizeOptions : WindowSummaryOptions {
  // Read only this job's files (LoadOptions::job).
  std::string job;
  // The summary being written, never read as an input (a group's made
  // again into the folder of its nodes' summaries would gather itself).
  std::string out_path;
  // The most bytes of one process's record (SummaryProcess); 0: no cap.
  // Past it, checkpoints are thinned, then the window's oldest operations
  // go (CapSummaryProcess). The asked collectives are kept outside it.
  uint64_t max_bytes_per_rank = 64 << 10;
  // A group's window (summarize given summaries, group.h): each input
  // process kept at more is cut to it. `window` applies to trace files.
  uint64_t group_window = kGroupWindow;
};

// Brings `sp` within `max_bytes` (its serialized size): first thins every
// prefix's checkpoints (every 2nd kept, the interval doubling from
// `checkpoint_every`, each prefix's last kept, the interval recorded in
// sp.checkpoint_every), then drops the window's oldest finished
// operations, then the stuck reports' newest listed operations (each keeps
// its oldest), then the oldest unfinished operations, counted in
// sp.cut_ops and sp.cut_stuck_ops. Definitions and other records stay: a
// process whose other records pass the cap stays over it. The asked
// collectives (--collectives) are neither measured nor cut: their request
// bounds them, and cutting the window for them would turn the answer into
// an INCOMPLETE.
void CapSummaryProcess(uint64_t max_bytes, uint32_t checkpoint_every, summary::SummaryProcess* sp);

// The trace files among `paths` (files, folders) summarized; with
// summaries among them too, a group's summary of those and of the trace
// files (group.h). False with `error` when none can be (no trace file or
// summary, several jobs without --job).
bool Summarize(const std::vector<std::string>& paths, const SummarizeOptions& opts, SummaryResult* out,
               std::string* error);
// The trace files among `paths` alone, a node's summary.
bool SummarizeTraces(const std::vector<std::string>& paths, const SummarizeOptions& opts, SummaryResult* out,
                     std::string* error);
// One trace file; `facts`: the node model's Proc of it (null: none).
bool SummarizeFile(const std::string& path, const SummarizeOptions& opts, const Proc* facts,
                   summary::SummaryProcess* out, std::string* error);

}  // namespace ncclwatch::tools

#endif  // TOOLS_SUMMARY_SUMMARY_H_
