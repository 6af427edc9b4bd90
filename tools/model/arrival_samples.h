// Arrival samples: where a node cannot judge a communicator's arrivals
// whole (its ranks span nodes), a summary keeps each rank's arrivals at one
// collective in S over the whole file (summary.proto ArrivalSamples), and
// the job's model lines the members up by position. The positions sampled,
// and the samples' packed encoding, are here.
//
// Thread safety: pure functions.

#ifndef TOOLS_MODEL_ARRIVAL_SAMPLES_H_
#define TOOLS_MODEL_ARRIVAL_SAMPLES_H_

#include <stdint.h>

#include <vector>

#include "proto/summary.pb.h"

namespace ncclwatch::tools {

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

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_ARRIVAL_SAMPLES_H_
