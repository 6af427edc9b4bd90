// Finalize against threads that still post, and against a buggy host: the
// process's plugin state outlives every user. Runs under TSan and ASan too
// (scripts/test.sh).

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "plugin/testing/fake_nccl_host.h"

namespace ncclwatch::testing {
namespace {

int CountWarnings(const std::string& part) {
  int n = 0;
  for (const std::string& w : Warnings()) n += w.find(part) != std::string::npos;
  return n;
}

// NCCL finalizes the last communicator while other threads still post on it
// (a framework tearing down): it used to free the Profiler under them
// (SIGSEGV in AllocSlot, 3 runs of 3).
TEST(FinalizeTest, TheLastFinalizeWhileThreadsStillPost) {
  std::string dir = MakeTempDir("lastfin");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_BUFFER_MB", "4"}, {"NCCLWATCH_FLUSH_MS", "5"}});
  PluginLib* lib = PluginLib::FreshCopy();
  ClearLogs();
  FakeComm comm(lib, 5);
  ASSERT_EQ(comm.Init(0xf1, "world", 1, 2, 0), 0);
  std::atomic<int> posted{0};
  std::atomic<bool> finalized{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      FakeComm poster = comm.Alias();
      for (uint64_t k = 0;; ++k) {
        OpSpec s;
        s.seq = k;
        s.peer = t % 2;
        poster.RunOp(s);
        ++posted;
        // Go on well past the finalize: every call after it must be harmless.
        static thread_local int after = 0;
        if (finalized.load() && ++after > 200) break;
      }
    });
  }
  while (posted.load() < 400) std::this_thread::yield();
  ASSERT_EQ(comm.Finalize(), 0);
  finalized.store(true);
  for (auto& th : threads) th.join();
  EXPECT_EQ(CountWarnings("events on a finalized communicator are ignored"), 1);
  // The file was closed whole at the finalize.
  std::vector<std::string> files = TraceFiles(dir);
  ASSERT_EQ(files.size(), 1u);
  ReadResult r = ReadTraceFile(files[0]);
  EXPECT_TRUE(r.issues.empty()) << r.issues[0];
}

// A host that finalizes one communicator twice while another lives: the
// reference count underflowed and the next event on the other crashed.
TEST(FinalizeTest, ASecondFinalizeIsIgnoredWithOneWarning) {
  std::string dir = MakeTempDir("twice");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_FLUSH_MS", "5"}});
  PluginLib* lib = PluginLib::FreshCopy();
  ClearLogs();
  FakeComm a(lib, 5), b(lib, 5);
  ASSERT_EQ(a.Init(0xa1, "a", 1, 2, 0), 0);
  ASSERT_EQ(b.Init(0xb1, "b", 1, 2, 0), 0);
  void* a_ctx = a.context();
  ASSERT_EQ(a.Finalize(), 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(a.FinalizeAgain(a_ctx), 0);
  EXPECT_EQ(CountWarnings("finalized twice"), 1);
  for (uint64_t k = 0; k < 20; ++k) {
    OpSpec s;
    s.seq = k;
    OpResult r = b.RunOp(s);
    (void)r;
  }
  ASSERT_EQ(b.Finalize(), 0);
  std::vector<std::string> files = TraceFiles(dir);
  ASSERT_EQ(files.size(), 1u);
  ReadResult r = ReadTraceFile(files[0]);
  EXPECT_TRUE(r.issues.empty()) << r.issues[0];
  int ops = 0, finals = 0;
  for (const trace::Record& rec : r.records) {
    ops += rec.has_op();
    finals += rec.has_comm_finalize();
  }
  EXPECT_EQ(ops, 20);
  EXPECT_EQ(finals, 2);  // once each
}

}  // namespace
}  // namespace ncclwatch::testing
