// Completions from CUDA events (NCCLWATCH_COMPLETIONS=events) on one real
// GPU, without NCCL: a one-rank NCCL communicator never calls a profiler
// plugin, so this program plays NCCL 2.28's part (profiler API v5) around
// real launches on a real stream: KernelLaunch start, an 8-byte
// cuMemsetD8Async (the kernel), KernelLaunch stop, then the plan's Group
// and AllReduce start and stop on the same thread.
//
//   events_check PLUGIN_SO OUT_DIR check   traces of the cases below, in OUT_DIR/<case>/
//   events_check PLUGIN_SO OUT_DIR bench   host time per launch: no plugin, channels, events
//                                          (and events-sampled: EVENT_INTERVAL_US, default 50)
//   events_check PLUGIN_SO OUT_DIR ablate  the same, the driver's calls alone beside the plugin;
//                                          with BASE_PLUGIN=<an earlier .so>, its plans beside
//                                          this one's, with NCCL 2.28's API events (GroupApi,
//                                          CollApi) before each launch, and their ratio per round
//
// check: `ok` (200 ops, the stream synchronized), `graph` (a launch into a
// stream being captured), `blocked` (a host function holds the stream past
// the stuck threshold), `ctxgone` (the context destroyed with launches the
// writer has not yet seen complete). With NCCLWATCH_EVENT_INTERVAL_US=50:
// `sampled` (200 ops, synchronized, then one more after the interval:
// every op completes, most with OpDone.from_later_event) and
// `sampled_blocked` (a host function holds the stream before 6 ops, the
// first with events: its stuck report says GPU_NOT_STARTED for op 0 and
// GPU_IN_WINDOW for ops 1..5, window op 0..op 5; released, one more op
// after the interval completes them all). The traces are judged afterwards with
// `ncclwatch dump` (gpu/events_check.sh). Each case runs in a child
// process: the plugin's mode is chosen at its first init.
//
// bench: rounds of the three configurations interleaved, each a child
// process timing 20,000 launches on the launching thread (the stream is
// synchronized outside the timed spans).

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "plugin/abi/profiler_common.h"
#include "plugin/abi/profiler_v5.h"
#include "plugin/testing/api_events.h"

namespace nccl = ncclwatch::nccl;

namespace {

#define CK(x)                                                                 \
  do {                                                                        \
    CUresult r_ = (x);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                 \
      fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #x, r_); \
      _exit(2);                                                               \
    }                                                                         \
  } while (0)

uint64_t Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

extern "C" int ncclGetVersion(int* v) {  // what NCCL's process exports
  *v = 22809;
  return 0;
}

struct Plugin {
  nccl::ProfilerV5* t = nullptr;
  void* ctx = nullptr;
  int mask = 0;
  uint64_t seq = 0;
};

Plugin Load(const char* so) {
  Plugin p;
  void* h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    fprintf(stderr, "dlopen %s: %s\n", so, dlerror());
    _exit(2);
  }
  p.t = static_cast<nccl::ProfilerV5*>(dlsym(h, "ncclProfiler_v5"));
  if (p.t == nullptr || p.t->init(&p.ctx, 0xE0E0, &p.mask, "events_check", 1, 2, 0, nullptr) != 0 ||
      p.ctx == nullptr) {
    fprintf(stderr, "plugin init failed\n");
    _exit(2);
  }
  return p;
}

// One NCCL plan: the launch (with its profiler events when `p`), then the
// plan's Group and AllReduce, their stop meaning "enqueued".
// `parts`: 1 the launch's events, 2 the plan's Group and op (the bench
// times each part alone too), 4 the API events NCCL 2.28 sends before the
// launch whatever the plugin's mask (GroupApi, its two states, CollApi),
// `captured` being NCCL's answer in them (NCCL asks the runtime at the
// call: its cost, not the plugin's, so not played here); GroupApi stops
// last.
void Plan(Plugin* p, CUstream s, CUdeviceptr buf, int parts = 3, bool captured = false) {
  if (p == nullptr) {
    CK(cuMemsetD8Async(buf, 0, 8, s));
    return;
  }
  void* gah = nullptr;
  void* cah = nullptr;
  if (parts & 4) ncclwatch::testing::StartCallApiEvents<nccl::DescrV5>(p->t, p->ctx, s, captured, &gah, &cah);
  nccl::DescrV5 k{};
  k.type = nccl::kKernelLaunch;
  k.parentObj = gah;
  k.kernelLaunch.stream = s;
  void* kh = nullptr;
  if (parts & 1) p->t->startEvent(p->ctx, &kh, &k);
  CK(cuMemsetD8Async(buf, 0, 8, s));
  if (parts & 1) p->t->stopEvent(kh);
  if (!(parts & 2)) {
    if (gah != nullptr) p->t->stopEvent(gah);
    return;
  }
  nccl::DescrV5 g{};
  g.type = nccl::kGroup;
  void* gh = nullptr;
  p->t->startEvent(p->ctx, &gh, &g);
  nccl::DescrV5 c{};
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
  c.parentObj = cah;  // v5: a Coll's parent is its (stopped) CollApi
  void* ch = nullptr;
  p->t->startEvent(p->ctx, &ch, &c);
  p->t->stopEvent(ch);
  p->t->stopEvent(gh);
  if (gah != nullptr) p->t->stopEvent(gah);
}

std::atomic<int> g_release{0};
void CUDA_CB HoldStream(void*) {
  while (g_release.load() == 0) usleep(1000);
}

void Setup(CUcontext* cu, CUstream* s, CUdeviceptr* buf) {
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CK(cuCtxCreate(cu, nullptr, 0, dev));
  CK(cuStreamCreate(s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(buf, 64));
}

void Env(const std::string& dir, const char* completions) {
  mkdir(dir.c_str(), 0755);
  setenv("NCCLWATCH_DIR", dir.c_str(), 1);
  setenv("NCCLWATCH_COMPLETIONS", completions, 1);
  setenv("NCCLWATCH_STUCK_SEC", "1", 1);
  setenv("NCCLWATCH_FLUSH_MS", "20", 1);
}

int Check(const char* so, const std::string& out, const std::string& which) {
  const std::string dir = out + "/" + which;
  Env(dir, "events");
  const bool sampled = which.rfind("sampled", 0) == 0;
  setenv("NCCLWATCH_EVENT_INTERVAL_US", sampled ? "50" : "0", 1);
  CUcontext cu;
  CUstream s;
  CUdeviceptr buf;
  Setup(&cu, &s, &buf);
  Plugin p = Load(so);
  printf("%s: mask 0x%x\n", which.c_str(), p.mask);
  if (which == "ok") {
    for (int i = 0; i < 200; ++i) Plan(&p, s, buf);
    CK(cuStreamSynchronize(s));
    usleep(100 * 1000);  // a few writer cycles see the events complete
  } else if (which == "graph") {
    // As NCCL 2.28 calls: API events first, with NCCL's answer to whether
    // the stream is captured.
    Plan(&p, s, buf, 7, false);  // seq 0: tracked
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    Plan(&p, s, buf, 7, true);  // seq 1: captured
    CUgraph graph;
    CK(cuStreamEndCapture(s, &graph));
    CK(cuGraphDestroy(graph));
    Plan(&p, s, buf, 7, false);  // seq 2: tracked
    CK(cuStreamSynchronize(s));
    usleep(100 * 1000);
  } else if (which == "blocked") {
    CK(cuLaunchHostFunc(s, &HoldStream, nullptr));
    Plan(&p, s, buf);  // its kernel waits behind the host function
    usleep(2500 * 1000);  // past the 1 s stuck threshold: the report is written
    g_release.store(1);
    CK(cuStreamSynchronize(s));
    usleep(100 * 1000);
  } else if (which == "sampled") {
    usleep(50 * 1000);  // the writer's first cycle turns the interval into ticks
    for (int i = 0; i < 200; ++i) Plan(&p, s, buf);
    CK(cuStreamSynchronize(s));
    usleep(100 * 1000);  // the tail after the last launch with events stays unproven
    Plan(&p, s, buf);    // seq 200: past the interval, it records and proves the tail
    CK(cuStreamSynchronize(s));
    usleep(100 * 1000);
  } else if (which == "sampled_blocked") {
    usleep(50 * 1000);
    CK(cuLaunchHostFunc(s, &HoldStream, nullptr));
    for (int i = 0; i < 6; ++i) Plan(&p, s, buf);  // seq 0 records; 1..5 within the interval do not
    usleep(2500 * 1000);  // past the 1 s stuck threshold: the report is written
    g_release.store(1);
    CK(cuStreamSynchronize(s));
    usleep(100 * 1000);
    Plan(&p, s, buf);  // seq 6: proves 1..5
    CK(cuStreamSynchronize(s));
    usleep(100 * 1000);
  } else if (which == "ctxgone") {
    CK(cuLaunchHostFunc(s, &HoldStream, nullptr));
    for (int i = 0; i < 50; ++i) Plan(&p, s, buf);
    std::thread release([] {
      usleep(20 * 1000);
      g_release.store(1);
    });
    CK(cuCtxDestroy(cu));  // waits for the stream, then the context is gone
    release.join();
    usleep(200 * 1000);  // the writer's next queries meet a destroyed context
  }
  p.t->finalize(p.ctx);
  printf("%s: done\n", which.c_str());
  return 0;
}

// A private copy of the plugin, so that each configuration has its own
// globals and Profiler in one process (its mode is chosen at its first init).
Plugin LoadCopy(const char* so, const std::string& dir, const char* completions, bool start_events = true,
                const char* interval_us = "0") {
  static int n = 0;
  const std::string copy = "/tmp/events_check_plugin_" + std::to_string(getpid()) + "_" + std::to_string(n++) + ".so";
  const std::string cmd = "cp " + std::string(so) + " " + copy;
  if (system(cmd.c_str()) != 0) _exit(2);
  Env(dir, completions);
  setenv("NCCLWATCH_STUCK_SEC", "0", 1);
  setenv("NCCLWATCH_START_EVENTS", start_events ? "1" : "0", 1);
  setenv("NCCLWATCH_EVENT_INTERVAL_US", interval_us, 1);
  return Load(copy.c_str());
}

// ns per call of `fn`, over `n` calls.
template <typename F>
double PerCall(int n, F fn) {
  const uint64_t t0 = Now();
  for (int i = 0; i < n; ++i) fn();
  return double(Now() - t0) / n;
}

// Host time per plan on the launching thread, the configurations
// interleaved block by block in one process: no plugin, the plugin with
// kernel-channel completions, the plugin with event completions.
int Bench(const char* so, const std::string& out) {
  CUcontext cu;
  CUstream s;
  CUdeviceptr buf;
  Setup(&cu, &s, &buf);
  // What the event path is made of, alone.
  CUevent ev;
  CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  std::vector<double> rec, cap, ctx, launch;
  for (int r = 0; r < 5; ++r) {
    launch.push_back(PerCall(500, [&] { CK(cuMemsetD8Async(buf, 0, 8, s)); }));
    CK(cuStreamSynchronize(s));
    rec.push_back(PerCall(500, [&] {
      CK(cuMemsetD8Async(buf, 0, 8, s));
      CK(cuEventRecord(ev, s));
    }));
    CK(cuStreamSynchronize(s));
    cap.push_back(PerCall(2000, [&] {
      CUstreamCaptureStatus st;
      CK(cuStreamIsCapturing(s, &st));
    }));
    ctx.push_back(PerCall(2000, [&] {
      CUcontext c;
      CK(cuCtxGetCurrent(&c));
    }));
  }
  for (auto* v : {&rec, &cap, &ctx, &launch}) std::sort(v->begin(), v->end());
  printf("alone (median of 5): cuMemsetD8Async %.1f ns; + cuEventRecord %.1f ns; cuStreamIsCapturing %.1f ns; "
         "cuCtxGetCurrent %.1f ns\n",
         launch[2], rec[2], cap[2], ctx[2]);

  Plugin chan = LoadCopy(so, out + "/bench_channels", "channels");
  Plugin evp = LoadCopy(so, out + "/bench_events", "events");
  Plugin evn = LoadCopy(so, out + "/bench_events_nostart", "events", false);
  // EVENT_INTERVAL_US (default 50): NCCLWATCH_EVENT_INTERVAL_US of events-sampled.
  const char* interval = getenv("EVENT_INTERVAL_US");
  if (interval == nullptr || interval[0] == '\0') interval = "50";
  Plugin evs = LoadCopy(so, out + "/bench_events_sampled", "events", true, interval);
  // events/launch: only the launch's events (its ops untracked); events/ops:
  // only the plan's ops (no launch before them: untracked too).
  // events-nostart: NCCLWATCH_START_EVENTS=0, one event per launch.
  // events-sampled: NCCLWATCH_EVENT_INTERVAL_US, events at most once per
  // interval on the stream.
  constexpr int kModes = 9;
  Plugin* modes[kModes] = {nullptr, &chan, &evp, &evp, &evp, &evn, &evn, &evs, &evs};
  const int parts[kModes] = {3, 3, 3, 1, 2, 3, 1, 3, 1};
  const char* names[kModes] = {"none",           "channels",
                               "events",         "events/launch",
                               "events/ops",     "events-nostart",
                               "events-nostart/launch", "events-sampled",
                               "events-sampled/launch"};
  constexpr int kBlock = 500, kRounds = 60;
  for (int m = 0; m < kModes; ++m)
    for (int i = 0; i < 2000; ++i) Plan(modes[m], s, buf, parts[m]);  // warm-up: pools, pages, caches
  CK(cuStreamSynchronize(s));
  std::vector<double> per[kModes];
  for (int round = 0; round < kRounds; ++round) {
    for (int k = 0; k < kModes; ++k) {
      const int m = (round + k) % kModes;  // each mode in each position as often
      const uint64_t t0 = Now();
      for (int i = 0; i < kBlock; ++i) Plan(modes[m], s, buf, parts[m]);
      per[m].push_back(double(Now() - t0) / kBlock);
      CK(cuStreamSynchronize(s));  // outside the timed span: the queue never fills
      usleep(2000);                // the writers drain between blocks
    }
  }
  double med[kModes];
  for (int m = 0; m < kModes; ++m) {
    std::sort(per[m].begin(), per[m].end());
    med[m] = per[m][per[m].size() / 2];
    printf("%-21s ns per plan: p25 %.1f, median %.1f, p75 %.1f (%d blocks of %d)\n", names[m],
           per[m][per[m].size() / 4], med[m], per[m][per[m].size() * 3 / 4], kRounds, kBlock);
  }
  printf("events - none: %.1f ns per launch (%.2fx); events - channels: %.1f ns\n", med[2] - med[0],
         med[2] / med[0], med[2] - med[1]);
  printf("events-nostart - none: %.1f ns per launch; launch events alone: %.1f ns (both), %.1f ns (after only); "
         "the ops alone: %.1f ns\n",
         med[5] - med[0], med[3] - med[0], med[6] - med[0], med[4] - med[0]);
  printf("events-sampled (NCCLWATCH_EVENT_INTERVAL_US=%s) - none: %.1f ns per launch; its launch alone: %.1f ns\n",
         interval, med[7] - med[0], med[8] - med[0]);
  chan.t->finalize(chan.ctx);
  evp.t->finalize(evp.ctx);
  evn.t->finalize(evn.ctx);
  evs.t->finalize(evs.ctx);
  return 0;
}

// ablate: where a launch's cost with events goes, the driver's part
// alone. The same interleaved method as bench, with driver-only patterns
// beside the plugin: one event after the kernel; a fixed pair around it;
// a ring of pairs around it (the plugin's pattern, 128 or 8 pairs); the
// ring with the capture check; the ring while another thread queries its
// events (the writer's part, exaggerated: every 50 us).
int Ablate(const char* so, const std::string& out) {
  CUcontext cu;
  CUstream s;
  CUdeviceptr buf;
  Setup(&cu, &s, &buf);
  constexpr int kRing = 128;
  std::vector<CUevent> before(kRing), after(kRing);
  for (int i = 0; i < kRing; ++i) {
    CK(cuEventCreate(&before[i], CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&after[i], CU_EVENT_DISABLE_TIMING));
  }
  std::atomic<int> latest{-1};
  std::atomic<bool> querying{false}, stop{false};
  std::thread querier([&] {
    CK(cuCtxSetCurrent(cu));
    while (!stop.load()) {
      const int i = latest.load();
      if (querying.load() && i >= 0) {
        cuEventQuery(after[i]);
        cuEventQuery(before[i]);
      }
      usleep(50);
    }
  });
  Plugin evp = LoadCopy(so, out + "/ablate_events", "events");
  // BASE_PLUGIN: an earlier build, timed beside this one in the same rounds
  // (its plans with the API events, as NCCL 2.28 sends them).
  const char* base_so = getenv("BASE_PLUGIN");
  const bool with_base = base_so != nullptr && base_so[0] != '\0';
  Plugin base = with_base ? LoadCopy(base_so, out + "/ablate_base", "events") : Plugin();
  int ri = 0;
  auto ring = [&](int size, bool cap) {
    if (cap) {
      CUstreamCaptureStatus st;
      CK(cuStreamIsCapturing(s, &st));
    }
    ri = (ri + 1) % size;
    CK(cuEventRecord(before[ri], s));
    CK(cuMemsetD8Async(buf, 0, 8, s));
    CK(cuEventRecord(after[ri], s));
    latest.store(ri, std::memory_order_relaxed);
  };
  const int kModes = with_base ? 14 : 12;
  const char* names[14] = {"none",
                           "after-event (one event)",
                           "pair (fixed)",
                           "ring 128",
                           "ring 8",
                           "ring 128 + capture check",
                           "ring 128 + capture + queries",
                           "plugin: launch events",
                           "plugin: plan",
                           "plugin: ops only",
                           "plugin: launch + API events",
                           "plugin: plan + API events",
                           "base: launch + API events",
                           "base: plan + API events"};
  auto run = [&](int m) {
    switch (m) {
      case 0: CK(cuMemsetD8Async(buf, 0, 8, s)); break;
      case 1:
        CK(cuMemsetD8Async(buf, 0, 8, s));
        CK(cuEventRecord(after[0], s));
        break;
      case 2:
        CK(cuEventRecord(before[0], s));
        CK(cuMemsetD8Async(buf, 0, 8, s));
        CK(cuEventRecord(after[0], s));
        break;
      case 3: ring(kRing, false); break;
      case 4: ring(8, false); break;
      case 5: ring(kRing, true); break;
      case 6: ring(kRing, true); break;
      case 7: Plan(&evp, s, buf, 1); break;
      case 8: Plan(&evp, s, buf, 3); break;
      case 9: Plan(&evp, s, buf, 2); break;
      case 10: Plan(&evp, s, buf, 5); break;
      case 11: Plan(&evp, s, buf, 7); break;
      case 12: Plan(&base, s, buf, 5); break;
      case 13: Plan(&base, s, buf, 7); break;
    }
  };
  constexpr int kBlock = 500, kRounds = 60;
  // Warm-up, each configuration apart: run back to back, the five of this
  // plugin's copy filled its thread's ring and dropped records (a dropped
  // one skips its copy into the ring), which its closing line then counted.
  for (int m = 0; m < kModes; ++m) {
    for (int i = 0; i < 2000; ++i) run(m);
    CK(cuStreamSynchronize(s));
    usleep(10000);
  }
  std::vector<double> per[14], rounds[14];  // rounds: in round order, per keeps them sorted at the end
  for (int round = 0; round < kRounds; ++round) {
    for (int k = 0; k < kModes; ++k) {
      const int m = (round + k) % kModes;
      querying.store(m == 6);
      const uint64_t t0 = Now();
      for (int i = 0; i < kBlock; ++i) run(m);
      per[m].push_back(double(Now() - t0) / kBlock);
      rounds[m].push_back(per[m].back());
      querying.store(false);
      CK(cuStreamSynchronize(s));
      usleep(10000);  // the writers drain between blocks
    }
  }
  stop.store(true);
  querier.join();
  std::sort(per[0].begin(), per[0].end());
  const double none = per[0][per[0].size() / 2];
  for (int m = 0; m < kModes; ++m) {
    std::sort(per[m].begin(), per[m].end());
    const double med = per[m][per[m].size() / 2];
    printf("ablate %-30s ns per launch: median %.1f (p25 %.1f, p75 %.1f), beyond none %.1f\n", names[m], med,
           per[m][per[m].size() / 4], per[m][per[m].size() * 3 / 4], med - none);
  }
  if (with_base) {
    // Per round, base / this build: the same round's blocks, so the ratio
    // moves less than either time with the host's load.
    for (int pair = 0; pair < 2; ++pair) {
      const int head = pair == 0 ? 10 : 11, old = pair == 0 ? 12 : 13;
      std::vector<double> ratio;
      for (int round = 0; round < kRounds; ++round) ratio.push_back(rounds[old][round] / rounds[head][round]);
      std::sort(ratio.begin(), ratio.end());
      printf("ablate base / plugin, %-19s median of rounds %.3f (p25 %.3f, p75 %.3f)\n",
             pair == 0 ? "launch + API events:" : "plan + API events:", ratio[ratio.size() / 2],
             ratio[ratio.size() / 4], ratio[ratio.size() * 3 / 4]);
    }
    base.t->finalize(base.ctx);
  }
  evp.t->finalize(evp.ctx);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PLUGIN_SO OUT_DIR check|bench|ablate\n", argv[0]);
    return 2;
  }
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  const std::string out = argv[2];
  mkdir(out.c_str(), 0755);
  auto child = [&](auto fn) -> int {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      double v = fn();
      if (write(fds[1], &v, sizeof(v)) != sizeof(v)) _exit(3);
      _exit(0);
    }
    close(fds[1]);
    double v = -1;
    if (read(fds[0], &v, sizeof(v)) != sizeof(v)) v = -1;
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fprintf(stderr, "child status %d\n", st);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
  };
  if (strcmp(argv[3], "check") == 0) {
    int bad = 0;
    for (const char* c : {"ok", "graph", "blocked", "ctxgone", "sampled", "sampled_blocked"})
      bad += child([&] { return double(Check(argv[1], out, c)); });
    return bad == 0 ? 0 : 1;
  }
  if (strcmp(argv[3], "ablate") == 0) return Ablate(argv[1], out);
  return Bench(argv[1], out);
}
