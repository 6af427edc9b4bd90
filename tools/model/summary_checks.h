// Whether a summary's process record, whose checksum holds, says what
// `ncclwatch summarize` could have written: the consistency checks a trace
// file's records get, for a summary's counts, numbering and hashes.
//
// The CRC-32 after each record (summary_format.h) sees a byte changed on
// the way; it cannot see an edit, since whoever edits a summary can
// compute its checksums. An edited checkpoint hash, count or seq would be
// read as evidence, and the merge would build a MISMATCH or HANG on it.
// Each rule here holds for every summary summarize writes, at any window,
// cap (thinned checkpoints), second round (--collectives) and format
// version, and fails on edits:
//  - a prefix's checkpoints stand at increasing positions within its
//    collectives, on the grid of its interval (the header's, or the one
//    the cap thinned them to), its last at its last collective;
//  - each checkpoint's function and seq are among what it let go (its
//    function's last seq is at least the checkpoint's);
//  - counts agree: collectives within operations, one function or
//    (function, peer) once, the process's let-go operations the sum of
//    its prefixes', completed ones within them, each stats row's counts
//    and sketches within its operations;
//  - a chain value stands at one position: the chain is FNV over the
//    collectives' signatures, so one value at two positions, in any
//    prefix of any process of the file, is a 64-bit collision or an edit
//    (ChainValues);
//  - asked collectives (the second round) lie in what their prefix let go
//    and asked for, and where they run on from a checkpoint (or from the
//    start), their signatures chained give the checkpoints stored after
//    them.
// Checked at the merge, where the window's records are parsed anyway: that
// the window's collectives are not numbered below its prefix's (NCCL's
// numbers repeat for CUDA graphs, never go back; merge_feed.cc), and that
// chains which differ do not agree again (merge_chains.cc).
// Not seen here: an edited hash at a prefix's end with nothing to chain
// to it (no asked collectives); the merge then compares it with the other
// ranks' (merge_chains.cc), and the second round, which asks for those
// collectives, finds it here.
//
// Not for: the record's shape before parsing (summary_shape.h), or what
// the values mean for the job (the merge).
//
// Thread safety: CheckSummaryProcess is a pure function; a ChainValues is
// one thread's.

#ifndef TOOLS_MODEL_SUMMARY_CHECKS_H_
#define TOOLS_MODEL_SUMMARY_CHECKS_H_

#include <stdint.h>

#include <string>
#include <unordered_map>
#include <utility>

#include "proto/summary.pb.h"

namespace ncclwatch::tools {

// Whether `sp`, read under `header`, could be what summarize wrote (see
// above). False with `why`, a phrase naming the field ("prefixes[2]
// (comm 0x...) checkpoints[3] at position 70 is off its interval of 64").
bool CheckSummaryProcess(const summary::SummaryHeader& header, const summary::SummaryProcess& sp, std::string* why);

// The checkpoints of a file's processes, each chain value at its position:
// a value at two positions is an edit. Memory: 24 bytes or so per
// checkpoint of the file (a few thousand per node).
class ChainValues {
 public:
  // Record `record`'s checkpoints added; false with `why` and `other`
  // (the record of the value's other position: `record` itself when its
  // own prefixes disagree) at the first value that stands at two.
  bool Add(uint64_t record, const summary::SummaryProcess& sp, uint64_t* other, std::string* why);

 private:
  std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> at_;  // value -> position, record
};

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_SUMMARY_CHECKS_H_
