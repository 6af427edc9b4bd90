// What `ncclwatch stats` and a summary's stats digest (DigestProcesses)
// take from the model alike: the row an operation belongs to, the sample it
// gives that row, a collective's arrival skew, and each rank's lateness at
// each collective.
//
// Thread safety: functions of their arguments.

#ifndef TOOLS_STATS_SAMPLES_H_
#define TOOLS_STATS_SAMPLES_H_

#include <stdint.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tools/model/model.h"
#include "tools/stats/stats.h"

namespace ncclwatch::tools::stats_internal {

// A row of the stats (StatRow): communicator key, function name and size
// bucket.
struct RowKey {
  std::string comm;
  std::string func;
  int32_t bucket;
  bool operator<(const RowKey& o) const {
    return std::tie(comm, func, bucket) < std::tie(o.comm, o.func, o.bucket);
  }
};

// The function's name, "(unknown)" for none.
std::string FuncName(const Model& m, uint16_t id);
// The size bucket of an op (BucketLog2) and, when `*known`, its bytes.
int32_t BucketOf(const Model& m, const Op& o, double* bytes, bool* known);

// What one operation gives its row: one rank's sample.
struct OpSample {
  bool known = false;  // bytes known
  double bytes = 0;
  bool incomplete = false, warmup = false;
  bool gpu = false, delay = false, cpu = false, polled = false;
  int64_t gpu_ns = 0, delay_ns = 0, cpu_ns = 0;
};
// One operation as its row samples it; `warmed`: its process's timed
// operations of the row left out so far (StatsOptions::warmup_per_rank).
OpSample Sample(const Op& o, uint32_t* warmed, const StatsOptions& opts);

// A collective's arrival skew: its latest start minus its earliest, over
// the ranks that have one (two at least); `first` the first such op.
bool Skew(const Model& m, const Match& match, uint32_t* first, int64_t* skew);

// A rank of a communicator (RankRow), by its key, size and rank.
struct RankKey {
  std::string comm;
  int32_t nranks;
  int32_t rank;
  bool operator<(const RankKey& o) const {
    return std::tie(comm, nranks, rank) < std::tie(o.comm, o.nranks, o.rank);
  }
};

struct RankAcc {
  std::vector<int64_t> lateness;
  // Per function (Op::func): a rank held before one function of a step
  // (its all-reduce waits behind a kernel) is held at a minority of the
  // communicator's collectives, so the median over all of them hides it.
  std::map<uint16_t, std::vector<int64_t>> gpu_lateness;
  std::vector<std::string> procs;
  std::vector<uint32_t> proc_ids;  // Model::procs, as `procs`
  uint64_t stride = 0;  // from samples across the job: one collective in this many (RankRow.stride)
};

// The lower median of `v`, which it reorders; v non-empty.
int64_t LowerMedian(std::vector<int64_t>* v);

// Each rank's lateness at each collective (RankRow): its enqueue start
// minus the lower median start of the collective's ranks. Each
// communicator's first collective (the lowest seq of each function) is
// warm-up. With completions from CUDA events, the same on the GPU: how
// long each rank's kernel was held by other GPU work (GpuHeldNs) minus the
// lower median of its ranks'. A host that enqueues in time but whose GPU
// is busy with other work is late there only.
// `skip_comm`: per communicator, whether its collectives are left out.
std::map<RankKey, RankAcc> Lateness(const Model& m, const std::vector<bool>& skip_comm);

}  // namespace ncclwatch::tools::stats_internal

#endif  // TOOLS_STATS_SAMPLES_H_
