// The kinds of NCCL profiler event, as the plugin indexes them: NCCL's
// type bit index + 1 (so the hot path maps a type to a kind with one
// count-trailing-zeros), also trace.proto's EventType values.
//
// Constant tables; any thread.

#ifndef PLUGIN_ABI_EVENT_KIND_H_
#define PLUGIN_ABI_EVENT_KIND_H_

#include <stdint.h>

#include "plugin/abi/profiler_common.h"

namespace ncclwatch::plugin {

// Event kinds as our own index (also used as EventType in trace.proto).
enum EventKind : uint8_t {
  kEvNone = 0,
  kEvGroup = 1,
  kEvColl = 2,
  kEvP2p = 3,
  kEvProxyOp = 4,
  kEvProxyStep = 5,
  kEvProxyCtrl = 6,
  kEvKernelCh = 7,
  kEvNetPlugin = 8,
  kEvGroupApi = 9,
  kEvCollApi = 10,
  kEvP2pApi = 11,
  kEvKernelLaunch = 12,
  kEvCeColl = 13,
  kEvCeSync = 14,
  kEvCeBatch = 15,
  kEvKernelPhase = 16,  // v7+
  kEvCount = 17,
};

// NCCL mask bit of an event kind and back.
uint64_t MaskOf(EventKind k);
// kEvNone unless `type_bit` is exactly one known type bit. Hot path: every
// event of every type goes through it.
inline EventKind KindOfMask(uint64_t type_bit) {
  if (type_bit == 0 || (type_bit & (type_bit - 1)) != 0) return kEvNone;
  const int b = __builtin_ctzll(type_bit);
  return b < kEvCount - 1 ? static_cast<EventKind>(b + 1) : kEvNone;
}
const char* EventKindName(EventKind k);

// Every kind with its NCCL mask bit and its name in NCCLWATCH_EVENTS.
struct EventKindInfo {
  EventKind kind;
  uint64_t mask;
  const char* name;
};
inline constexpr EventKindInfo kEventKinds[kEvCount - 1] = {
    {kEvGroup, nccl::kGroup, "group"},
    {kEvColl, nccl::kColl, "coll"},
    {kEvP2p, nccl::kP2p, "p2p"},
    {kEvProxyOp, nccl::kProxyOp, "proxyop"},
    {kEvProxyStep, nccl::kProxyStep, "proxystep"},
    {kEvProxyCtrl, nccl::kProxyCtrl, "proxyctrl"},
    {kEvKernelCh, nccl::kKernelCh, "kernelch"},
    {kEvNetPlugin, nccl::kNetPlugin, "netplugin"},
    {kEvGroupApi, nccl::kGroupApi, "groupapi"},
    {kEvCollApi, nccl::kCollApi, "collapi"},
    {kEvP2pApi, nccl::kP2pApi, "p2papi"},
    {kEvKernelLaunch, nccl::kKernelLaunch, "kernellaunch"},
    {kEvCeColl, nccl::kCeColl, "cecoll"},
    {kEvCeSync, nccl::kCeSync, "cesync"},
    {kEvCeBatch, nccl::kCeBatch, "cebatch"},
    {kEvKernelPhase, nccl::kKernelPhase, "kernelphase"},
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_ABI_EVENT_KIND_H_
