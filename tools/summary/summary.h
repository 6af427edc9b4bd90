// Per-node summaries (issue 32): the trace files of one node, or any set of
// ranks, reduced to what diagnose needs, so that one merge reads a small
// file per node instead of every rank's full trace.
//
// A summary keeps, per process, its FileWindow (tools/model/file_window.h:
// definitions, operations with completions folded in, the latest heartbeat,
// drops and stuck reports) with, per (rank, communicator), every operation
// not safely completed plus the last `window` ones; it lets go the older
// completed ones (a prefix of the rank's program order on the communicator)
// and keeps of them what the merge needs to settle them across ranks: per
// collective function the last seq let go, per p2p function and peer the
// last p2p_seq, and a chain of the collectives' signatures with
// checkpoints, so that a mismatch among them is still seen; and, where the
// node cannot count a process's arrivals whole (a communicator spans
// nodes), its arrivals at one collective in S over the whole file
// (ArrivalSamples), which the merge judges across nodes. What reading
// the whole file found (damage, a cut tail, the whole-file checks) is kept
// as the model's Proc facts. The merge is in job.h.
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
#include "proto/trace.pb.h"
#include "tools/model/model.h"
#include "tools/model/collectives.h"

namespace ncclwatch::tools {

inline constexpr char kSummaryFormat[] = "ncclwatch-summary";
// 2: every operation's timings as stats rows (SummaryProcess.rows).
inline constexpr uint32_t kSummaryVersion = 2;
inline constexpr char kSummaryExtension[] = ".ncclsummary";

struct SummarizeOptions {
  // Operations kept per (rank, communicator) beyond those not finished;
  // UINT64_MAX keeps every one (a trace file read beside summaries).
  uint64_t window = 64;
  // Collectives between the signature chain's checkpoints.
  uint32_t checkpoint_every = 64;
  // Read only this job's files (LoadOptions::job).
  std::string job;
  // The most bytes of one process's record (SummaryProcess); 0: no cap.
  // Past it, checkpoints are thinned, then the window's oldest operations
  // go (CapSummaryProcess).
  uint64_t max_bytes_per_rank = 64 << 10;
  // The second round of a chain mismatch (--collectives, collectives.h):
  // these collectives, where a rank let them go, are kept as their records
  // (SummaryProcess.asked_collectives) outside the cap.
  std::vector<CollectiveRange> collectives;
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

// A completion this far after its operation's start, and this close to the
// end of its file or its communicator's finalize, may be an abort's
// (model.h): such an operation is never let go.
inline constexpr int64_t kSafeWaitNs = 1000000000;
// An operation that waited this long may be the evidence of a late rank
// (diagnose's find_late.cc: an enqueue 10 s late): never let go; the merge
// says the evidence is incomplete where it must drop one.
inline constexpr int64_t kLateWaitNs = 10000000000;

// Which operations of a window (serialized trace.Records in file order)
// finished beyond doubt: completed after a wait under kSafeWaitNs, or under
// kLateWaitNs and more than kAbortWindowSec before the end of the file and
// of its communicator (where an abort's "completion" falls). Per record:
// false for other records. `first_open`: the earliest start of an
// operation not finished beyond doubt (UINT64_MAX: none).
std::vector<bool> FinishedOps(const std::vector<const std::string*>& records, uint64_t* first_open);
// The same, of records already parsed (null: one that did not parse).
std::vector<bool> FinishedOps(const std::vector<const trace::Record*>& records, uint64_t* first_open);

// Arrival samples (summary.proto ArrivalSamples): at most this many per
// rank and communicator, whatever the job's length.
inline constexpr uint64_t kMaxArrivalSamples = 256;
// The stride's log2 for a rank with `collectives` on a communicator: the
// smallest power of two S with collectives / S <= kMaxArrivalSamples.
uint32_t SampleStrideLog2(uint64_t collectives);
// Whether stride 2^log2 samples chain position `position`: one position in
// S on average, chosen by a hash of the position, not its multiples. A
// training step repeats its collectives with a period; multiples of S
// would fall on the same one of them every time (every 8th of AllReduce,
// Broadcast, ... is always a Broadcast), and a rank late at the others
// would never be sampled late. The sets nest (a position sampled at 2S is
// sampled at S), so members with different counts, and so strides, share
// every position of the largest stride among them.
bool SampledPosition(uint64_t position, uint32_t log2);

inline constexpr int32_t kNoBucket = INT32_MIN;
// One sample of ArrivalSamples, decoded: its chain position, start (file
// time), duration, function (an index into `functions`), seq, and how long
// its kernel waited on the GPU behind other work (to the us; -1: not known).
struct ArrivalSample {
  uint64_t position = 0;
  int64_t start_ns = 0;
  uint64_t duration_ns = 0;
  uint32_t func = 0;
  uint64_t seq = 0;
  int64_t held_ns = -1;
  // Its size bucket (StatRow.bucket_log2: -2 unknown); kNoBucket where the
  // summary carries none.
  int32_t bucket = kNoBucket;
};
// The samples of `a`, positions ascending; false on a damaged message
// (fields of different lengths, more than kMaxArrivalSamples, a position
// its stride does not sample or past the collectives, a start
// before the file's or past 2^58 ns, a function not in `functions`, held
// times or buckets not one per sample, a held time past 2^58 ns, a bucket
// past 63, first_seqs not one per function).
bool DecodeSamples(const summary::ArrivalSamples& a, std::vector<ArrivalSample>* out);
// `v` into `a`'s per-sample fields, replacing them (its comm, stride,
// collectives, functions and first_seqs stay). `held`: write the held
// times (the rank's completions come from CUDA events), else none. Buckets
// are written where every sample has one.
void EncodeSamples(const std::vector<ArrivalSample>& v, summary::ArrivalSamples* a, bool held = false);

// The chain's step over one collective's signature.
uint64_t ChainStep(uint64_t chain, const std::string& func, uint64_t count, const std::string& datatype, int64_t root);

struct SummaryResult {
  summary::SummaryHeader header;
  std::vector<summary::SummaryProcess> procs;
  std::vector<std::string> errors;  // paths not summarized, with why
  std::vector<std::string> notes;   // e.g. an asked communicator no rank here has
};

// The trace files among `paths` (files, folders) summarized. False with
// `error` when none can be (no trace file, several jobs without --job).
bool Summarize(const std::vector<std::string>& paths, const SummarizeOptions& opts, SummaryResult* out,
               std::string* error);
// One trace file; `facts`: the node model's Proc of it (null: none).
bool SummarizeFile(const std::string& path, const SummarizeOptions& opts, const Proc* facts,
                   summary::SummaryProcess* out, std::string* error);

// A Sketch to its message and back; false on a damaged one.
void SketchToProto(const Sketch& s, summary::Sketch* out);
bool SketchFromProto(const summary::Sketch& p, Sketch* out);
// The digests of one process (stats.h ProcDigest) into its summary, and
// from it into the model's Proc (false: damaged, nothing set).
void SetDigests(const std::vector<RowDigest>& rows, const std::vector<RankDigest>& ranks,
                const std::vector<std::string>& whole_comms, summary::SummaryProcess* out);
bool ReadDigests(const summary::SummaryProcess& sp, Proc* out);

// The summary file's bytes: the header, then each process, length-delimited.
std::string EncodeSummary(const SummaryResult& s);

// Whether `head` (a file's first bytes) starts like a summary file.
bool LooksLikeSummary(const std::string& head);
// A summary file's bytes to its header and processes. On damage (a length
// past the end, a record that does not parse, a foreign or newer file) the
// processes before it are kept and `error` names the file, the offset and
// the problem (false).
bool ParseSummary(const std::string& name, const std::string& bytes, SummaryResult* out, std::string* error);
// The same on a file (a regular file of at most kMaxSummaryBytes).
inline constexpr uint64_t kMaxSummaryBytes = 4ull << 30;
bool ReadSummaryFile(const std::string& path, SummaryResult* out, std::string* error);
// The same on many files, on two threads (at 2,048 summaries, parsing one
// by one was a quarter of the merge: BENCHMARKS.md, "The 16k merge on more
// than one core"). Each file goes to its own slot, out[i] and errors[i]
// (empty when read whole), so that nothing depends on the threads' order.
// Thread safety: call from one thread; it joins its own before returning.
void ReadSummaryFiles(const std::vector<std::string>& files, std::vector<SummaryResult>* out,
                      std::vector<std::string>* errors);

}  // namespace ncclwatch::tools

#endif  // TOOLS_SUMMARY_SUMMARY_H_
