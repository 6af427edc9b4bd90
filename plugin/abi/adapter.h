// What the exported adapters share (exports.cc: init, finalize, v4 to v7
// and the tables; adapters_v1_v3.cc: v1 to v3): the checks before a
// descriptor is copied, the call into the core, the handles that name
// nothing. Not part of the plugin's interface: only the adapters include it.
//
// Thread safety: as Profiler::Start and Stop (NCCL calls them from any
// thread).

#ifndef PLUGIN_ABI_ADAPTER_H_
#define PLUGIN_ABI_ADAPTER_H_

#include "plugin/abi/profiler_common.h"
#include "plugin/abi/profiler_v1.h"
#include "plugin/abi/profiler_v2.h"
#include "plugin/abi/profiler_v3.h"
#include "plugin/core/core.h"
#include "plugin/core/event.h"

namespace ncclwatch::plugin::adapter {

// Before any copying: NCCL starts some event types whatever the activation
// mask says (v5 calls Group, GroupApi and CollApi for every collective), and
// most are of no use at the default capture.
inline bool Wanted(void* context, EventKind kind) {
  // Only a context we made is read: a PXN proxy's events carry another
  // process's (NVIDIA/nccl#1586), and a turned-off communicator's is null.
  Context* c = Profiler::KnownContext(context);
  if (c == nullptr || !c->prof->Wants(kind)) return false;
  if (__builtin_expect(c->finalized.load(std::memory_order_acquire), 0)) {
    c->prof->RefuseFinalized();
    return false;
  }
  return true;
}

inline void StartCommon(void* context, void** handle, const EventDesc& d) {
  auto* c = static_cast<Context*>(context);
  void* h = c != nullptr ? c->prof->Start(c, d) : nullptr;
  if (handle != nullptr) *handle = h;
}

// A Group event the plugin keeps nothing for still gets a handle on API v1
// to v4 (exports.cc).
void GroupFallback(int api, void* context, void** handle, EventKind kind);

// A handle behind which the plugin keeps nothing: Stop and State ignore it.
// A GroupApi token is tested first: NCCL 2.28+ hands one back twice per
// group (its states) and once at its stop, on the launching thread.
inline bool Empty(void* handle) {
  return handle == nullptr || IsGroupApiToken(handle) || handle == GroupToken() || handle == CapturedApiToken();
}

template <typename D>
void CopyProxy(const D& e, EventDesc* d) {
  d->pid = e.proxyOp.pid;
  d->channel = e.proxyOp.channelId;
  d->peer = e.proxyOp.peer;
  d->nsteps = e.proxyOp.nSteps;
  d->chunk_size = e.proxyOp.chunkSize;
  d->is_send = e.proxyOp.isSend != 0;
}

// The v1 to v3 tables' own entries (adapters_v1_v3.cc).
nccl::Result StartV1(void* context, void** handle, nccl::DescrV1* e) noexcept;
nccl::Result StartV2(void* context, void** handle, nccl::DescrV2* e) noexcept;
nccl::Result StartV3(void* context, void** handle, nccl::DescrV3* e) noexcept;
nccl::Result StateV1(void* handle, int state, nccl::StateArgsV1* args) noexcept;

}  // namespace ncclwatch::plugin::adapter

#endif  // PLUGIN_ABI_ADAPTER_H_
