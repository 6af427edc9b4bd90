// Benchmark of `ncclwatch watch`'s polls. Not a timed test: run it by
// hand (BENCHMARKS.md, "A watch poll").
//
//   bazel build -c opt //tools/watch:watch_benchmark
//   bazel-bin/tools/watch/watch_benchmark --generate DIR [--ranks 64] [--colls 5000]
//   /usr/bin/time -v bazel-bin/tools/watch/watch_benchmark --run DIR [--polls 5] [--keep-recent N]
//   bazel-bin/tools/watch/watch_benchmark --replay DIR --into EMPTY_DIR [--steps 20] [--polls 5]
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
//
// --replay plays DIR's files into EMPTY_DIR as a running job writes them:
// at each of --steps steps every file gains the next 1/steps of its bytes
// (cut anywhere, as a write seen half done), and the watcher polls, letting
// go what settled (keep_recent 100, watch's default); then --polls more
// polls find nothing new (a job whose processes froze). It prints each
// poll's CPU time, the models it built and its verdict.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>

#include <string>
#include <utility>
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
  // BuildJob starts rank r at 500 ms + 3 ms * r; a rank drops the operations
  // scheduled before it starts, so the first starts after the last rank.
  spec.first_op_ns = (510 + 3 * static_cast<uint64_t>(ranks)) * t::kMs;
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

// Appends to `into` the bytes of `from` past its size, up to `n`.
bool GrowTo(const std::string& from, const std::string& into, uint64_t n) {
  FILE* in = fopen(from.c_str(), "rb");
  FILE* out = fopen(into.c_str(), "ab");
  if (in == nullptr || out == nullptr) return false;
  const long have = ftell(out);
  fseek(in, have, SEEK_SET);
  std::vector<char> buf(n > static_cast<uint64_t>(have) ? n - static_cast<uint64_t>(have) : 0);
  const size_t got = fread(buf.data(), 1, buf.size(), in);
  const bool ok = fwrite(buf.data(), 1, got, out) == got;
  fclose(in);
  return fclose(out) == 0 && ok;
}

int Replay(const std::string& dir, const std::string& into, int steps, int polls) {
  std::vector<std::pair<std::string, uint64_t>> files;  // name, size
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 1;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    struct stat st;
    if (name.size() > 10 && name.substr(name.size() - 10) == ".ncclwatch" && stat((dir + "/" + name).c_str(), &st) == 0)
      files.emplace_back(name, static_cast<uint64_t>(st.st_size));
  }
  closedir(d);
  mkdir(into.c_str(), 0755);
  WatchOptions opts;
  opts.window_ops = UINT64_MAX;
  opts.chunk_bytes = 1ull << 30;
  Watcher w({into}, opts);
  double now = 1000, cpu_steps = 0, cpu_after = 0;
  for (int k = 1; k <= steps + polls; ++k) {
    if (k <= steps)
      for (const auto& [name, size] : files)
        if (!GrowTo(dir + "/" + name, into + "/" + name, size * static_cast<uint64_t>(k) / static_cast<uint64_t>(steps)))
          return 1;
    const double c0 = CpuSec();
    const WatchState s = w.Poll(now);
    const double c1 = CpuSec();
    (k <= steps ? cpu_steps : cpu_after) += c1 - c0;
    now += 1;
    printf("%s %d: %.3f s CPU, %d models; end %d, %llu ops kept, %llu let go, verdict: %.100s\n",
           k <= steps ? "step" : "poll", k, c1 - c0, s.models_built, static_cast<int>(s.end),
           static_cast<unsigned long long>(s.ops_kept), static_cast<unsigned long long>(s.ops_let_go),
           s.diagnosis.verdict().c_str());
    if (s.end != WatchState::kRunning) break;
  }
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("CPU: %.3f s over the steps, %.3f s over the polls after; peak RSS %ld KB\n", cpu_steps, cpu_after,
         ru.ru_maxrss);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string generate, run, replay, into;
  int ranks = 64, colls = 5000, polls = 5, steps = 20;
  uint64_t keep_recent = UINT64_MAX;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--generate") generate = value;
    else if (flag == "--run") run = value;
    else if (flag == "--replay") replay = value;
    else if (flag == "--into") into = value;
    else if (flag == "--steps") steps = atoi(value.c_str());
    else if (flag == "--ranks") ranks = atoi(value.c_str());
    else if (flag == "--colls") colls = atoi(value.c_str());
    else if (flag == "--polls") polls = atoi(value.c_str());
    else if (flag == "--keep-recent") keep_recent = strtoull(value.c_str(), nullptr, 10);
  }
  if (!generate.empty()) return Generate(generate, ranks, colls);
  if (!run.empty()) return Run(run, polls, keep_recent);
  if (!replay.empty() && !into.empty()) return Replay(replay, into, steps, polls);
  fprintf(stderr, "usage: %s --generate DIR [--ranks N] [--colls N] | --run DIR [--polls N] [--keep-recent N] |"
          " --replay DIR --into EMPTY_DIR [--steps N] [--polls N]\n",
          argv[0]);
  return 2;
}
