#include "plugin/core/core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "plugin/abi/profiler_common.h"
#include "plugin/abi/profiler_net.h"
#include "plugin/core/clock.h"

namespace ncclwatch::plugin {
namespace {

// The calling thread's buffer, in one thread-local: each hot-path call
// looks up its address once (in a dlopen'ed .so every thread-local access
// is a call, BENCHMARKS.md "The launching thread's cost").
struct ThreadState {
  ThreadBuf* buf;
  uint64_t gen;    // Profiler generation buf belongs to
  uint64_t epoch;  // buffers freed when this thread last found none
};
thread_local ThreadState t_thread{nullptr, 0, 0};

// Completions from CUDA events: the last kernel launch on this thread. NCCL
// starts a plan's operations right after its launch, on the same thread
// (docs/nccl_call_order.md), so they belong to it when their communicator
// is the launch's.
struct LaunchBinding {
  uint64_t gen;  // Profiler generation
  const Context* ctx;
  uint64_t id;     // the launch's event id (0: none)
  uint16_t flags;  // kFlagGraph, kFlagNoEvent
};
thread_local LaunchBinding t_launch{0, nullptr, 0, 0};

// Raw event records may fill a ring only up to 1 - 1/4 of it: the last
// quarter is kept for operations and their completions, which the diagnosis
// needs (measured on GPU with NCCLWATCH_EVENTS=all: bursts of small
// operations filled the rings with raw events, ~11% of events dropped).
constexpr uint32_t kOpReserveDivisor = 4;

bool IsOp(uint32_t k) { return k == kEvColl || k == kEvP2p; }

// An operation's kernel-channel fields (kernel_started, kernel_stopped,
// gpu_min, gpu_max) have one writer: NCCL makes every kernel-channel call of
// an operation from its communicator's proxy progress thread (the profiler
// proxy connection's progress function). So they are updated with a plain
// load and store, no locked instruction: on H200 hosts each locked update
// there cost NCCL's proxy thread 40 to 85 ns in place, three per channel
// (BENCHMARKS.md, "Locked instructions on NCCL's proxy thread"). The proxy counters keep their
// atomic updates: under PXN, another rank's proxy thread in this process may
// report proxy operations for the same op.
void OwnerMin(std::atomic<uint64_t>& a, uint64_t v) {
  if (v < a.load(std::memory_order_relaxed)) a.store(v, std::memory_order_relaxed);
}
void OwnerMax(std::atomic<uint64_t>& a, uint64_t v) {
  if (v > a.load(std::memory_order_relaxed)) a.store(v, std::memory_order_relaxed);
}


#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

// Makes [addr, addr + len) resident and writable without changing a byte.
// Older kernels refuse the madvise: then a word of every page gets an atomic
// add of 0 (the memory may already be read by the writer thread's scans).
void Prefault(void* addr, size_t len) {
  if (addr == nullptr || len == 0) return;
  if (madvise(addr, len, MADV_POPULATE_WRITE) == 0) return;
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  char* p = static_cast<char*>(addr);
  for (size_t off = 0; off < len; off += page)
    __atomic_fetch_add(reinterpret_cast<uint64_t*>(p + off), 0, __ATOMIC_RELAXED);
}


alignas(64) char g_group_token[64];

// GroupApi tokens (NewGroupApiToken): each thread takes a block of numbers
// at a time, so that a group costs its thread no locked instruction (NCCL
// starts a GroupApi for every call outside a user's group).
constexpr uint64_t kTokenBlock = 1u << 16;
std::atomic<uint64_t> g_group_api_blocks{0};
struct TokenBlock {
  uint64_t next;  // 0: none taken yet
  uint64_t end;
};
thread_local TokenBlock t_tokens{0, 0};

}  // namespace

__attribute__((hot)) void* GroupToken() { return g_group_token; }

__attribute__((hot)) void* NewGroupApiToken() {
  TokenBlock& b = t_tokens;
  if (b.next == b.end) {
    const uint64_t block = g_group_api_blocks.fetch_add(1, std::memory_order_relaxed) + 1;
    b.next = block * kTokenBlock;
    b.end = b.next + kTokenBlock;
  }
  const uint64_t n = b.next++;
  // 62 bits of numbers: unique while the process lives.
  return reinterpret_cast<void*>((uint64_t{1} << 63) | ((n << 1) & ~(uint64_t{1} << 63)));
}

// On the hot path (ValidParent): kept here so that it inlines.
bool Profiler::SlotIsOurs(const void* p) const {
  auto* s = static_cast<const Slot*>(p);
  if (s < slots_begin_ || s >= slots_end_) return false;
  return (reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(slots_begin_)) % sizeof(Slot) == 0;
}

// ------------------------------------------------------------- thread buffers

void Profiler::ThreadExit(void* buf) {
  static_cast<ThreadBuf*>(buf)->owner.store(kBufOrphaned, std::memory_order_release);
}

__attribute__((hot)) ThreadBuf* Profiler::CurrentThread() {
  ThreadState& t = t_thread;
  if (__builtin_expect(t.gen == generation_, 1)) {
    if (__builtin_expect(t.buf != nullptr, 1)) return t.buf;
    // None was free when this thread last looked: look again only once the
    // writer has freed one (an exited thread's).
    if (t.epoch == buffers_freed_.load(std::memory_order_acquire)) return nullptr;
  }
  return ClaimThread();
}

__attribute__((cold)) ThreadBuf* Profiler::ClaimThread() {
  ThreadState& t = t_thread;
  t.gen = generation_;
  t.buf = nullptr;
  t.epoch = buffers_freed_.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < nthreads_; ++i) {
    uint32_t expected = kBufFree;
    if (threads_[i].owner.compare_exchange_strong(expected, kBufOwned, std::memory_order_acq_rel)) {
      ThreadBuf* tb = &threads_[i];
      tb->tid.store(static_cast<uint32_t>(syscall(SYS_gettid)), std::memory_order_relaxed);
      // Fault the buffer in now, once, rather than a page at a time on later
      // events: measured on GPU, those faults made a collective's start cost
      // 0.4 to 1.2 us on average for the first 4,096 operations of a thread.
      Prefault(tb->slots, size_t{tb->nslots + tb->nspare} * sizeof(Slot));
      Prefault(tb->ring.storage(), size_t{tb->ring.capacity()} * sizeof(Rec));
      if (events_) InitLaunchSlot(tb);
      if (key_ok_) pthread_setspecific(key_, tb);
      t.buf = tb;
      return tb;
    }
  }
  return nullptr;  // callers count what they drop for want of a buffer
}

__attribute__((cold)) void Profiler::NoBuffer() { no_thread_slot_.fetch_add(1, std::memory_order_relaxed); }

// A free slot becomes live for a new event: a new id, every field at its
// initial value, published by the state.
__attribute__((hot)) void Profiler::Claim(ThreadBuf* tb, Slot* s) {
  s->id.store(NewId(tb), std::memory_order_relaxed);
  s->op_id.store(0, std::memory_order_relaxed);
  s->parent = nullptr;
  s->op = nullptr;
  s->raw = 0;
  s->has_ptimer = 0;
  s->step_bytes = 0;
  s->expect_channels.store(0, std::memory_order_relaxed);
  s->tracked.store(0, std::memory_order_relaxed);
  s->enqueued.store(0, std::memory_order_relaxed);
  s->done.store(0, std::memory_order_relaxed);
  s->kernel_started.store(0, std::memory_order_relaxed);
  s->kernel_stopped.store(0, std::memory_order_relaxed);
  s->proxy_started.store(0, std::memory_order_relaxed);
  s->proxy_stopped.store(0, std::memory_order_relaxed);
  s->gpu_min.store(~0ull, std::memory_order_relaxed);
  s->gpu_max.store(0, std::memory_order_relaxed);
  s->proxy_bytes.store(0, std::memory_order_relaxed);
  s->px_desc.store(0, std::memory_order_relaxed);
  s->px_progress.store(0, std::memory_order_relaxed);
  s->px_update_ns.store(0, std::memory_order_relaxed);
  s->state.store(kSlotLive, std::memory_order_release);
}

// What no launch changes in the thread's launch slot (ThreadBuf::launch),
// set once per claim of the buffer: StartLaunch writes only the rest.
void Profiler::InitLaunchSlot(ThreadBuf* tb) {
  Slot* s = tb->launch;
  Claim(tb, s);
  s->kind.store(kEvKernelLaunch, std::memory_order_relaxed);
  Rec& r = s->rec;
  memset(&r, 0, sizeof(Rec));
  r.kind = kRecLaunch;
  r.etype = kEvKernelLaunch;
  r.launch.tid = tb->tid.load(std::memory_order_relaxed);
  s->state.store(kSlotDone, std::memory_order_release);
}

__attribute__((hot)) Slot* Profiler::AllocSlot(ThreadBuf* tb) {
  const uint32_t mask = tb->nslots - 1;
  for (uint32_t i = 0; i < kAllocTries; ++i) {
    Slot* s = &tb->slots[tb->cursor];
    tb->cursor = (tb->cursor + 1) & mask;
    // The next slot was last used a full round ago (4,096 operations): fetch
    // its lines now, while NCCL does the rest of this operation. A plain read
    // prefetch (PREFETCHT0 for a baseline x86-64 build) is enough: fetching
    // the lines owned gains nothing in place (BENCHMARKS.md, "NCCL's proxy
    // thread").
    const char* next = reinterpret_cast<const char*>(&tb->slots[tb->cursor]);
    for (size_t off = 0; off < sizeof(Slot); off += 64) __builtin_prefetch(next + off, 1, 3);
    if (s->state.load(std::memory_order_acquire) == kSlotLive) continue;
    Claim(tb, s);
    return s;
  }
  return nullptr;  // the caller counts what it drops
}

// Every slot waits for a completion (NCCL's proxy thread can fall ~80 ms,
// 4,096 operations, behind: measured on H200s). The operation is still
// recorded, on a spare slot and without completion tracking, rather than
// lost: the analysis needs every Op record, completion less so. A spare slot
// is reused once its operation stopped; late kernel-channel events naming it
// only touch counters nobody reads (tracked is 0).
Slot* Profiler::SpareSlot(ThreadBuf* tb) {
  for (uint32_t i = 0; i < tb->nspare; ++i) {
    Slot* s = &tb->slots[tb->nslots + tb->spare_cursor];
    tb->spare_cursor = tb->spare_cursor + 1 == tb->nspare ? 0 : tb->spare_cursor + 1;
    if (s->state.load(std::memory_order_acquire) == kSlotLive) continue;  // started, not yet stopped
    Claim(tb, s);
    return s;
  }
  return nullptr;
}

__attribute__((hot)) Slot* Profiler::ValidParent(void* p) {
  if (p == nullptr || p == g_group_token || IsGroupApiToken(p)) return nullptr;
  auto* s = static_cast<Slot*>(p);
  if (SlotIsOurs(p) && s->state.load(std::memory_order_acquire) != kSlotFree) return s;
  // Rare: the thread's buffer is looked up only to count it.
  if (ThreadBuf* tb = CurrentThread()) OwnerIncrement(tb->counters.bad_parent);
  return nullptr;
}

__attribute__((hot)) Rec* Profiler::ReserveOpRecord(ThreadBuf* tb) {
  Rec* r = tb->ring.Reserve();
  if (r == nullptr) OwnerIncrement(tb->counters.ring_full);
  return r;
}

Rec* Profiler::ReserveRawRecord(ThreadBuf* tb) {
  Rec* r = tb->ring.Reserve(tb->ring.capacity() - tb->ring.capacity() / kOpReserveDivisor);
  if (r == nullptr) OwnerIncrement(tb->counters.ring_full);
  return r;
}

// ------------------------------------------------------------------ hot path

__attribute__((hot)) void Profiler::FillOp(ThreadBuf* tb, Slot* s, const OpDesc& d, uint64_t now) {
  Context* ctx = s->ctx;
  Rec& r = s->rec;
  r.kind = kRecOp;
  r.etype = d.kind;
  r.comm = ctx->comm;
  r.flags = static_cast<uint16_t>((d.is_collnet ? kFlagCollnet : 0) | (d.is_nvls ? kFlagNvls : 0) |
                                  (d.is_sym_coll ? kFlagSymColl : 0));
  r.nchannels = d.nchannels;
  r.nwarps = d.nwarps;
  r.id = s->id.load(std::memory_order_relaxed);
  r.t0_ticks = now;
  r.t1 = now;
  Slot* parent = ValidParent(d.parent);
  r.parent_id = parent != nullptr && parent->raw ? parent->id.load(std::memory_order_relaxed) : 0;
  r.op.seq = d.seq;
  r.op.func = d.func;
  r.op.count = d.count;
  r.op.datatype = d.datatype;
  r.op.algo = d.algo;
  if (d.is_sym_coll) {
    r.op.kernel_variant = d.kernel_variant;
  } else {
    r.op.proto = d.proto;
  }
  const bool full = any_raw_;
  r.op.send_buff = full ? reinterpret_cast<uint64_t>(d.send_buff) : 0;
  r.op.recv_buff = full ? reinterpret_cast<uint64_t>(d.recv_buff) : 0;
  if (d.kind == kEvP2p) {
    r.op.peer = d.peer;
  } else {
    r.op.root = d.root;
  }
  if (api_version_ == 1) {
    r.op.user_tag = 0;
    r.op.op = d.op;
  } else {
    r.op.user_tag = d.user_tag;
  }
  r.op.traffic_bytes = d.traffic_bytes;
  r.op.p2p_seq = 0;
  if (d.kind == kEvP2p && ctx->send_seq && d.peer >= 0 && d.peer < ctx->nranks) {
    bool recv = d.func != nullptr && d.func[0] == 'R';
    auto& c = recv ? ctx->recv_seq[d.peer] : ctx->send_seq[d.peer];
    uint32_t v = c.load(std::memory_order_relaxed);
    c.store(v + 1, std::memory_order_relaxed);
    r.op.p2p_seq = v + 1;
  }
  if (d.comm_hash != 0 && ctx->comm_hash == 0 &&
      ctx->event_comm_hash.load(std::memory_order_relaxed) == 0) {
    ctx->event_comm_hash.store(d.comm_hash, std::memory_order_relaxed);
  }
  if (events_) {
    // Completion comes from the launch's CUDA event, which the writer
    // watches: the slot is free again at the op's stop.
    if (t_launch.gen == generation_ && t_launch.ctx == ctx) {
      r.op.launch_id = t_launch.id;
      r.flags |= t_launch.flags;
      if (t_launch.flags == 0) r.flags |= kFlagTracked;
    } else {
      r.op.launch_id = 0;
      r.flags |= kFlagNoLaunch;
    }
    s->expect_channels.store(d.nchannels, std::memory_order_relaxed);
    s->tracked.store(0, std::memory_order_relaxed);
    return;
  }
  // Completion is tracked from kernel channels, which need API v4+ (exact
  // nChannels) and KernelCh in the activation mask.
  bool tracked = api_version_ >= 4 && (config_.nccl_mask & nccl::kKernelCh) != 0;
  s->expect_channels.store(d.nchannels, std::memory_order_relaxed);
  s->tracked.store(tracked ? 1 : 0, std::memory_order_relaxed);
}

__attribute__((hot)) void* Profiler::StartKernelLaunch(Context* ctx, const void* stream, const void* group_api) {
  if (__builtin_expect(abandoned_.load(std::memory_order_relaxed), false)) return nullptr;
  ThreadBuf* tb = CurrentThread();
  if (tb == nullptr) {
    NoBuffer();
    // The ops that follow must not take an earlier launch's completion.
    t_launch = {generation_, ctx, 0, kFlagNoEvent};
    return nullptr;
  }
  return StartLaunch(tb, ctx, stream, group_api, nullptr);
}

__attribute__((hot)) void* Profiler::StartLaunch(ThreadBuf* tb, Context* ctx, const void* stream_arg,
                                                const void* group_api, const EventDesc* raw) {
  // No clock read here unless the launch is captured raw: the writer needs
  // only the launch's number on its stream (every read is paid on NCCL's
  // launching thread, BENCHMARKS.md).
  const uint64_t now = __builtin_expect(raw != nullptr, 0) ? Ticks() : 0;
  Slot* s = tb->launch;
  const uint64_t id = NewId(tb);
  s->id.store(id, std::memory_order_relaxed);
  s->ctx = ctx;
  s->start_ns = now;
  s->raw = raw != nullptr ? 1 : 0;
  // kind, etype, nchannels, nwarps, parent_id, launch.tid: InitLaunchSlot;
  // t0_ticks and t1 stay 0 (nothing reads a launch record's times).
  Rec& r = s->rec;
  r.comm = ctx->comm;
  r.flags = 0;
  r.id = id;
  void* stream = const_cast<void*>(stream_arg);
  r.launch.stream = reinterpret_cast<uint64_t>(stream);
  r.launch.events = nullptr;
  r.launch.n = 0;
  r.launch.unsampled = 0;
  s->state.store(kSlotLive, std::memory_order_release);
  // An event recorded into a stream being captured would become a node of
  // the user's graph: none there, and its ops say why. NCCL's own answer for
  // this group, when its API events gave one (Context::capture_hint), spares
  // the launching thread a driver call; without it the driver is asked.
  int capturing = 0;
  const uint64_t hint = IsGroupApiToken(group_api) ? ctx->capture_hint.load(std::memory_order_relaxed) : 0;
  const bool answered = hint != 0 && (hint & ~uint64_t{1}) == reinterpret_cast<uintptr_t>(group_api);
  if (__builtin_expect(answered, 1)) capturing = static_cast<int>(hint & 1);
  if (!answered && cuda_.stream_is_capturing(stream, &capturing) != kCudaSuccess) {
    r.flags = kFlagNoEvent;
  } else if (__builtin_expect(capturing != 0, 0)) {
    r.flags = kFlagGraph;
  } else {
    StreamEvents* ev = streams_->For(stream);
    if (__builtin_expect(sampled_, 0) && ev != nullptr &&
        !ev->Due(Ticks(), interval_ticks_.load(std::memory_order_relaxed))) {
      // Sampled, and the stream recorded events less than the interval ago:
      // none here. Its place in stream order (the number the next launch
      // that records will take) is read at its stop, after its kernel is
      // queued; that launch's events prove it.
      r.launch.events = ev;
      r.launch.unsampled = 1;
    } else {
      uint64_t n = 0;
      bool ok = false;
      if (__builtin_expect(ev != nullptr, 1)) {
        n = ev->Next();
        // The event before the kernel tells "never started" from "started" in
        // a stuck report; NCCLWATCH_START_EVENTS=0 saves its cost.
        ok = !start_events_ || cuda_.event_record(ev->before(n), stream) == kCudaSuccess;
        // The thread's cached ring may be a destroyed context's whose stream
        // handle came back: the stream's ring in the current context, once.
        if (__builtin_expect(!ok, 0) && (ev = streams_->Again(stream)) != nullptr) {
          n = ev->Next();
          ok = cuda_.event_record(ev->before(n), stream) == kCudaSuccess;
        }
      }
      if (__builtin_expect(ok, 1)) {
        r.launch.events = ev;
        r.launch.n = n;
        if (!start_events_) r.flags |= kFlagNoStartEvent;
      } else {
        r.flags = kFlagNoEvent;
      }
    }
  }
  if (__builtin_expect(raw != nullptr, 0)) StartRaw(tb, s, *raw, now);
  OwnerIncrement(tb->counters.recorded);
  return s;
}

__attribute__((hot)) void Profiler::StopLaunch(ThreadBuf* tb, Slot* s) {
  Rec& r = s->rec;
  auto* ev = static_cast<StreamEvents*>(r.launch.events);
  void* stream = reinterpret_cast<void*>(r.launch.stream);
  if (__builtin_expect(r.launch.unsampled != 0, 0)) {
    // Read after the kernel was queued: a launch that another thread numbered
    // (and so recorded) before can only have queued its events before this
    // kernel, so this launch is never placed before an event that does not
    // cover it. One numbered in between places it later than it is: its
    // completion is seen later, never early.
    r.launch.n = ev->issued();
  } else if (ev != nullptr && __builtin_expect(cuda_.event_record(ev->after(r.launch.n), stream) != kCudaSuccess, 0)) {
    // Without an event before the kernel, the ring was not tried at the
    // start (StartLaunch): the stream's ring in the current context, once.
    StreamEvents* again = (r.flags & kFlagNoStartEvent) ? streams_->Again(stream) : nullptr;
    const uint64_t n = again != nullptr ? again->Next() : 0;
    if (again != nullptr && cuda_.event_record(again->after(n), stream) == kCudaSuccess) {
      r.launch.events = again;
      r.launch.n = n;
    } else {
      r.launch.events = nullptr;
      r.flags |= kFlagNoEvent;
    }
  }
  bool sent = false;
  if (__builtin_expect(tb != nullptr, 1)) {
    if (Rec* out = ReserveOpRecord(tb)) {
      memcpy(out, &r, sizeof(Rec));
      tb->ring.Commit();
      sent = true;
    }
  } else if (lane_.Push(r)) {
    sent = true;
  } else {
    NoBuffer();
  }
  // The writer will never see this launch: its ops are untracked (its
  // events serve a later launch in turn).
  if (!sent) r.flags |= kFlagNoEvent;
  t_launch = {generation_, s->ctx, r.id, static_cast<uint16_t>(r.flags & (kFlagGraph | kFlagNoEvent))};
}

__attribute__((cold)) void Profiler::StartRaw(ThreadBuf* tb, Slot* s, const EventDesc& d, uint64_t now) {
  Rec* r = ReserveRawRecord(tb);
  if (r == nullptr) return;
  memset(r, 0, sizeof(Rec));
  r->kind = kRecEvStart;
  r->etype = d.kind;
  r->comm = s->ctx->comm;
  r->id = s->id.load(std::memory_order_relaxed);
  r->t0_ticks = now;
  r->t1 = tb->tid.load(std::memory_order_relaxed);
  r->parent_id = s->parent != nullptr ? s->parent->id.load(std::memory_order_relaxed) : 0;
  uint16_t flags = d.graph_captured ? kFlagGraph : 0;
  switch (d.kind) {
    case kEvGroupApi:
      r->api.group_depth = d.group_depth;
      break;
    case kEvCollApi:
    case kEvP2pApi:
    case kEvKernelLaunch:
      r->api.func = d.func;
      r->api.count = d.count;
      r->api.datatype = d.datatype;
      r->api.root = d.root;
      r->api.stream = reinterpret_cast<uint64_t>(d.stream);
      r->api.user_tag = d.user_tag;
      break;
    case kEvCeColl:
      r->api.seq = d.seq;
      r->api.func = d.func;
      r->api.count = d.count;
      r->api.datatype = d.datatype;
      r->api.root = d.root;
      r->api.stream = reinterpret_cast<uint64_t>(d.stream);
      r->api.send_buff = reinterpret_cast<uint64_t>(d.send_buff);
      r->api.recv_buff = reinterpret_cast<uint64_t>(d.recv_buff);
      r->api.sync_strategy = d.sync_strategy;
      r->api.batch_size = d.batch_size;
      r->api.num_batches = d.num_batches;
      r->api.ce_seq = d.ce_seq;
      r->api.user_tag = d.user_tag;
      if (d.intra_batch_sync) flags |= kFlagIntraBatchSync;
      break;
    case kEvCeSync:
      r->api.nranks = d.nranks;
      if (d.is_complete) flags |= kFlagIsComplete;
      break;
    case kEvCeBatch:
      r->batch.num_ops = d.num_ops;
      r->batch.total_bytes = d.total_bytes;
      if (d.use_intra_sync) flags |= kFlagUseIntraSync;
      break;
    case kEvProxyOp:
    case kEvProxyStep:
    case kEvKernelCh:
      r->px.pid = d.pid;
      r->px.channel = d.channel;
      r->px.peer = d.peer;
      r->px.nsteps = d.nsteps;
      r->px.chunk_size = d.chunk_size;
      r->px.step = d.step;
      r->px.rank = d.rank;
      r->px.ptimer = d.ptimer;
      if (d.is_send) flags |= kFlagIsSend;
      if (d.has_ptimer) flags |= kFlagHasGpu;
      if (s->op != nullptr) r->parent_id = s->op->id.load(std::memory_order_relaxed);
      if (d.kind == kEvProxyStep && s->parent != nullptr) r->parent_id = s->parent->id.load(std::memory_order_relaxed);
      break;
    case kEvKernelPhase:
      r->px.channel = d.channel;
      r->px.step = d.phase;
      r->px.ptimer = d.ptimer;
      if (d.has_ptimer) flags |= kFlagHasGpu;
      // Its kernel channel when that is captured, else the op.
      if (s->parent == nullptr && s->op != nullptr) r->parent_id = s->op->id.load(std::memory_order_relaxed);
      break;
    case kEvNetPlugin: {
      r->net.id = d.net_id;
      const int64_t type = d.net_id & nccl::kNetTypeMask;
      const int64_t ver = d.net_id & nccl::kNetVersionMask;
      if (d.net_data != nullptr && type == nccl::kNetTypeIb && ver == 1) {
        const auto* ib = static_cast<const nccl::NetIbDescrV1*>(d.net_data);
        r->net.type = ib->type;
        r->net.device = ib->qp.device;
        r->net.wr_id = ib->qp.wr_id;
        r->net.opcode = ib->qp.opcode;
        r->net.qp_num = ib->qp.qpNum;
        r->net.length = ib->qp.length;
        flags |= kFlagNetIb;
      } else if (d.net_data != nullptr && type == nccl::kNetTypeSocket && ver == 1) {
        const auto* so = static_cast<const nccl::NetSocketDescrV1*>(d.net_data);
        r->net.type = so->type;
        r->net.device = so->sock.fd;
        r->net.opcode = so->sock.op;
        r->net.length = so->sock.length;
        flags |= kFlagNetSocket;
      }
      break;
    }
    default:
      break;
  }
  r->flags = flags;
  tb->ring.Commit();
}

void* Profiler::StartKernelCh(void* parent, uint64_t ptimer) {
  // Start's kernel-channel path for an op parent, without the descriptor.
  if (__builtin_expect(abandoned_.load(std::memory_order_relaxed), false)) return nullptr;
  Slot* op = ValidParent(parent);
  if (op == nullptr || !IsOp(op->kind.load(std::memory_order_relaxed))) return nullptr;
  return TagKernelCh(op, ptimer, true);
}

void* Profiler::TagKernelCh(Slot* op, uint64_t ptimer, bool has_ptimer) {
  if (has_ptimer) OwnerMin(op->gpu_min, ptimer);
  OwnerIncrement(op->kernel_started);
  return KernelChHandle(op);
}

void Profiler::KernelChStopped(Slot* op, uint64_t now) {
  if (OwnerIncrement(op->kernel_stopped) < op->expect_channels.load(std::memory_order_relaxed)) return;
  // The last channel. The enqueuing thread's Stop stores `enqueued` and then
  // reads this count; this thread stored the count and now reads `enqueued`.
  // If it reads 1, MaybeComplete's compare-exchange settles who completes.
  // If it reads 0, the fence makes one of the two threads see both writes.
  // Either way one locked instruction per operation, usually (the op stopped
  // long before its kernel did) only the compare-exchange.
  if (op->enqueued.load(std::memory_order_relaxed) == 0) std::atomic_thread_fence(std::memory_order_seq_cst);
  MaybeComplete(op, now);
}

__attribute__((hot)) void* Profiler::StartOp(Context* ctx, const OpDesc& d) {
  if (ctx == nullptr || !IsOp(d.kind)) return nullptr;
  if (__builtin_expect(abandoned_.load(std::memory_order_relaxed), false)) return nullptr;
  ThreadBuf* tb = CurrentThread();
  if (tb == nullptr) {
    NoBuffer();
    return nullptr;
  }
  return StartOpIn(tb, ctx, d);
}

__attribute__((hot)) void* Profiler::StartOpIn(ThreadBuf* tb, Context* ctx, const OpDesc& d) {
  const uint64_t now = Ticks();
  Slot* s = AllocSlot(tb);
  const bool spare = s == nullptr;
  if (spare && (s = SpareSlot(tb)) == nullptr) {
    OwnerIncrement(tb->counters.pool_exhausted);
    return nullptr;
  }
  s->kind.store(d.kind, std::memory_order_relaxed);
  s->ctx = ctx;
  s->start_ns = now;
  FillOp(tb, s, d, now);
  if (spare) {
    s->tracked.store(0, std::memory_order_relaxed);
    OwnerIncrement(tb->counters.untracked_ops);
  }
  return s;
}

void* Profiler::Start(Context* ctx, const EventDesc& d) {
  if (ctx == nullptr || d.kind == kEvNone || d.kind >= kEvCount) return nullptr;
  if (__builtin_expect(abandoned_.load(std::memory_order_relaxed), false)) return nullptr;
  ThreadBuf* tb = CurrentThread();
  if (tb == nullptr) {
    NoBuffer();
    // The ops that follow must not take an earlier launch's completion.
    if (d.kind == kEvKernelLaunch && events_) t_launch = {generation_, ctx, 0, kFlagNoEvent};
    // A kernel channel captured raw loses its records, not its op's
    // completion: it feeds the op as an uncaptured one does.
    if (d.kind == kEvKernelCh) {
      Slot* op = ValidParent(d.parent);
      if (op != nullptr && IsOp(op->kind.load(std::memory_order_relaxed)))
        return TagKernelCh(op, d.ptimer, d.has_ptimer);
    }
    return nullptr;
  }
  const bool raw = (config_.raw_kinds >> d.kind) & 1;

  if (d.kind == kEvKernelLaunch && events_) return StartLaunch(tb, ctx, d.stream, d.parent, raw ? &d : nullptr);
  if (IsOp(d.kind)) return StartOpIn(tb, ctx, OpOf(d));

  // Children of an operation feed its completion.
  Slot* parent = nullptr;
  Slot* op = nullptr;
  if (d.kind == kEvProxyOp && d.parent != nullptr && d.pid != pid_) {
    // PXN: the parent lives in another process's address space.
    OwnerIncrement(tb->counters.foreign_parent);
  } else if (Slot* tagged = OpOfKernelCh(d.parent)) {
    // A kernel phase (v7) under a kernel channel not captured raw, whose
    // handle is its op's slot, tagged (KernelChHandle).
    op = ValidParent(tagged);
    if (op != nullptr && !IsOp(op->kind.load(std::memory_order_relaxed))) op = nullptr;
  } else {
    parent = ValidParent(d.parent);
  }
  if (parent != nullptr) {
    uint32_t pk = parent->kind.load(std::memory_order_relaxed);
    if (IsOp(pk)) op = parent;
    else if (pk == kEvProxyOp || pk == kEvProxyStep || pk == kEvKernelCh) op = parent->op;
  }
  const bool feeds_op = op != nullptr && (d.kind == kEvKernelCh || d.kind == kEvProxyOp);
  // Kernel channels without raw capture need no slot of their own: the handle
  // is the op's slot, tagged (KernelChHandle). This is NCCL's proxy thread's
  // path, once per channel of every operation.
  if (d.kind == kEvKernelCh && feeds_op && !raw) return TagKernelCh(op, d.ptimer, d.has_ptimer);
  const bool feeds_proxy = parent != nullptr && d.kind == kEvProxyStep &&
                           parent->kind.load(std::memory_order_relaxed) == kEvProxyOp;
  if (!raw && !feeds_op && !feeds_proxy) return nullptr;

  const uint64_t now = Ticks();
  Slot* s = AllocSlot(tb);
  if (s == nullptr) {
    OwnerIncrement(tb->counters.pool_exhausted);
    // As without a buffer: the op's completion does not need this slot.
    if (d.kind == kEvKernelCh && feeds_op) return TagKernelCh(op, d.ptimer, d.has_ptimer);
    return nullptr;
  }
  s->kind.store(d.kind, std::memory_order_relaxed);
  s->ctx = ctx;
  s->start_ns = now;
  s->parent = parent;
  s->op = op;
  s->raw = raw ? 1 : 0;
  if (op != nullptr) s->op_id.store(op->id.load(std::memory_order_relaxed), std::memory_order_relaxed);
  switch (d.kind) {
    case kEvKernelCh:
      if (d.has_ptimer) {
        s->ptimer_start = d.ptimer;
        s->has_ptimer = 1;
      }
      if (feeds_op) OwnerIncrement(op->kernel_started);
      break;
    case kEvKernelPhase:
      if (d.has_ptimer) {
        s->ptimer_start = d.ptimer;
        s->has_ptimer = 1;
      }
      break;
    case kEvProxyOp:
      s->px_desc.store(PackPxDesc(d.channel, d.is_send, d.nsteps, d.peer), std::memory_order_relaxed);
      s->px_update_ns.store(now, std::memory_order_relaxed);
      if (feeds_op) {
        if (!seen_proxy_.load(std::memory_order_relaxed)) seen_proxy_.store(true);
        op->proxy_started.fetch_add(1);
      }
      break;
    case kEvProxyStep:
      if (feeds_proxy) {
        parent->px_progress.store(PackPxProgress(d.step, 0, false), std::memory_order_relaxed);
        parent->px_update_ns.store(now, std::memory_order_relaxed);
      }
      break;
    default:
      break;
  }
  if (raw) StartRaw(tb, s, d, now);
  OwnerIncrement(tb->counters.recorded);
  return s;
}

void Profiler::MaybeComplete(Slot* op, uint64_t now) {
  // Line 0 of the slot only (see Slot), unless proxy events feed completion.
  if (!op->tracked.load() || !op->enqueued.load()) return;
  if (op->kernel_stopped.load() < op->expect_channels.load()) return;
  const bool proxy = seen_proxy_.load();
  if (proxy && op->proxy_stopped.load() < op->proxy_started.load()) return;
  uint32_t z = 0;
  if (!op->done.compare_exchange_strong(z, 1)) return;
  ThreadBuf* tb = CurrentThread();
  Rec* r = nullptr;
  if (tb != nullptr) {
    OwnerIncrement(tb->counters.ops_completed);
    r = tb->ring.Reserve();
  }
  // NCCL's proxy thread past the buffers, or its ring full: the record is
  // built in the op's own slot and waits there for the writer. The op's
  // record was copied out at its stop (`enqueued` is 1), so the slot's is
  // free; and the slot is live until the writer takes it, so however many
  // completions come between two drains, none is lost.
  const bool in_slot = r == nullptr;
  if (in_slot) r = &op->rec;
  r->kind = kRecOpDone;
  r->etype = static_cast<uint8_t>(op->kind.load(std::memory_order_relaxed));
  r->comm = op->ctx->comm;
  r->id = op->id.load(std::memory_order_relaxed);
  r->t0_ticks = now != 0 ? now : Ticks();
  r->t1 = 0;
  r->parent_id = 0;
  r->nchannels = 0;
  r->nwarps = 0;
  uint64_t gmin = op->gpu_min.load(std::memory_order_relaxed);
  uint64_t gmax = op->gpu_max.load(std::memory_order_relaxed);
  bool gpu = gmin != ~0ull && gmax >= gmin && gmax != 0;
  r->flags = gpu ? kFlagHasGpu : 0;
  r->done.gpu_start = gpu ? gmin : 0;
  r->done.gpu_stop = gpu ? gmax : 0;
  r->done.kernel_channels = op->kernel_stopped.load(std::memory_order_relaxed);
  r->done.proxy_ops = proxy ? op->proxy_started.load(std::memory_order_relaxed) : 0;
  r->done.proxy_bytes = proxy ? op->proxy_bytes.load(std::memory_order_relaxed) : 0;
  if (in_slot) {
    CompleteInSlot(op);
    return;
  }
  tb->ring.Commit();
  op->state.store(kSlotDone, std::memory_order_release);
}

void Profiler::CompleteInSlot(Slot* op) {
  // Tracked ops live in the buffers' regions (AllocSlot): the slot's buffer
  // and index follow from its address.
  constexpr size_t kPerThread = kSlotsPerThread + kSpareSlots;
  const size_t k = static_cast<size_t>(op - slots_begin_);
  threads_[k / kPerThread].done_in_slot.Raise(k % kPerThread);
}

__attribute__((hot)) void Profiler::Stop(void* handle) {
  if (handle == nullptr) return;
  if (Slot* op = OpOfKernelCh(handle)) {
    KernelChStopped(op, 0);
    return;
  }
  auto* s = static_cast<Slot*>(handle);
  ThreadBuf* tb = CurrentThread();
  const uint32_t kind = s->kind.load(std::memory_order_relaxed);
  // The launch's stop first and in line: NCCL's launching thread pays for
  // every cache line of code it runs after the driver's launch.
  if (__builtin_expect(kind == kEvKernelLaunch && s->rec.kind == kRecLaunch && events_ && !s->raw, 1)) {
    // No clock read: nothing reads a launch record's times (the writer
    // needs its stream, events and number), and NCCL's launching thread
    // pays for every read. Captured raw, its stop below has a time.
    StopLaunch(tb, s);
    s->state.store(kSlotDone, std::memory_order_release);
    return;
  }
  const uint64_t now = Ticks();

  if (IsOp(kind)) {
    s->rec.t1 = now;
    if (s->tracked.load(std::memory_order_relaxed)) s->rec.flags |= kFlagTracked;
    if (tb != nullptr) {
      if (Rec* r = ReserveOpRecord(tb)) {
        memcpy(r, &s->rec, sizeof(Rec));
        tb->ring.Commit();
        OwnerIncrement(tb->counters.recorded);
      }
    } else if (!lane_.Push(s->rec)) {  // stopped on a thread past the buffers
      NoBuffer();
    }
    s->enqueued.store(1);
    if (s->tracked.load(std::memory_order_relaxed)) {
      MaybeComplete(s, now);
    } else {
      s->state.store(kSlotDone, std::memory_order_release);
    }
    return;
  }

  if (kind == kEvKernelLaunch && s->rec.kind == kRecLaunch && events_) StopLaunch(tb, s);
  Slot* op = s->op;
  switch (kind) {
    case kEvKernelCh:
      if (op != nullptr) {
        if (s->has_ptimer & 1) OwnerMin(op->gpu_min, s->ptimer_start);
        if (s->has_ptimer & 2) OwnerMax(op->gpu_max, s->ptimer_stop);
        KernelChStopped(op, now);
      }
      break;
    case kEvProxyOp: {
      uint64_t p = s->px_progress.load(std::memory_order_relaxed);
      s->px_progress.store(p | (uint64_t{1} << 63), std::memory_order_relaxed);
      s->px_update_ns.store(now, std::memory_order_relaxed);
      if (op != nullptr) {
        op->proxy_stopped.fetch_add(1);
        MaybeComplete(op, now);
      }
      break;
    }
    case kEvProxyStep:
      if (op != nullptr && s->step_bytes != 0) op->proxy_bytes.fetch_add(s->step_bytes, std::memory_order_relaxed);
      break;
    default:
      break;
  }
  if (s->raw && tb != nullptr) {
    if (Rec* r = ReserveRawRecord(tb)) {
      r->kind = kRecEvStop;
      r->etype = static_cast<uint8_t>(kind);
      r->comm = s->ctx->comm;
      r->flags = (s->has_ptimer & 2) ? kFlagHasGpuStop : 0;
      r->nchannels = 0;
      r->nwarps = 0;
      r->id = s->id.load(std::memory_order_relaxed);
      r->t0_ticks = now;
      r->t1 = 0;
      r->parent_id = 0;
      r->st.ptimer = s->ptimer_stop;
      tb->ring.Commit();
    }
  }
  s->state.store(kSlotDone, std::memory_order_release);
}

void Profiler::State(void* handle, int state, const StateArgs& a) {
  if (handle == nullptr) return;
  if (Slot* op = OpOfKernelCh(handle)) {
    if (state == nccl::kKernelChStop && a.has_ptimer) OwnerMax(op->gpu_max, a.ptimer);
    return;
  }
  auto* s = static_cast<Slot*>(handle);
  const uint32_t kind = s->kind.load(std::memory_order_relaxed);
  const uint64_t now = Ticks();
  switch (kind) {
    case kEvKernelCh:
      if (state == nccl::kKernelChStop && a.has_ptimer) {
        s->ptimer_stop = a.ptimer;
        s->has_ptimer |= 2;
      }
      break;
    case kEvKernelPhase:
      if (state == nccl::kKernelPhaseStop && a.has_ptimer) {
        s->ptimer_stop = a.ptimer;
        s->has_ptimer |= 2;
      }
      break;
    case kEvProxyStep:
      if (a.trans_size != 0) s->step_bytes = a.trans_size;
      if (s->parent != nullptr) {
        s->parent->px_progress.store(
            PackPxProgress(PxStep(s->parent->px_progress.load(std::memory_order_relaxed)), state, false),
            std::memory_order_relaxed);
        s->parent->px_update_ns.store(now, std::memory_order_relaxed);
      }
      break;
    case kEvProxyOp:
      // v1..v3 report progress on the ProxyOp itself.
      s->px_progress.store(PackPxProgress(a.steps, state, false), std::memory_order_relaxed);
      s->px_update_ns.store(now, std::memory_order_relaxed);
      if (s->op != nullptr && a.trans_size != 0 && (state == nccl::kProxyOpSendDone || state == nccl::kProxyOpRecvDone))
        s->op->proxy_bytes.fetch_add(a.trans_size, std::memory_order_relaxed);
      break;
    default:
      break;
  }
  if (!s->raw) return;
  ThreadBuf* tb = CurrentThread();
  if (tb == nullptr) {
    NoBuffer();
    return;
  }
  if (Rec* r = ReserveRawRecord(tb)) {
    r->kind = kRecEvState;
    r->etype = static_cast<uint8_t>(kind);
    r->comm = s->ctx->comm;
    r->flags = a.has_ptimer ? kFlagHasGpu : 0;
    r->nchannels = 0;
    r->nwarps = 0;
    r->id = s->id.load(std::memory_order_relaxed);
    r->t0_ticks = now;
    r->t1 = 0;
    r->parent_id = 0;
    r->st.ptimer = a.ptimer;
    r->st.trans_size = a.trans_size;
    r->st.net_data = reinterpret_cast<uint64_t>(a.net_data);
    r->st.state = static_cast<uint32_t>(state);
    r->st.steps = a.steps;
    r->st.appended_proxy_ops = a.appended_proxy_ops;
    tb->ring.Commit();
  }
}

}  // namespace ncclwatch::plugin
