// The Profiler's event path on NCCL's launching thread: an operation's start
// (a slot from the calling thread's region, its record built in the slot)
// and stop (the record into the thread's ring), a kernel launch's start and
// stop (CUDA events on its stream), the completion of an operation, and the
// handles the plugin gives NCCL for what it keeps nothing of (group tokens).
//
// These functions are laid out for NCCL's launching thread (BENCHMARKS.md,
// "The launching thread's code, not its data"): the ones it runs for a plan
// are __attribute__((hot)), grouped by the linker in .text.hot, their rare
// callees cold. They stay in this one file: calls between them are compiled
// knowing which registers each callee uses, and so is their code.
// Events under an operation and raw captures are child_events.cc and
// raw_events.cc; claiming a thread's buffer is thread_bufs.cc.

#include "plugin/core/core.h"

#include <string.h>

#include "plugin/abi/profiler_common.h"
#include "plugin/core/calling_thread.h"
#include "plugin/core/clock.h"

namespace ncclwatch::plugin {

namespace calling_thread {
__thread ThreadState t_thread = {nullptr, 0, 0};
__thread LaunchBinding t_launch = {0, nullptr, 0, 0};
}  // namespace calling_thread

using calling_thread::t_launch;

namespace token_internal {
alignas(64) char g_group_token[64];
alignas(64) char g_captured_api_token[64];
}  // namespace token_internal
using token_internal::g_captured_api_token;
using token_internal::g_group_token;

namespace {

// Raw event records may fill a ring only up to 1 - 1/4 of it: the last
// quarter is kept for operations and their completions, which the diagnosis
// needs (measured on GPU with NCCLWATCH_EVENTS=all: bursts of small
// operations filled the rings with raw events, ~11% of events dropped).
constexpr uint32_t kOpReserveDivisor = 4;

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

// ------------------------------------------------------------- slots, records

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
    // Unrolled: five prefetch instructions, not a loop around them.
    const char* next = reinterpret_cast<const char*>(&tb->slots[tb->cursor]);
#pragma GCC unroll 8
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
  if (p == nullptr || p == g_group_token || p == g_captured_api_token || IsGroupApiToken(p)) return nullptr;
  auto* s = static_cast<Slot*>(p);
  if (SlotIsOurs(p) && s->state.load(std::memory_order_acquire) != kSlotFree) return s;
  // Rare: the thread's buffer is looked up only to count it.
  if (ThreadBuf* tb = CurrentThread()) OwnerIncrement(tb->counters.bad_parent);
  return nullptr;
}

// Inline: a launch's stop and an op's stop each take one.
inline __attribute__((hot)) Rec* Profiler::ReserveOpRecord(ThreadBuf* tb) {
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
  // Under a CapturedApiToken parent, NCCL started the op for a plan
  // captured into a CUDA graph: at capture, or at one of its replays.
  r.flags = static_cast<uint16_t>((d.is_collnet ? kFlagCollnet : 0) | (d.is_nvls ? kFlagNvls : 0) |
                                  (d.is_sym_coll ? kFlagSymColl : 0) |
                                  (d.parent == g_captured_api_token ? kFlagGraph : 0));
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

// Flattened: the launch's start is one function on NCCL's launching thread.
__attribute__((hot, flatten)) void* Profiler::StartKernelLaunch(Context* ctx, const void* stream, const void* group_api) {
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
  return StartOpOf(ctx, d);
}

__attribute__((hot, flatten)) void* Profiler::StartOpOf(Context* ctx, const OpDesc& d) {
  if (__builtin_expect(abandoned_.load(std::memory_order_relaxed), false)) return nullptr;
  ThreadBuf* tb = CurrentThread();
  if (tb == nullptr) {
    NoBuffer();
    return nullptr;
  }
  return StartOpIn(tb, ctx, d);
}

// Flattened: the slot's claim and the record's fill are its own code, with
// no call or register saves between them (the spare slot stays a call).
__attribute__((hot, flatten)) void* Profiler::StartOpIn(ThreadBuf* tb, Context* ctx, const OpDesc& d) {
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

}  // namespace ncclwatch::plugin
