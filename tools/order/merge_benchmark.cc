// Benchmark of `ncclwatch merge` + `diagnose` at scale. The target: 1,024
// ranks with 10,000 collectives each in <= 10 s on the 2-core dev machine,
// peak memory <= 2 GB (BENCHMARKS.md). Not a timed test: run it by hand.
//
//   bazel build -c opt //tools/order:merge_benchmark
//   bazel-bin/tools/order/merge_benchmark --generate DIR [--ranks 1024] [--colls 10000]
//   /usr/bin/time -v bazel-bin/tools/order/merge_benchmark --run DIR
//
// --generate writes one file per rank (one rank at a time, so it stays
// small): a world communicator and a 'tp' pair per two ranks, collectives
// cycling through AllReduce / AllGather / ReduceScatter / Broadcast (one in
// five on 'tp'), heartbeats, and, on the last rank, the last collective never
// completes (a hang for diagnose to find). --run loads, orders and diagnoses
// them in a process of its own, apart from the generation, and times each
// stage, so its peak RSS (ru_maxrss) is the analysis alone.
//
// --comms N (with --generate) adds N two-rank communicators, the k-th on
// ranks 2k and 2k+1 (modulo --ranks), each with --comm-colls collectives
// (default 1): a job with many communicators, where diagnose once took 5.3
// times as long on 140,000 communicators as on 70,000.

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "tools/model/model.h"
#include "tools/order/order.h"
#include "tools/testing/trace_builder.h"

#include "tools/diagnose/diagnose.h"

namespace t = ncclwatch::tools::testing;
using ncclwatch::tools::BuildModel;
using ncclwatch::tools::ComputeOrder;
using ncclwatch::tools::LoadOptions;
using ncclwatch::tools::Model;

namespace {

int Generate(const std::string& dir, int ranks, int colls, int comms, int comm_colls) {
  mkdir(dir.c_str(), 0755);
  const char* funcs[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast"};
  const uint64_t step = 200 * t::kUs;
  for (int r = 0; r < ranks; ++r) {
    t::ProcSpec spec;
    spec.host = "node" + std::to_string(r / 8);
    spec.pid = 10000 + r;
    spec.launcher_rank = r;
    spec.launcher_world_size = ranks;
    // Hosts disagree on realtime by up to a few ms (NTP).
    spec.realtime_base_ns += static_cast<uint64_t>((r / 8) % 7) * 700 * t::kUs;
    t::TraceBuilder b(spec);
    int world = b.AddComm(0x5000, "world", ranks, r, 1 * t::kMs);
    int tp = b.AddComm(0x7000 + static_cast<uint64_t>(r / 2), "tp", 2, r % 2, 2 * t::kMs);
    uint64_t seq_world[4] = {0, 0, 0, 0}, seq_tp[4] = {0, 0, 0, 0};
    // The extra communicators this rank is in: the k-th is on ranks 2k and
    // 2k + 1 (modulo the ranks), created before the collectives start.
    std::vector<std::pair<int, int>> extra;  // (builder id, k)
    for (int k = 0; k < comms; ++k) {
      const int a = static_cast<int>((2 * static_cast<int64_t>(k)) % ranks), b2 = (a + 1) % ranks;
      if (r != a && r != b2) continue;
      extra.push_back({b.AddComm(0x100000000ull + static_cast<uint64_t>(k), "pair", 2, r == a ? 0 : 1,
                                 3 * t::kMs + static_cast<uint64_t>(k) * 10),
                       k});
    }
    uint64_t t0 = 10 * t::kMs + static_cast<uint64_t>(comms) * 10;
    for (int k = 0; k < colls; ++k) {
      int f = k % 4;
      bool on_tp = k % 5 == 4;
      uint64_t start = t0 + static_cast<uint64_t>(k) * step + static_cast<uint64_t>((r * 37 + k * 11) % 50) * t::kUs;
      int64_t done = static_cast<int64_t>(t0 + static_cast<uint64_t>(k) * step + 120 * t::kUs);
      if (r == ranks - 1 && k == colls - 1) done = t::kNever;
      t::OpOpts o;
      o.nchannels = 8;
      o.completion = t::Completion::kFolded;
      uint64_t count = uint64_t{1} << (10 + k % 12);
      if (on_tp) b.Coll(tp, funcs[f], seq_tp[f]++, count, start, done, o);
      else b.Coll(world, funcs[f], seq_world[f]++, count, start, done, o);
    }
    uint64_t t1 = t0 + static_cast<uint64_t>(colls) * step;
    for (const auto& [id, k] : extra)
      for (int j = 0; j < comm_colls; ++j) {
        const uint64_t start = t1 + (static_cast<uint64_t>(k) * comm_colls + j) * 20 * t::kUs;
        t::OpOpts o;
        o.nchannels = 2;
        o.completion = t::Completion::kFolded;
        b.Coll(id, "AllReduce", static_cast<uint64_t>(j), 1024, start, static_cast<int64_t>(start + 10 * t::kUs), o);
      }
    t1 += static_cast<uint64_t>(comms) * comm_colls * 20 * t::kUs;
    uint64_t end = t1 + 2 * t::kSec;
    b.Heartbeats(0, end);
    b.Finalize(end + t::kMs, true);
    if (!b.WriteTo(dir + "/" + b.FileName())) {
      fprintf(stderr, "cannot write %s\n", b.FileName().c_str());
      return 1;
    }
  }
  return 0;
}

double Seconds(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

int Run(const std::string& dir) {
  auto t0 = std::chrono::steady_clock::now();
  Model m;
  std::string error;
  if (!BuildModel({dir}, LoadOptions(), &m, &error)) {
    fprintf(stderr, "%s\n", error.c_str());
    return 2;
  }
  double load = Seconds(t0);
  auto t1 = std::chrono::steady_clock::now();
  auto order = ComputeOrder(m);
  double ord = Seconds(t1);
  auto t2 = std::chrono::steady_clock::now();
  auto d = ncclwatch::tools::Diagnose(m, ncclwatch::tools::DiagnoseOptions());
  double diag = Seconds(t2);
  std::string verdict = d.verdict();
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("processes %zu, ops %zu, matches %zu, order nodes %zu\n", m.procs.size(), m.ops.size(), m.matches.size(),
         order.nodes.size());
  printf("load+match+align %.2f s, order %.2f s, diagnose %.2f s, total %.2f s, peak RSS %.0f MiB\n", load, ord, diag,
         Seconds(t0), static_cast<double>(ru.ru_maxrss) / 1024.0);
  printf("verdict: %s\n", verdict.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "", dir = argc > 2 ? argv[2] : "";
  int ranks = 1024, colls = 10000, comms = 0, comm_colls = 1;
  for (int i = 3; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--ranks") ranks = atoi(argv[i + 1]);
    else if (a == "--colls") colls = atoi(argv[i + 1]);
    else if (a == "--comms") comms = atoi(argv[i + 1]);
    else if (a == "--comm-colls") comm_colls = atoi(argv[i + 1]);
  }
  if (mode == "--generate" && !dir.empty()) return Generate(dir, ranks, colls, comms, comm_colls);
  if (mode == "--run" && !dir.empty()) return Run(dir);
  fprintf(stderr, "usage: merge_benchmark --generate DIR [--ranks N] [--colls N] [--comms N] [--comm-colls N] | --run DIR\n");
  return 2;
}
