// Exact accounting with more threads than buffers: every operation NCCL
// hands the plugin is written or counted as dropped, and the buffers of
// threads that exit are used again. NCCLWATCH_BUFFER_MB=1 gives 4 buffers.

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "plugin/testing/fake_nccl_host.h"
#include "proto/trace.pb.h"

namespace ncclwatch::testing {
namespace {

TEST(CountTest, EveryOperationIsWrittenOrCountedAndBuffersComeBack) {
  std::string dir = MakeTempDir("count");
  // Operations only (no kernel events): one record, or one drop, each.
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_EVENTS", "coll"},
                {"NCCLWATCH_BUFFER_MB", "1"},
                {"NCCLWATCH_FLUSH_MS", "5"},
                {"NCCLWATCH_HEARTBEAT_MS", "20"}});
  PluginLib* lib = PluginLib::FreshCopy();
  FakeComm anchor(lib, 5);
  ASSERT_EQ(anchor.Init(0xc0c0, "world", 1, 2, 0), 0);
  constexpr int kWaves = 6, kThreads = 8, kOps = 50;
  for (int wave = 0; wave < kWaves; ++wave) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([poster = anchor.Alias(), wave, t]() mutable {
        for (int k = 0; k < kOps; ++k) {
          OpSpec s;
          s.seq = static_cast<uint64_t>((wave * kThreads + t) * kOps + k);
          s.nchannels = 0;
          poster.RunOp(s);
        }
      });
    for (auto& th : threads) th.join();
  }
  // The threads have exited: one more, alone, finds a buffer again (once the
  // writer has taken the exited threads' back) and loses nothing.
  const uint64_t exited = MonoNs();
  WaitForTrace(dir, [&](const Trace& tr) { return WriterPast(tr, exited); });
  std::thread last([poster = anchor.Alias()]() mutable {
    for (int k = 0; k < 10; ++k) {
      OpSpec s;
      s.seq = 100000 + static_cast<uint64_t>(k);
      s.nchannels = 0;
      poster.RunOp(s);
    }
  });
  last.join();
  ASSERT_EQ(anchor.Finalize(), 0);

  std::unique_ptr<Trace> t = ReadSingleTrace(dir);
  EXPECT_TRUE(t->raw.issues.empty()) << t->raw.issues[0];
  uint64_t written = 0, last_written = 0;
  for (const OpView& o : t->ops) {
    ++written;
    last_written += o.op->seq() >= 100000;
  }
  const trace::Drops* d = t->LastDrops();
  const uint64_t dropped = d == nullptr ? 0 : d->no_thread_slot() + d->ring_full() + d->pool_exhausted();
  EXPECT_EQ(written + dropped, static_cast<uint64_t>(kWaves * kThreads * kOps + 10))
      << written << " written, " << dropped << " dropped";
  EXPECT_EQ(last_written, 10u);
}

}  // namespace
}  // namespace ncclwatch::testing
