// The Writer's encoders: one trace.proto record each, from a staged record
// or the writer's state, appended to the current batch (writer.h).

#include <stdio.h>

#include <string>

#include "plugin/version.h"
#include "plugin/writer.h"
#include "plugin/writer_internal.h"

namespace ncclwatch::plugin {

using namespace writer_internal;  // NOLINT: the writer's own helpers

namespace {

constexpr int64_t kGpuReanchorNs = 2000;  // re-anchor the GPU clock for a 2 us tighter pair

}  // namespace

uint32_t Writer::Intern(const char* s) {
  if (s == nullptr) return 0;
  auto it = string_ptr_ids_.find(s);
  if (it != string_ptr_ids_.end()) return it->second;
  std::string text = SafeString(s);
  uint32_t id;
  auto jt = string_ids_.find(text);
  if (jt != string_ids_.end()) {
    id = jt->second;
  } else {
    id = ++last_string_id_;  // never reused, also after a lost write resets the table
    string_ids_.emplace(text, id);
    size_t at = BeginRecord();
    size_t m = wire_.BeginMessage(tf::Record::kStringDef);
    wire_.U64(tf::StringDef::kId, id);
    wire_.Bytes(tf::StringDef::kText, text.data(), text.size());
    wire_.EndMessage(m);
    EndRecord(at);
  }
  string_ptr_ids_.emplace(s, id);
  return id;
}

void Writer::DefineGpuClock(uint64_t gpu_ns, uint64_t cpu_ns) {
  if (gpu_base_set_) {
    // Re-anchor when this pair is tighter: the GPU moment seen sooner by the
    // CPU than the anchor's was (the first operations of a job are often seen
    // late, while NCCL's proxy thread warms up). Deltas stay lossless: each
    // refers to the GpuClock before it.
    const int64_t lag = static_cast<int64_t>(Rel(cpu_ns)) - static_cast<int64_t>(gpu_ns - gpu_offset_);
    if (lag > -kGpuReanchorNs) return;
  }
  gpu_base_set_ = true;
  gpu_base_ = gpu_ns;
  gpu_offset_ = gpu_ns - Rel(cpu_ns);
  size_t at = BeginRecord();
  size_t m = wire_.BeginMessage(tf::Record::kGpuClock);
  wire_.U64(tf::GpuClock::kGpuBaseNs, gpu_base_);
  wire_.U64(tf::GpuClock::kCpuNs, Rel(cpu_ns));
  wire_.EndMessage(m);
  EndRecord(at);
}

int64_t Writer::GpuDelta(uint64_t gpu_ns, uint64_t ref_cpu_ns) const {
  return static_cast<int64_t>(gpu_ns - (Rel(ref_cpu_ns) + gpu_offset_));
}

void Writer::EncodeHeader() {
  const Config& c = prof_->config();
  size_t at = BeginRecord();
  size_t m = wire_.BeginMessage(tf::Record::kHeader);
  wire_.U64(tf::ProcessHeader::kSchemaVersion, 1);  // SCHEMA_VERSION_CURRENT
  wire_.String(tf::ProcessHeader::kPluginVersion, kPluginVersion);
  wire_.U64(tf::ProcessHeader::kProfilerApiVersion, static_cast<uint64_t>(prof_->api_version()));
  wire_.Bytes(tf::ProcessHeader::kHostname, info_.hostname.data(), info_.hostname.size());
  wire_.I64(tf::ProcessHeader::kPid, info_.pid);
  wire_.U64(tf::ProcessHeader::kMonoBaseNs, mono_base_);
  wire_.U64(tf::ProcessHeader::kRealtimeBaseNs, realtime_base_);
  wire_.U64(tf::ProcessHeader::kClockPairErrorNs, clock_error_);
  wire_.I32(tf::ProcessHeader::kLauncherRank, info_.launcher_rank);
  wire_.I32(tf::ProcessHeader::kLauncherWorldSize, info_.launcher_world_size);
  wire_.I32(tf::ProcessHeader::kLauncherLocalRank, info_.launcher_local_rank);
  wire_.Bytes(tf::ProcessHeader::kLauncherRankSource, info_.launcher_rank_source.data(), info_.launcher_rank_source.size());
  wire_.I32(tf::ProcessHeader::kCudaDevice, info_.cuda_device);
  wire_.Bytes(tf::ProcessHeader::kCudaVisibleDevices, info_.cuda_visible_devices.data(), info_.cuda_visible_devices.size());
  wire_.Bytes(tf::ProcessHeader::kGpuPciBusId, info_.gpu_pci_bus_id.data(), info_.gpu_pci_bus_id.size());
  wire_.Bytes(tf::ProcessHeader::kGpuUuid, info_.gpu_uuid.data(), info_.gpu_uuid.size());
  wire_.U64(tf::ProcessHeader::kEventMask, c.nccl_mask);
  wire_.Bytes(tf::ProcessHeader::kEventsConfig, c.events.data(), c.events.size());
  wire_.U64(tf::ProcessHeader::kFlushMs, c.flush_ms);
  wire_.U64(tf::ProcessHeader::kHeartbeatMs, c.heartbeat_ms);
  wire_.Double(tf::ProcessHeader::kStuckSec, c.stuck_sec);
  wire_.U64(tf::ProcessHeader::kBufferBytes, c.buffer_mb << 20);
  wire_.Bytes(tf::ProcessHeader::kJobId, info_.job_id.data(), info_.job_id.size());
  for (const std::string& a : info_.argv) wire_.Bytes(tf::ProcessHeader::kArgv, a.data(), a.size());
  wire_.Bytes(tf::ProcessHeader::kClockSource, ticks_.why().data(), ticks_.why().size());
  wire_.U64(tf::ProcessHeader::kTickClock, ticks_.tsc() ? 1 : 2);  // TickClock: TICK_CLOCK_TSC, TICK_CLOCK_MONOTONIC
  const ClockFacts& f = ticks_.facts();
  wire_.Bytes(tf::ProcessHeader::kKernelClocksource, f.clocksource.data(), f.clocksource.size());
  wire_.Double(tf::ProcessHeader::kClockGettimeNs, f.gettime_ns);
  wire_.EndMessage(m);
  EndRecord(at);
}

void Writer::EncodeCommInit(const Context* ctx, bool from_event, uint64_t hash) {
  size_t at = BeginRecord();
  size_t m = wire_.BeginMessage(tf::Record::kCommInit);
  wire_.U64(tf::CommInit::kComm, ctx->comm);
  wire_.U64(tf::CommInit::kCommHash, hash);
  if (!from_event) {
    wire_.Bytes(tf::CommInit::kName, ctx->name.data(), ctx->name.size());
    wire_.I32(tf::CommInit::kNranks, ctx->nranks);
    wire_.I32(tf::CommInit::kNnodes, ctx->nnodes);
    wire_.I32(tf::CommInit::kRank, ctx->rank);
  }
  wire_.U64(tf::CommInit::kTimeNs, Rel(ctx->init_ns));
  wire_.Bool(tf::CommInit::kFromEvent, from_event);
  wire_.EndMessage(m);
  EndRecord(at);
}

void Writer::EncodeCommFinalize(const Context* ctx, uint64_t time_ns) {
  size_t at = BeginRecord();
  size_t m = wire_.BeginMessage(tf::Record::kCommFinalize);
  wire_.U64(tf::CommFinalize::kComm, ctx->comm);
  wire_.U64(tf::CommFinalize::kTimeNs, Rel(time_ns));
  wire_.U64(tf::CommFinalize::kOpsEnqueued, in_flight_.enqueued(ctx->comm));
  wire_.U64(tf::CommFinalize::kOpsCompleted, in_flight_.completed(ctx->comm));
  wire_.EndMessage(m);
  EndRecord(at);
}

void Writer::EncodeDoneBody(const StagedRec& d, const StagedRec* op) {
  if (op != nullptr) {
    wire_.U64(tf::OpDone::kDoneAfterStartNs, d.t0_ns > op->t0_ns ? d.t0_ns - op->t0_ns : 0);
  } else {
    wire_.U64(tf::OpDone::kDoneNs, Rel(d.t0_ns));
  }
  if (d.flags & kFlagHasGpu) {
    // The GPU clock was defined before the record began (DefineGpuClock).
    wire_.S64(tf::OpDone::kGpuStartDeltaNs, GpuDelta(d.done.gpu_start, d.t0_ns));
    uint64_t dur = d.done.gpu_stop - d.done.gpu_start;
    wire_.U64(tf::OpDone::kGpuDurationNs, dur);
    if (dur == 0) wire_.Bool(tf::OpDone::kGpuTiming, true);
  }
  if (op == nullptr || d.done.kernel_channels != op->nchannels) wire_.U64(tf::OpDone::kKernelChannels, d.done.kernel_channels);
  wire_.U64(tf::OpDone::kProxyOps, d.done.proxy_ops);
  wire_.U64(tf::OpDone::kProxyBytes, d.done.proxy_bytes);
}

void Writer::EncodeOp(const StagedRec& r, const StagedRec* done) {
  // Definitions first: strings, the GPU clock base, a communicator named only by its events.
  uint32_t func = Intern(r.op.func);
  uint32_t dtype = Intern(r.op.datatype);
  uint32_t algo = Intern(r.op.algo);
  uint32_t proto = Intern(r.op.proto);
  // The GPU clock is anchored on a kernel stop and the CPU time it was seen,
  // the closest pair the plugin has.
  if (done != nullptr && (done->flags & kFlagHasGpu)) DefineGpuClock(done->done.gpu_stop, done->t0_ns);
  auto ann = comm_announced_.find(r.comm);
  if (ann == comm_announced_.end() || !ann->second) {
    for (Context* ctx : prof_->ContextsSnapshot()) {
      if (ctx->comm != r.comm) continue;
      uint64_t h = ctx->event_comm_hash.load(std::memory_order_relaxed);
      if (h != 0) {
        EncodeCommInit(ctx, true, h);
        comm_announced_[r.comm] = true;
      }
    }
  }
  const bool tracked = (r.flags & kFlagTracked) != 0;
  if (done != nullptr) {
    in_flight_.EnqueuedCompleted(r.comm, r.t0_ns, done->t0_ns);
  } else {
    in_flight_.Enqueued(r.id, {r.comm, r.etype, r.op.seq, r.op.func, r.op.count, r.op.peer, r.t0_ns, r.nchannels, false, r.t1_ns},
                        tracked);
  }
  size_t at = BeginRecord();
  size_t m = wire_.BeginMessage(tf::Record::kOp);
  // A folded op needs no id unless raw records may name it as their parent.
  if (done == nullptr || prof_->config().raw_kinds != 0) wire_.U64(tf::Op::kEventId, r.id);
  wire_.U64(tf::Op::kComm, r.comm);
  wire_.U64(tf::Op::kKind, OpKindOf(r.etype));
  wire_.U64(tf::Op::kSeq, r.op.seq);
  wire_.U64(tf::Op::kFunc, func);
  wire_.U64(tf::Op::kCount, r.op.count);
  wire_.U64(tf::Op::kDatatype, dtype);
  if (r.etype == kEvColl) wire_.S64(tf::Op::kRoot, r.op.root);
  if (r.etype == kEvP2p) wire_.S64(tf::Op::kPeer, r.op.peer);
  wire_.U64(tf::Op::kAlgo, algo);
  wire_.U64(tf::Op::kProto, proto);
  wire_.U64(tf::Op::kNchannels, r.nchannels);
  wire_.U64(tf::Op::kNwarps, r.nwarps);
  const uint64_t start = Rel(r.t0_ns);
  wire_.S64(tf::Op::kStartDeltaNs, static_cast<int64_t>(start - prev_op_start_));
  prev_op_start_ = start;
  wire_.U64(tf::Op::kEnqueueNs, r.t1_ns - r.t0_ns);
  wire_.U64(tf::Op::kParentId, r.parent_id);
  wire_.U64(tf::Op::kSendBuff, r.op.send_buff);
  wire_.U64(tf::Op::kRecvBuff, r.op.recv_buff);
  wire_.U64(tf::Op::kTrafficBytes, r.op.traffic_bytes);
  wire_.U64(tf::Op::kOp, r.op.op);
  wire_.Bool(tf::Op::kIsCollnet, r.flags & kFlagCollnet);
  wire_.Bool(tf::Op::kIsNvls, r.flags & kFlagNvls);
  wire_.U64(tf::Op::kP2pSeq, r.op.p2p_seq);
  if (done != nullptr) {
    size_t dm = wire_.BeginMessage(tf::Op::kCompletion);
    EncodeDoneBody(*done, &r);
    wire_.EndMessage(dm);
  } else {
    wire_.Bool(tf::Op::kCompletionTracked, tracked);
  }
  wire_.EndMessage(m);
  EndRecord(at);
}

void Writer::EncodeOpDone(const StagedRec& r) {
  if (r.flags & kFlagHasGpu) DefineGpuClock(r.done.gpu_stop, r.t0_ns);
  size_t at = BeginRecord();
  size_t m = wire_.BeginMessage(tf::Record::kOpDone);
  wire_.U64(tf::OpDone::kEventId, r.id);
  EncodeDoneBody(r, nullptr);
  wire_.EndMessage(m);
  EndRecord(at);
  in_flight_.Completed(r.id, r.comm, r.t0_ns);
}

void Writer::EncodeEvStart(const StagedRec& r) {
  uint32_t func = 0, dtype = 0, sync = 0;
  if (r.etype == kEvCollApi || r.etype == kEvP2pApi || r.etype == kEvCeColl) {
    func = Intern(r.api.func);
    dtype = Intern(r.api.datatype);
    if (r.etype == kEvCeColl) sync = Intern(r.api.sync_strategy);
  }
  int64_t gdelta = 0;
  if (r.etype == kEvKernelCh && (r.flags & kFlagHasGpu)) {
    DefineGpuClock(r.px.ptimer, r.t0_ns);
    gdelta = GpuDelta(r.px.ptimer, r.t0_ns);
  }
  size_t at = BeginRecord();
  size_t m = wire_.BeginMessage(tf::Record::kEventStart);
  wire_.U64(tf::EventStart::kEventId, r.id);
  wire_.U64(tf::EventStart::kType, r.etype);
  wire_.U64(tf::EventStart::kParentId, r.parent_id);
  wire_.U64(tf::EventStart::kComm, r.comm);
  wire_.U64(tf::EventStart::kTimeNs, Rel(r.t0_ns));
  if (r.etype == kEvProxyOp || r.etype == kEvProxyStep || r.etype == kEvKernelCh) wire_.I32(tf::EventStart::kNcclRank, r.px.rank);
  wire_.U64(tf::EventStart::kTid, r.t1);
  const bool graph = r.flags & kFlagGraph;
  size_t d;
  switch (r.etype) {
    case kEvGroupApi:
      d = wire_.BeginMessage(tf::EventStart::kGroupApi);
      wire_.Bool(tf::GroupApiDetail::kGraphCaptured, graph);
      wire_.I32(tf::GroupApiDetail::kGroupDepth, r.api.group_depth);
      wire_.EndMessage(d);
      break;
    case kEvCollApi:
      d = wire_.BeginMessage(tf::EventStart::kCollApi);
      wire_.U64(tf::CollApiDetail::kFunc, func);
      wire_.U64(tf::CollApiDetail::kCount, r.api.count);
      wire_.U64(tf::CollApiDetail::kDatatype, dtype);
      wire_.S64(tf::CollApiDetail::kRoot, r.api.root);
      wire_.U64(tf::CollApiDetail::kStream, r.api.stream);
      wire_.Bool(tf::CollApiDetail::kGraphCaptured, graph);
      wire_.EndMessage(d);
      break;
    case kEvP2pApi:
      d = wire_.BeginMessage(tf::EventStart::kP2pApi);
      wire_.U64(tf::P2pApiDetail::kFunc, func);
      wire_.U64(tf::P2pApiDetail::kCount, r.api.count);
      wire_.U64(tf::P2pApiDetail::kDatatype, dtype);
      wire_.U64(tf::P2pApiDetail::kStream, r.api.stream);
      wire_.Bool(tf::P2pApiDetail::kGraphCaptured, graph);
      wire_.EndMessage(d);
      break;
    case kEvKernelLaunch:
      d = wire_.BeginMessage(tf::EventStart::kKernelLaunch);
      wire_.U64(tf::KernelLaunchDetail::kStream, r.api.stream);
      wire_.EndMessage(d);
      break;
    case kEvProxyOp:
      d = wire_.BeginMessage(tf::EventStart::kProxyOp);
      wire_.I64(tf::ProxyOpDetail::kPid, r.px.pid);
      wire_.U64(tf::ProxyOpDetail::kChannel, static_cast<uint32_t>(r.px.channel));
      wire_.S64(tf::ProxyOpDetail::kPeer, r.px.peer);
      wire_.I32(tf::ProxyOpDetail::kNsteps, r.px.nsteps);
      wire_.I32(tf::ProxyOpDetail::kChunkSize, r.px.chunk_size);
      wire_.Bool(tf::ProxyOpDetail::kIsSend, r.flags & kFlagIsSend);
      wire_.U64(tf::ProxyOpDetail::kOpId, r.parent_id);
      wire_.EndMessage(d);
      break;
    case kEvProxyStep:
      d = wire_.BeginMessage(tf::EventStart::kProxyStep);
      wire_.I32(tf::ProxyStepDetail::kStep, r.px.step);
      wire_.EndMessage(d);
      break;
    case kEvKernelCh:
      d = wire_.BeginMessage(tf::EventStart::kKernelCh);
      wire_.U64(tf::KernelChDetail::kChannel, static_cast<uint32_t>(r.px.channel));
      if (r.flags & kFlagHasGpu) {
        wire_.S64(tf::KernelChDetail::kGpuStartDeltaNs, gdelta);
        wire_.Bool(tf::KernelChDetail::kHasGpuStart, true);
      }
      wire_.EndMessage(d);
      break;
    case kEvNetPlugin: {
      d = wire_.BeginMessage(tf::EventStart::kNetPlugin);
      wire_.I64(tf::NetPluginDetail::kId, r.net.id);
      if (r.flags & kFlagNetIb) {
        size_t q = wire_.BeginMessage(tf::NetPluginDetail::kIbQp);
        wire_.U64(tf::NetIbQp::kType, r.net.type);
        wire_.I32(tf::NetIbQp::kDevice, r.net.device);
        wire_.U64(tf::NetIbQp::kWrId, r.net.wr_id);
        wire_.I32(tf::NetIbQp::kOpcode, r.net.opcode);
        wire_.I32(tf::NetIbQp::kQpNum, r.net.qp_num);
        wire_.U64(tf::NetIbQp::kLength, r.net.length);
        wire_.EndMessage(q);
      } else if (r.flags & kFlagNetSocket) {
        size_t q = wire_.BeginMessage(tf::NetPluginDetail::kSocket);
        wire_.U64(tf::NetSocket::kType, r.net.type);
        wire_.I32(tf::NetSocket::kFd, r.net.device);
        wire_.I32(tf::NetSocket::kOp, r.net.opcode);
        wire_.U64(tf::NetSocket::kLength, r.net.length);
        wire_.EndMessage(q);
      }
      wire_.EndMessage(d);
      break;
    }
    case kEvCeColl:
      d = wire_.BeginMessage(tf::EventStart::kCeColl);
      wire_.U64(tf::CeCollDetail::kSeq, r.api.seq);
      wire_.U64(tf::CeCollDetail::kFunc, func);
      wire_.U64(tf::CeCollDetail::kSendBuff, r.api.send_buff);
      wire_.U64(tf::CeCollDetail::kRecvBuff, r.api.recv_buff);
      wire_.U64(tf::CeCollDetail::kCount, r.api.count);
      wire_.S64(tf::CeCollDetail::kRoot, r.api.root);
      wire_.U64(tf::CeCollDetail::kDatatype, dtype);
      wire_.U64(tf::CeCollDetail::kSyncStrategy, sync);
      wire_.Bool(tf::CeCollDetail::kIntraBatchSync, r.flags & kFlagIntraBatchSync);
      wire_.U64(tf::CeCollDetail::kBatchSize, r.api.batch_size);
      wire_.U64(tf::CeCollDetail::kNumBatches, r.api.num_batches);
      wire_.U64(tf::CeCollDetail::kCeSeq, r.api.ce_seq);
      wire_.U64(tf::CeCollDetail::kStream, r.api.stream);
      wire_.EndMessage(d);
      break;
    case kEvCeSync:
      d = wire_.BeginMessage(tf::EventStart::kCeSync);
      wire_.Bool(tf::CeSyncDetail::kIsComplete, r.flags & kFlagIsComplete);
      wire_.I32(tf::CeSyncDetail::kNranks, r.api.nranks);
      wire_.EndMessage(d);
      break;
    case kEvCeBatch:
      d = wire_.BeginMessage(tf::EventStart::kCeBatch);
      wire_.I32(tf::CeBatchDetail::kNumOps, r.batch.num_ops);
      wire_.U64(tf::CeBatchDetail::kTotalBytes, r.batch.total_bytes);
      wire_.Bool(tf::CeBatchDetail::kUseIntraSync, r.flags & kFlagUseIntraSync);
      wire_.EndMessage(d);
      break;
    default:
      break;  // Group, ProxyCtrl: no detail
  }
  wire_.EndMessage(m);
  EndRecord(at);
}

void Writer::EncodeEvStop(const StagedRec& r) {
  int64_t g = 0;
  const bool has = r.flags & kFlagHasGpuStop;
  if (has) {
    DefineGpuClock(r.st.ptimer, r.t0_ns);
    g = GpuDelta(r.st.ptimer, r.t0_ns);
  }
  size_t at = BeginRecord();
  size_t m = wire_.BeginMessage(tf::Record::kEventStop);
  wire_.U64(tf::EventStop::kEventId, r.id);
  wire_.U64(tf::EventStop::kTimeNs, Rel(r.t0_ns));
  if (has) {
    wire_.S64(tf::EventStop::kGpuStopDeltaNs, g);
    wire_.Bool(tf::EventStop::kHasGpuStop, true);
  }
  wire_.EndMessage(m);
  EndRecord(at);
}

void Writer::EncodeEvState(const StagedRec& r) {
  int64_t g = 0;
  const bool has = r.flags & kFlagHasGpu;
  if (has) {
    DefineGpuClock(r.st.ptimer, r.t0_ns);
    g = GpuDelta(r.st.ptimer, r.t0_ns);
  }
  size_t at = BeginRecord();
  size_t m = wire_.BeginMessage(tf::Record::kEventState);
  wire_.U64(tf::EventState::kEventId, r.id);
  wire_.U64(tf::EventState::kState, r.st.state);
  wire_.U64(tf::EventState::kTimeNs, Rel(r.t0_ns));
  wire_.U64(tf::EventState::kTransSize, r.st.trans_size);
  wire_.I32(tf::EventState::kSteps, r.st.steps);
  wire_.I32(tf::EventState::kAppendedProxyOps, r.st.appended_proxy_ops);
  if (has) {
    wire_.S64(tf::EventState::kGpuDeltaNs, g);
    wire_.Bool(tf::EventState::kHasGpu, true);
  }
  wire_.U64(tf::EventState::kNetData, r.st.net_data);
  wire_.EndMessage(m);
  EndRecord(at);
}

void Writer::EncodeHeartbeat(uint64_t now) {
  uint64_t recorded = 0, dropped = prof_->no_thread_slot();
  for (uint32_t i = 0; i < prof_->thread_count(); ++i) {
    const ThreadCounters& c = prof_->thread_buf(i)->counters;
    recorded += c.recorded.load(std::memory_order_relaxed);
    dropped += c.ring_full.load(std::memory_order_relaxed) + c.pool_exhausted.load(std::memory_order_relaxed);
  }
  size_t at = BeginRecord();
  size_t m = wire_.BeginMessage(tf::Record::kHeartbeat);
  wire_.U64(tf::Heartbeat::kTimeNs, Rel(now));
  wire_.U64(tf::Heartbeat::kOpsInFlight, in_flight_.size());
  wire_.U64(tf::Heartbeat::kEventsRecorded, recorded);
  wire_.U64(tf::Heartbeat::kEventsDropped, dropped + file_.records_lost());
  wire_.U64(tf::Heartbeat::kBytesWritten, file_.bytes_written());
  wire_.EndMessage(m);
  EndRecord(at);
}

void Writer::EncodeFinalize(uint64_t now, bool clean) {
  size_t at = BeginRecord();
  size_t m = wire_.BeginMessage(tf::Record::kFinalize);
  wire_.U64(tf::Finalize::kTimeNs, Rel(now));
  wire_.Bool(tf::Finalize::kClean, clean);
  wire_.EndMessage(m);
  EndRecord(at);
}

}  // namespace ncclwatch::plugin
