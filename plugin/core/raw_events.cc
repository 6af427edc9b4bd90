// Events captured raw (NCCLWATCH_EVENTS): an event's start record, with its
// descriptor's fields for its kind, into the calling thread's ring (raw
// records fill it only up to three quarters: Profiler::ReserveRawRecord).
// Cold: only a configuration that captures some kind raw calls it.
//
// Thread safety: as Profiler::Start, on the thread that started the event.

#include <string.h>

#include "plugin/abi/profiler_net.h"
#include "plugin/core/core.h"

namespace ncclwatch::plugin {

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

}  // namespace ncclwatch::plugin
