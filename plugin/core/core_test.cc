// Tests of the plugin core that need its internals: where memory comes from
// and which events it bothers with. (Behaviour seen through the exported ABI
// is in abi_test.)

#include "plugin/core/core.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "plugin/core/config.h"
#include "plugin/core/event.h"
#include "plugin/abi/profiler_common.h"

namespace ncclwatch::plugin {
namespace {

struct Open {
  Profiler* prof = nullptr;
  Context* ctx = nullptr;
  std::string dir;

  explicit Open(const std::string& events) {
    const char* tmp = getenv("TEST_TMPDIR");
    std::string tmpl = std::string(tmp != nullptr ? tmp : "/tmp") + "/core-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    dir = mkdtemp(buf.data());
    ProfilerOptions o;
    o.config.dir = dir;
    std::string err;
    EXPECT_TRUE(ParseEvents(events, &o.config.nccl_mask, &o.config.raw_kinds, &err)) << err;
    o.config.events = events;
    o.config.buffer_mb = 8;
    o.api_version = 5;
    o.file_name_override = "core.ncclwatch";
    prof = Profiler::Acquire(o, &err);
    EXPECT_NE(prof, nullptr) << err;
    ctx = prof->NewContext(0xC0FE, "world", 1, 2, 0);
  }
  ~Open() {
    prof->FinalizeContext(ctx);
    Profiler::Release(prof);
  }
};

// The calling thread's buffer (after its first event), or null.
ThreadBuf* OwnBuf(Profiler* prof) {
  for (uint32_t i = 0; i < prof->thread_count(); ++i)
    if (prof->thread_buf(i)->tid.load() == static_cast<uint32_t>(gettid())) return prof->thread_buf(i);
  return nullptr;
}

// Pages of [p, p + len) not resident.
size_t NonResidentPages(const void* p, size_t len) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  uintptr_t e = reinterpret_cast<uintptr_t>(p) + len;
  size_t n = (e - a + page - 1) / page;
  std::vector<unsigned char> v(n);
  EXPECT_EQ(mincore(reinterpret_cast<void*>(a), e - a, v.data()), 0);
  size_t out = 0;
  for (unsigned char c : v) out += (c & 1) == 0;
  return out;
}

EventDesc Coll(uint64_t seq) {
  EventDesc d;
  d.kind = kEvColl;
  d.seq = seq;
  d.func = "AllReduce";
  d.nchannels = 0;
  return d;
}

// Communicators made and finalized over and over beside a long-lived one
// (66,000 such cycles hit a lifetime cap of 65,535 ids): a finalized
// communicator's context and id serve the next one once its CommFinalize is
// written and the grace has passed (none here), so memory and ids follow the
// communicators alive, not all there ever were.
TEST(CoreTest, FinalizedContextsServeNewCommunicators) {
  const char* tmp = getenv("TEST_TMPDIR");
  std::string tmpl = std::string(tmp != nullptr ? tmp : "/tmp") + "/reuse-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  ProfilerOptions o;
  o.config.dir = mkdtemp(buf.data());
  o.config.buffer_mb = 8;
  o.api_version = 5;
  o.context_grace_ns = 0;
  std::string err;
  Profiler* prof = Profiler::Acquire(o, &err);
  ASSERT_NE(prof, nullptr) << err;
  Context* anchor = prof->NewContext(0xA0, "anchor", 1, 2, 0);
  std::set<Context*> contexts;
  std::set<uint16_t> ids;
  for (uint64_t k = 0; k < 200; ++k) {
    Context* c = prof->NewContext(0x1000 + k, "sub", 1, 2, 0);
    ASSERT_NE(c, nullptr);
    EXPECT_FALSE(c->finalized.load());
    EXPECT_EQ(c->comm_hash, 0x1000 + k);
    contexts.insert(c);
    ids.insert(c->comm);
    EXPECT_TRUE(prof->FinalizeContext(c));  // writes its CommFinalize, then recycles it
  }
  EXPECT_LE(contexts.size(), 2u);
  EXPECT_LE(ids.size(), 2u);
  EXPECT_EQ(ids.count(anchor->comm), 0u);
  prof->FinalizeContext(anchor);
  Profiler::Release(prof);
}

// All 65,535 ids in use and one communicator finalized a moment ago: its
// context serves the next init at once, grace or not (no init is refused
// for the lifetime count).
TEST(CoreTest, PastTheLastIdTheNewestFinalizedContextIsTakenAtOnce) {
  const char* tmp = getenv("TEST_TMPDIR");
  std::string tmpl = std::string(tmp != nullptr ? tmp : "/tmp") + "/ids-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  ProfilerOptions o;
  o.config.dir = mkdtemp(buf.data());
  o.config.buffer_mb = 8;
  o.api_version = 5;  // the default grace: 10 s
  std::string err;
  Profiler* prof = Profiler::Acquire(o, &err);
  ASSERT_NE(prof, nullptr) << err;
  std::vector<Context*> all;
  for (uint32_t k = 0; k < 65535; ++k) {
    Context* c = prof->NewContext(0x100000 + k, nullptr, 1, 1, 0);
    ASSERT_NE(c, nullptr) << k;
    all.push_back(c);
  }
  EXPECT_EQ(prof->NewContext(0xdead, nullptr, 1, 1, 0), nullptr);  // every id alive: refused
  ASSERT_TRUE(prof->FinalizeContext(all[77]));
  Context* again = prof->NewContext(0xbeef, nullptr, 1, 1, 0);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again, all[77]);
  EXPECT_EQ(again->comm_hash, 0xbeefu);
  Profiler::Release(prof);  // the others are left alive: the file just ends unclean
}

TEST(CoreTest, AThreadsBufferIsResidentFromItsFirstEvent) {
  Open o("default");
  std::thread([&] {
    void* h = o.prof->Start(o.ctx, Coll(1));
    ASSERT_NE(h, nullptr);
    o.prof->Stop(h);
    // The thread's buffer is the one whose slots hold the handle.
    const ThreadBuf* mine = nullptr;
    for (uint32_t i = 0; i < o.prof->thread_count(); ++i) {
      ThreadBuf* tb = o.prof->thread_buf(i);
      if (h >= static_cast<void*>(tb->slots) && h < static_cast<void*>(tb->slots + tb->nslots)) mine = tb;
    }
    ASSERT_NE(mine, nullptr);
    // One operation touched one slot and one record; every page of both
    // regions is resident all the same (no page fault on later events).
    EXPECT_EQ(NonResidentPages(mine->slots, size_t{mine->nslots} * sizeof(Slot)), 0u);
    EXPECT_EQ(NonResidentPages(mine->ring.storage(), size_t{mine->ring.capacity()} * sizeof(Rec)), 0u);
    // Buffers no thread has claimed stay untouched (the budget is a ceiling, not RSS).
    const ThreadBuf* last = o.prof->thread_buf(o.prof->thread_count() - 1);
    ASSERT_NE(last, mine);
    EXPECT_GT(NonResidentPages(last->slots, size_t{last->nslots} * sizeof(Slot)), 0u);
  }).join();
}

// Raw events that overflow a ring must not crowd out the operations: the
// last quarter of every ring is theirs.
TEST(CoreTest, RawEventsLeaveRoomForOperations) {
  Open o("all");
  o.prof->PauseDrainForTesting(true);
  o.prof->ForceFlush();  // a whole writer cycle after the pause: no drain is under way from here
  std::thread([&] {
    ThreadBuf* tb = nullptr;
    EventDesc g;
    g.kind = kEvGroup;
    uint64_t pushed = 0;
    for (int i = 0; i < 10000; ++i) {  // 20,000 raw records (start + stop) for an 8,192-record ring
      void* h = o.prof->Start(o.ctx, g);
      ASSERT_NE(h, nullptr);
      o.prof->Stop(h);
    }
    tb = OwnBuf(o.prof);
    ASSERT_NE(tb, nullptr);
    const uint32_t cap = tb->ring.capacity();
    const uint64_t raw_dropped = tb->counters.ring_full.load();
    pushed = 20000 - raw_dropped;
    EXPECT_EQ(pushed, cap - cap / 4) << "raw records stop at three quarters of the ring";
    // Operations behind them still fit: each is an Op and a completion.
    for (uint64_t seq = 1; seq <= cap / 8; ++seq) {
      void* h = o.prof->Start(o.ctx, Coll(seq));
      ASSERT_NE(h, nullptr);
      o.prof->Stop(h);
    }
    EXPECT_EQ(tb->counters.ring_full.load(), raw_dropped) << "an operation's record was dropped";
    // And once the ring is full to the brim, operations are dropped too (counted).
    for (uint64_t seq = 1; seq <= cap / 8 + 1; ++seq) {
      void* h = o.prof->Start(o.ctx, Coll(cap + seq));
      if (h != nullptr) o.prof->Stop(h);
    }
    EXPECT_GT(tb->counters.ring_full.load(), raw_dropped);
  }).join();
  o.prof->PauseDrainForTesting(false);
}

// An operation that never completes holds its slot; once the cursor comes
// round to it, the next operation steps over it and stays tracked. But it
// looks at no more than kAllocTries slots: when that many in a row are live
// (NCCL's proxy thread a full round behind), it takes a spare slot rather
// than reading on through the lines that thread is completing.
TEST(CoreTest, AllocationStepsOverAFewLiveSlotsOnly) {
  for (uint32_t stuck : {kAllocTries - 1, kAllocTries}) {
    Open o("default");
    // The hung operations on a communicator of their own: on o.ctx, the
    // later completions would prove them complete after a second (the
    // writer's lost-completion rule) and free their slots on a slow machine.
    Context* hung_ctx = o.prof->NewContext(0xC0FF, "hung", 1, 2, 0);
    std::thread([&] {
      uint64_t seq = 0;
      EventDesc hung = Coll(0);
      hung.nchannels = 2;  // tracked, waits for two kernel channels that never stop
      ThreadBuf* tb = nullptr;
      for (uint32_t i = 0; i < stuck; ++i) {
        hung.seq = ++seq;
        void* h = o.prof->Start(hung_ctx, hung);
        ASSERT_NE(h, nullptr);
        o.prof->Stop(h);
      }
      tb = OwnBuf(o.prof);
      ASSERT_NE(tb, nullptr);
      // The rest of the round completes at its stop (no kernel channel expected).
      for (uint32_t i = stuck; i < tb->nslots; ++i) {
        void* h = o.prof->Start(o.ctx, Coll(++seq));
        ASSERT_NE(h, nullptr);
        o.prof->Stop(h);
      }
      ASSERT_EQ(tb->counters.untracked_ops.load(), 0u);
      // The cursor is back at the first hung operation's slot.
      void* h = o.prof->Start(o.ctx, Coll(++seq));
      ASSERT_NE(h, nullptr);
      o.prof->Stop(h);
      const bool spare = h >= static_cast<void*>(tb->slots + tb->nslots);
      if (stuck < kAllocTries) {
        EXPECT_FALSE(spare) << stuck << " live slots in a row are stepped over";
        EXPECT_EQ(h, static_cast<void*>(tb->slots + stuck));
        EXPECT_EQ(tb->counters.untracked_ops.load(), 0u);
      } else {
        EXPECT_TRUE(spare) << "looked past " << kAllocTries << " live slots";
        EXPECT_EQ(tb->counters.untracked_ops.load(), 1u);
      }
    }).join();
    o.prof->FinalizeContext(hung_ctx);
  }
}

// An operation completes when it has stopped on the enqueuing thread and
// its last kernel channel has stopped on NCCL's proxy thread, whichever comes
// last. The channel counters are written without locked instructions (one
// writer), so the hand-off rests on the last channel's fence: each side
// stores its part, then reads the other's. Here the two stops race on every
// operation, on two threads; each must complete exactly once, and each slot
// come free for the next round.
TEST(CoreTest, TheLastChannelAndTheStopRacingCompleteEachOperationOnce) {
  Open o("default");
  constexpr uint64_t kOps = 20000;  // almost five rounds of a thread's slots
  constexpr uint32_t kChannels = 2;
  std::atomic<void*> mailbox{nullptr};
  std::atomic<bool> quit{false};
  std::atomic<uint64_t> channels_run{0};
  std::thread proxy([&] {
    while (!quit.load(std::memory_order_acquire)) {
      void* h = mailbox.exchange(nullptr, std::memory_order_acq_rel);
      if (h == nullptr) continue;
      for (uint32_t c = 0; c < kChannels; ++c) {
        void* kh = o.prof->StartKernelCh(h, 100 + c);
        ASSERT_NE(kh, nullptr);
        StateArgs a;
        a.ptimer = 200 + c;
        a.has_ptimer = true;
        o.prof->State(kh, nccl::kKernelChStop, a);
        o.prof->Stop(kh);
      }
      channels_run.fetch_add(kChannels, std::memory_order_release);
    }
  });
  ThreadBuf* tb = nullptr;
  std::thread([&] {
    for (uint64_t seq = 1; seq <= kOps; ++seq) {
      EventDesc d = Coll(seq);
      d.nchannels = kChannels;
      void* h = o.prof->Start(o.ctx, d);
      ASSERT_NE(h, nullptr) << seq;
      void* none = nullptr;
      while (!mailbox.compare_exchange_weak(none, h, std::memory_order_acq_rel)) none = nullptr;
      o.prof->Stop(h);  // races the proxy thread's last channel
    }
    tb = OwnBuf(o.prof);
  }).join();
  while (channels_run.load(std::memory_order_acquire) < kOps * kChannels) std::this_thread::yield();
  quit.store(true, std::memory_order_release);
  proxy.join();
  ASSERT_NE(tb, nullptr);
  uint64_t completed = 0;
  for (uint32_t i = 0; i < o.prof->thread_count(); ++i)
    completed += o.prof->thread_buf(i)->counters.ops_completed.load();
  // On a busy machine the writer may fall behind: completions then wait in
  // their slots until it collects them, and operations that find no free
  // slot are recorded without completion tracking. Each tracked one must
  // complete exactly once.
  const uint64_t untracked = tb->counters.untracked_ops.load();
  EXPECT_EQ(completed + untracked, kOps) << "an operation completed twice, or not at all (" << untracked
                                         << " without completion tracking)";
  EXPECT_EQ(tb->counters.pool_exhausted.load(), 0u);
  // Every slot comes free once the writer has collected what waits in it:
  // each flush waits for one of its cycles.
  auto live = [&] {
    uint32_t n = 0;
    for (uint32_t k = 0; k < tb->nslots + tb->nspare; ++k) n += tb->slots[k].state.load() == kSlotLive;
    return n;
  };
  while (live() != 0) o.prof->ForceFlush();
  EXPECT_EQ(live(), 0u) << "a slot was still waiting for a completion";
}

TEST(CoreTest, WantsOperationsTheirFeedersAndRawKindsOnly) {
  {
    Open o("default");
    for (EventKind k : {kEvColl, kEvP2p, kEvKernelCh, kEvProxyOp, kEvProxyStep}) EXPECT_TRUE(o.prof->Wants(k)) << k;
    for (EventKind k : {kEvGroup, kEvGroupApi, kEvCollApi, kEvP2pApi, kEvKernelLaunch, kEvProxyCtrl, kEvNetPlugin,
                        kEvCeColl, kEvCeSync, kEvCeBatch, kEvNone})
      EXPECT_FALSE(o.prof->Wants(k)) << k;
  }
  {
    Open o("default,group,collapi");
    EXPECT_TRUE(o.prof->Wants(kEvGroup));
    EXPECT_TRUE(o.prof->Wants(kEvCollApi));
    EXPECT_FALSE(o.prof->Wants(kEvGroupApi));
  }
  {
    Open o("all");
    for (int k = kEvGroup; k < kEvCount; ++k) EXPECT_TRUE(o.prof->Wants(static_cast<EventKind>(k))) << k;
  }
}

}  // namespace
}  // namespace ncclwatch::plugin
