// The hot path (startEvent, stopEvent, recordEventState) allocates nothing:
// checked by interposing malloc and friends and counting calls made from the
// calling thread while it drives events, including the thread's first event
// (which claims its buffer) and completion of operations.

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <string>
#include <thread>

#include "plugin/core/core.h"
#include "plugin/abi/profiler_common.h"

extern "C" void* __libc_malloc(size_t);
extern "C" void* __libc_calloc(size_t, size_t);
extern "C" void* __libc_realloc(void*, size_t);
extern "C" void* __libc_memalign(size_t, size_t);
extern "C" void __libc_free(void*);

namespace {
thread_local bool t_counting = false;
std::atomic<int> g_allocs{0};
}  // namespace

extern "C" {
void* malloc(size_t n) {
  if (t_counting) g_allocs.fetch_add(1);
  return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
  if (t_counting) g_allocs.fetch_add(1);
  return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
  if (t_counting) g_allocs.fetch_add(1);
  return __libc_realloc(p, n);
}
void* memalign(size_t a, size_t n) {
  if (t_counting) g_allocs.fetch_add(1);
  return __libc_memalign(a, n);
}
int posix_memalign(void** p, size_t a, size_t n) {
  if (t_counting) g_allocs.fetch_add(1);
  *p = __libc_memalign(a, n);
  return *p ? 0 : 12;
}
void* aligned_alloc(size_t a, size_t n) {
  if (t_counting) g_allocs.fetch_add(1);
  return __libc_memalign(a, n);
}
void free(void* p) { __libc_free(p); }
}

namespace ncclwatch::plugin {
namespace {

void DriveOps(Profiler* prof, Context* ctx, int n) {
  for (int i = 0; i < n; ++i) {
    EventDesc c;
    c.kind = kEvColl;
    c.seq = i + 1;
    c.func = "AllReduce";
    c.datatype = "ncclFloat32";
    c.algo = "RING";
    c.proto = "LL";
    c.count = 256;
    c.nchannels = 2;
    void* coll = prof->Start(ctx, c);
    prof->Stop(coll);
    for (int ch = 0; ch < 2; ++ch) {
      EventDesc k;
      k.kind = kEvKernelCh;
      k.parent = coll;
      k.channel = ch;
      k.ptimer = 1000 + i;
      k.has_ptimer = true;
      void* kh = prof->Start(ctx, k);
      StateArgs a;
      a.ptimer = 2000 + i;
      a.has_ptimer = true;
      prof->State(kh, nccl::kKernelChStop, a);
      prof->Stop(kh);
    }
    EventDesc px;
    px.kind = kEvProxyOp;
    px.parent = coll;
    px.pid = prof->pid();
    px.nsteps = 2;
    void* ph = prof->Start(ctx, px);
    EventDesc st;
    st.kind = kEvProxyStep;
    st.parent = ph;
    st.step = 1;
    void* sh = prof->Start(ctx, st);
    StateArgs sa;
    sa.trans_size = 4096;
    prof->State(sh, nccl::kProxyStepSendWait, sa);
    prof->Stop(sh);
    prof->Stop(ph);
    EventDesc p2p;
    p2p.kind = kEvP2p;
    p2p.func = "Send";
    p2p.peer = 1;
    p2p.nchannels = 0;
    prof->Stop(prof->Start(ctx, p2p));
  }
}

int CountHotPathAllocs(const std::string& events) {
  ProfilerOptions opts;
  opts.config.dir = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  std::string err;
  uint64_t mask;
  uint32_t raw;
  EXPECT_TRUE(ParseEvents(events, &mask, &raw, &err)) << err;
  opts.config.nccl_mask = mask;
  opts.config.raw_kinds = raw;
  opts.config.events = events;
  opts.api_version = 5;
  Profiler* prof = Profiler::Acquire(opts, &err);
  EXPECT_NE(prof, nullptr) << err;
  Context* ctx = prof->NewContext(77, "world", 1, 2, 0);
  g_allocs.store(0);
  // A fresh thread: its first event claims a buffer, inside the count.
  std::thread t([&] {
    t_counting = true;
    DriveOps(prof, ctx, 500);
    t_counting = false;
  });
  t.join();
  int n = g_allocs.load();
  // The path under test really ran: every collective and send completed.
  uint64_t completed = 0;
  for (uint32_t i = 0; i < prof->thread_count(); ++i) completed += prof->thread_buf(i)->counters.ops_completed.load();
  EXPECT_EQ(completed, 1000u);
  prof->FinalizeContext(ctx);
  Profiler::Release(prof);
  return n;
}

TEST(HotPathAllocTest, DefaultCaptureAllocatesNothing) { EXPECT_EQ(CountHotPathAllocs("default"), 0); }

TEST(HotPathAllocTest, FullCaptureAllocatesNothing) { EXPECT_EQ(CountHotPathAllocs("all"), 0); }

TEST(HotPathAllocTest, TheCounterCounts) {
  // Guard against a test that cannot fail: an allocation on a counting thread is seen.
  g_allocs.store(0);
  t_counting = true;
  void* p = malloc(64);
  t_counting = false;
  free(p);
  EXPECT_EQ(g_allocs.load(), 1);
}

}  // namespace
}  // namespace ncclwatch::plugin
