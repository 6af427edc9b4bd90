// Benchmarks of the plugin's hot path and writer (run: bazel run -c opt
// //plugin:hot_path_benchmark). The targets: start+stop of a collective
// <= 50 ns on one thread and <= 100 ns per thread with 8 threads; the writer
// drains >= 5 M events/s; <= 48 bytes on disk per collective at the default
// capture. Numbers and method: BENCHMARKS.md, "Plugin hot path and writer".
//
// Each timed batch stays within a thread's ring (so nothing is dropped) and
// the writer drains between batches, outside the timing.

#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "plugin/core/clock.h"
#include "plugin/core/core.h"
#include "plugin/abi/profiler_common.h"

namespace ncclwatch::plugin {
namespace {

constexpr int kBatch = 900;  // ops per timed batch: two records each fit a thread's ring

struct Bench {
  Profiler* prof = nullptr;
  Context* ctx = nullptr;
  std::string dir;
};

Bench* g_bench = nullptr;
std::atomic<int> g_finished{0};

Bench* Open(const std::string& events) {
  auto* b = new Bench;
  char tmpl[] = "/tmp/ncclwatch-bench-XXXXXX";
  b->dir = mkdtemp(tmpl);
  ProfilerOptions o;
  o.config.dir = b->dir;
  uint64_t mask;
  uint32_t raw;
  std::string err;
  ParseEvents(events, &mask, &raw, &err);
  o.config.nccl_mask = mask;
  o.config.raw_kinds = raw;
  o.config.events = events;
  o.config.stuck_sec = 0;
  o.api_version = 5;
  o.file_name_override = "bench.ncclwatch";
  b->prof = Profiler::Acquire(o, &err);
  if (b->prof == nullptr) abort();
  b->ctx = b->prof->NewContext(1234, "world", 1, 8, 0);
  return b;
}

void Close(Bench* b) {
  b->prof->FinalizeContext(b->ctx);
  Profiler::Release(b->prof);
  std::string cmd = "rm -rf " + b->dir;
  if (system(cmd.c_str()) != 0) {
  }
  delete b;
}

EventDesc Coll(uint64_t seq, uint8_t nchannels) {
  EventDesc c;
  c.kind = kEvColl;
  c.seq = seq;
  c.func = "AllReduce";
  c.datatype = "ncclBfloat16";
  c.algo = "RING";
  c.proto = "SIMPLE";
  c.count = 4 << 20;
  c.nchannels = nchannels;
  c.nwarps = 16;
  return c;
}

uint64_t Dropped(Profiler* p) {
  uint64_t d = p->no_thread_slot();
  for (uint32_t i = 0; i < p->thread_count(); ++i)
    d += p->thread_buf(i)->counters.ring_full.load() + p->thread_buf(i)->counters.pool_exhausted.load();
  return d;
}

// Completes ops as NCCL's proxy thread would: two kernel channels each,
// through the path the v4+ adapters take at the default capture.
void CompleteOps(Bench* b, void* const* handles, int n) {
  for (int i = 0; i < n; ++i) {
    for (int ch = 0; ch < 2; ++ch) {
      const uint64_t ptimer = NowNs();
      void* kh = b->prof->StartKernelCh(handles[i], ptimer);
      StateArgs a;
      a.ptimer = ptimer + 5000;
      a.has_ptimer = true;
      b->prof->State(kh, nccl::kKernelChStop, a);
      b->prof->Stop(kh);
    }
  }
}

// Start+stop of a collective on the calling (user) thread, as NCCL calls them
// at enqueue. Completion (kernel channel events) is done outside the timing,
// as NCCL's proxy thread would; `nchannels` 0 instead completes at stop, on
// the calling thread (a second record).
void BM_CollStartStop(benchmark::State& state) {
  const int nchannels = static_cast<int>(state.range(0));
  if (state.thread_index() == 0) {
    g_bench = Open("default");
  }
  while (g_bench == nullptr) std::this_thread::yield();
  Bench* b = g_bench;
  uint64_t seq = 0;
  double seconds = 0;
  std::vector<void*> handles(kBatch);
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatch; ++i) {
      EventDesc c = Coll(++seq, static_cast<uint8_t>(nchannels));
      void* h = b->prof->Start(b->ctx, c);
      b->prof->Stop(h);
      handles[i] = h;
    }
    auto t1 = std::chrono::steady_clock::now();
    double s = std::chrono::duration<double>(t1 - t0).count();
    seconds += s;
    state.SetIterationTime(s);
    if (nchannels > 0) CompleteOps(b, handles.data(), kBatch);
    b->prof->ForceFlush();
  }
  // Per thread: each thread's own time per start+stop, averaged over threads.
  state.counters["ns_per_op"] = benchmark::Counter(seconds * 1e9 / static_cast<double>(state.iterations() * kBatch),
                                                   benchmark::Counter::kAvgThreads);
  if (state.thread_index() == 0) {
    state.counters["dropped"] = static_cast<double>(Dropped(b->prof));
    // Close once every thread has left its loop.
    while (g_finished.load() + 1 < state.threads()) std::this_thread::yield();
    g_finished.store(0);
    g_bench = nullptr;
    Close(b);
  } else {
    g_finished.fetch_add(1);
  }
}
BENCHMARK(BM_CollStartStop)->UseManualTime()->Arg(2)->Arg(0)->Threads(1)->Threads(8);

// The whole default capture of one collective: Coll start/stop plus two
// kernel channels with their GPU timestamps, completing the op.
void BM_CollWithKernelChannels(benchmark::State& state) {
  Bench* b = Open("default");
  uint64_t seq = 0;
  double seconds = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatch; ++i) {
      EventDesc c = Coll(++seq, 2);
      void* h = b->prof->Start(b->ctx, c);
      b->prof->Stop(h);
      CompleteOps(b, &h, 1);  // on the same thread here, inside the timing
    }
    auto t1 = std::chrono::steady_clock::now();
    double s = std::chrono::duration<double>(t1 - t0).count();
    seconds += s;
    state.SetIterationTime(s);
    b->prof->ForceFlush();
  }
  state.counters["ns_per_op"] = seconds * 1e9 / static_cast<double>(state.iterations() * kBatch);
  state.counters["dropped"] = static_cast<double>(Dropped(b->prof));
  Close(b);
}
BENCHMARK(BM_CollWithKernelChannels)->UseManualTime();

// NCCL's proxy thread's share, as in a pipelined burst: one thread enqueues
// a batch of collectives (start+stop, 2 channels each), then another thread,
// on another CPU, runs their kernel channels (start, stop state with the GPU
// time, stop; the last one completes the op). Timed: the proxy thread's loop.
// Every slot it touches was last written on the other CPU, as on a GPU host;
// the single-thread benchmarks above cannot show that cost.
void BM_ProxyThreadKernelChannels(benchmark::State& state) {
  Bench* b = Open("default");
  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  // NCCLWATCH_BENCH_CPUS="A,B": the enqueuing thread on CPU A, the proxy
  // thread on CPU B (default 0,1), to compare pairs of cores on a big host.
  int cpu_enqueue = 0, cpu_proxy = 1;
  if (const char* v = getenv("NCCLWATCH_BENCH_CPUS")) {
    if (sscanf(v, "%d,%d", &cpu_enqueue, &cpu_proxy) != 2) cpu_enqueue = 0, cpu_proxy = 1;
  }
  auto pin = [&](int cpu) {
    if (ncpu < 2) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu % ncpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  };
  pin(cpu_enqueue);
  std::vector<void*> handles(kBatch);
  std::atomic<int> go{0}, done{0};
  std::atomic<bool> quit{false};
  double proxy_seconds = 0;
  std::thread proxy([&] {
    pin(cpu_proxy);
    int seen = 0;
    while (true) {
      while (go.load(std::memory_order_acquire) == seen && !quit.load(std::memory_order_acquire)) {
      }
      if (quit.load(std::memory_order_acquire)) return;
      ++seen;
      auto t0 = std::chrono::steady_clock::now();
      const uint64_t g = NowNs();
      for (int i = 0; i < kBatch; ++i) {
        for (int ch = 0; ch < 2; ++ch) {
          void* kh = b->prof->StartKernelCh(handles[i], g + i);
          StateArgs a;
          a.ptimer = g + i + 5000;
          a.has_ptimer = true;
          b->prof->State(kh, nccl::kKernelChStop, a);
          b->prof->Stop(kh);
        }
      }
      auto t1 = std::chrono::steady_clock::now();
      proxy_seconds = std::chrono::duration<double>(t1 - t0).count();
      done.store(seen, std::memory_order_release);
    }
  });
  uint64_t seq = 0;
  double total = 0;
  int round = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      EventDesc c = Coll(++seq, 2);
      handles[i] = b->prof->Start(b->ctx, c);
      b->prof->Stop(handles[i]);
    }
    go.store(++round, std::memory_order_release);
    while (done.load(std::memory_order_acquire) != round) {
    }
    state.SetIterationTime(proxy_seconds);
    total += proxy_seconds;
    b->prof->ForceFlush();
  }
  quit.store(true, std::memory_order_release);
  proxy.join();
  state.counters["proxy_ns_per_op"] = total * 1e9 / static_cast<double>(state.iterations() * kBatch);
  state.counters["dropped"] = static_cast<double>(Dropped(b->prof));
  Close(b);
}
BENCHMARK(BM_ProxyThreadKernelChannels)->UseManualTime();

// Writer throughput: 16 threads each fill their ring, then one drain+encode+write is timed.
void BM_WriterDrain(benchmark::State& state) {
  Bench* b = Open("default");
  constexpr int kThreads = 16;
  uint64_t events = 0;
  double seconds = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t)
      ts.emplace_back([&, t] {
        for (int i = 0; i < kBatch; ++i) {
          EventDesc c = Coll(uint64_t(t) * 1000000 + i + 1, 0);
          b->prof->Stop(b->prof->Start(b->ctx, c));
        }
      });
    for (auto& t : ts) t.join();
    state.ResumeTiming();
    auto t0 = std::chrono::steady_clock::now();
    b->prof->ForceFlush();
    auto t1 = std::chrono::steady_clock::now();
    double s = std::chrono::duration<double>(t1 - t0).count();
    seconds += s;
    state.SetIterationTime(s);
    events += uint64_t{kThreads} * kBatch * 2;  // Op + OpDone events (encoded as one folded record)
  }
  state.counters["events_per_s"] = static_cast<double>(events) / seconds;
  state.counters["dropped"] = static_cast<double>(Dropped(b->prof));
  Close(b);
}
BENCHMARK(BM_WriterDrain)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(20);

// Bytes on disk per collective at the default capture, for realistic ops
// (4 Mi elements, 2 channels, GPU timing, completion folded into the record).
void BM_BytesPerCollective(benchmark::State& state) {
  Bench* b = Open("default");
  std::string path = b->dir + "/bench.ncclwatch";
  uint64_t seq = 0, ops = 0;
  b->prof->ForceFlush();
  struct stat st0;
  if (stat(path.c_str(), &st0) != 0) abort();
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      EventDesc c = Coll(++seq, 2);
      void* h = b->prof->Start(b->ctx, c);
      b->prof->Stop(h);
      uint64_t g = NowNs();
      for (int ch = 0; ch < 2; ++ch) {
        EventDesc k;
        k.kind = kEvKernelCh;
        k.parent = h;
        k.channel = ch;
        k.ptimer = g + ch * 100;
        k.has_ptimer = true;
        void* kh = b->prof->Start(b->ctx, k);
        StateArgs a;
        a.ptimer = g + 250000 + ch * 100;
        a.has_ptimer = true;
        b->prof->State(kh, nccl::kKernelChStop, a);
        b->prof->Stop(kh);
      }
    }
    b->prof->ForceFlush();
    ops += kBatch;
  }
  struct stat st1;
  if (stat(path.c_str(), &st1) != 0) abort();
  state.counters["bytes_per_coll"] = static_cast<double>(st1.st_size - st0.st_size) / static_cast<double>(ops);
  state.counters["dropped"] = static_cast<double>(Dropped(b->prof));
  Close(b);
}
BENCHMARK(BM_BytesPerCollective)->Iterations(100);

}  // namespace
}  // namespace ncclwatch::plugin

BENCHMARK_MAIN();
