// A job's summaries read twice, so that the merge never holds them all
// parsed: at 16,384 ranks the parsed summaries were most of diagnose's
// memory (BENCHMARKS.md, "Streaming the summaries").
//
// The first reading (ReadLightSummaries) parses each file and keeps of its
// processes only what the merge reads of every process before it feeds the
// first window: the header record the screening reads, the prefixes
// without their checkpoints (the cuts), the arrival samples (lined up
// across the job), the scalar facts. The second (SummaryRereader) parses
// each file again just before its processes are fed and puts back the
// rest (window records, checkpoints, stats rows, arrival digests, asked
// collectives), one file at a time: beyond the light processes and the
// model, one file is held parsed. A file whose bytes changed between
// the readings is not used the second time: its processes are fed without
// their windows, and the error (naming the file) makes the verdict
// incomplete, since a mix of two versions is evidence of neither.
//
// Thread safety: each object is one thread's (ReadLightSummaries parses on
// two threads of its own and joins them).

#ifndef TOOLS_MODEL_SUMMARY_REREAD_H_
#define TOOLS_MODEL_SUMMARY_REREAD_H_

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "proto/summary.pb.h"
#include "tools/model/summary_format.h"
#include "tools/model/summary_merge.h"

namespace ncclwatch::tools {

// `sp` cut to what the merge reads before it feeds any window (above).
// Returns how many window records it had.
uint64_t LightenProcess(summary::SummaryProcess* sp);
// What LightenProcess let go of `light`, taken from `whole` (the same
// process read again, left without it).
void RefillProcess(summary::SummaryProcess* whole, summary::SummaryProcess* light);

// The first reading: the summaries' processes appended to `pieces` light,
// each with the file it came from, the files parsed on two threads and
// each cut as soon as parsed. What cannot be read goes to `errors` (a
// group's read_errors too); `crcs` gets each file's bytes' CRC-32.
void ReadLightSummaries(const std::vector<std::string>& files, std::vector<SummaryPiece>* pieces,
                        std::vector<std::string>* errors, std::unordered_map<std::string, uint32_t>* crcs);

// The second reading, as a Reread (summary_merge.h): a file is parsed
// when a piece of it is asked for and held until a piece of another is
// (ReadLightSummaries puts a file's pieces together), each checked against
// its first reading's CRC-32 in `crcs`.
class SummaryRereader {
 public:
  explicit SummaryRereader(std::unordered_map<std::string, uint32_t> crcs);

  // Piece `i`'s parts put back (RefillProcess); false where they cannot
  // be, with `error` naming the file (once a file: "" after).
  bool Refill(size_t i, std::vector<SummaryPiece>* pieces, std::string* error);

 private:
  // Makes `result_` the file `source`, read again.
  void Take(const std::string& source);
  void Index();

  std::unordered_map<std::string, uint32_t> crcs_;
  std::string source_;  // the file held parsed ("": none yet)
  SummaryResult result_;
  std::unordered_map<uint64_t, size_t> index_;  // result_'s processes by record
  std::string why_;                              // result_ cannot be used: why
  bool said_ = false;                            // why_ was given
};

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_SUMMARY_REREAD_H_
