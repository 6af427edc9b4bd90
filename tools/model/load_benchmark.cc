// Benchmark of LoadModel alone (the streaming loader). Not a
// timed test: run it by hand, one load per process so that the peak RSS
// is the load's.
//
//   bazel build -c opt //tools/model:load_benchmark
//   bazel-bin/tools/order/merge_benchmark --generate DIR --ranks 1024 --colls 10000
//   /usr/bin/time -v bazel-bin/tools/model/load_benchmark DIR
//
// Prints the load's CPU time (CLOCK_PROCESS_CPUTIME_ID) and wall time,
// what it loaded (so that two builds can be checked to load alike) and
// the peak RSS.

#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

#include <string>

#include "tools/model/model.h"

namespace {

double Clock(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const double cpu0 = Clock(CLOCK_PROCESS_CPUTIME_ID), wall0 = Clock(CLOCK_MONOTONIC);
  ncclwatch::tools::Model m;
  std::string error;
  if (!ncclwatch::tools::LoadModel({argv[1]}, ncclwatch::tools::LoadOptions(), &m, &error)) {
    fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  const double cpu = Clock(CLOCK_PROCESS_CPUTIME_ID) - cpu0, wall = Clock(CLOCK_MONOTONIC) - wall0;
  size_t damaged = 0, issues = 0;
  for (const ncclwatch::tools::Proc& p : m.procs) {
    damaged += p.damaged;
    issues += p.issues.size();
  }
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("LoadModel: %.2f s CPU, %.2f s wall; %zu processes, %zu ops, %zu communicators, %zu damaged, %zu issues; "
         "peak RSS %ld KB\n",
         cpu, wall, m.procs.size(), m.ops.size(), m.comms.size(), damaged, issues, ru.ru_maxrss);
  return 0;
}
