// Everything at once, for the sanitizers (bazel test --config=asan / tsan):
// 8 threads, each creating and finalizing communicators over and over
// (init/finalize churn on a shared Profiler), driving collectives with kernel
// channels and proxy operations, PXN proxy events with a foreign pid and a
// garbage parent, null handles, and bursts of raw events past a 1 MiB buffer.
// The host must see only successes, and every file must read back whole.

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "plugin/testing/fake_nccl_host.h"

namespace ncclwatch::testing {
namespace {

TEST(StressTest, ChurnBurstsPxnAndNullHandlesOnEightThreads) {
  std::string dir = MakeTempDir("stress");
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_EVENTS", "all"},
                {"NCCLWATCH_BUFFER_MB", "1"},
                {"NCCLWATCH_FLUSH_MS", "5"},
                {"NCCLWATCH_HEARTBEAT_MS", "20"},
                {"NCCLWATCH_STUCK_SEC", "0.05"}});
  PluginLib* lib = PluginLib::Shared();
  // One communicator lives throughout, so the Profiler (and its writer) is
  // shared by the churning threads rather than recreated each time.
  FakeComm anchor(lib, 6);
  ASSERT_EQ(anchor.Init(0x5e55, "anchor", 1, 8, 0), 0);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 6; ++round) {
        FakeComm c(lib, t % 2 ? 5 : 6);
        if (c.Init(0x1000 + static_cast<uint64_t>(t) * 100 + static_cast<uint64_t>(round), "churn", 1, 8, t) != 0) {
          ++failures;
          return;
        }
        for (uint64_t k = 0; k < 40; ++k) {
          OpSpec s;
          s.seq = k;
          s.nchannels = 4;
          s.proxy_peers = {(t + 1) % 8, (t + 7) % 8};
          s.nsteps = 4;
          s.pxn = k % 7 == 3;                       // proxy events from another process
          s.kernel_stop = k % 11 == 5 ? 2 : -1;     // some never complete: stuck reports
          s.stop_proxies = k % 11 != 5;
          c.RunOp(s);
          // NCCL gives back null handles for dropped events: no-ops.
          c.Stop(nullptr);
          c.State(nullptr, nccl::kProxyStepRecvWait);
          c.State(nullptr, nccl::kKernelChStop);
        }
        c.RunProxyCtrl(3);
        if (t % 2 == 0) c.RunCe(round, static_cast<uint32_t>(round));
        if (c.Finalize() != 0) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  anchor.Finalize();
  auto files = TraceFiles(dir);
  ASSERT_GE(files.size(), 1u);
  uint64_t ops = 0, dropped = 0;
  for (const std::string& f : files) {
    auto t = ReadTrace(f);
    EXPECT_TRUE(t->raw.only_cut_tail) << f << ": " << (t->raw.issues.empty() ? "" : t->raw.issues[0]);
    EXPECT_FALSE(t->raw.cut_tail) << f;
    ops += t->ops.size();
    if (const auto* d = t->LastDrops()) dropped += d->ring_full() + d->pool_exhausted() + d->no_thread_slot();
  }
  // With a 1 MiB buffer, bursts are dropped and counted, never block.
  EXPECT_GT(ops + dropped, 0u);
}

}  // namespace
}  // namespace ncclwatch::testing
