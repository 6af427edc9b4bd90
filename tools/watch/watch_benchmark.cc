// Benchmark of one `ncclwatch watch` poll (issue 32). Not a timed test:
// run it by hand.
//
//   bazel build -c opt //tools/watch:watch_benchmark
//   bazel-bin/tools/watch/watch_benchmark --generate DIR [--ranks 64] [--colls 5000]
//   /usr/bin/time -v bazel-bin/tools/watch/watch_benchmark --run DIR [--polls 5] [--keep-recent N]
//
// --generate writes a running job (BuildJob): every rank alive and still
// writing (nothing finalized), one world communicator, collectives
// cycling through AllReduce, AllGather, ReduceScatter and Broadcast, every
// one completed, heartbeats.
//
// --run follows DIR with one Watcher: the first poll reads every file
// whole, each later one reads nothing new and builds and judges the model
// of the windows again: what a poll of a running job costs. By default
// every operation stays in the windows (--keep-recent: as while an error
// finding stands, or a file lags, when nothing settles), so each poll
// builds the model of every operation read. It prints the CPU time
// (CLOCK_PROCESS_CPUTIME_ID) of each poll and what the poll saw, so two
// builds can be checked to judge alike.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include <string>
#include <vector>

#include "tools/testing/trace_builder.h"
#include "tools/watch/watch.h"

namespace t = ncclwatch::tools::testing;
using ncclwatch::tools::Watcher;
using ncclwatch::tools::WatchOptions;
using ncclwatch::tools::WatchState;

namespace {

double CpuSec() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

int Generate(const std::string& dir, int ranks, int colls) {
  mkdir(dir.c_str(), 0755);
  t::JobSpec spec;
  spec.nranks = ranks;
  spec.ncolls = colls;
  spec.funcs = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast"};
  spec.step_ns = 200 * t::kUs;
  spec.duration_ns = 120 * t::kUs;
  spec.rank_hook = [](int, t::RankPlan& p) { p.end = t::RankEnd::kNone; };
  for (const t::TraceBuilder& b : t::BuildJob(spec))
    if (!b.WriteTo(dir + "/" + b.FileName())) {
      fprintf(stderr, "cannot write %s\n", (dir + "/" + b.FileName()).c_str());
      return 1;
    }
  printf("wrote %d files of %d collectives to %s\n", ranks, colls, dir.c_str());
  return 0;
}

int Run(const std::string& dir, int polls, uint64_t keep_recent) {
  WatchOptions opts;
  opts.keep_recent = keep_recent;
  opts.window_ops = UINT64_MAX;
  opts.chunk_bytes = 1ull << 30;
  Watcher w({dir}, opts);
  double now = 1000;
  for (int k = 0; k <= polls; ++k) {
    const double c0 = CpuSec();
    const WatchState s = w.Poll(now);
    const double c1 = CpuSec();
    now += 1;
    printf("poll %d: %.3f s CPU; end %d, %zu processes, %llu ops kept, %llu let go, verdict: %s\n", k, c1 - c0,
           static_cast<int>(s.end), s.processes, static_cast<unsigned long long>(s.ops_kept),
           static_cast<unsigned long long>(s.ops_let_go), s.diagnosis.verdict().c_str());
  }
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("peak RSS %ld KB\n", ru.ru_maxrss);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string generate, run;
  int ranks = 64, colls = 5000, polls = 5;
  uint64_t keep_recent = UINT64_MAX;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--generate") generate = value;
    else if (flag == "--run") run = value;
    else if (flag == "--ranks") ranks = atoi(value.c_str());
    else if (flag == "--colls") colls = atoi(value.c_str());
    else if (flag == "--polls") polls = atoi(value.c_str());
    else if (flag == "--keep-recent") keep_recent = strtoull(value.c_str(), nullptr, 10);
  }
  if (!generate.empty()) return Generate(generate, ranks, colls);
  if (!run.empty()) return Run(run, polls, keep_recent);
  fprintf(stderr, "usage: %s --generate DIR [--ranks N] [--colls N] | --run DIR [--polls N] [--keep-recent N]\n",
          argv[0]);
  return 2;
}
