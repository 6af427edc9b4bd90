// Benchmark input for per-node summaries: a synthetic job with a
// mismatch near the start, a straggler and a hang at the end, one file per
// rank, 8 ranks per host. Not a timed test: run it by hand (BENCHMARKS.md,
// "Per-node summaries"), timing `ncclwatch summarize` per node and
// `ncclwatch diagnose` on the summaries and on the traces.
//
//   bazel build -c opt //tools/summary:summary_benchmark //tools:ncclwatch
//   bazel-bin/tools/summary/summary_benchmark DIR [RANKS] [COLLS] [JOB_ID] [events]
//
// With `events`, every completion comes from a CUDA event (the default
// capture from profiler API v5), the stream seen at each kernel 5 us after
// its enqueue: the summaries then carry each sample's GPU-held time.
// Files go to DIR/nodeN/ (one folder per host), so that a node's files are
// what `summarize DIR/nodeN` reads. Rank 5's 11th collective (a
// ReduceScatter on world, #2) has another count; rank 7 arrives 2 ms after
// the others at every collective; the last rank never issues the last
// collective, in which every other rank waits for the last 10 s. JOB_ID
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
#include <sys/stat.h>

#include <string>

#include "tools/testing/trace_builder.h"

namespace t = ncclwatch::tools::testing;

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: summary_benchmark DIR [RANKS] [COLLS] [JOB_ID] [events]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int ranks = argc > 2 ? atoi(argv[2]) : 1024;
  const int colls = argc > 3 ? atoi(argv[3]) : 10000;
  const std::string job = argc > 4 ? argv[4] : "";
  const bool events = argc > 5 && std::string(argv[5]) == "events";
  mkdir(dir.c_str(), 0755);
  const char* funcs[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast"};
  const uint64_t step = 3 * t::kMs;
  for (int r = 0; r < ranks; ++r) {
    t::ProcSpec spec;
    spec.host = "node" + std::to_string(r / 8);
    spec.pid = 10000 + r;
    spec.launcher_rank = r;
    spec.launcher_world_size = ranks;
    spec.job_id = job;
    spec.realtime_base_ns += static_cast<uint64_t>((r / 8) % 7) * 700 * t::kUs;
    t::TraceBuilder b(spec);
    const int world = b.AddComm(0x5000, "world", ranks, r, 1 * t::kMs);
    const int tp = b.AddComm(0x7000 + static_cast<uint64_t>(r / 2), "tp", 2, r % 2, 2 * t::kMs);
    uint64_t seq_world[4] = {0, 0, 0, 0}, seq_tp[4] = {0, 0, 0, 0};
    const uint64_t t0 = 10 * t::kMs;
    for (int k = 0; k < colls; ++k) {
      const int f = k % 4;
      const bool on_tp = k % 5 == 4;
      const uint64_t late = r == 7 ? 2 * t::kMs : 0;
      const uint64_t start =
          t0 + static_cast<uint64_t>(k) * step + static_cast<uint64_t>((r * 37 + k * 11) % 50) * t::kUs + late;
      int64_t done = static_cast<int64_t>(t0 + static_cast<uint64_t>(k) * step + 2500 * t::kUs);
      // The hang: the last rank never issues the last collective, which
      // every other rank waits in until the end.
      if (k == colls - 1) {
        if (r == ranks - 1) continue;
        done = t::kNever;
      }
      t::OpOpts o;
      o.nchannels = 8;
      o.completion = t::Completion::kFolded;
      if (events) {
        o.from_event = true;
        o.event_started_ns = static_cast<int64_t>(start + 5 * t::kUs);
      }
      uint64_t count = uint64_t{1} << (10 + k % 12);
      if (r == 5 && k == 10) count *= 2;
      if (on_tp) b.Coll(tp, funcs[f], seq_tp[f]++, count, start, done, o);
      else b.Coll(world, funcs[f], seq_world[f]++, count, start, done, o);
    }
    const uint64_t end = t0 + static_cast<uint64_t>(colls) * step + 10 * t::kSec;
    b.Heartbeats(0, end);
    const std::string node = dir + "/node" + std::to_string(r / 8);
    mkdir(node.c_str(), 0755);
    if (!b.WriteTo(node + "/" + b.FileName())) {
      fprintf(stderr, "cannot write %s\n", b.FileName().c_str());
      return 1;
    }
  }
  return 0;
}
