// The synthetic job the summary benchmarks and tests write: one trace file
// per rank, 8 ranks a host, each under DIR/nodeN/ (what `summarize
// DIR/nodeN` reads), with a fault of each kind the summaries must carry:
// rank 5's 11th collective (a ReduceScatter on world, #2) has another
// count, rank 7 arrives 2 ms late at every collective, and the last rank
// never issues the last collective, in which every other rank waits.
// Collectives alternate over AllReduce, AllGather, ReduceScatter and
// Broadcast, every 5th on the rank's pair ("tp"), the others on "world",
// one every 3 ms.
//
// Thread safety: one thread.

#ifndef TOOLS_TESTING_SYNTHETIC_JOB_H_
#define TOOLS_TESTING_SYNTHETIC_JOB_H_

#include <string>
#include <vector>

namespace ncclwatch::tools::testing {

struct SyntheticJob {
  int ranks = 1024;
  int colls = 10000;   // per rank
  std::string job_id;  // in every header (what `summarize --job` picks)
  // Every completion from a CUDA event, the stream seen at each kernel
  // 5 us after its enqueue (the summaries then carry GPU-held times).
  bool events = false;
  // Every 7th step, a send then a receive within each pair, instead of
  // that step's collective.
  bool p2p = false;
  // Hosts' realtime clocks apart by up to 4.2 ms (NTP), and 8 channels an
  // operation: what the benchmarks' job has had from the start.
  bool benchmark_shape = false;
  // Only hosts [first_node, end_node) (-1: to the last), so that several
  // processes can write one large job side by side, each its own hosts;
  // each host's files are those the whole job's writing gives.
  int first_node = 0;
  int end_node = -1;
};

// Writes `job` (its hosts from first_node to end_node) under `dir`. The
// host folders written, in rank order; false with
// `error` naming the file where one cannot be written.
bool WriteSyntheticJob(const std::string& dir, const SyntheticJob& job, std::vector<std::string>* hosts,
                       std::string* error);

}  // namespace ncclwatch::tools::testing

#endif  // TOOLS_TESTING_SYNTHETIC_JOB_H_
