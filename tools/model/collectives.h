// The second round of a chain mismatch: which collectives a
// summary adds besides its window, asked as `summarize --collectives`.
//
// The per-node summaries' signature chains find that ranks diverged
// between two checkpoints of a communicator, not where; the merge
// (diagnose, tools/model/merge_chains.cc) names the range, and summarize asked for that range
// keeps those collectives' records so that diagnose's own finder names the
// operation. A range is of chain positions: a collective's 1-based count
// over its rank's collectives on the communicator (CommPrefix.collectives
// counts the same), so every rank finds the same range whatever its node.
// A communicator is named by its 64-bit hash (CommInit.comm_hash), the one
// thing every rank's trace and summary call it alike: names repeat
// ('tp' groups) and indices are per file.
//
// Text: COMM:FROM-TO[,COMM:FROM-TO...], COMM the hash in hex (0x and up
// to 16 digits), e.g. 0x5c0e71c9a3b1d2f4:1-64. Parse and format live here
// only, so diagnose's hint and summarize read one syntax.
//
// Thread safety: pure functions.

#ifndef TOOLS_MODEL_COLLECTIVES_H_
#define TOOLS_MODEL_COLLECTIVES_H_

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

namespace ncclwatch::tools {

struct CollectiveRange {
  uint64_t comm_hash = 0;
  uint64_t from = 0, to = 0;  // chain positions, 1-based, both included
  bool operator==(const CollectiveRange& o) const {
    return comm_hash == o.comm_hash && from == o.from && to == o.to;
  }
};

// The bounds that keep a summary small whatever is asked: a range is at
// most the default checkpoint interval (what one chain mismatch spans
// unless the cap thinned the checkpoints), at most this many ranges per
// communicator and communicators per request. 64 x 16 collectives of one
// rank are some 60 KB of records at most.
inline constexpr uint64_t kMaxAskedPerRange = 64;
inline constexpr size_t kMaxAskedRangesPerComm = 16;
inline constexpr size_t kMaxAskedComms = 16;

// `text` (the flag's value) to ranges. False with `error` saying what is
// wrong (for "bad --collectives: ..."): a missing part, a hash that is not
// hex or is 0, a position 0 or FROM after TO, a range or a request past the
// bounds above.
bool ParseCollectiveRanges(const std::string& text, std::vector<CollectiveRange>* out, std::string* error);

// The ranges as the flag's value ("" for none): the inverse of the above.
std::string FormatCollectiveRanges(const std::vector<CollectiveRange>& ranges);

// The hash as the flag writes it: 0x and 16 hex digits.
std::string CommHashText(uint64_t hash);

// Positions FROM to TO of one communicator as ranges a request may ask:
// split in pieces of kMaxAskedPerRange, at most kMaxAskedRangesPerComm of
// them from FROM on (a range wider than that, where the cap thinned the
// checkpoints 16-fold, is asked from its start only).
std::vector<CollectiveRange> RangesToAsk(uint64_t comm_hash, uint64_t from, uint64_t to);

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_COLLECTIVES_H_
