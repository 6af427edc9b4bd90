// libnccl-profiler-timing.so: an NCCL profiler plugin that loads another one
// (TIMING_SHIM_INNER, a path) and forwards every call to it unchanged, timing
// each call with the TSC on the thread NCCL made it from. It answers "how long
// does the profiler plugin itself keep each of NCCL's threads busy, in the real
// job", which a CPU micro-benchmark cannot (no GPU, no proxy thread, no cache
// lines shared with NCCL). Wrapping the do-nothing plugin gives the shim's own
// floor (two rdtsc and an indirect call per callback).
//
//   NCCL_PROFILER_PLUGIN=/abs/libnccl-profiler-timing.so
//   TIMING_SHIM_INNER=/abs/libnccl-profiler-ncclwatch.so   (required)
//
// At the last finalize it prints, to stderr, one line per thread that called
// the plugin: its name (/proc/self/task/TID/comm: NCCL names its proxy thread
// "NCCL Progress"), then per callback (startEvent by event type, stopEvent,
// recordEventState) the calls, the mean ns, and the upper edges of the
// power-of-two buckets holding the median and the 99th percentile,
// and the thread's total time in the plugin per Coll/P2p start seen by the
// process. Event handles and descriptors pass through untouched.
//
// Exports ncclProfiler_v5 (NCCL 2.28) only; the inner plugin must export v5.
// Build (gpu/overhead.sh does):
//   g++ -std=c++17 -O2 -shared -fPIC -fvisibility=hidden -I. gpu/timing_shim.cc
//       -o out/libnccl-profiler-timing.so -ldl -pthread

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/abi/profiler_common.h"
#include "plugin/abi/profiler_v4.h"
#include "plugin/abi/profiler_v5.h"

namespace abi = ncclwatch::nccl;

namespace {

// Callback slots: startEvent per event type bit (0..15), then stop, state.
constexpr int kTypes = 16;
constexpr int kStop = kTypes;
constexpr int kState = kTypes + 1;
constexpr int kSlots = kTypes + 2;
constexpr int kBuckets = 24;  // log2(ticks) histogram

struct ThreadStats {
  pid_t tid = 0;
  uint64_t calls[kSlots] = {};
  uint64_t ticks[kSlots] = {};
  uint64_t hist[kSlots][kBuckets] = {};
};

std::mutex g_mu;
std::vector<ThreadStats*>* g_threads = nullptr;  // leaked on purpose: threads may outlive finalize
abi::ProfilerV5* g_inner = nullptr;
void* g_inner_dl = nullptr;
int g_refs = 0;
uint64_t g_tsc0 = 0, g_ns0 = 0;

uint64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

thread_local ThreadStats* t_stats = nullptr;

ThreadStats* Mine() {
  if (t_stats == nullptr) {
    auto* s = new ThreadStats;
    s->tid = static_cast<pid_t>(syscall(SYS_gettid));
    std::lock_guard<std::mutex> l(g_mu);
    if (g_threads == nullptr) g_threads = new std::vector<ThreadStats*>;
    g_threads->push_back(s);
    t_stats = s;
  }
  return t_stats;
}

inline void Account(int slot, uint64_t t0, uint64_t t1) {
  ThreadStats* s = Mine();
  uint64_t d = t1 - t0;
  s->calls[slot]++;
  s->ticks[slot] += d;
  int b = d == 0 ? 0 : 63 - __builtin_clzll(d);
  s->hist[slot][b < kBuckets ? b : kBuckets - 1]++;
}

int TypeSlot(uint64_t type) {
  if (type == 0) return 0;
  int b = __builtin_ctzll(type);
  return b < kTypes ? b : 0;
}

const char* SlotName(int slot) {
  static const char* const kNames[kTypes] = {"Group",     "Coll",       "P2p",        "ProxyOp",
                                             "ProxyStep", "ProxyCtrl",  "KernelCh",   "NetPlugin",
                                             "GroupApi",  "CollApi",    "P2pApi",     "KernelLaunch",
                                             "CeColl",    "CeSync",     "CeBatch",    "type15"};
  if (slot < kTypes) return kNames[slot];
  return slot == kStop ? "stop" : "state";
}

std::string ThreadName(pid_t tid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/comm", static_cast<int>(tid));
  FILE* f = fopen(path, "r");
  if (f == nullptr) return "(exited)";
  char buf[64] = {0};
  if (fgets(buf, sizeof(buf), f) == nullptr) buf[0] = '\0';
  fclose(f);
  size_t n = strlen(buf);
  if (n > 0 && buf[n - 1] == '\n') buf[n - 1] = '\0';
  return buf;
}

void Report() {
  const double ns_per_tick = (MonoNs() - g_ns0) / double(__rdtsc() - g_tsc0);
  std::lock_guard<std::mutex> l(g_mu);
  if (g_threads == nullptr) return;
  uint64_t ops = 0;
  for (ThreadStats* s : *g_threads) ops += s->calls[TypeSlot(abi::kColl)] + s->calls[TypeSlot(abi::kP2p)];
  for (ThreadStats* s : *g_threads) {
    uint64_t total = 0;
    std::string line;
    char buf[160];
    for (int i = 0; i < kSlots; ++i) {
      if (s->calls[i] == 0) continue;
      total += s->ticks[i];
      // Upper edges of the buckets holding the median and the 99th percentile.
      auto edge = [&](uint64_t want) {
        uint64_t seen = 0;
        int b = 0;
        for (; b < kBuckets - 1; ++b) {
          seen += s->hist[i][b];
          if (seen >= want) break;
        }
        return double(uint64_t{2} << b) * ns_per_tick;
      };
      snprintf(buf, sizeof(buf), " %s %llu x %.0f ns (p50 < %.0f, p99 < %.0f ns);", SlotName(i),
               static_cast<unsigned long long>(s->calls[i]), s->ticks[i] * ns_per_tick / s->calls[i],
               edge((s->calls[i] + 1) / 2), edge(s->calls[i] - s->calls[i] / 100));
      line += buf;
    }
    fprintf(stderr, "timing_shim pid %d tid %d '%s': %.0f ns in the plugin per Coll/P2p;%s\n",
            static_cast<int>(getpid()), static_cast<int>(s->tid), ThreadName(s->tid).c_str(),
            ops ? total * ns_per_tick / ops : 0.0, line.c_str());
  }
}

abi::Result Init(void** context, uint64_t comm_id, int* mask, const char* name, int nnodes, int nranks, int rank,
                 abi::Logger log) {
  {
    std::lock_guard<std::mutex> l(g_mu);
    if (g_inner == nullptr) {
      const char* path = getenv("TIMING_SHIM_INNER");
      if (path == nullptr || path[0] == '\0') {
        fprintf(stderr, "timing_shim: TIMING_SHIM_INNER is not set\n");
        return abi::kInvalidUsage;
      }
      g_inner_dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (g_inner_dl == nullptr) {
        fprintf(stderr, "timing_shim: dlopen %s: %s\n", path, dlerror());
        return abi::kInternalError;
      }
      g_inner = static_cast<abi::ProfilerV5*>(dlsym(g_inner_dl, "ncclProfiler_v5"));
      if (g_inner == nullptr) {
        fprintf(stderr, "timing_shim: %s has no ncclProfiler_v5\n", path);
        return abi::kInternalError;
      }
      g_tsc0 = __rdtsc();
      g_ns0 = MonoNs();
      fprintf(stderr, "timing_shim: wrapping %s (%s)\n", path, g_inner->name);
    }
  }
  abi::Result r = g_inner->init(context, comm_id, mask, name, nnodes, nranks, rank, log);
  if (r == abi::kSuccess) {
    std::lock_guard<std::mutex> l(g_mu);
    ++g_refs;
  }
  return r;
}

abi::Result Start(void* context, void** handle, abi::DescrV5* d) {
  uint64_t t0 = __rdtsc();
  abi::Result r = g_inner->startEvent(context, handle, d);
  uint64_t t1 = __rdtsc();
  Account(TypeSlot(d != nullptr ? d->type : 0), t0, t1);
  return r;
}

abi::Result Stop(void* handle) {
  uint64_t t0 = __rdtsc();
  abi::Result r = g_inner->stopEvent(handle);
  Account(kStop, t0, __rdtsc());
  return r;
}

abi::Result State(void* handle, int state, abi::StateArgsV4* args) {
  uint64_t t0 = __rdtsc();
  abi::Result r = g_inner->recordEventState(handle, state, args);
  Account(kState, t0, __rdtsc());
  return r;
}

abi::Result Finalize(void* context) {
  abi::Result r = g_inner->finalize(context);
  bool last = false;
  {
    std::lock_guard<std::mutex> l(g_mu);
    last = --g_refs == 0;
  }
  if (last) Report();
  return r;
}

}  // namespace

extern "C" {
__attribute__((visibility("default"))) abi::ProfilerV5 ncclProfiler_v5 = {"timing_shim", Init, Start, Stop, State,
                                                                           Finalize};
}
