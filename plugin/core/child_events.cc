// Profiler::Start for an event from its EventDesc, and Profiler::State: what
// the v1..v3 adapters send, the events under an operation that feed its
// completion and progress (kernel channels, proxy operations and steps,
// kernel phases: NCCL's proxy thread's calls), and every kind captured raw.
// An operation's own start and a kernel launch's go on to core.cc's path.
//
// Thread safety: as Profiler::Start and Profiler::State (core.h).

#include <stdint.h>

#include "plugin/abi/profiler_common.h"
#include "plugin/core/calling_thread.h"
#include "plugin/core/clock.h"
#include "plugin/core/core.h"

namespace ncclwatch::plugin {

using calling_thread::t_launch;

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
