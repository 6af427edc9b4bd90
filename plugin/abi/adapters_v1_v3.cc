// The v1 to v3 adapters: each copies its version's descriptor, field by
// field, into an EventDesc and calls the core (adapter.h). v1 passes enum
// values for names; v1 to v3 pass a union of state arguments.

#include <stdint.h>

#include "plugin/abi/adapter.h"
#include "plugin/abi/profiler_common.h"
#include "plugin/abi/profiler_v1.h"
#include "plugin/abi/profiler_v2.h"
#include "plugin/abi/profiler_v3.h"
#include "plugin/core/core.h"
#include "plugin/core/event.h"

namespace ncclwatch::plugin::adapter {
namespace {

// v1 passes enum values where later versions pass NCCL's names.
const char* FuncName(uint8_t f) {
  static const char* const kNames[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce",
                                       "SendRecv",  "Send",   "Recv"};
  return f < sizeof(kNames) / sizeof(kNames[0]) ? kNames[f] : "Unknown";
}
const char* DatatypeName(uint8_t t) {
  static const char* const kNames[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32", "ncclInt64",
                                       "ncclUint64",  "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16"};
  return t < sizeof(kNames) / sizeof(kNames[0]) ? kNames[t] : "Unknown";
}
const char* AlgoName(uint8_t a) {
  static const char* const kNames[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
  return a < sizeof(kNames) / sizeof(kNames[0]) ? kNames[a] : "Unknown";
}
const char* ProtoName(uint8_t p) {
  static const char* const kNames[] = {"LL", "LL128", "SIMPLE"};
  return p < sizeof(kNames) / sizeof(kNames[0]) ? kNames[p] : "Unknown";
}

}  // namespace

// State arguments of v1..v3: a union whose member depends on the state.
nccl::Result StateV1(void* handle, int state, nccl::StateArgsV1* args) noexcept {
  if (Empty(handle)) return nccl::kSuccess;
  StateArgs a;
  if (args != nullptr) {
    if ((state >= nccl::kProxyOpSendPosted && state <= nccl::kProxyOpRecvDone) || state == nccl::kProxyOpInProgress) {
      a.trans_size = args->proxyOp.transSize;
      a.steps = args->proxyOp.steps;
    } else if (state >= nccl::kProxyCtrlIdle && state <= nccl::kProxyCtrlAppendEnd) {
      a.appended_proxy_ops = args->proxyCtrl.appendedProxyOps;
    }
  }
  SlotOfHandle(handle)->ctx->prof->State(handle, state, a);
  return nccl::kSuccess;
}

nccl::Result StartV1(void* context, void** handle, nccl::DescrV1* e) noexcept {
  if (handle != nullptr) *handle = nullptr;
  if (e == nullptr) return nccl::kSuccess;
  const EventKind kind = KindOfMask(e->type);
  if (!Wanted(context, kind)) {
    GroupFallback(1, context, handle, kind);
    return nccl::kSuccess;
  }
  EventDesc d;
  d.kind = kind;
  d.parent = e->parentObj;
  d.rank = e->rank;
  switch (d.kind) {
    case kEvColl:
      d.comm_hash = e->coll.commHash;
      d.seq = e->coll.seqNumber;
      d.func = FuncName(e->coll.func);
      d.send_buff = e->coll.sendBuff;
      d.recv_buff = e->coll.recvBuff;
      d.count = e->coll.count;
      d.root = e->coll.root;
      d.datatype = DatatypeName(e->coll.datatype);
      d.op = e->coll.op;
      d.traffic_bytes = e->coll.trafficBytes;
      d.nchannels = e->coll.nMaxChannels;
      d.nwarps = e->coll.nWarps;
      d.algo = AlgoName(e->coll.algo);
      d.proto = ProtoName(e->coll.proto);
      d.is_collnet = e->coll.isCollnet != 0;
      d.is_nvls = e->coll.isNvls != 0;
      break;
    case kEvP2p:
      d.comm_hash = e->p2p.commHash;
      d.func = FuncName(e->p2p.func);
      d.recv_buff = e->p2p.buff;
      d.datatype = DatatypeName(e->p2p.datatype);
      d.count = e->p2p.count;
      d.peer = e->p2p.peer;
      break;
    case kEvProxyOp:
      CopyProxy(*e, &d);
      break;
    case kEvProxyStep:
      d.step = e->proxyStep.step;
      break;
    case kEvGroup:
    case kEvProxyCtrl:
      break;
    default:
      return nccl::kSuccess;  // not a v1 event type
  }
  StartCommon(context, handle, d);
  GroupFallback(1, context, handle, kind);
  return nccl::kSuccess;
}

template <typename D>
void CopyCollV2V3(const D& e, EventDesc* d) {
  d->comm_hash = e.coll.commHash;
  d->seq = e.coll.seqNumber;
  d->func = e.coll.func;
  d->send_buff = e.coll.sendBuff;
  d->recv_buff = e.coll.recvBuff;
  d->count = e.coll.count;
  d->root = e.coll.root;
  d->datatype = e.coll.datatype;
  d->nchannels = e.coll.nMaxChannels;
  d->nwarps = e.coll.nWarps;
  d->algo = e.coll.algo;
  d->proto = e.coll.proto;
}
template <typename D>
void CopyP2pV2V3(const D& e, EventDesc* d) {
  d->comm_hash = e.p2p.commHash;
  d->func = e.p2p.func;
  d->recv_buff = e.p2p.buff;
  d->datatype = e.p2p.datatype;
  d->count = e.p2p.count;
  d->peer = e.p2p.peer;
}

nccl::Result StartV2(void* context, void** handle, nccl::DescrV2* e) noexcept {
  if (handle != nullptr) *handle = nullptr;
  if (e == nullptr) return nccl::kSuccess;
  const EventKind kind = KindOfMask(e->type);
  if (!Wanted(context, kind)) {
    GroupFallback(2, context, handle, kind);
    return nccl::kSuccess;
  }
  EventDesc d;
  d.kind = kind;
  d.parent = e->parentObj;
  d.rank = e->rank;
  switch (d.kind) {
    case kEvColl:
      CopyCollV2V3(*e, &d);
      d.traffic_bytes = e->coll.trafficBytes;
      break;
    case kEvP2p:
      CopyP2pV2V3(*e, &d);
      break;
    case kEvProxyOp:
      CopyProxy(*e, &d);
      break;
    case kEvProxyStep:
      d.step = e->proxyStep.step;
      break;
    case kEvGroup:
    case kEvProxyCtrl:
      break;
    default:
      return nccl::kSuccess;
  }
  StartCommon(context, handle, d);
  GroupFallback(2, context, handle, kind);
  return nccl::kSuccess;
}

nccl::Result StartV3(void* context, void** handle, nccl::DescrV3* e) noexcept {
  if (handle != nullptr) *handle = nullptr;
  if (e == nullptr) return nccl::kSuccess;
  const EventKind kind = KindOfMask(e->type);
  if (!Wanted(context, kind)) {
    GroupFallback(3, context, handle, kind);
    return nccl::kSuccess;
  }
  EventDesc d;
  d.kind = kind;
  d.parent = e->parentObj;
  d.rank = e->rank;
  switch (d.kind) {
    case kEvColl:
      CopyCollV2V3(*e, &d);
      break;
    case kEvP2p:
      CopyP2pV2V3(*e, &d);
      break;
    case kEvProxyOp:
      CopyProxy(*e, &d);
      break;
    case kEvProxyStep:
      d.step = e->proxyStep.step;
      break;
    case kEvKernelCh:
      d.channel = e->kernelCh.channelId;
      break;
    case kEvNetPlugin:
      d.net_id = e->netPlugin.id;
      d.net_data = e->netPlugin.data;
      break;
    case kEvGroup:
    case kEvProxyCtrl:
      break;
    default:
      return nccl::kSuccess;
  }
  StartCommon(context, handle, d);
  GroupFallback(3, context, handle, kind);
  return nccl::kSuccess;
}

}  // namespace ncclwatch::plugin::adapter
