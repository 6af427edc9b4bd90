// The launching thread's cost of completions from CUDA events, on the CPU:
// the built plugin, loaded as NCCL loads it, driven through the exported
// ncclProfiler_v5 (and v7) with NCCL 2.28's calls for one plan
// (docs/nccl_call_order.md): KernelLaunch start, cuLaunchKernelEx,
// KernelLaunch stop, then the plan's Group start, Coll start, Coll stop,
// Group stop; the -api configurations with the GroupApi and CollApi events
// before them too. The CUDA driver is plugin/testing/null_cuda.cc, whose calls do
// nothing, so what is timed beyond the "none" configuration is the plugin's
// own work beyond the driver's calls: the measure of the target that a
// launch cost its thread at most 0.1 us beyond the driver's own record
// calls. BENCHMARKS.md, "The launching thread's cost", has the method and
// the numbers.
//
//   launch_benchmark [ROUNDS]   interleaved timing: ROUNDS (default 60) rounds of every
//                               configuration, one block of 500 plans each, in rotated order
//   launch_benchmark --count CONFIG [PLANS]
//                               runs PLANS (default 10,000) plans of one configuration inside
//                               CountedPlans, for valgrind --tool=callgrind
//                               --toggle-collect='*CountedPlans*' (instructions per plan)
//
//   LAUNCH_BENCH_SO=path        another build of the plugin instead of this one's
//   LAUNCH_BENCH_BASE_SO=path   another build timed in the same rounds as this one's
//                               (base-plan, base-launch, base-ops), with per-round ratios
//   LAUNCH_BENCH_INTERVAL_US=N  NCCLWATCH_EVENT_INTERVAL_US of the sampled configurations
//                               (plan-sampled, launch-sampled; default 100: in a loop of
//                               plans, almost no launch records its events)
//
// Each configuration that needs its own settings gets a private copy of
// the .so (its own Profiler: the mode is chosen at its first init). The
// writers drain between blocks, outside the timed spans; each copy's closing
// log line (printed at the end) must say 0 events dropped for the numbers to
// count.

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "plugin/abi/profiler_common.h"
#include "plugin/abi/profiler_v5.h"
#include "plugin/abi/profiler_v7.h"
#include "plugin/testing/api_events.h"

namespace nccl = ncclwatch::nccl;

// What NCCL's process exports (the plugin asks for NCCL's version).
extern "C" __attribute__((visibility("default"))) int ncclGetVersion(int* v) {
  *v = 22809;
  return 0;
}

namespace {

constexpr int kBlock = 500;  // plans per timed block: 1,000 records, an eighth of a thread's ring

uint64_t Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

std::string g_runfiles;

std::string Runfile(const char* rel) { return g_runfiles + "/" + rel; }

void FindRunfiles(const char* argv0) {
  if (const char* d = getenv("RUNFILES_DIR")) {
    g_runfiles = std::string(d) + "/ncclwatch";
  } else if (access((std::string(argv0) + ".runfiles/ncclwatch").c_str(), F_OK) == 0) {
    g_runfiles = std::string(argv0) + ".runfiles/ncclwatch";
  } else {
    g_runfiles = ".";  // bazel run: the runfiles tree is the working directory
  }
}

void Logger(nccl::LogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "  plugin log: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

void (*g_launch)(void*) = nullptr;  // null_cuda.cc's stand-in for cuLaunchKernelEx
uint64_t (*g_records)() = nullptr;  // null_cuda.cc's count of cuEventRecord calls
uint64_t (*g_checks)() = nullptr;   // and of cuStreamIsCapturing calls

struct Plugin {
  int api = 5;
  nccl::ProfilerV5* v5 = nullptr;
  nccl::ProfilerV7* v7 = nullptr;
  void* ctx = nullptr;
  int mask = 0;
  uint64_t seq = 0;
};

// A private copy of the plugin with its own settings.
Plugin LoadCopy(const std::string& name, int api, bool start_events, const std::string& so,
                const char* interval_us = "0") {
  const std::string copy = "/tmp/ncclwatch_launch_bench_" + std::to_string(getpid()) + "_" + name + ".so";
  const std::string dir = "/tmp/ncclwatch_launch_bench_" + std::to_string(getpid()) + "_" + name;
  const std::string cmd = "cp " + so + " " + copy + " && mkdir -p " + dir;
  if (system(cmd.c_str()) != 0) exit(2);
  setenv("NCCLWATCH_DIR", dir.c_str(), 1);
  setenv("NCCLWATCH_COMPLETIONS", "events", 1);
  setenv("NCCLWATCH_STUCK_SEC", "0", 1);
  setenv("NCCLWATCH_START_EVENTS", start_events ? "1" : "0", 1);
  setenv("NCCLWATCH_EVENT_INTERVAL_US", interval_us, 1);
  Plugin p;
  p.api = api;
  void* h = dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    fprintf(stderr, "dlopen %s: %s\n", copy.c_str(), dlerror());
    exit(2);
  }
  int rc = -1;
  if (api == 7) {
    p.v7 = static_cast<nccl::ProfilerV7*>(dlsym(h, "ncclProfiler_v7"));
    if (p.v7 != nullptr) rc = p.v7->init(&p.ctx, 0xBE07, &p.mask, "bench", 1, 2, 0, &Logger);
  } else {
    p.v5 = static_cast<nccl::ProfilerV5*>(dlsym(h, "ncclProfiler_v5"));
    if (p.v5 != nullptr) rc = p.v5->init(&p.ctx, 0xBE05, &p.mask, "bench", 1, 2, 0, &Logger);
  }
  if (rc != 0 || p.ctx == nullptr || (p.mask & nccl::kKernelLaunch) == 0) {
    fprintf(stderr, "%s: plugin init failed or no CUDA-event completions (mask 0x%x)\n", name.c_str(), p.mask);
    exit(2);
  }
  return p;
}

void* const kStream = reinterpret_cast<void*>(uintptr_t{0x5A00});

// One plan as NCCL 2.28 makes it: the API events NCCL sends whatever the
// plugin's mask (when parts & 4: GroupApi, its two states and a CollApi
// before the launch, the GroupApi's stop last), the launch (with its
// profiler events when parts & 1), then the plan's Group and AllReduce (when
// parts & 2), their stop meaning "enqueued". D is the version's descriptor.
template <typename D, typename T>
inline void PlanOf(T* t, Plugin* p, int parts) {
  void* gah = nullptr;
  void* cah = nullptr;
  if (parts & 4) ncclwatch::testing::StartCallApiEvents<D>(t, p->ctx, kStream, false, &gah, &cah);
  void* kh = nullptr;
  if (parts & 1) {
    D k{};
    k.type = nccl::kKernelLaunch;
    k.parentObj = gah;
    k.kernelLaunch.stream = kStream;
    t->startEvent(p->ctx, &kh, &k);
  }
  g_launch(kStream);
  if (parts & 1) t->stopEvent(kh);
  if (!(parts & 2)) {
    if (gah != nullptr) t->stopEvent(gah);
    return;
  }
  D g{};
  g.type = nccl::kGroup;
  void* gh = nullptr;
  t->startEvent(p->ctx, &gh, &g);
  D c{};
  c.type = nccl::kColl;
  c.coll.seqNumber = p->seq++;
  c.coll.func = "AllReduce";
  c.coll.count = 2;
  c.coll.datatype = "ncclFloat32";
  c.coll.nChannels = 1;
  c.coll.nWarps = 1;
  c.coll.algo = "RING";
  c.coll.proto = "LL";
  c.coll.parentGroup = gh;
  c.parentObj = cah;  // v5+: a Coll's parent is its (stopped) CollApi
  void* ch = nullptr;
  t->startEvent(p->ctx, &ch, &c);
  t->stopEvent(ch);
  t->stopEvent(gh);
  if (gah != nullptr) t->stopEvent(gah);
}

inline void Plan(Plugin* p, int parts) {
  if (p == nullptr) {
    g_launch(kStream);
  } else if (p->api == 7) {
    PlanOf<nccl::DescrV7>(p->v7, p, parts);
  } else {
    PlanOf<nccl::DescrV5>(p->v5, p, parts);
  }
}

struct Mode {
  const char* name;
  Plugin* plugin;  // null: no plugin
  int parts;
};

// Callgrind counts what runs inside this function (--toggle-collect).
__attribute__((noinline)) void CountedPlans(const Mode& m, int n) {
  for (int i = 0; i < n; ++i) Plan(m.plugin, m.parts);
  __asm__ volatile("" ::: "memory");
}
// The same, not counted (a body of its own: identical ones are folded).
volatile int g_warm_calls = 0;
__attribute__((noinline)) void WarmUp(const Mode& m, int n) {
  for (int i = 0; i < n; ++i) Plan(m.plugin, m.parts);
  g_warm_calls = g_warm_calls + 1;
}

void Finalize(Plugin* p) {
  if (p->api == 7) p->v7->finalize(p->ctx);
  else p->v5->finalize(p->ctx);
}

}  // namespace

int main(int argc, char** argv) {
  FindRunfiles(argv[0]);
  // RTLD_GLOBAL: the plugin's dlopen("libcuda.so.1", RTLD_NOLOAD) finds it by soname.
  void* cuda = dlopen(Runfile("plugin/testing/libnullcuda.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (cuda == nullptr) {
    fprintf(stderr, "cannot load the null CUDA driver: %s\n", dlerror());
    return 2;
  }
  g_launch = reinterpret_cast<void (*)(void*)>(dlsym(cuda, "nullcuda_launch"));
  g_records = reinterpret_cast<uint64_t (*)()>(dlsym(cuda, "nullcuda_records"));
  g_checks = reinterpret_cast<uint64_t (*)()>(dlsym(cuda, "nullcuda_capture_checks"));
  if (g_launch == nullptr || g_records == nullptr || g_checks == nullptr) return 2;

  // LAUNCH_BENCH_SO: another build of the plugin instead of this one's.
  const char* so_env = getenv("LAUNCH_BENCH_SO");
  const std::string so = so_env != nullptr && so_env[0] != '\0' ? std::string(so_env)
                                                                 : Runfile("plugin/libnccl-profiler-ncclwatch.so");
  Plugin ev = LoadCopy("events", 5, true, so);
  Plugin nostart = LoadCopy("nostart", 5, false, so);
  Plugin v7 = LoadCopy("v7", 7, true, so);
  const char* interval_env = getenv("LAUNCH_BENCH_INTERVAL_US");
  Plugin sampled = LoadCopy("sampled", 5, true, so,
                            interval_env != nullptr && interval_env[0] != '\0' ? interval_env : "100");
  // plan: all six calls; launch: the launch's two only (its ops never come);
  // ops: the plan's four only (no launch before them: untracked).
  // plan-sampled, launch-sampled: NCCLWATCH_EVENT_INTERVAL_US (the null
  // driver's records cost nothing, so this times the sampling's own work).
  // plan-api, launch-api: plan and launch with the API events NCCL 2.28
  // sends before them (GroupApi, CollApi), as a real NCCL calls.
  std::vector<Mode> modes = {{"none", nullptr, 0},          {"plan", &ev, 3},
                             {"launch", &ev, 1},            {"ops", &ev, 2},
                             {"plan-nostart", &nostart, 3}, {"plan-v7", &v7, 3},
                             {"plan-sampled", &sampled, 3}, {"launch-sampled", &sampled, 1},
                             {"plan-api", &ev, 7},          {"launch-api", &ev, 5}};
  const size_t kPlanApiAt = 8;
  const size_t kBaseAt = modes.size();  // base-plan's index, when there is one
  // Another build of the plugin (an earlier commit's), timed in the same
  // rounds: base-plan / plan is the change's ratio.
  Plugin base;
  const char* base_so = getenv("LAUNCH_BENCH_BASE_SO");
  if (base_so != nullptr && base_so[0] != '\0') {
    base = LoadCopy("base", 5, true, base_so);
    modes.push_back({"base-plan", &base, 3});
    modes.push_back({"base-launch", &base, 1});
    modes.push_back({"base-ops", &base, 2});
    modes.push_back({"base-plan-api", &base, 7});
  }

  if (argc >= 3 && strcmp(argv[1], "--count") == 0) {
    const int plans = argc >= 4 ? atoi(argv[3]) : 10000;
    const Mode* m = nullptr;
    for (const Mode& x : modes)
      if (strcmp(x.name, argv[2]) == 0) m = &x;
    if (m == nullptr) {
      fprintf(stderr, "no configuration %s\n", argv[2]);
      return 2;
    }
    WarmUp(*m, 2000);  // the stream's ring, pages, caches
    usleep(20000);
    for (int done = 0; done < plans; done += kBlock) {
      CountedPlans(*m, kBlock);
      usleep(20000);  // the writer drains between blocks
    }
    printf("%s: %d plans counted\n", m->name, plans);
  } else {
    const int rounds = argc >= 2 ? atoi(argv[1]) : 60;
    // Each configuration's warm-up apart: back to back, the copies that
    // serve several configurations filled their thread's ring (their
    // closing lines counted the drops; the timed blocks had none).
    for (const Mode& m : modes) {
      WarmUp(m, 2000);
      usleep(20000);
    }
    std::vector<std::vector<double>> per(modes.size());
    const size_t n = modes.size();
    std::vector<uint64_t> records(modes.size(), 0), checks(modes.size(), 0);
    for (int round = 0; round < rounds; ++round) {
      for (size_t k = 0; k < n; ++k) {
        const Mode& m = modes[(round + k) % n];  // each mode in each position as often
        const uint64_t r0 = g_records(), c0 = g_checks();
        const uint64_t t0 = Now();
        for (int i = 0; i < kBlock; ++i) Plan(m.plugin, m.parts);
        per[(round + k) % n].push_back(double(Now() - t0) / kBlock);
        records[(round + k) % n] += g_records() - r0;
        checks[(round + k) % n] += g_checks() - c0;
        usleep(3000);  // the writers drain between blocks (every 10 ms)
      }
    }
    // Medians of the blocks, and of each round's difference from "none" in
    // the same round (paired: a round's load affects both).
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    for (size_t m = 0; m < n; ++m) {
      std::vector<double> diff;
      for (int i = 0; i < rounds; ++i) diff.push_back(per[m][i] - per[0][i]);
      std::vector<double> v = per[m];
      std::sort(v.begin(), v.end());
      printf("%-14s ns per plan: p25 %7.1f  median %7.1f  p75 %7.1f; beyond none: median %6.1f  (%d blocks of %d); "
             "event records per plan %.3f, capture checks %.3f\n",
             modes[m].name, v[v.size() / 4], v[v.size() / 2], v[v.size() * 3 / 4], median(diff), rounds, kBlock,
             double(records[m]) / (double(rounds) * kBlock), double(checks[m]) / (double(rounds) * kBlock));
    }
    if (n > kBaseAt) {
      // Per round, (base - none) / (plan - none): the ratio of the plugin's own work.
      for (size_t k = 0; k < 4; ++k) {
        const size_t head = k < 3 ? 1 + k : kPlanApiAt;
        std::vector<double> r;
        for (int i = 0; i < rounds; ++i)
          r.push_back((per[kBaseAt + k][i] - per[0][i]) / (per[head][i] - per[0][i]));
        printf("%s beyond none / %s beyond none: median of rounds %.2f\n", modes[kBaseAt + k].name,
               modes[head].name, median(r));
      }
    }
  }
  Finalize(&ev);
  Finalize(&nostart);
  Finalize(&v7);
  Finalize(&sampled);
  if (base.ctx != nullptr) Finalize(&base);
  const std::string cmd = "rm -rf /tmp/ncclwatch_launch_bench_" + std::to_string(getpid()) + "_*";
  if (system(cmd.c_str()) != 0) return 1;
  return 0;
}
