// The per-node summary file (proto/summary.proto), read and written: the
// format every reader of a job's summaries shares (the job's model,
// ncclwatch summarize, the fuzzers).
//
// A summary file is a stream of length-delimited SummaryRecords: first a
// header (format, version, the options it was made with), then one
// SummaryProcess per trace file summarized. Lengths are protobuf varints,
// written and read with libprotobuf's coded streams. From version 3 each
// record is followed by four bytes, the CRC-32 (zlib's, little endian) of
// its length and body: a summary is copied off every node and stands in for
// traces, so a byte changed on the way must read as damage, never as a
// finding. A record that fails its check is not read (see ParseSummary).
//
// Thread safety: pure functions, but for ReadSummaryFiles (below).

#ifndef TOOLS_MODEL_SUMMARY_FORMAT_H_
#define TOOLS_MODEL_SUMMARY_FORMAT_H_

#include <stdint.h>

#include <functional>
#include <string>
#include <vector>

#include "proto/summary.pb.h"
#include "tools/model/model.h"
#include "tools/model/sketch.h"

namespace ncclwatch::tools {

inline constexpr char kSummaryFormat[] = "ncclwatch-summary";
// 2: every operation's timings as stats rows (SummaryProcess.rows).
// 3: each record followed by the CRC-32 of its frame (length and body).
// 4: a group's processes may refer to earlier records for what they share
//    (summary_sharing.h), which a reader of 3 would read as missing.
// The newest version this reads.
inline constexpr uint32_t kSummaryVersion = 4;
inline constexpr uint32_t kFirstCheckedVersion = 3;
// The version of a summary whose processes refer to nothing (a node's, a
// group whose processes share nothing): the oldest that holds it, so that
// a reader of version 3 still reads it.
inline constexpr uint32_t kPlainSummaryVersion = 3;
inline constexpr char kSummaryExtension[] = ".ncclsummary";
// A group's process records may be deflated (summary.proto
// DeflatedProcess, version 4): to at most this many times their bytes
// inflated, so that reading costs memory in proportion to the file's bytes
// (docs/security.md). Records of groups deflate 2 to 3.5 times
// (BENCHMARKS.md); one that would deflate more is written plain.
inline constexpr uint64_t kMaxInflation = 4;

struct SummaryResult {
  summary::SummaryHeader header;
  std::vector<summary::SummaryProcess> procs;
  // Per process read (ParseSummary): its record's index in the file (the
  // header is 0), so that an error found later can name it.
  std::vector<uint64_t> records;
  std::vector<std::string> errors;  // paths not summarized, with why
  std::vector<std::string> notes;   // e.g. an asked communicator no rank here has
  // The CRC-32 of the file's bytes as read (ReadSummaryFile), so that a
  // second reading can tell it read the same file.
  uint32_t bytes_crc = 0;
};

// A Sketch to its message and back; false on a damaged one.
void SketchToProto(const Sketch& s, summary::Sketch* out);
bool SketchFromProto(const summary::Sketch& p, Sketch* out);
// The digests of one process (model.h RowDigest, RankDigest) into its summary, and
// from it into the model's Proc (false: damaged, nothing set).
void SetDigests(const std::vector<RowDigest>& rows, const std::vector<RankDigest>& ranks,
                const std::vector<std::string>& whole_comms, summary::SummaryProcess* out);
// With `keep_rows` false, the rows are checked and not kept.
bool ReadDigests(const summary::SummaryProcess& sp, Proc* out, bool keep_rows = true);

// The summary file's bytes: the header, then each process, length-delimited.
// A group's (header.nodes() > 0) processes refer to earlier ones for what
// they share (summary_sharing.h), and are deflated where that is smaller
// (within kMaxInflation); where any is either, the header says
// kFirstSharingVersion; a node's are written whole, as given. ParseSummary
// gives back, field for field, the processes given here.
std::string EncodeSummary(const SummaryResult& s);

// Record `r`'s deflated process (r->has_deflated()), in a file of format
// `version`, inflated into `buf` and parsed into `r`, held to what a plain
// record is held to (its shape, summary_shape.h). False with `why`, a
// phrase ("says its 10 deflated bytes inflate to 900, more than 4 times
// as many: ..."), on a version without it, more than kMaxInflation,
// bytes that do not inflate to the size it says, or what is no process.
bool InflateProcess(uint32_t version, summary::SummaryRecord* r, std::string* buf, std::string* why);

// Where each record's frame starts in `bytes`, a checked (version 3) summary
// as EncodeSummary writes it: length, body, checksum. Stops at a length
// that runs past the end. For tests and tools that look at the framing.
std::vector<size_t> SummaryFrameStarts(const std::string& bytes);

// Whether `head` (a file's first bytes) starts like a summary file.
bool LooksLikeSummary(const std::string& head);
// A summary file's bytes to its header and processes. On damage (a length
// past the end, a checksum that does not match, a record that does not
// parse, a foreign or newer file) the
// processes before it are kept and `error` names the file, the offset and
// the problem (false). A process record that fails its checksum alone
// (the next frame's checksum holds, or the file ends after it) is skipped
// and the reading goes on: `error` names each one skipped. So is a process
// record that is not what summarize writes: its elements too small to be
// (summary_shape.h), or its counts, numbering or chain values at odds
// (summary_checks.h; two records whose chain values disagree: both), and
// one whose reference to an earlier record cannot be resolved
// (summary_sharing.h: out of range, forward, to a record not read, to
// what that record has not) or that refers to a record not read.
bool ParseSummary(const std::string& name, const std::string& bytes, SummaryResult* out, std::string* error);
// The same on a file (a regular file of at most kMaxSummaryBytes).
inline constexpr uint64_t kMaxSummaryBytes = 4ull << 30;
bool ReadSummaryFile(const std::string& path, SummaryResult* out, std::string* error);
// The same on many files, on two threads (at 2,048 summaries, parsing one
// by one was a quarter of the merge: BENCHMARKS.md, "The 16k merge on more
// than one core"). Each file goes to its own slot, out[i] and errors[i]
// (empty when read whole), so that nothing depends on the threads' order.
// `then`, where given, is called with each file's index and result as
// soon as it is read, on the thread that read it (to let go at once what
// the caller does not need of it).
// Thread safety: call from one thread; it joins its own before returning.
void ReadSummaryFiles(const std::vector<std::string>& files, std::vector<SummaryResult>* out,
                      std::vector<std::string>* errors,
                      const std::function<void(size_t, SummaryResult*)>& then = nullptr);

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_SUMMARY_FORMAT_H_
