// What a per-node summary keeps of one trace file's window, and what it
// lets go: the rule both ncclwatch summarize (tools/summary/) and the
// job's model (job.h, for a trace file read beside summaries) apply.
//
// Per (rank, communicator) a summary keeps every operation not safely
// completed plus the last `window` ones, and lets go the older completed
// ones (a prefix of the rank's program order on the communicator), keeping
// of them what the job's model needs to settle them across ranks: per
// collective function the last seq let go, per point-to-point function and
// peer the last p2p_seq, and a chain of the collectives' signatures with
// checkpoints, so that a mismatch among them is still seen (CommPrefix);
// and its arrivals at one collective in S over the whole file
// (ArrivalSamples, arrival_samples.h). Nothing issued at or after the
// first operation still unfinished goes, on any communicator: the order of
// issue across communicators is what an order cycle (a deadlock) is found
// by.
//
// Thread safety: pure functions.

#ifndef TOOLS_MODEL_WINDOW_SUMMARY_H_
#define TOOLS_MODEL_WINDOW_SUMMARY_H_

#include <stdint.h>

#include <string>
#include <vector>

#include "proto/summary.pb.h"
#include "proto/trace.pb.h"
#include "tools/model/collectives.h"
#include "tools/model/file_window.h"
#include "tools/model/model.h"

namespace ncclwatch::tools {

// An operation that waited this long may be the evidence of a late rank
// (diagnose's find_late.cc: an enqueue 10 s late): never let go; the merge
// says the evidence is incomplete where it must drop one.
inline constexpr int64_t kLateWaitNs = 10000000000;

// Which operations of a window (its records in file order; null: one that
// did not parse) finished beyond doubt: completed after a wait under
// kLateWaitNs that the job's model does not take for an abort's (model.h,
// LoadModel): under AbortMinWaitSec (the header's stuck limit), or more
// than kAbortWindowSec before the end of the file and of its communicator,
// or before a later operation of its communicator started that completed
// under kAbortMinWaitSec. The rule is the model's, so that ranks of one
// collective agree on it wherever the model would: a rule stricter than
// the model's (a 1 s wait) had a rank let a collective go after 994 ms
// while its peer, 13 ms longer in it, kept it as evidence, and the merge
// could settle neither. Per record: false for other records.
// `first_open`: the earliest start of an operation not finished beyond
// doubt (UINT64_MAX: none).
std::vector<bool> FinishedOps(const std::vector<const trace::Record*>& records, uint64_t* first_open);

// The chain's step over one collective's signature.
uint64_t ChainStep(uint64_t chain, const std::string& func, uint64_t count, const std::string& datatype, int64_t root);

struct WindowSummaryOptions {
  // Operations kept per (rank, communicator) beyond those not finished;
  // UINT64_MAX keeps every one (a trace file read beside summaries).
  uint64_t window = 64;
  // Collectives between the signature chain's checkpoints.
  uint32_t checkpoint_every = 64;
  // The second round of a chain mismatch (--collectives, collectives.h):
  // these collectives, where a rank let them go, are kept as their records
  // (SummaryProcess.asked_collectives).
  std::vector<CollectiveRange> collectives;
};

// A file's window (read whole) summarized into `out`: path, size, the
// prefixes let go, the arrival samples and, with `keep_records`, the
// records kept (serialized); not the whole file's facts (SetFacts) nor a
// cap. False with `error` when the window holds no record (`notes`: what
// its reading said).
bool SummarizeWindow(const FileWindow& w, const std::vector<std::string>& notes, const WindowSummaryOptions& opts,
                     bool keep_records, summary::SummaryProcess* out, std::string* error);

// A summary's process `sp`, kept at a larger window, cut to `window` by
// the rule SummarizeWindow applies (a group's summary of node summaries,
// tools/summary/group.h): per communicator, the window's oldest
// operations that the rule lets go at `window` are folded into its
// prefix as the node would have folded them (last sequence numbers, the
// chain continued from its last checkpoint, checkpoints every
// sp.checkpoint_every collectives, else `checkpoint_every`, and at the
// new end, the asked collectives among them), and their records go.
// What is over the whole file (arrival samples, stats rows, digests)
// stays. A communicator whose chain cannot be continued (no checkpoint at
// its prefix's last collective) stays as it is. False with `why`, `sp`
// untouched, where the window is not the rule's whole output (damaged,
// cut for the cap) or a record of it does not parse: nothing is guessed.
// Memory: the window's records parsed, once.
bool RewindowProcess(uint64_t window, uint32_t checkpoint_every, summary::SummaryProcess* sp, std::string* why);

// What reading the whole file found (`p`: a model's Proc of it: damage, a
// cut tail, the issues) into its summary.
void SetFacts(const Proc& p, summary::SummaryProcess* out);

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_WINDOW_SUMMARY_H_
