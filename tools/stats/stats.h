// `ncclwatch stats`: latency, bandwidth, enqueue delay and arrival skew per
// communicator, function and message-size bucket, as a table or as JSON
// (proto/stats.proto, the baseline format of `ncclwatch check`).
//
// Conventions (the full list is in proto/stats.proto, StatRow):
// - Bytes follow nccl-tests (doc/PERFORMANCE.md): the "size" S of an
//   operation is count x datatype size, except AllGather and ReduceScatter,
//   where NCCL's count is per rank (AllGather's sendcount, ReduceScatter's
//   recvcount) and S is the whole array: count x datatype size x nranks.
//   Send and Recv: count x datatype size.
// - algbw = S / t and busbw = algbw x factor with nccl-tests' factors:
//   AllReduce 2(n-1)/n; AllGather, ReduceScatter (n-1)/n; Broadcast, Reduce,
//   Send, Recv 1. t is the row's median latency.
// - Latency is GPU time (first kernel channel start to last stop) for rows
//   where any op has GPU timing (only those ops are sampled); otherwise CPU
//   time (completion seen by the plugin minus enqueue start), labelled "cpu".

#ifndef TOOLS_STATS_STATS_H_
#define TOOLS_STATS_STATS_H_

#include <stdint.h>

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "proto/stats.pb.h"
#include "tools/model/model.h"
#include "tools/model/semantics.h"

namespace ncclwatch::tools {

// Nearest-rank percentile (p in (0, 100]) of `v`, which it reorders; v non-empty.
int64_t Percentile(std::vector<int64_t>* v, double p);

// The row key of a communicator: its name, or "(unnamed, N ranks)".
std::string CommKey(const Comm& c);

// "0 B", "512 B", "1 KiB", "64 MiB", "2 GiB" for 2^log2 bytes; "unknown" for -1.
std::string BucketLabel(int32_t log2);


struct StatsOptions {
  // Each rank's first timed operations of a row left out of the timings as
  // warm-up (NCCL connects peers and builds plans on first use).
  uint32_t warmup_per_rank = 1;
};

// The rows, sorted by communicator, function and bucket.
stats::Stats ComputeStats(const Model& m, const StatsOptions& opts = {});

// What a per-node summary keeps of each process of `m` (a node's model,
// matched) for stats (model.h RowDigest): its operations per row, with
// the skew and lateness of the communicators whose every rank is in `m`.
// ComputeStats over a model of summaries' processes (Proc::digested)
// reads these instead of the processes' windows.
struct ProcDigest {
  std::vector<RowDigest> rows;
  std::vector<RankDigest> ranks;
  std::vector<std::string> whole_comms;
};
std::vector<ProcDigest> DigestProcesses(const Model& m, const StatsOptions& opts = {});

// An aligned table, one line per row.
void PrintStatsTable(const stats::Stats& s, std::ostream& out);

// JSON (protobuf's encoder, proto field names), and back.
std::string StatsToJson(const stats::Stats& s);
bool StatsFromJson(const std::string& json, stats::Stats* s, std::string* error);


}  // namespace ncclwatch::tools

#endif  // TOOLS_STATS_STATS_H_
