// The Writer's records: what NCCL reported (staged records) and the
// writer's own state, turned into TraceEncoder's fields in file time.

#include <string.h>

#include <string>

#include "plugin/core/version.h"
#include "plugin/writer/writer.h"

namespace ncclwatch::plugin {
namespace {

// A NUL-terminated string NCCL handed us, up to 256 bytes: a longer one is
// cut, with a marker (NCCL's names are short; anything else is not a name).
std::string SafeString(const char* s) {
  constexpr size_t kMax = 256;
  const size_t n = strnlen(s, kMax + 1);
  if (n <= kMax) return std::string(s, n);
  return std::string(s, kMax) + "...(truncated)";
}

}  // namespace

uint32_t Writer::Intern(const char* s) {
  if (s == nullptr) return 0;
  // NCCL's strings are static: their address names them, without a copy.
  auto it = string_ptr_ids_.find(s);
  if (it != string_ptr_ids_.end()) return it->second;
  const uint32_t id = enc_.Intern(SafeString(s));
  string_ptr_ids_.emplace(s, id);
  return id;
}

void Writer::EncodeHeader() {
  const Config& c = core_->config();
  const ClockFacts& f = ticks_.facts();
  HeaderFields h;
  h.plugin_version = kPluginVersion;
  h.profiler_api_version = static_cast<uint32_t>(core_->api_version());
  h.hostname = info_.hostname;
  h.pid = info_.pid;
  h.mono_base_ns = mono_base_;
  h.realtime_base_ns = realtime_base_;
  h.clock_pair_error_ns = clock_error_;
  h.launcher_rank = info_.launcher_rank;
  h.launcher_world_size = info_.launcher_world_size;
  h.launcher_local_rank = info_.launcher_local_rank;
  h.launcher_rank_source = info_.launcher_rank_source;
  h.cuda_device = info_.cuda_device;
  h.cuda_visible_devices = info_.cuda_visible_devices;
  h.gpu_pci_bus_id = info_.gpu_pci_bus_id;
  h.gpu_uuid = info_.gpu_uuid;
  h.event_mask = c.nccl_mask;
  h.events_config = c.events;
  h.flush_ms = c.flush_ms;
  h.heartbeat_ms = c.heartbeat_ms;
  h.stuck_sec = c.stuck_sec;
  h.buffer_bytes = c.buffer_mb << 20;
  h.job_id = info_.job_id;
  h.argv = &info_.argv;
  h.clock_source = ticks_.why();
  h.tick_clock = ticks_.tsc() ? 1 : 2;  // TickClock: TICK_CLOCK_TSC, TICK_CLOCK_MONOTONIC
  h.kernel_clocksource = f.clocksource;
  h.clock_gettime_ns = f.gettime_ns;
  h.nccl_version = info_.nccl_version;
  h.cuda_driver_version = info_.cuda_driver_version;
  h.completions = core_->completions();
  // CompletionSource: COMPLETION_SOURCE_CUDA_EVENTS, COMPLETION_SOURCE_KERNEL_CHANNELS.
  h.completion_source = core_->events() ? 2 : 1;
  h.event_interval_us = core_->events() ? core_->config().event_interval_us : 0;
  enc_.Header(h);
}

void Writer::EncodeCommInit(const Context* ctx, bool from_event, uint64_t hash) {
  CommInitFields f;
  f.comm = ctx->comm;
  f.comm_hash = hash;
  f.from_event = from_event;
  f.name = ctx->name;
  f.nranks = ctx->nranks;
  f.nnodes = ctx->nnodes;
  f.rank = ctx->rank;
  f.nccl_impossible = !from_event && ctx->nccl_impossible;
  f.time_ns = Rel(ctx->init_ns);
  enc_.CommInit(f);
}

void Writer::EncodeCommFinalize(const Context* ctx, uint64_t time_ns) {
  enc_.CommFinalize(ctx->comm, Rel(time_ns), in_flight_.enqueued(ctx->comm), in_flight_.completed(ctx->comm));
}

DoneFields Writer::DoneOf(const StagedRec& d) const {
  DoneFields f;
  f.event_id = d.id;
  f.done_ns = Rel(d.t0_ns);
  f.has_gpu = (d.flags & kFlagHasGpu) != 0;
  f.gpu_start = d.done.gpu_start;
  f.gpu_stop = d.done.gpu_stop;
  f.kernel_channels = d.done.kernel_channels;
  f.proxy_ops = d.done.proxy_ops;
  f.proxy_bytes = d.done.proxy_bytes;
  return f;
}

void Writer::EncodeOp(const StagedRec& r, const StagedRec* done) {
  // Definitions first: strings, a communicator named only by its events.
  OpFields f;
  f.func = Intern(r.op.func);
  f.datatype = Intern(r.op.datatype);
  f.algo = Intern(r.op.algo);
  // The record holds a symmetric kernel's variant where the others' protocol
  // is (record.h); NCCL passes such a kernel no protocol.
  f.is_sym_coll = (r.flags & kFlagSymColl) != 0;
  if (f.is_sym_coll) {
    f.kernel_variant = Intern(r.op.kernel_variant);
  } else {
    f.proto = Intern(r.op.proto);
  }
  auto ann = comm_announced_.find(r.comm);
  if (ann == comm_announced_.end() || !ann->second) {
    for (Context* ctx : core_->ContextsSnapshot()) {
      // Ids are reused: the one context of that id whose CommFinalize is
      // not written yet (an id is given again only after it is).
      if (ctx->comm != r.comm || ctx->finalize_written.load(std::memory_order_acquire)) continue;
      uint64_t h = ctx->event_comm_hash.load(std::memory_order_relaxed);
      if (h != 0) {
        EncodeCommInit(ctx, true, h);
        comm_announced_[r.comm] = true;
      }
    }
  }
  bool tracked = (r.flags & kFlagTracked) != 0;
  const bool events = core_->events();
  // Completions from CUDA events: the op joins its launch, which may have
  // completed already (the writer saw its event before the op's record).
  StagedRec ev_done;
  uint64_t ev_started_ns = 0;
  bool without_event = false;  // sampled: its launch recorded no event of its own
  // NCCL's mask may have lacked the completion source when this op was
  // enqueued (a MaskChange took it away): its completion may never come,
  // and with CUDA events it would be an earlier launch's. One that comes
  // folded (its kernel channels all stopped) is real.
  const bool unsure = tracked && done == nullptr && mask_watch_.Unsure(r.t0_ns);
  if (events && tracked && done == nullptr && !unsure) {
    uint64_t done_ns = 0;
    switch (launches_.Bind(r.op.launch_id, r.id, &done_ns, &ev_started_ns, &without_event)) {
      case LaunchTable::Bound::kWatched:
        break;
      case LaunchTable::Bound::kDone:
        ev_done = r;
        ev_done.kind = kRecOpDone;
        ev_done.flags = 0;
        ev_done.done = {};
        // Seen done before this record came: no earlier than its enqueue ended.
        ev_done.t0_ns = done_ns > r.t1_ns ? done_ns : r.t1_ns;
        done = &ev_done;
        break;
      case LaunchTable::Bound::kUnknown:  // the launch's record was lost
        tracked = false;
        break;
    }
  }
  if (done != nullptr) {
    in_flight_.EnqueuedCompleted(r.comm, r.t0_ns, done->t0_ns);
  } else {
    const int32_t peer = r.etype == kEvP2p ? r.op.peer : 0;  // a collective's record holds its root there
    InFlightTable::Op o{r.comm, r.etype, r.op.seq, r.op.func, r.op.count, peer, r.t0_ns, r.nchannels, false, r.t1_ns};
    o.unsure = unsure;
    o.unsure_at = cycle_now_;
    // With CUDA events nothing waits for it (its handle was freed at its
    // stop); with kernel channels its handle waits, and a completion may
    // still come until ReleaseUnsure lets it go.
    in_flight_.Enqueued(r.id, o, tracked && !(unsure && events));
  }
  // A folded op needs no id unless raw records may name it as their parent.
  if (done == nullptr || core_->config().raw_kinds != 0) f.event_id = r.id;
  f.comm = r.comm;
  f.p2p = r.etype == kEvP2p;
  f.seq = r.op.seq;
  f.count = r.op.count;
  if (f.p2p) {
    f.peer = r.op.peer;
  } else {
    f.root = r.op.root;
  }
  f.nchannels = r.nchannels;
  f.nwarps = r.nwarps;
  f.start_ns = Rel(r.t0_ns);
  f.enqueue_ns = r.t1_ns - r.t0_ns;
  f.parent_id = r.parent_id;
  f.send_buff = r.op.send_buff;
  f.recv_buff = r.op.recv_buff;
  f.traffic_bytes = events ? 0 : r.op.traffic_bytes;  // the same word holds the launch id
  // One word: v1's reduction op, or a later version's user tag.
  if (core_->api_version() == 1) {
    f.op = r.op.op;
  } else {
    f.user_tag = r.op.user_tag;
  }
  f.collnet = (r.flags & kFlagCollnet) != 0;
  f.nvls = (r.flags & kFlagNvls) != 0;
  f.p2p_seq = r.op.p2p_seq;
  f.completion_tracked = tracked && !unsure;
  f.launch_without_event = tracked && without_event;
  f.graph = (r.flags & kFlagGraph) != 0;
  if (unsure) {
    f.no_completion = 4;  // NO_COMPLETION_MASK
  } else if (events && !tracked) {
    f.no_completion = (r.flags & kFlagGraph)      ? 1   // NO_COMPLETION_GRAPH
                      : (r.flags & kFlagNoLaunch) ? 2   // NO_COMPLETION_NO_LAUNCH
                                                  : 3;  // NO_COMPLETION_NO_EVENT
  }
  if (done != nullptr) {
    DoneFields d = DoneOf(*done);
    d.from_event = done == &ev_done;
    if (d.from_event && ev_started_ns != 0) d.started_ns = Rel(ev_started_ns);
    d.from_later_event = d.from_event && without_event;
    enc_.Op(f, &d);
    ++completions_;
  } else {
    enc_.Op(f, nullptr);
  }
}

void Writer::EncodeOpDone(const StagedRec& r) {
  enc_.OpDone(DoneOf(r));
  ++completions_;
  in_flight_.Completed(r.id, r.comm, r.t0_ns);
}

void Writer::EncodeEvStart(const StagedRec& r) {
  EvStartStrings s;
  if (r.etype == kEvCollApi || r.etype == kEvP2pApi || r.etype == kEvCeColl) {
    s.func = Intern(r.api.func);
    s.datatype = Intern(r.api.datatype);
    if (r.etype == kEvCeColl) s.sync_strategy = Intern(r.api.sync_strategy);
  }
  enc_.EvStart(r, Rel(r.t0_ns), s);
}

void Writer::NoteLaunch(const StagedRec& r) {
  launches_.Launched(r.id, static_cast<StreamEvents*>(r.launch.events), r.launch.n, r.launch.tid,
                     (r.flags & kFlagNoStartEvent) == 0, r.launch.unsampled == 0);
}

void Writer::PollLaunches(uint64_t now) {
  std::lock_guard<std::mutex> lock(CudaCallMutex());
  if (!CudaCallsAllowed()) return;  // the process is exiting
  const CudaDriver& cuda = core_->cuda();
  if (!capture_mode_set_) {
    // A CUDA graph captured in the global mode by another thread would be
    // invalidated by this thread's event queries: ours are relaxed (what
    // PyTorch's watchdog does for its own queries).
    capture_mode_set_ = true;
    if (cuda.thread_exchange_capture_mode != nullptr) {
      int mode = kCudaCaptureModeRelaxed;
      cuda.thread_exchange_capture_mode(&mode);
    }
  }
  if (launches_.pending() == 0) return;
  uint64_t gone = 0;
  launches_.Poll(
      [] { return NowNs(); },
      [&](uint64_t op, uint64_t done_ns, uint64_t started_ns, bool from_later) {
        const InFlightTable::Op* o = in_flight_.Find(op);
        if (o == nullptr) return;
        const uint32_t comm = o->comm;
        DoneFields d;
        d.event_id = op;
        d.done_ns = Rel(done_ns);
        d.from_event = true;
        if (started_ns != 0) d.started_ns = Rel(started_ns);
        d.from_later_event = from_later;
        enc_.OpDone(d);
        ++completions_;
        in_flight_.Completed(op, static_cast<uint16_t>(comm), done_ns);
      },
      [&](uint64_t op) {
        in_flight_.Forget(op);
        ++gone;
      });
  launches_gone_ += gone;
  if (gone > 0 && !warned_context_gone_) {
    warned_context_gone_ = true;
    core_->Log(nccl::kLogWarn,
               "a CUDA context was destroyed with kernel launches pending: the completion of %llu operations is "
               "unknown; they are no longer watched",
               static_cast<unsigned long long>(gone));
  }
}

HeartbeatFields Writer::HeartbeatOf(uint64_t now) const {
  uint64_t recorded = 0, dropped = core_->no_thread_slot();
  for (uint32_t i = 0; i < core_->thread_count(); ++i) {
    const ThreadCounters& c = core_->thread_buf(i)->counters;
    recorded += c.recorded.load(std::memory_order_relaxed);
    dropped += c.ring_full.load(std::memory_order_relaxed) + c.pool_exhausted.load(std::memory_order_relaxed);
  }
  HeartbeatFields h;
  h.time_ns = Rel(now);
  h.ops_in_flight = in_flight_.size();
  h.events_recorded = recorded;
  h.events_dropped = dropped + RecordsLost();
  h.bytes_written = file_.bytes_written();
  return h;
}

}  // namespace ncclwatch::plugin
