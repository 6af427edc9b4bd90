// Benchmark input for per-node summaries: a synthetic job with a
// mismatch near the start, a straggler and a hang at the end, one file per
// rank, 8 ranks per host. Not a timed test: run it by hand (BENCHMARKS.md,
// "Per-node summaries"), timing `ncclwatch summarize` per node and
// `ncclwatch diagnose` on the summaries and on the traces.
//
//   bazel build -c opt //tools/summary:summary_benchmark //tools:ncclwatch
//   bazel-bin/tools/summary/summary_benchmark DIR [RANKS] [COLLS] [JOB_ID] [events] [nodes=FIRST-END]
//
// With `events`, every completion comes from a CUDA event (the default
// capture from profiler API v5), the stream seen at each kernel 5 us after
// its enqueue: the summaries then carry each sample's GPU-held time.
// With `nodes=FIRST-END`, only hosts nodeFIRST to node(END-1), as the
// whole job has them: one process per core, each its own range, write a
// large job in a fraction of the time (the 131k job takes about 100
// minutes of one core).
// The job is tools/testing/synthetic_job.h's (rank 5's count mismatch,
// rank 7 late, the last rank's hang), in its benchmark shape. JOB_ID
// goes in every header (what `summarize --job` picks; examples_test.sh
// runs the job scripts on a small one).
//
// Group summaries (BENCHMARKS.md, "Group summaries"): each node's summary
// into SUMS/, one group summary per 64 of them, as the job scripts gather
// them, and `diagnose` of the groups beside `diagnose` of the nodes:
//
//   for n in $(ls DIR); do ncclwatch summarize -o SUMS/$n.ncclsummary DIR/$n; done
//   /usr/bin/time -v ncclwatch summarize -o GROUPS/group0.ncclsummary SUMS/node{0..63}.ncclsummary
//   /usr/bin/time -v ncclwatch diagnose GROUPS

#include <stdio.h>
#include <stdlib.h>

#include <string>

#include "tools/testing/synthetic_job.h"

namespace t = ncclwatch::tools::testing;

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: summary_benchmark DIR [RANKS] [COLLS] [JOB_ID] [events] [nodes=FIRST-END]\n");
    return 2;
  }
  t::SyntheticJob job;
  job.ranks = argc > 2 ? atoi(argv[2]) : 1024;
  job.colls = argc > 3 ? atoi(argv[3]) : 10000;
  job.job_id = argc > 4 ? argv[4] : "";
  for (int i = 5; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "events") {
      job.events = true;
    } else if (a.rfind("nodes=", 0) == 0 && a.find('-') != std::string::npos) {
      job.first_node = atoi(a.c_str() + 6);
      job.end_node = atoi(a.c_str() + a.find('-') + 1);
    } else {
      fprintf(stderr, "summary_benchmark: %s: neither events nor nodes=FIRST-END\n", a.c_str());
      return 2;
    }
  }
  job.benchmark_shape = true;
  std::string error;
  if (!t::WriteSyntheticJob(argv[1], job, nullptr, &error)) {
    fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  return 0;
}
