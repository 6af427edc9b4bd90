#include "plugin/writer/encoder.h"

#include "plugin/abi/event_kind.h"
#include "proto/trace_fields.h"

namespace ncclwatch::plugin {
namespace {

namespace tf = ::ncclwatch::trace_fields;

// Re-anchor the GPU clock only for a pair at least this much tighter.
constexpr int64_t kGpuReanchorNs = 2000;

void Str(Wire* w, uint32_t field, std::string_view s) { w->Bytes(field, s.data(), s.size()); }

uint64_t OpKind(bool p2p) { return p2p ? 1 : 0; }  // trace.proto OpKind

}  // namespace

void TraceEncoder::ForgetDefinitions() {
  string_ids_.clear();
  gpu_set_ = false;
}

uint32_t TraceEncoder::Intern(std::string_view text) {
  if (text.empty()) return 0;
  auto it = string_ids_.find(std::string(text));
  if (it != string_ids_.end()) return it->second;
  const uint32_t id = ++last_string_id_;
  string_ids_.emplace(std::string(text), id);
  Wire* w = sink_->NextRecord();
  size_t at = w->BeginRecord();
  size_t m = w->BeginMessage(tf::Record::kStringDef);
  w->U64(tf::StringDef::kId, id);
  Str(w, tf::StringDef::kText, text);
  w->EndMessage(m);
  w->EndRecord(at);
  return id;
}

void TraceEncoder::DefineGpuClock(uint64_t gpu_ns, uint64_t cpu_ns) {
  // Deltas stay lossless across a re-anchor: each refers to the GpuClock
  // before it. The first operations of a job are often seen late, while
  // NCCL's proxy thread warms up, hence re-anchoring at all.
  if (gpu_set_ && static_cast<int64_t>(cpu_ns - (gpu_ns - gpu_offset_)) > -kGpuReanchorNs) return;
  gpu_set_ = true;
  gpu_offset_ = gpu_ns - cpu_ns;
  Wire* w = sink_->NextRecord();
  size_t at = w->BeginRecord();
  size_t m = w->BeginMessage(tf::Record::kGpuClock);
  w->U64(tf::GpuClock::kGpuBaseNs, gpu_ns);
  w->U64(tf::GpuClock::kCpuNs, cpu_ns);
  w->EndMessage(m);
  w->EndRecord(at);
}

void TraceEncoder::Header(const HeaderFields& h) {
  Wire* w = sink_->NextRecord();
  size_t at = w->BeginRecord();
  size_t m = w->BeginMessage(tf::Record::kHeader);
  w->U64(tf::ProcessHeader::kSchemaVersion, 1);  // SCHEMA_VERSION_CURRENT
  Str(w, tf::ProcessHeader::kPluginVersion, h.plugin_version);
  w->U64(tf::ProcessHeader::kProfilerApiVersion, h.profiler_api_version);
  Str(w, tf::ProcessHeader::kHostname, h.hostname);
  w->I64(tf::ProcessHeader::kPid, h.pid);
  w->U64(tf::ProcessHeader::kMonoBaseNs, h.mono_base_ns);
  w->U64(tf::ProcessHeader::kRealtimeBaseNs, h.realtime_base_ns);
  w->U64(tf::ProcessHeader::kClockPairErrorNs, h.clock_pair_error_ns);
  w->I32(tf::ProcessHeader::kLauncherRank, h.launcher_rank);
  w->I32(tf::ProcessHeader::kLauncherWorldSize, h.launcher_world_size);
  w->I32(tf::ProcessHeader::kLauncherLocalRank, h.launcher_local_rank);
  Str(w, tf::ProcessHeader::kLauncherRankSource, h.launcher_rank_source);
  w->I32(tf::ProcessHeader::kCudaDevice, h.cuda_device);
  Str(w, tf::ProcessHeader::kCudaVisibleDevices, h.cuda_visible_devices);
  Str(w, tf::ProcessHeader::kGpuPciBusId, h.gpu_pci_bus_id);
  Str(w, tf::ProcessHeader::kGpuUuid, h.gpu_uuid);
  w->U64(tf::ProcessHeader::kEventMask, h.event_mask);
  Str(w, tf::ProcessHeader::kEventsConfig, h.events_config);
  w->U64(tf::ProcessHeader::kFlushMs, h.flush_ms);
  w->U64(tf::ProcessHeader::kHeartbeatMs, h.heartbeat_ms);
  w->Double(tf::ProcessHeader::kStuckSec, h.stuck_sec);
  w->U64(tf::ProcessHeader::kBufferBytes, h.buffer_bytes);
  Str(w, tf::ProcessHeader::kJobId, h.job_id);
  if (h.argv != nullptr)
    for (const std::string& a : *h.argv) Str(w, tf::ProcessHeader::kArgv, a);
  Str(w, tf::ProcessHeader::kClockSource, h.clock_source);
  w->U64(tf::ProcessHeader::kTickClock, h.tick_clock);
  Str(w, tf::ProcessHeader::kKernelClocksource, h.kernel_clocksource);
  w->Double(tf::ProcessHeader::kClockGettimeNs, h.clock_gettime_ns);
  Str(w, tf::ProcessHeader::kNcclVersion, h.nccl_version);
  w->I32(tf::ProcessHeader::kCudaDriverVersion, h.cuda_driver_version);
  Str(w, tf::ProcessHeader::kCompletions, h.completions);
  w->U64(tf::ProcessHeader::kEventIntervalUs, h.event_interval_us);
  w->U64(tf::ProcessHeader::kCompletionSource, h.completion_source);
  w->EndMessage(m);
  w->EndRecord(at);
}

void TraceEncoder::CommInit(const CommInitFields& c) {
  Wire* w = sink_->NextRecord();
  batch_times_.Note(c.time_ns);
  size_t at = w->BeginRecord();
  size_t m = w->BeginMessage(tf::Record::kCommInit);
  w->U64(tf::CommInit::kComm, c.comm);
  w->U64(tf::CommInit::kCommHash, c.comm_hash);
  if (!c.from_event) {
    Str(w, tf::CommInit::kName, c.name);
    w->I32(tf::CommInit::kNranks, c.nranks);
    w->I32(tf::CommInit::kNnodes, c.nnodes);
    w->I32(tf::CommInit::kRank, c.rank);
  }
  w->U64(tf::CommInit::kTimeNs, c.time_ns);
  w->Bool(tf::CommInit::kFromEvent, c.from_event);
  w->Bool(tf::CommInit::kNcclImpossible, c.nccl_impossible);
  w->EndMessage(m);
  w->EndRecord(at);
}

void TraceEncoder::CommFinalize(uint32_t comm, uint64_t time_ns, uint64_t ops_enqueued, uint64_t ops_completed) {
  Wire* w = sink_->NextRecord();
  batch_times_.Note(time_ns);
  size_t at = w->BeginRecord();
  size_t m = w->BeginMessage(tf::Record::kCommFinalize);
  w->U64(tf::CommFinalize::kComm, comm);
  w->U64(tf::CommFinalize::kTimeNs, time_ns);
  w->U64(tf::CommFinalize::kOpsEnqueued, ops_enqueued);
  w->U64(tf::CommFinalize::kOpsCompleted, ops_completed);
  w->EndMessage(m);
  w->EndRecord(at);
}

void TraceEncoder::DoneBody(Wire* w, const DoneFields& d, const OpFields* op) {
  if (op != nullptr) {
    w->U64(tf::OpDone::kDoneAfterStartNs, d.done_ns > op->start_ns ? d.done_ns - op->start_ns : 0);
  } else {
    w->U64(tf::OpDone::kDoneNs, d.done_ns);
  }
  if (d.has_gpu) {
    w->S64(tf::OpDone::kGpuStartDeltaNs, GpuDelta(d.gpu_start, d.done_ns));
    const uint64_t dur = d.gpu_stop - d.gpu_start;
    w->U64(tf::OpDone::kGpuDurationNs, dur);
    if (dur == 0) w->Bool(tf::OpDone::kGpuTiming, true);  // timed, and 0: not "no timing"
  }
  // Folded: the channel count only where it differs from the Op's.
  if (op == nullptr || d.kernel_channels != op->nchannels) w->U64(tf::OpDone::kKernelChannels, d.kernel_channels);
  w->U64(tf::OpDone::kProxyOps, d.proxy_ops);
  w->U64(tf::OpDone::kProxyBytes, d.proxy_bytes);
  w->Bool(tf::OpDone::kFromEvent, d.from_event);
  w->U64(tf::OpDone::kStartedNs, d.started_ns);
  w->Bool(tf::OpDone::kFromLaterEvent, d.from_later_event);
}

void TraceEncoder::Op(const OpFields& op, const DoneFields* folded) {
  // The GPU clock is anchored on a kernel stop and the CPU time it was seen,
  // the closest pair there is.
  if (folded != nullptr && folded->has_gpu) DefineGpuClock(folded->gpu_stop, folded->done_ns);
  Wire* w = sink_->NextRecord();
  batch_times_.Note(op.start_ns);
  // A folded completion is read back as start + done_after_start_ns (DoneBody).
  if (folded != nullptr) batch_times_.Note(folded->done_ns > op.start_ns ? folded->done_ns : op.start_ns);
  size_t at = w->BeginRecord();
  size_t m = w->BeginMessage(tf::Record::kOp);
  w->U64(tf::Op::kEventId, op.event_id);
  w->U64(tf::Op::kComm, op.comm);
  w->U64(tf::Op::kKind, OpKind(op.p2p));
  w->U64(tf::Op::kSeq, op.seq);
  w->U64(tf::Op::kFunc, op.func);
  w->U64(tf::Op::kCount, op.count);
  w->U64(tf::Op::kDatatype, op.datatype);
  if (!op.p2p) w->S64(tf::Op::kRoot, op.root);
  if (op.p2p) w->S64(tf::Op::kPeer, op.peer);
  w->U64(tf::Op::kAlgo, op.algo);
  w->U64(tf::Op::kProto, op.proto);
  w->U64(tf::Op::kNchannels, op.nchannels);
  w->U64(tf::Op::kNwarps, op.nwarps);
  if (start_chain_) {
    w->S64(tf::Op::kStartDeltaNs, static_cast<int64_t>(op.start_ns - prev_op_start_));
    prev_op_start_ = op.start_ns;
  } else {
    w->U64(tf::Op::kStartNs, op.start_ns);
  }
  w->U64(tf::Op::kEnqueueNs, op.enqueue_ns);
  w->U64(tf::Op::kParentId, op.parent_id);
  w->U64(tf::Op::kSendBuff, op.send_buff);
  w->U64(tf::Op::kRecvBuff, op.recv_buff);
  w->U64(tf::Op::kTrafficBytes, op.traffic_bytes);
  w->U64(tf::Op::kOp, op.op);
  w->Bool(tf::Op::kIsCollnet, op.collnet);
  w->Bool(tf::Op::kIsNvls, op.nvls);
  w->U64(tf::Op::kP2pSeq, op.p2p_seq);
  w->U64(tf::Op::kUserTag, op.user_tag);
  w->Bool(tf::Op::kIsSymColl, op.is_sym_coll);
  w->U64(tf::Op::kKernelVariant, op.kernel_variant);
  w->Bool(tf::Op::kLaunchWithoutEvent, op.launch_without_event);
  w->Bool(tf::Op::kGraph, op.graph);
  if (folded != nullptr) {
    size_t dm = w->BeginMessage(tf::Op::kCompletion);
    DoneBody(w, *folded, &op);
    w->EndMessage(dm);
  } else {
    w->Bool(tf::Op::kCompletionTracked, op.completion_tracked);
    w->U64(tf::Op::kNoCompletion, op.no_completion);
  }
  w->EndMessage(m);
  w->EndRecord(at);
}

void TraceEncoder::OpDone(const DoneFields& d) {
  if (d.has_gpu) DefineGpuClock(d.gpu_stop, d.done_ns);
  Wire* w = sink_->NextRecord();
  batch_times_.Note(d.done_ns);
  size_t at = w->BeginRecord();
  size_t m = w->BeginMessage(tf::Record::kOpDone);
  w->U64(tf::OpDone::kEventId, d.event_id);
  DoneBody(w, d, nullptr);
  w->EndMessage(m);
  w->EndRecord(at);
}

void TraceEncoder::EvStart(const Rec& r, uint64_t time_ns, const EvStartStrings& s) {
  int64_t gdelta = 0;
  if ((r.etype == kEvKernelCh || r.etype == kEvKernelPhase) && (r.flags & kFlagHasGpu)) {
    DefineGpuClock(r.px.ptimer, time_ns);
    gdelta = GpuDelta(r.px.ptimer, time_ns);
  }
  Wire* w = sink_->NextRecord();
  batch_times_.Note(time_ns);
  size_t at = w->BeginRecord();
  size_t m = w->BeginMessage(tf::Record::kEventStart);
  w->U64(tf::EventStart::kEventId, r.id);
  w->U64(tf::EventStart::kType, r.etype);
  w->U64(tf::EventStart::kParentId, r.parent_id);
  w->U64(tf::EventStart::kComm, r.comm);
  w->U64(tf::EventStart::kTimeNs, time_ns);
  if (r.etype == kEvProxyOp || r.etype == kEvProxyStep || r.etype == kEvKernelCh)
    w->I32(tf::EventStart::kNcclRank, r.px.rank);
  w->U64(tf::EventStart::kTid, r.t1);
  const bool graph = r.flags & kFlagGraph;
  size_t d;
  switch (r.etype) {
    case kEvGroupApi:
      d = w->BeginMessage(tf::EventStart::kGroupApi);
      w->Bool(tf::GroupApiDetail::kGraphCaptured, graph);
      w->I32(tf::GroupApiDetail::kGroupDepth, r.api.group_depth);
      w->EndMessage(d);
      break;
    case kEvCollApi:
      d = w->BeginMessage(tf::EventStart::kCollApi);
      w->U64(tf::CollApiDetail::kFunc, s.func);
      w->U64(tf::CollApiDetail::kCount, r.api.count);
      w->U64(tf::CollApiDetail::kDatatype, s.datatype);
      w->S64(tf::CollApiDetail::kRoot, r.api.root);
      w->U64(tf::CollApiDetail::kStream, r.api.stream);
      w->Bool(tf::CollApiDetail::kGraphCaptured, graph);
      w->U64(tf::CollApiDetail::kUserTag, r.api.user_tag);
      w->EndMessage(d);
      break;
    case kEvP2pApi:
      d = w->BeginMessage(tf::EventStart::kP2pApi);
      w->U64(tf::P2pApiDetail::kFunc, s.func);
      w->U64(tf::P2pApiDetail::kCount, r.api.count);
      w->U64(tf::P2pApiDetail::kDatatype, s.datatype);
      w->U64(tf::P2pApiDetail::kStream, r.api.stream);
      w->Bool(tf::P2pApiDetail::kGraphCaptured, graph);
      w->U64(tf::P2pApiDetail::kUserTag, r.api.user_tag);
      w->EndMessage(d);
      break;
    case kEvKernelLaunch:
      d = w->BeginMessage(tf::EventStart::kKernelLaunch);
      w->U64(tf::KernelLaunchDetail::kStream, r.api.stream);
      w->EndMessage(d);
      break;
    case kEvProxyOp:
      d = w->BeginMessage(tf::EventStart::kProxyOp);
      w->I64(tf::ProxyOpDetail::kPid, r.px.pid);
      w->U64(tf::ProxyOpDetail::kChannel, static_cast<uint32_t>(r.px.channel));
      w->S64(tf::ProxyOpDetail::kPeer, r.px.peer);
      w->I32(tf::ProxyOpDetail::kNsteps, r.px.nsteps);
      w->I32(tf::ProxyOpDetail::kChunkSize, r.px.chunk_size);
      w->Bool(tf::ProxyOpDetail::kIsSend, r.flags & kFlagIsSend);
      w->U64(tf::ProxyOpDetail::kOpId, r.parent_id);
      w->EndMessage(d);
      break;
    case kEvProxyStep:
      d = w->BeginMessage(tf::EventStart::kProxyStep);
      w->I32(tf::ProxyStepDetail::kStep, r.px.step);
      w->EndMessage(d);
      break;
    case kEvKernelCh:
      d = w->BeginMessage(tf::EventStart::kKernelCh);
      w->U64(tf::KernelChDetail::kChannel, static_cast<uint32_t>(r.px.channel));
      if (r.flags & kFlagHasGpu) {
        w->S64(tf::KernelChDetail::kGpuStartDeltaNs, gdelta);
        w->Bool(tf::KernelChDetail::kHasGpuStart, true);
      }
      w->EndMessage(d);
      break;
    case kEvKernelPhase:
      d = w->BeginMessage(tf::EventStart::kKernelPhase);
      w->U64(tf::KernelPhaseDetail::kChannel, static_cast<uint32_t>(r.px.channel));
      w->U64(tf::KernelPhaseDetail::kPhase, static_cast<uint32_t>(r.px.step));
      if (r.flags & kFlagHasGpu) {
        w->S64(tf::KernelPhaseDetail::kGpuStartDeltaNs, gdelta);
        w->Bool(tf::KernelPhaseDetail::kHasGpuStart, true);
      }
      w->EndMessage(d);
      break;
    case kEvNetPlugin: {
      d = w->BeginMessage(tf::EventStart::kNetPlugin);
      w->I64(tf::NetPluginDetail::kId, r.net.id);
      if (r.flags & kFlagNetIb) {
        size_t q = w->BeginMessage(tf::NetPluginDetail::kIbQp);
        w->U64(tf::NetIbQp::kType, r.net.type);
        w->I32(tf::NetIbQp::kDevice, r.net.device);
        w->U64(tf::NetIbQp::kWrId, r.net.wr_id);
        w->I32(tf::NetIbQp::kOpcode, r.net.opcode);
        w->I32(tf::NetIbQp::kQpNum, r.net.qp_num);
        w->U64(tf::NetIbQp::kLength, r.net.length);
        w->EndMessage(q);
      } else if (r.flags & kFlagNetSocket) {
        size_t q = w->BeginMessage(tf::NetPluginDetail::kSocket);
        w->U64(tf::NetSocket::kType, r.net.type);
        w->I32(tf::NetSocket::kFd, r.net.device);
        w->I32(tf::NetSocket::kOp, r.net.opcode);
        w->U64(tf::NetSocket::kLength, r.net.length);
        w->EndMessage(q);
      }
      w->EndMessage(d);
      break;
    }
    case kEvCeColl:
      d = w->BeginMessage(tf::EventStart::kCeColl);
      w->U64(tf::CeCollDetail::kSeq, r.api.seq);
      w->U64(tf::CeCollDetail::kFunc, s.func);
      w->U64(tf::CeCollDetail::kSendBuff, r.api.send_buff);
      w->U64(tf::CeCollDetail::kRecvBuff, r.api.recv_buff);
      w->U64(tf::CeCollDetail::kCount, r.api.count);
      w->S64(tf::CeCollDetail::kRoot, r.api.root);
      w->U64(tf::CeCollDetail::kDatatype, s.datatype);
      w->U64(tf::CeCollDetail::kSyncStrategy, s.sync_strategy);
      w->Bool(tf::CeCollDetail::kIntraBatchSync, r.flags & kFlagIntraBatchSync);
      w->U64(tf::CeCollDetail::kBatchSize, r.api.batch_size);
      w->U64(tf::CeCollDetail::kNumBatches, r.api.num_batches);
      w->U64(tf::CeCollDetail::kCeSeq, r.api.ce_seq);
      w->U64(tf::CeCollDetail::kStream, r.api.stream);
      w->U64(tf::CeCollDetail::kUserTag, r.api.user_tag);
      w->EndMessage(d);
      break;
    case kEvCeSync:
      d = w->BeginMessage(tf::EventStart::kCeSync);
      w->Bool(tf::CeSyncDetail::kIsComplete, r.flags & kFlagIsComplete);
      w->I32(tf::CeSyncDetail::kNranks, r.api.nranks);
      w->EndMessage(d);
      break;
    case kEvCeBatch:
      d = w->BeginMessage(tf::EventStart::kCeBatch);
      w->I32(tf::CeBatchDetail::kNumOps, r.batch.num_ops);
      w->U64(tf::CeBatchDetail::kTotalBytes, r.batch.total_bytes);
      w->Bool(tf::CeBatchDetail::kUseIntraSync, r.flags & kFlagUseIntraSync);
      w->EndMessage(d);
      break;
    default:
      break;  // Group, ProxyCtrl: no detail
  }
  w->EndMessage(m);
  w->EndRecord(at);
}

void TraceEncoder::EvStop(const Rec& r, uint64_t time_ns) {
  const bool has = r.flags & kFlagHasGpuStop;
  if (has) DefineGpuClock(r.st.ptimer, time_ns);
  Wire* w = sink_->NextRecord();
  batch_times_.Note(time_ns);
  size_t at = w->BeginRecord();
  size_t m = w->BeginMessage(tf::Record::kEventStop);
  w->U64(tf::EventStop::kEventId, r.id);
  w->U64(tf::EventStop::kTimeNs, time_ns);
  if (has) {
    w->S64(tf::EventStop::kGpuStopDeltaNs, GpuDelta(r.st.ptimer, time_ns));
    w->Bool(tf::EventStop::kHasGpuStop, true);
  }
  w->EndMessage(m);
  w->EndRecord(at);
}

void TraceEncoder::EvState(const Rec& r, uint64_t time_ns) {
  const bool has = r.flags & kFlagHasGpu;
  if (has) DefineGpuClock(r.st.ptimer, time_ns);
  Wire* w = sink_->NextRecord();
  batch_times_.Note(time_ns);
  size_t at = w->BeginRecord();
  size_t m = w->BeginMessage(tf::Record::kEventState);
  w->U64(tf::EventState::kEventId, r.id);
  w->U64(tf::EventState::kState, r.st.state);
  w->U64(tf::EventState::kTimeNs, time_ns);
  w->U64(tf::EventState::kTransSize, r.st.trans_size);
  w->I32(tf::EventState::kSteps, r.st.steps);
  w->I32(tf::EventState::kAppendedProxyOps, r.st.appended_proxy_ops);
  if (has) {
    w->S64(tf::EventState::kGpuDeltaNs, GpuDelta(r.st.ptimer, time_ns));
    w->Bool(tf::EventState::kHasGpu, true);
  }
  w->U64(tf::EventState::kNetData, r.st.net_data);
  w->EndMessage(m);
  w->EndRecord(at);
}

void TraceEncoder::Stuck(const StuckFields& s) {
  Wire* w = sink_->NextRecord();
  batch_times_.Note(s.time_ns);
  size_t at = w->BeginRecord();
  size_t m = w->BeginMessage(tf::Record::kStuck);
  w->U64(tf::StuckReport::kTimeNs, s.time_ns);
  w->Double(tf::StuckReport::kThresholdSec, s.threshold_sec);
  w->U64(tf::StuckReport::kTriggerEventId, s.trigger_event_id);
  for (const InFlightFields& f : s.ops) {
    size_t o = w->BeginMessage(tf::StuckReport::kOps);
    w->U64(tf::InFlightOp::kEventId, f.event_id);
    w->U64(tf::InFlightOp::kComm, f.comm);
    w->U64(tf::InFlightOp::kKind, OpKind(f.p2p));
    w->U64(tf::InFlightOp::kSeq, f.seq);
    w->U64(tf::InFlightOp::kFunc, f.func);
    w->U64(tf::InFlightOp::kCount, f.count);
    if (f.p2p) w->S64(tf::InFlightOp::kPeer, f.peer);
    w->U64(tf::InFlightOp::kStartNs, f.start_ns);
    w->U64(tf::InFlightOp::kAgeNs, f.age_ns);
    w->Bool(tf::InFlightOp::kEnqueued, f.enqueued);
    w->U64(tf::InFlightOp::kNchannels, f.nchannels);
    if (f.has_progress) {
      w->U64(tf::InFlightOp::kKernelChannelsStarted, f.kernel_channels_started);
      w->U64(tf::InFlightOp::kKernelChannelsStopped, f.kernel_channels_stopped);
      w->U64(tf::InFlightOp::kProxyOpsStarted, f.proxy_ops_started);
      w->U64(tf::InFlightOp::kProxyOpsStopped, f.proxy_ops_stopped);
    }
    w->U64(tf::InFlightOp::kGpu, f.gpu);
    w->U64(tf::InFlightOp::kWindowFirstEventId, f.window_first_event_id);
    w->U64(tf::InFlightOp::kWindowLastEventId, f.window_last_event_id);
    for (const ProxyProgressFields& p : f.proxy) {
      size_t q = w->BeginMessage(tf::InFlightOp::kProxy);
      w->U64(tf::ProxyProgress::kChannel, p.channel);
      w->S64(tf::ProxyProgress::kPeer, p.peer);
      w->Bool(tf::ProxyProgress::kIsSend, p.is_send);
      w->I32(tf::ProxyProgress::kNsteps, p.nsteps);
      w->I32(tf::ProxyProgress::kLastStep, p.last_step);
      w->U64(tf::ProxyProgress::kLastState, p.last_state);
      w->U64(tf::ProxyProgress::kLastUpdateNs, p.last_update_ns);
      w->Bool(tf::ProxyProgress::kStopped, p.stopped);
      w->EndMessage(q);
    }
    w->EndMessage(o);
  }
  w->EndMessage(m);
  w->EndRecord(at);
}

void TraceEncoder::Finalize(uint64_t time_ns, bool clean) {
  Wire* w = sink_->NextRecord();
  batch_times_.Note(time_ns);
  size_t at = w->BeginRecord();
  size_t m = w->BeginMessage(tf::Record::kFinalize);
  w->U64(tf::Finalize::kTimeNs, time_ns);
  w->Bool(tf::Finalize::kClean, clean);
  w->EndMessage(m);
  w->EndRecord(at);
}

void TraceEncoder::MaskChange(const MaskChangeFields& c) {
  Wire* w = sink_->NextRecord();
  batch_times_.Note(c.time_ns);
  batch_times_.Note(c.since_ns);
  size_t at = w->BeginRecord();
  size_t m = w->BeginMessage(tf::Record::kMaskChange);
  w->U64(tf::MaskChange::kTimeNs, c.time_ns);
  w->U64(tf::MaskChange::kOldMask, c.old_mask);
  w->U64(tf::MaskChange::kNewMask, c.new_mask);
  w->U64(tf::MaskChange::kSinceNs, c.since_ns);
  w->U64(tf::MaskChange::kCompletionSource, c.completion_source);
  w->EndMessage(m);
  w->EndRecord(at);
}

void TraceEncoder::Batch(Wire* w, uint64_t seq, uint64_t time_ns, uint64_t records_before, const TimeRange* times) {
  size_t at = w->BeginRecord();
  size_t m = w->BeginMessage(tf::Record::kBatch);
  w->U64(tf::Batch::kSeq, seq);
  w->U64(tf::Batch::kTimeNs, time_ns);
  w->U64(tf::Batch::kRecordsBefore, records_before);
  if (times != nullptr && times->set) {
    w->U64(tf::Batch::kOldestNs, times->oldest);
    w->U64(tf::Batch::kNewestNs, times->newest);
    w->Bool(tf::Batch::kTimeRange, true);
  }
  w->EndMessage(m);
  w->EndRecord(at);
}

void TraceEncoder::Heartbeat(Wire* w, const HeartbeatFields& h) {
  size_t at = w->BeginRecord();
  size_t m = w->BeginMessage(tf::Record::kHeartbeat);
  w->U64(tf::Heartbeat::kTimeNs, h.time_ns);
  w->U64(tf::Heartbeat::kOpsInFlight, h.ops_in_flight);
  w->U64(tf::Heartbeat::kEventsRecorded, h.events_recorded);
  w->U64(tf::Heartbeat::kEventsDropped, h.events_dropped);
  w->U64(tf::Heartbeat::kBytesWritten, h.bytes_written);
  w->EndMessage(m);
  w->EndRecord(at);
}

void TraceEncoder::Drops(Wire* w, const DropFields& d) {
  size_t at = w->BeginRecord();
  size_t m = w->BeginMessage(tf::Record::kDrops);
  w->U64(tf::Drops::kTimeNs, d.time_ns);
  w->U64(tf::Drops::kRingFull, d.ring_full);
  w->U64(tf::Drops::kPoolExhausted, d.pool_exhausted);
  w->U64(tf::Drops::kNoThreadSlot, d.no_thread_slot);
  w->U64(tf::Drops::kWriteFailed, d.write_failed);
  w->U64(tf::Drops::kForeignParent, d.foreign_parent);
  w->U64(tf::Drops::kBadParent, d.bad_parent);
  Str(w, tf::Drops::kLastWriteError, d.last_write_error);
  w->U64(tf::Drops::kCompletionUntracked, d.completion_untracked);
  w->U64(tf::Drops::kCompletionsLost, d.completions_lost);
  w->Bool(tf::Drops::kCompletionsCounted, d.completions_counted);
  w->EndMessage(m);
  w->EndRecord(at);
}

}  // namespace ncclwatch::plugin
