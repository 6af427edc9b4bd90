// More threads than buffers: what a thread with no buffer of its own still
// delivers, and what it counts. NCCLWATCH_BUFFER_MB=1 gives 4 buffers.

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "plugin/testing/fake_nccl_host.h"

namespace ncclwatch::testing {
namespace {

// Three threads hold the buffers the main thread leaves: each posts one
// operation and stays alive until released.
class BufferHolders {
 public:
  BufferHolders(const FakeComm& comm, int n) {
    for (int i = 0; i < n; ++i)
      threads_.emplace_back([this, poster = comm.Alias(), i]() mutable {
        OpSpec s;
        s.seq = 1000 + static_cast<uint64_t>(i);
        poster.RunOp(s);
        std::unique_lock<std::mutex> lock(mu_);
        ++ready_;
        cv_.notify_all();
        cv_.wait(lock, [&] { return release_; });
      });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return ready_ == n; });
  }
  ~BufferHolders() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      release_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int ready_ = 0;
  bool release_ = false;
  std::vector<std::thread> threads_;
};

// NCCL's proxy thread, past the buffers, delivers every kernel-channel stop:
// the completions must still reach the file (they used to be dropped
// silently, and diagnose called the operations hung).
TEST(NoBufferTest, CompletionsFromAThreadWithoutABufferReachTheFile) {
  std::string dir = MakeTempDir("nobuf");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_BUFFER_MB", "1"}, {"NCCLWATCH_FLUSH_MS", "5"}});
  PluginLib* lib = PluginLib::FreshCopy();
  FakeComm comm(lib, 5);
  ASSERT_EQ(comm.Init(0xb0f, "world", 1, 2, 0), 0);
  // The main thread takes a buffer with its first event.
  std::vector<void*> ops;
  for (uint64_t k = 0; k < 8; ++k) {
    Ev o;
    o.type = nccl::kColl;
    o.seq = k;
    o.func = "AllReduce";
    o.datatype = "ncclFloat32";
    o.count = 1024;
    o.nchannels = 1;
    o.algo = "RING";
    o.proto = "SIMPLE";
    void* h = comm.Start(o);
    comm.Stop(h);  // enqueued
    ops.push_back(h);
  }
  {
    BufferHolders holders(comm, 3);  // the other 3 buffers
    std::thread proxy([&, poster = comm.Alias()]() mutable {
      for (size_t k = 0; k < ops.size(); ++k) {
        Ev ch;
        ch.type = nccl::kKernelCh;
        ch.parent = ops[k];
        ch.ptimer = 5'000'000'000 + k * 100'000;
        void* h = poster.Start(ch);
        StArgs a;
        a.ptimer = ch.ptimer + 10'000;
        poster.State(h, nccl::kKernelChStop, a);
        poster.Stop(h);
      }
    });
    proxy.join();
  }
  ASSERT_EQ(comm.Finalize(), 0);
  std::unique_ptr<Trace> t = ReadSingleTrace(dir);
  EXPECT_TRUE(t->raw.issues.empty()) << t->raw.issues[0];
  int completed = 0;
  for (const OpView& o : t->ops)  // the holders' own ops (seq 1000+) are not counted
    if (o.op->seq() < 8) completed += o.done_count;
  EXPECT_EQ(completed, 8);
}

}  // namespace
}  // namespace ncclwatch::testing
