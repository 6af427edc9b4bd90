// The exported ncclProfiler_v1 .. ncclProfiler_v7 tables. Each is a thin
// adapter: it copies its own version's descriptor, field by field, into the
// version-neutral EventDesc and calls the one core (core.h). No descriptor is
// ever read through another version's type: the `type` tag is 8 bits wide
// before v5 and 64 bits from v5 on. The v1 to v3 adapters are
// adapters_v1_v3.cc; what they share with these, adapter.h.
//
// Every entry point is noexcept and returns success, except init, which
// fails (so NCCL runs on without us) when the plugin cannot work, saying why
// once through NCCL's logger.

#include <stdlib.h>

#include <atomic>
#include <type_traits>

#include "plugin/abi/adapter.h"
#include "plugin/core/config.h"
#include "plugin/core/core.h"
#include "plugin/core/event.h"
#include "plugin/abi/profiler_common.h"
#include "plugin/abi/profiler_v1.h"
#include "plugin/abi/profiler_v2.h"
#include "plugin/abi/profiler_v3.h"
#include "plugin/abi/profiler_v4.h"
#include "plugin/abi/profiler_v5.h"
#include "plugin/abi/profiler_v6.h"
#include "plugin/abi/profiler_v7.h"

namespace ncclwatch::plugin {

namespace adapter {
// A Group event the plugin keeps nothing for still gets a handle on API v1
// to v4: NCCL 2.23 to 2.27 start no Coll or P2p event under a null one (seen
// on 2x H200: every file held no operation). Not on a context we did not
// make or one that is turned off.
// `api`: the calling table's version, not the Profiler's (the first init's).
__attribute__((hot)) void GroupFallback(int api, void* context, void** handle, EventKind kind) {
  if (api > 4 || kind != kEvGroup || handle == nullptr || *handle != nullptr) return;
  if (Profiler::KnownContext(context) != nullptr) *handle = GroupToken();
}

}  // namespace adapter

namespace {

using adapter::CopyProxy;
using adapter::Empty;
using adapter::GroupFallback;
using adapter::StartCommon;
using adapter::StateV1;
using adapter::StartV1;
using adapter::StartV2;
using adapter::StartV3;
using adapter::Wanted;

std::atomic<bool> g_off_logged{false};

const char* GetEnv(const char* name) { return getenv(name); }

void LogOff(nccl::Logger log, const std::string& why) {
  if (g_off_logged.exchange(true)) return;
  if (log != nullptr) {
    log(nccl::kLogWarn, nccl::kLogSubsysInit | nccl::kLogSubsysProfile, "ncclwatch", 0,
        "ncclwatch: turned off: %s", why.c_str());
  } else {
    fprintf(stderr, "NCCL WARN ncclwatch: turned off: %s\n", why.c_str());
  }
}

// When the plugin cannot run, init still succeeds, with a null context and
// the mask left as it is: NCCL keeps calling us and every call is a no-op.
// An error would be worse for the host, whatever the release (read in their
// src/plugin/profiler.cc): 2.23 to 2.26 turn the profiler off for every
// communicator and then dereference NULL at the last ncclCommDestroy; 2.27
// turns it off process-wide; 2.30 unloads the plugin, then unloads it again
// at that communicator's finalize. The mask is one int shared by all of a
// process's communicators, so writing 0 would silence the others too.
nccl::Result TurnOff(nccl::Logger log, const std::string& why) {
  LogOff(log, why);
  return nccl::kSuccess;
}

nccl::Result InitCommon(int api, void** context, int* mask, uint64_t hash, const char* name, int nnodes, int nranks,
                        int rank, nccl::Logger log) noexcept {
  if (context == nullptr) return nccl::kSuccess;
  *context = nullptr;
  ProfilerOptions opts;
  opts.config = ParseConfig(&GetEnv);
  opts.api_version = api;
  opts.logger = log;
  if (!opts.config.enabled) return TurnOff(log, "NCCLWATCH_ENABLE=0");
  const bool fresh = Profiler::Current() == nullptr;
  std::string err;
  Profiler* p = Profiler::Acquire(opts, &err);
  if (p == nullptr) return TurnOff(log, err);
  if (fresh) {
    for (const std::string& w : p->config().warnings) p->Log(nccl::kLogWarn, "%s", w.c_str());
    // Sampled events (NCCLWATCH_EVENT_INTERVAL_US) say so after the source.
    std::string completions = p->completions();
    if (p->events() && p->config().event_interval_us > 0)
      completions += " (at most once per stream every " + std::to_string(p->config().event_interval_us) + " us)";
    p->Log(nccl::kLogInfo,
           "profiler API v%d, events 0x%llx, completions from %s, clock %s (clock_gettime %.0f ns here), writing %s",
           api, static_cast<unsigned long long>(p->mask()), completions.c_str(), p->clock_source().c_str(),
           p->clock_facts().gettime_ns, p->writer_path().c_str());
  }
  Context* c = p->NewContext(hash, name, nnodes, nranks, rank);
  if (c == nullptr) {
    Profiler::Release(p);
    return TurnOff(log, "too many communicators");
  }
  // One int for every communicator of the process, which NCCL reads with
  // atomic loads while another thread may be initializing a communicator.
  if (mask != nullptr) __atomic_store_n(mask, static_cast<int>(p->mask()), __ATOMIC_RELAXED);
  // NCCL 2.31 may change it after this init (RAS, for the whole job): the
  // writer reads it from here on and records what changed.
  p->NoteMaskAddress(mask);
  *context = c;
  return nccl::kSuccess;
}

nccl::Result Finalize(void* context) noexcept {
  auto* c = static_cast<Context*>(context);
  if (c == nullptr) return nccl::kSuccess;
  Profiler* p = c->prof;
  if (p->FinalizeContext(c)) Profiler::Release(p);
  return nccl::kSuccess;
}

// v4+: a kernel channel without raw capture goes straight to its op
// (Profiler::StartKernelCh). True when it did.
template <typename D>
bool KernelChFast(void* context, void** handle, EventKind kind, const D& e) {
  if (kind != kEvKernelCh) return false;
  Profiler* p = static_cast<Context*>(context)->prof;
  if (!p->KernelChFast()) return false;
  void* h = p->StartKernelCh(e.parentObj, e.kernelCh.pTimer);
  if (handle != nullptr) *handle = h;
  return true;
}

__attribute__((hot)) nccl::Result Stop(void* handle) noexcept {
  if (Empty(handle)) return nccl::kSuccess;
  SlotOfHandle(handle)->ctx->prof->Stop(handle);
  return nccl::kSuccess;
}

__attribute__((hot)) nccl::Result StateV4(void* handle, int state, nccl::StateArgsV4* args) noexcept {
  if (Empty(handle)) return nccl::kSuccess;
  StateArgs a;
  if (args != nullptr) {
    if ((state >= nccl::kProxyStepSendGPUWait && state <= nccl::kProxyStepRecvGPUWait) ||
        state == nccl::kProxyStepSendPeerWait) {
      a.trans_size = args->proxyStep.transSize;
    } else if (state >= nccl::kProxyCtrlIdle && state <= nccl::kProxyCtrlAppendEnd) {
      a.appended_proxy_ops = args->proxyCtrl.appendedProxyOps;
    } else if (state == nccl::kNetPluginUpdate) {
      a.net_data = args->netPlugin.data;
    } else if (state == nccl::kKernelChStop || state == nccl::kKernelPhaseStop) {  // the latter v7 only
      a.ptimer = args->kernelCh.pTimer;
      a.has_ptimer = true;
    }
  }
  SlotOfHandle(handle)->ctx->prof->State(handle, state, a);
  return nccl::kSuccess;
}

// ---------------------------------------------------------------- v4..v7
// A Coll or P2p: no EventDesc, its OpDesc filled from the members v4 to v7
// share, and v7's tag and symmetric kernel (Profiler::StartOp).
// Inline: a plan's op (PlanStart) makes no call for its copy.
template <typename D>
inline __attribute__((always_inline)) void CopyOpV4(const D& e, OpDesc* o) {
  constexpr bool kV7 = std::is_same<D, nccl::DescrV7>::value;
  if (o->kind == kEvColl) {
    o->seq = e.coll.seqNumber;
    o->func = e.coll.func;
    o->send_buff = e.coll.sendBuff;
    o->recv_buff = e.coll.recvBuff;
    o->count = e.coll.count;
    o->root = e.coll.root;
    o->datatype = e.coll.datatype;
    o->nchannels = e.coll.nChannels;
    o->nwarps = e.coll.nWarps;
    o->algo = e.coll.algo;
    o->proto = e.coll.proto;
    if constexpr (kV7) {
      o->kernel_variant = e.coll.kernelVariant;
      o->is_sym_coll = e.coll.isSymColl;
      o->user_tag = e.coll.userTag;
    }
  } else {
    o->func = e.p2p.func;
    o->recv_buff = e.p2p.buff;
    o->datatype = e.p2p.datatype;
    o->count = e.p2p.count;
    o->peer = e.p2p.peer;
    o->nchannels = e.p2p.nChannels;
    if constexpr (kV7) o->user_tag = e.p2p.userTag;
  }
}

// The other members shared by v4 to v7 (same names, same meaning).
template <typename D>
bool CopyCommonV4(const D& e, EventDesc* d) {
  switch (d->kind) {
    case kEvProxyOp:
      CopyProxy(e, d);
      return true;
    case kEvProxyStep:
      d->step = e.proxyStep.step;
      return true;
    case kEvKernelCh:
      d->channel = e.kernelCh.channelId;
      d->ptimer = e.kernelCh.pTimer;
      d->has_ptimer = true;
      return true;
    case kEvNetPlugin:
      d->net_id = e.netPlugin.id;
      d->net_data = e.netPlugin.data;
      return true;
    case kEvGroup:
    case kEvProxyCtrl:
      return true;
    default:
      return false;
  }
}

template <typename D>
bool CopyApiV5(const D& e, EventDesc* d) {
  switch (d->kind) {
    case kEvGroupApi:
      d->graph_captured = e.groupApi.graphCaptured;
      d->group_depth = e.groupApi.groupDepth;
      return true;
    case kEvCollApi:
      d->func = e.collApi.func;
      d->count = e.collApi.count;
      d->datatype = e.collApi.datatype;
      d->root = e.collApi.root;
      d->stream = e.collApi.stream;
      d->graph_captured = e.collApi.graphCaptured;
      return true;
    case kEvP2pApi:
      d->func = e.p2pApi.func;
      d->count = e.p2pApi.count;
      d->datatype = e.p2pApi.datatype;
      d->stream = e.p2pApi.stream;
      d->graph_captured = e.p2pApi.graphCaptured;
      return true;
    case kEvKernelLaunch:
      d->stream = e.kernelLaunch.stream;
      return true;
    default:
      return CopyCommonV4(e, d);
  }
}

// v6's copy-engine events; the rest as v5.
bool CopyCeV6(const nccl::DescrV6& e, EventDesc* d) {
  switch (d->kind) {
    case kEvCeColl:
      d->seq = e.ceColl.seqNumber;
      d->func = e.ceColl.func;
      d->send_buff = e.ceColl.sendBuff;
      d->recv_buff = e.ceColl.recvBuff;
      d->count = e.ceColl.count;
      d->root = e.ceColl.root;
      d->datatype = e.ceColl.datatype;
      d->sync_strategy = e.ceColl.syncStrategy;
      d->intra_batch_sync = e.ceColl.intraBatchSync;
      d->batch_size = e.ceColl.batchSize;
      d->num_batches = e.ceColl.numBatches;
      d->ce_seq = e.ceColl.ceSeqNum;
      d->stream = e.ceColl.stream;
      return true;
    case kEvCeSync:
      d->is_complete = e.ceCollSync.isComplete;
      d->nranks = e.ceCollSync.nRanks;
      return true;
    case kEvCeBatch:
      d->num_ops = e.ceCollBatch.numOps;
      d->total_bytes = e.ceCollBatch.totalBytes;
      d->use_intra_sync = e.ceCollBatch.useIntraSync;
      return true;
    default:
      return CopyApiV5(e, d);
  }
}

// v7: v6's events, each copied from v7's own members, plus the caller's tag
// and the kernel phases (Coll and P2p: CopyOpV4). Not through CopyCeV6:
// that reads a DescrV6.
bool CopyV7(const nccl::DescrV7& e, EventDesc* d) {
  switch (d->kind) {
    case kEvCollApi:
      CopyApiV5(e, d);
      d->user_tag = e.collApi.userTag;
      return true;
    case kEvP2pApi:
      CopyApiV5(e, d);
      d->user_tag = e.p2pApi.userTag;
      return true;
    case kEvCeColl:
      d->seq = e.ceColl.seqNumber;
      d->func = e.ceColl.func;
      d->send_buff = e.ceColl.sendBuff;
      d->recv_buff = e.ceColl.recvBuff;
      d->count = e.ceColl.count;
      d->root = e.ceColl.root;
      d->datatype = e.ceColl.datatype;
      d->sync_strategy = e.ceColl.syncStrategy;
      d->intra_batch_sync = e.ceColl.intraBatchSync;
      d->batch_size = e.ceColl.batchSize;
      d->num_batches = e.ceColl.numBatches;
      d->ce_seq = e.ceColl.ceSeqNum;
      d->stream = e.ceColl.stream;
      d->user_tag = e.ceColl.userTag;
      return true;
    case kEvCeSync:
      d->is_complete = e.ceCollSync.isComplete;
      d->nranks = e.ceCollSync.nRanks;
      return true;
    case kEvCeBatch:
      d->num_ops = e.ceCollBatch.numOps;
      d->total_bytes = e.ceCollBatch.totalBytes;
      d->use_intra_sync = e.ceCollBatch.useIntraSync;
      return true;
    case kEvKernelPhase:
      d->channel = e.kernelPhase.channelId;
      d->phase = e.kernelPhase.phaseId;
      d->ptimer = e.kernelPhase.pTimer;
      d->has_ptimer = true;
      return true;
    default:
      return CopyApiV5(e, d);
  }
}

// startEvent of v4 and later: one body, the version's descriptor copy as a
// template argument (inlined: this is every event's path).
template <typename D, bool (*Copy)(const D&, EventDesc*)>
__attribute__((hot)) nccl::Result StartV4Plus(void* context, void** handle, D* e) noexcept {
  constexpr int kApi = std::is_same<D, nccl::DescrV4>::value ? 4 : 5;
  if (handle != nullptr) *handle = nullptr;
  if (e == nullptr) return nccl::kSuccess;
  const EventKind kind = KindOfMask(e->type);
  if (!Wanted(context, kind)) {
    GroupFallback(kApi, context, handle, kind);
    return nccl::kSuccess;
  }
  if (KernelChFast(context, handle, kind, *e)) return nccl::kSuccess;
  if (kind == kEvColl || kind == kEvP2p) {
    OpDesc o;
    o.kind = kind;
    o.parent = e->parentObj;
    CopyOpV4(*e, &o);
    // Wanted: the context is ours and not null.
    void* h = static_cast<Context*>(context)->prof->StartOp(static_cast<Context*>(context), o);
    if (handle != nullptr) *handle = h;
    return nccl::kSuccess;
  }
  EventDesc d;
  d.kind = kind;
  d.parent = e->parentObj;
  d.rank = e->rank;
  if (!Copy(*e, &d)) return nccl::kSuccess;
  StartCommon(context, handle, d);
  GroupFallback(kApi, context, handle, kind);
  return nccl::kSuccess;
}

// v5+: the events NCCL starts on its launching thread for every call (its
// API events, and a plan's kernel launch) take a path of their own before
// StartV4Plus, whose frame holds an EventDesc: six registers saved and 300
// bytes of stack on every call otherwise (BENCHMARKS.md, "The launching
// thread's own path"). The common cases make no call but the one they need;
// the rest (captured raw, kernel channels, a finalized context, a context
// not ours) go on to StartV4Plus.
//
// NCCL's own answer to "is this group captured into a CUDA graph?" is kept
// where the group's kernel launches find it, so that they need not ask the
// driver (Context::capture_hint). NCCL starts GroupApi, CollApi and P2pApi
// whenever its mask asks for KernelLaunch, Coll or P2p, whatever the
// plugin's own: a GroupApi the plugin keeps nothing for gets a token of its
// own (NewGroupApiToken) when launches take completions from CUDA events,
// and each CollApi or P2pApi under such a token notes its graphCaptured on
// its communicator.
constexpr uint64_t kLaunchThreadTypes = nccl::kGroupApi | nccl::kCollApi | nccl::kP2pApi | nccl::kKernelLaunch;

template <typename D, bool (*Copy)(const D&, EventDesc*)>
__attribute__((noinline, hot)) nccl::Result LaunchThreadStart(void* context, void** handle, D* e) noexcept {
  const uint64_t type = e->type;
  Context* c = Profiler::KnownContext(context);
  if (__builtin_expect(c != nullptr, 1)) {
    Profiler* p = c->prof;
    if (type == nccl::kKernelLaunch) {
      // With completions from CUDA events and no raw capture, a launch needs
      // its stream only (Profiler::StartKernelLaunch): no descriptor copied.
      if (p->LaunchFast() && !c->finalized.load(std::memory_order_acquire)) {
        void* h = p->StartKernelLaunch(c, e->kernelLaunch.stream, e->parentObj);
        if (handle != nullptr) *handle = h;
        return nccl::kSuccess;
      }
    } else if (type == nccl::kGroupApi) {
      if (!p->Wants(kEvGroupApi)) {
        if (handle != nullptr) *handle = p->LaunchFast() ? NewGroupApiToken() : nullptr;
        return nccl::kSuccess;
      }
    } else if (type == nccl::kCollApi || type == nccl::kP2pApi) {
      // NCCL's answer for this communicator.
      if (IsGroupApiToken(e->parentObj)) {
        const bool captured = type == nccl::kCollApi ? e->collApi.graphCaptured : e->p2pApi.graphCaptured;
        c->capture_hint.store(reinterpret_cast<uintptr_t>(e->parentObj) | (captured ? 1u : 0u),
                              std::memory_order_relaxed);
      }
      if (!p->Wants(type == nccl::kCollApi ? kEvCollApi : kEvP2pApi)) {
        const bool captured = type == nccl::kCollApi ? e->collApi.graphCaptured : e->p2pApi.graphCaptured;
        if (handle != nullptr) *handle = captured ? CapturedApiToken() : nullptr;
        return nccl::kSuccess;
      }
    }
  }
  return StartV4Plus<D, Copy>(context, handle, e);
}

// v5+: a plan's operations, on the same thread as its launch: a Coll or P2p
// goes straight to its OpDesc and Profiler::StartOpOf, without StartV4Plus's
// frame and its second context check; the rest go on to StartV4Plus.
template <typename D, bool (*Copy)(const D&, EventDesc*)>
__attribute__((noinline, hot)) nccl::Result PlanStart(void* context, void** handle, D* e) noexcept {
  const uint64_t type = e->type;
  Context* c = Profiler::KnownContext(context);
  if (__builtin_expect(c != nullptr && !c->finalized.load(std::memory_order_acquire), 1)) {
    OpDesc o;
    o.kind = type == nccl::kColl ? kEvColl : kEvP2p;
    o.parent = e->parentObj;
    CopyOpV4(*e, &o);
    void* h = c->prof->StartOpOf(c, o);
    if (handle != nullptr) *handle = h;
    return nccl::kSuccess;
  }
  return StartV4Plus<D, Copy>(context, handle, e);
}

// A plan's Group the plugin keeps nothing for (unless it is captured raw)
// gets a null handle before any frame is built: from v5 on NCCL starts a
// plan's operations under a null one (GroupFallback).
template <typename D, bool (*Copy)(const D&, EventDesc*)>
__attribute__((hot)) nccl::Result StartV5Plus(void* context, void** handle, D* e) noexcept {
  if (e != nullptr) {
    const uint64_t type = e->type;
    if ((type & kLaunchThreadTypes) != 0) return LaunchThreadStart<D, Copy>(context, handle, e);
    if (type == nccl::kGroup) {
      const Context* c = Profiler::KnownContext(context);
      if (c != nullptr && !c->prof->Wants(kEvGroup)) {
        if (handle != nullptr) *handle = nullptr;
        return nccl::kSuccess;
      }
    } else if (type == nccl::kColl || type == nccl::kP2p) {
      return PlanStart<D, Copy>(context, handle, e);
    }
  }
  return StartV4Plus<D, Copy>(context, handle, e);
}

constexpr auto StartV4 = &StartV4Plus<nccl::DescrV4, &CopyCommonV4<nccl::DescrV4>>;
constexpr auto StartV5 = &StartV5Plus<nccl::DescrV5, &CopyApiV5<nccl::DescrV5>>;
constexpr auto StartV6 = &StartV5Plus<nccl::DescrV6, &CopyCeV6>;
constexpr auto StartV7 = &StartV5Plus<nccl::DescrV7, &CopyV7>;

nccl::Result InitV1(void** context, int* mask) noexcept { return InitCommon(1, context, mask, 0, nullptr, 0, 0, 0, nullptr); }
nccl::Result InitV2(void** context, int* mask) noexcept { return InitCommon(2, context, mask, 0, nullptr, 0, 0, 0, nullptr); }
nccl::Result InitV3(void** context, int* mask) noexcept { return InitCommon(3, context, mask, 0, nullptr, 0, 0, 0, nullptr); }
nccl::Result InitV4(void** context, int* mask, const char* name, uint64_t hash, int nnodes, int nranks, int rank,
                    nccl::Logger log) noexcept {
  return InitCommon(4, context, mask, hash, name, nnodes, nranks, rank, log);
}
nccl::Result InitV5(void** context, uint64_t id, int* mask, const char* name, int nnodes, int nranks, int rank,
                    nccl::Logger log) noexcept {
  return InitCommon(5, context, mask, id, name, nnodes, nranks, rank, log);
}
nccl::Result InitV6(void** context, uint64_t id, int* mask, const char* name, int nnodes, int nranks, int rank,
                    nccl::Logger log) noexcept {
  return InitCommon(6, context, mask, id, name, nnodes, nranks, rank, log);
}
nccl::Result InitV7(void** context, uint64_t id, int* mask, const char* name, int nnodes, int nranks, int rank,
                    nccl::Logger log) noexcept {
  return InitCommon(7, context, mask, id, name, nnodes, nranks, rank, log);
}

}  // namespace
}  // namespace ncclwatch::plugin

namespace p = ncclwatch::plugin;
namespace n = ncclwatch::nccl;

#define NCCLWATCH_EXPORT __attribute__((visibility("default")))

extern "C" {

NCCLWATCH_EXPORT n::ProfilerV7 ncclProfiler_v7 = {"ncclwatch", p::InitV7, p::StartV7, p::Stop, p::StateV4, p::Finalize};
NCCLWATCH_EXPORT n::ProfilerV6 ncclProfiler_v6 = {"ncclwatch", p::InitV6, p::StartV6, p::Stop, p::StateV4, p::Finalize};
NCCLWATCH_EXPORT n::ProfilerV5 ncclProfiler_v5 = {"ncclwatch", p::InitV5, p::StartV5, p::Stop, p::StateV4, p::Finalize};
NCCLWATCH_EXPORT n::ProfilerV4 ncclProfiler_v4 = {"ncclwatch", p::InitV4, p::StartV4, p::Stop, p::StateV4, p::Finalize};
NCCLWATCH_EXPORT n::ProfilerV3 ncclProfiler_v3 = {"ncclwatch", p::InitV3, p::StartV3, p::Stop, p::StateV1, p::Finalize};
NCCLWATCH_EXPORT n::ProfilerV2 ncclProfiler_v2 = {"ncclwatch", p::InitV2, p::StartV2, p::Stop, p::StateV1, p::Finalize};
NCCLWATCH_EXPORT n::ProfilerV1 ncclProfiler_v1 = {"ncclwatch", p::InitV1, p::StartV1, p::Stop, p::StateV1, p::Finalize};
}  // extern "C"
