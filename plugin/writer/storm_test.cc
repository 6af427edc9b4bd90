// A property of the plugin as a whole: whatever NCCL does, every finished
// file reads as undamaged with the tools' loader. Each seed drives the
// built .so through the fake host with a random storm: several threads and
// communicators (some with values no communicator can have), collectives
// and point-to-point operations with random channels and proxy operations,
// some never completing, so that stuck reports of every size come in
// bursts; random flush and heartbeat intervals and captures. A failure
// names its seed; NCCLWATCH_STORM_SEED=N reruns that seed alone and
// NCCLWATCH_STORM_SEEDS=N runs N seeds.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "plugin/abi/profiler_common.h"
#include "plugin/testing/fake_nccl_host.h"
#include "tools/model/model.h"

namespace ncclwatch::testing {
namespace {

#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
constexpr bool kSanitizer = true;
#else
constexpr bool kSanitizer = false;
#endif
#elif defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizer = true;
#else
constexpr bool kSanitizer = false;
#endif

// Loads the one file in `dir`: no damage, no issue of any kind.
void ExpectReadsWhole(const std::string& dir) {
  tools::Model m;
  std::string error;
  ASSERT_TRUE(tools::LoadModel({dir}, tools::LoadOptions(), &m, &error)) << error;
  ASSERT_EQ(m.procs.size(), 1u);
  const tools::Proc& p = m.procs[0];
  EXPECT_FALSE(p.damaged) << "damaged at offset " << p.damaged_at;
  EXPECT_FALSE(p.cut_tail);
  EXPECT_TRUE(p.finalized);
  for (const std::string& issue : p.issues) ADD_FAILURE() << issue;
}

struct CommArgs {
  int nranks, rank;
};

void RunSeed(uint64_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun alone: NCCLWATCH_STORM_SEED=" + std::to_string(seed) + ")");
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t n) { return static_cast<uint64_t>(rng() % n); };
  const std::string dir = MakeTempDir("storm");
  // Flushes past a second now and then: a write then spans seconds.
  const char* flush[] = {"1", "5", "20", "1500"};
  const char* events[] = {"default", "all", "coll,p2p,proxyop,proxystep,kernelch"};
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_FLUSH_MS", flush[pick(4)]},
                {"NCCLWATCH_HEARTBEAT_MS", std::to_string(10 + pick(40))},
                {"NCCLWATCH_STUCK_SEC", pick(2) ? "0.01" : "0.05"},
                {"NCCLWATCH_EVENTS", events[pick(3)]}});
  const CommArgs impossible[] = {{0, 0}, {-1, 0}, {2147483647, 0}, {2, -5}, {2, 7}};
  // A communicator per thread, as NCCL's threads each drive their own:
  // one communicator's collectives are numbered in one line.
  const int nthreads = 1 + static_cast<int>(pick(kSanitizer ? 2 : 4));
  const int ncomms = nthreads;
  std::vector<FakeComm> comms;
  comms.reserve(ncomms);
  for (int k = 0; k < ncomms; ++k) {
    CommArgs a{2 + static_cast<int>(pick(7)), 0};
    a.rank = static_cast<int>(pick(static_cast<uint64_t>(a.nranks)));
    if (pick(4) == 0) a = impossible[pick(5)];
    comms.emplace_back(PluginLib::Shared(), 4 + static_cast<int>(pick(4)));
    ASSERT_EQ(comms.back().Init(0x5100 + seed * 8 + static_cast<uint64_t>(k), "storm", 1, a.nranks, a.rank), 0);
  }
  const int nops = kSanitizer ? 30 : 200;
  // Every thread's own PRNG, seeded from the seed's: the storm is the seed's.
  std::vector<uint64_t> thread_seeds;
  for (int t = 0; t < nthreads; ++t) thread_seeds.push_back(rng());
  bool any_stuck = false;
  std::vector<std::thread> threads;
  std::vector<int> stuck(nthreads, 0);
  for (int t = 0; t < nthreads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 r(thread_seeds[t]);
      uint64_t coll_seq = 0, p2p_seq = 0;
      FakeComm c = comms[static_cast<size_t>(t)].Alias();
      for (int i = 0; i < nops; ++i) {
        OpSpec s;
        s.p2p = r() % 3 == 0;
        if (s.p2p) {
          s.func = r() % 2 ? "Send" : "Recv";
          s.peer = 1;
          s.seq = ++p2p_seq;
        } else {
          s.seq = coll_seq++;
        }
        s.nchannels = static_cast<uint8_t>(1 + r() % 8);
        s.proxy_peers.clear();
        for (int k = 0, n = static_cast<int>(r() % 3); k <= n; ++k) s.proxy_peers.push_back(1 + k);
        s.nsteps = 1 + static_cast<int>(r() % 3);
        s.net_plugin = r() % 2;
        s.api_events = r() % 2;
        s.children_before_stop = r() % 4 == 0;
        if (r() % 10 == 0) {  // never completes: stuck reports pile up
          s.kernel_stop = static_cast<int>(r() % s.nchannels);
          s.stop_proxies = r() % 2;
          ++stuck[t];
        }
        c.RunOp(s);
      }
    });
  for (std::thread& th : threads) th.join();
  for (int n : stuck) any_stuck |= n > 0;
  if (any_stuck) WaitForTrace(dir, [](const Trace& x) { return !x.stucks.empty(); });
  for (FakeComm& c : comms) ASSERT_EQ(c.Finalize(), 0);
  ExpectReadsWhole(dir);
}

TEST(Storm, EveryFinishedFileReadsUndamaged) {
  if (const char* one = getenv("NCCLWATCH_STORM_SEED")) {
    RunSeed(strtoull(one, nullptr, 10));
    return;
  }
  const char* n = getenv("NCCLWATCH_STORM_SEEDS");
  const uint64_t seeds = n != nullptr ? strtoull(n, nullptr, 10) : (kSanitizer ? 4 : 12);
  for (uint64_t seed = 1; seed <= seeds && !HasFailure(); ++seed) RunSeed(seed);
}

// The largest stuck report there is, at least once: 16 threads each with
// 4,096 operations in flight, each with 16 proxy operations left mid-step,
// every event captured. The report is capped (1,024 operations, 32 proxy
// operations each) and comes again while the threads go on.
TEST(Storm, TheLargestStuckReportReadsUndamaged) {
  const std::string dir = MakeTempDir("storm-big");
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_FLUSH_MS", "20"},
                {"NCCLWATCH_HEARTBEAT_MS", "50"},
                {"NCCLWATCH_STUCK_SEC", "0.01"},
                {"NCCLWATCH_EVENTS", "all"}});
  const int nthreads = kSanitizer ? 4 : 16;
  const int nops = kSanitizer ? 256 : 4096;
  {
    FakeComm c(PluginLib::Shared(), 5);
    ASSERT_EQ(c.Init(0x5b16, "big", 1, 8, 0), 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < nthreads; ++t)
      threads.emplace_back([&, t] {
        FakeComm a = c.Alias();
        for (int k = 0; k < nops; ++k) {
          // Enqueued, then its proxy operations start and stay mid-step;
          // no kernel channel ever stops. Driven call by call: RunOp's
          // full sequence per operation would take most of a minute here.
          Ev o = AllReduceEv(static_cast<uint64_t>(t) * 100'000 + static_cast<uint64_t>(k));
          o.count = 1024;
          o.nchannels = 8;
          void* op = a.Start(o);
          a.Stop(op);
          for (int p = 0; p < 16; ++p) {
            Ev x;
            x.type = nccl::kProxyOp;
            x.parent = op;
            x.pid = getpid();
            x.channel = static_cast<uint8_t>(p / 2);
            x.peer = 1;
            x.nsteps = 4;
            x.chunk_size = 1 << 17;
            x.is_send = p % 2 == 0;
            void* px = a.Start(x);
            a.State(px, nccl::kProxyOpInProgress);
          }
        }
      });
    for (std::thread& th : threads) th.join();
    WaitForTrace(dir, [](const Trace& x) { return x.stucks.size() >= 2; });
    ASSERT_EQ(c.Finalize(), 0);
  }
  ExpectReadsWhole(dir);
}

}  // namespace
}  // namespace ncclwatch::testing
