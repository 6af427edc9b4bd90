// Writes a job of many short-lived communicators (BENCHMARKS.md, "Many
// communicators"): RANKS processes, each making N communicators one after
// another, every rank in each, one AllReduce on it, then finalizing it, as a
// program that makes a communicator per step or per subgroup does.
//
//   comms_benchmark DIR N [RANKS] [ops|bare|open|partial]
// ops (default): one AllReduce each; bare: no operation; open: one
// AllReduce each and no communicator finalized; partial: as ops, but each
// communicator has twice RANKS members (the others' files missing).
#include <stdio.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "tools/testing/trace_builder.h"

namespace t = ncclwatch::tools::testing;

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: comms_benchmark DIR N [RANKS] [ops|bare|open|partial]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int n = atoi(argv[2]);
  const int ranks = argc > 3 ? atoi(argv[3]) : 2;
  const std::string mode = argc > 4 ? argv[4] : "ops";
  for (int r = 0; r < ranks; ++r) {
    t::ProcSpec spec;
    spec.host = "node" + std::to_string(r);
    spec.pid = 1000 + r;
    spec.launcher_rank = r;
    spec.launcher_world_size = ranks;
    t::TraceBuilder b(spec);
    uint64_t at = t::kSec;
    for (int c = 0; c < n; ++c) {
      const int comm = b.AddComm(0x1000000ull + static_cast<uint64_t>(c), "c" + std::to_string(c),
                                 mode == "partial" ? 2 * ranks : ranks, r, at,
                                 ranks);
      if (mode != "bare") b.Coll(comm, "AllReduce", 0, 1024, at + 10 * t::kUs, at + 30 * t::kUs);
      if (mode != "open") b.FinalizeComm(comm, at + 50 * t::kUs);
      at += 100 * t::kUs;
    }
    b.Heartbeats(t::kSec, at);
    b.Finalize(at + t::kMs);
    if (!b.WriteTo(dir + "/" + b.FileName())) {
      fprintf(stderr, "cannot write %s\n", (dir + "/" + b.FileName()).c_str());
      return 1;
    }
  }
  return 0;
}
