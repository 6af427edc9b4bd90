// A burst of completions from a thread without a buffer, all between two
// drains of the writer: none may be lost. (They used to go through a shared
// lane of 1,024 records, and the rest were dropped: diagnose then called the
// last operations of the burst hung.) With the internals, so that the
// writer's drains can be held off for the whole burst.

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "plugin/core/config.h"
#include "plugin/core/core.h"
#include "plugin/core/event.h"
#include "plugin/testing/fake_nccl_host.h"

namespace ncclwatch::plugin {
namespace {

constexpr int kEnqueuers = 5;              // NCCLWATCH_BUFFER_MB=12: 5 buffers, all theirs
constexpr int kOpsPerEnqueuer = 4000;      // each holds that many ops in its 4,096 slots
constexpr int kOps = kEnqueuers * kOpsPerEnqueuer;

EventDesc Coll(uint64_t seq) {
  EventDesc d;
  d.kind = kEvColl;
  d.seq = seq;
  d.func = "AllReduce";
  d.nchannels = 1;
  return d;
}

// `events`: NCCLWATCH_EVENTS. `fast`: kernel channels as API v4+ hands them
// over without raw capture (Profiler::StartKernelCh); else through Start,
// as with raw capture, where the thread without a buffer loses the raw
// records but must still complete the op.
void RunBurst(const std::string& events, bool fast) {
  ProfilerOptions o;
  const std::string dir = testing::MakeTempDir("burst");
  o.config.dir = dir;
  std::string err;
  ASSERT_TRUE(ParseEvents(events, &o.config.nccl_mask, &o.config.raw_kinds, &err)) << err;
  o.config.events = events;
  o.config.buffer_mb = 12;
  o.api_version = 5;
  o.file_name_override = "burst.ncclwatch";
  Profiler* prof = Profiler::Acquire(o, &err);
  ASSERT_NE(prof, nullptr) << err;
  ASSERT_EQ(prof->thread_count(), static_cast<uint32_t>(kEnqueuers));
  Context* ctx = prof->NewContext(0xB0B0, "world", 1, 2, 0);
  prof->PauseDrainForTesting(true);
  prof->ForceFlush();  // a whole writer cycle after the pause: no drain is under way from here

  // Every buffer is taken by a thread that enqueued its share and stays
  // alive until released.
  std::vector<void*> ops(kOps, nullptr);
  std::mutex mu;
  std::condition_variable cv;
  int ready = 0;
  bool release = false;
  std::vector<std::thread> enqueuers;
  for (int t = 0; t < kEnqueuers; ++t)
    enqueuers.emplace_back([&, t] {
      for (int k = 0; k < kOpsPerEnqueuer; ++k) {
        const int i = t * kOpsPerEnqueuer + k;
        void* h = prof->Start(ctx, Coll(static_cast<uint64_t>(i)));
        prof->Stop(h);
        ops[i] = h;
      }
      std::unique_lock<std::mutex> lock(mu);
      ++ready;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
    });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return ready == kEnqueuers; });
  }
  for (void* h : ops) ASSERT_NE(h, nullptr);

  // NCCL's proxy thread, past the buffers: every op's kernel channel.
  std::thread proxy([&] {
    for (int i = 0; i < kOps; ++i) {
      const uint64_t ptimer = 5'000'000'000 + static_cast<uint64_t>(i) * 1000;
      void* ch;
      if (fast) {
        ch = prof->StartKernelCh(ops[i], ptimer);
      } else {
        EventDesc d;
        d.kind = kEvKernelCh;
        d.parent = ops[i];
        d.ptimer = ptimer;
        d.has_ptimer = true;
        ch = prof->Start(ctx, d);
      }
      ASSERT_NE(ch, nullptr) << "op " << i;
      StateArgs a;
      a.ptimer = ptimer + 500;
      a.has_ptimer = true;
      prof->State(ch, nccl::kKernelChStop, a);
      prof->Stop(ch);
    }
  });
  proxy.join();
  EXPECT_EQ(prof->lane().dropped(), 0u);

  prof->PauseDrainForTesting(false);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  for (auto& th : enqueuers) th.join();
  prof->FinalizeContext(ctx);
  Profiler::Release(prof);

  std::unique_ptr<testing::Trace> tr = testing::ReadSingleTrace(dir);
  EXPECT_TRUE(tr->raw.issues.empty()) << tr->raw.issues[0];
  std::vector<int> done(kOps, 0);
  int with_gpu = 0;
  for (const testing::OpView& v : tr->ops) {
    ASSERT_LT(v.op->seq(), static_cast<uint64_t>(kOps));
    done[v.op->seq()] += v.done_count;
    with_gpu += v.has_gpu;
  }
  EXPECT_EQ(tr->ops.size(), static_cast<size_t>(kOps));
  EXPECT_TRUE(tr->orphan_done.empty());
  int completed = 0;
  for (int i = 0; i < kOps; ++i) {
    EXPECT_LE(done[i], 1) << "op " << i;
    completed += done[i] == 1;
  }
  EXPECT_EQ(completed, kOps);
  EXPECT_EQ(with_gpu, kOps) << "each completion keeps its kernel's GPU times";
}

TEST(NoBufferBurstTest, TwentyThousandCompletionsBetweenTwoDrainsAllReachTheFile) {
  RunBurst("default", true);
}

TEST(NoBufferBurstTest, RawKernelChannelsWithoutABufferStillCompleteTheirOps) {
  RunBurst("all", false);
}

}  // namespace
}  // namespace ncclwatch::plugin
