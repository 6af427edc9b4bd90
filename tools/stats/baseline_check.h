// What `ncclwatch check` requires of a baseline (a `stats --format=json`
// file) before it trusts it.
//
// The problem: protobuf's JSON parser takes "NaN", "Infinity" and negative
// numbers for any double, and a missing key as its default, so a damaged or
// hand-edited baseline used to load: NaN latencies, a row with no
// communicator or function, the same row twice, a NUL byte in the middle.
// The bootstrap then compared nothing that meant anything and the gate
// passed.
//
// How: ParseBaseline screens the bytes (JSON holds no raw control byte),
// parses them strictly (the whole input, the format the file names), then
// ValidateBaseline holds every row to what `ncclwatch stats` writes: every
// number finite and in its range (latency percentiles > 0, latency
// samples, skews and bandwidths >= 0, nranks >= 1, 0 <= rank < nranks, a
// known size bucket and timing), every row keyed (communicator, size,
// function, bucket; rank rows: communicator, size, rank) and unique, each
// sample list sorted and as long as its count says (all samples up to
// kMaxRowSamples, at least that many above), each percentile present
// exactly when there are samples, and where every sample is listed, their
// nearest-rank percentile.
// The first problem is named with its row (index and key) and its field as
// the file spells it (lowerCamelCase); how many more there are follows.
// Names from the file are printed through absl::CHexEscape.
//
// Contract: functions of their arguments, no shared state; time and memory
// linear in the input (one pass per list, a set of the row keys).

#ifndef TOOLS_STATS_BASELINE_CHECK_H_
#define TOOLS_STATS_BASELINE_CHECK_H_

#include <string>
#include <string_view>

#include "proto/stats.pb.h"

namespace ncclwatch::tools {

// `bytes` (a whole baseline file) parsed into `s` and validated. False with
// `error` saying where and what: "byte 812 (line 40, column 3): ...",
// "row 3 (comm 'dp', 2 ranks, ReduceScatter, 1 MiB): latencyUs[0] is NaN; ...".
// The caller names the file.
bool ParseBaseline(std::string_view bytes, stats::Stats* s, std::string* error);

// The checks on the parsed message alone (ParseBaseline's second half).
bool ValidateBaseline(const stats::Stats& s, std::string* error);

}  // namespace ncclwatch::tools

#endif  // TOOLS_STATS_BASELINE_CHECK_H_
