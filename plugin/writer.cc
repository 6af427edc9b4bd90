#include "plugin/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "plugin/clock.h"
#include "plugin/version.h"
#include "proto/trace_fields.h"

namespace ncclwatch::plugin {
namespace {

// Field numbers come from the schema (generated; proto/trace_fields_test).
namespace tf = ::ncclwatch::trace_fields;

constexpr size_t kBufBytes = 8 << 20;         // encode buffer
constexpr size_t kWriteThreshold = 4 << 20;   // write early past this
constexpr size_t kRecordHeadroom = 64 << 10;  // room kept for one record
constexpr uint32_t kDrainPerRing = 1 << 16;
constexpr size_t kMaxStuckOps = 4096;
constexpr int64_t kGpuReanchorNs = 2000;  // re-anchor the GPU clock for a 2 us tighter pair


uint32_t OpKindOf(uint32_t etype) { return etype == kEvP2p ? 1 : 0; }

// Reads a NUL-terminated string NCCL handed us, bounded.
std::string SafeString(const char* s) {
  if (s == nullptr) return "";
  size_t n = strnlen(s, 256);
  return std::string(s, n);
}

}  // namespace

Writer::Writer(Profiler* prof, std::string file_name_override)
    : prof_(prof), override_(std::move(file_name_override)), buf_(kBufBytes), wire_(buf_.data(), buf_.size()) {}

Writer::~Writer() = default;

bool Writer::Open(std::string* error) {
  const Config& c = prof_->config();
  ticks_.Init(c.clock, ReadClockFacts(prof_->clock_probe()));
  info_ = ReadProcessInfo();
  ClockPair cp = ReadClockPair();
  mono_base_ = cp.mono_ns;
  realtime_base_ = cp.realtime_ns;
  clock_error_ = cp.error_ns;

  struct stat st;
  if (stat(c.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *error = "NCCLWATCH_DIR '" + c.dir + "' is not a directory (" + (errno ? strerror(errno) : "not a directory") + ")";
    return false;
  }
  std::string base;
  if (!override_.empty()) {
    base = c.dir + "/" + override_;
  } else {
    base = c.dir + "/" + SafeName(info_.hostname) + "-" + std::to_string(info_.pid) + "-" +
           std::to_string(realtime_base_ / 1000000);
  }
  if (!file_.Create(base, override_.empty() ? ".ncclwatch" : "", error)) return false;
  EncodeHeader();
  WriteOut();
  if (file_.records_lost() > 0) {
    *error = "cannot write trace file '" + file_.path() + "': " + file_.last_error();
    file_.Discard();
    return false;
  }
  uint64_t now = NowNs();
  next_flush_ = now + uint64_t{c.flush_ms} * 1000000;
  next_heartbeat_ = now + uint64_t{c.heartbeat_ms} * 1000000;
  return true;
}

void Writer::Start() {
  // The thread starts with every signal blocked: the host's handlers never
  // run on it, and a write past RLIMIT_FSIZE returns EFBIG instead of
  // killing the process with SIGXFSZ.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  thread_ = std::thread([this] { Loop(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  running_ = true;
}

void Writer::StopAndClose() {
  if (running_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    running_ = false;
  }
  file_.Close();
}

void Writer::NotifyCommInit(Context* ctx) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cold_.push_back({Cold::kInit, ctx, ctx->init_ns});
  }
  cv_.notify_all();
}

void Writer::NotifyCommFinalize(Context* ctx, uint64_t time_ns) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cold_.push_back({Cold::kFinalize, ctx, time_ns});
  }
  cv_.notify_all();
}

void Writer::FlushNow() {
  if (!running_) return;
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t want = ++flush_req_;
  cv_.notify_all();
  // Bounded: a stalled disk must not hang NCCL's finalize.
  done_cv_.wait_for(lock, std::chrono::seconds(5), [&] { return flush_done_ >= want || stop_; });
}

void Writer::Loop() {
  const Config& c = prof_->config();
  const auto tick = std::chrono::milliseconds(std::min<uint32_t>(10, c.flush_ms));
  // During a burst the rings are drained every millisecond (writes still
  // follow NCCLWATCH_FLUSH_MS): the hot path never waits, so the only guard
  // against a full ring is a consumer that keeps up.
  const auto burst_tick = std::chrono::milliseconds(1);
  for (;;) {
    bool stopping;
    uint64_t req;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, burst_ ? burst_tick : tick, [&] { return stop_ || flush_req_ > flush_done_; });
      stopping = stop_;
      req = flush_req_;
    }
    uint64_t now = NowNs();
    bool want_write = stopping || req > flush_done_ || now >= next_flush_;
    Cycle(now, want_write);
    if (stopping) {
      // Final records: drops and a clean finalize if every communicator ended.
      bool clean = true;
      for (Context* ctx : prof_->ContextsSnapshot())
        if (!ctx->finalized.load(std::memory_order_acquire)) clean = false;
      MaybeEncodeDrops(now, true);
      EncodeFinalize(NowNs(), clean);
      WriteOut();
      LogSummary();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      flush_done_ = std::max(flush_done_, req);
    }
    done_cv_.notify_all();
    if (stopping) return;
  }
}

void Writer::Cycle(uint64_t now, bool force_write) {
  std::vector<Cold> cold;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cold.swap(cold_);
  }
  // After a lost write, communicators are defined again.
  if (reannounce_) {
    reannounce_ = false;
    comm_announced_.clear();
    for (Context* ctx : prof_->ContextsSnapshot())
      if (!ctx->finalized.load(std::memory_order_acquire)) {
        EncodeCommInit(ctx, false, ctx->comm_hash);
        comm_announced_[ctx->comm] = ctx->comm_hash != 0;
      }
  }
  // Communicators defined before the operations that name them.
  for (const Cold& c : cold)
    if (c.kind == Cold::kInit) {
      EncodeCommInit(c.ctx, false, c.ctx->comm_hash);
      comm_announced_[c.ctx->comm] = c.ctx->comm_hash != 0;
    }
  ticks_.Refine();  // before the first conversion of ticks
  if (drain_paused_.load(std::memory_order_relaxed)) {
    staged_.clear();
    staged_done_.clear();
  } else {
    DrainRings();
  }
  EncodeStaged();
  for (const Cold& c : cold)
    if (c.kind == Cold::kFinalize) {
      EncodeCommFinalize(c.ctx, c.time_ns);
      in_flight_.CommFinalized(c.ctx->comm);
    }
  ReclaimThreads();
  MaybeEncodeDrops(now, false);
  if (now >= next_heartbeat_) {
    EncodeHeartbeat(now);
    next_heartbeat_ = now + uint64_t{prof_->config().heartbeat_ms} * 1000000;
  }
  ReclaimLost(now);
  MaybeStuckReport(now);
  if (force_write || wire_.size() >= kWriteThreshold) {
    WriteOut();
    next_flush_ = now + uint64_t{prof_->config().flush_ms} * 1000000;
  }
}

void Writer::DrainRings() {
  staged_.clear();
  staged_done_.clear();
  uint32_t busiest = 0;
  const uint32_t n = prof_->thread_count();
  for (uint32_t i = 0; i < n; ++i) {
    ThreadBuf* tb = prof_->thread_buf(i);
    if (tb->owner.load(std::memory_order_acquire) == kBufFree) continue;
    const uint32_t got = tb->ring.Drain(kDrainPerRing, [&](const Rec& r) {
      if (r.kind == kRecOpDone) staged_done_[r.id] = staged_.size();
      // From here on, record times are CLOCK_MONOTONIC ns.
      staged_.push_back({r, ticks_.ToNs(r.t0_ticks), r.kind == kRecOp ? ticks_.ToNs(r.t1) : 0});
    });
    busiest = std::max(busiest, got * 8 / tb->ring.capacity());
  }
  // A ring an eighth full or more since the last drain: a burst is on (a
  // pipelined loop of small operations fills 2,000 records in a few ms).
  burst_ = busiest > 0;
}

void Writer::EncodeStaged() {
  consumed_.assign(staged_.size(), false);
  for (size_t i = 0; i < staged_.size(); ++i) {
    if (consumed_[i]) continue;
    const StagedRec& r = staged_[i];
    const StagedRec* done = nullptr;
    if (r.kind == kRecOp) {
      auto it = staged_done_.find(r.id);
      if (it != staged_done_.end() && it->second > i) {
        done = &staged_[it->second];
        consumed_[it->second] = true;
      }
    }
    Emit(r, done);
  }
}

void Writer::Emit(const StagedRec& r, const StagedRec* done) {
  switch (r.kind) {
    case kRecOp:
      EncodeOp(r, done);
      break;
    case kRecOpDone:
      EncodeOpDone(r);
      break;
    case kRecEvStart:
      EncodeEvStart(r);
      break;
    case kRecEvStop:
      EncodeEvStop(r);
      break;
    case kRecEvState:
      EncodeEvState(r);
      break;
    default:
      break;
  }
}

void Writer::ReclaimThreads() {
  const uint32_t n = prof_->thread_count();
  for (uint32_t i = 0; i < n; ++i) {
    ThreadBuf* tb = prof_->thread_buf(i);
    if (tb->owner.load(std::memory_order_acquire) != kBufOrphaned || !tb->ring.Empty()) continue;
    bool live = false;
    for (uint32_t k = 0; k < tb->nslots && !live; ++k)
      live = tb->slots[k].state.load(std::memory_order_acquire) == kSlotLive;
    if (!live) tb->owner.store(kBufFree, std::memory_order_release);
  }
}

size_t Writer::BeginRecord() {
  if (wire_.size() + kRecordHeadroom > buf_.size()) WriteOut();
  if (wire_.size() == 0) {
    // A new batch: its base time opens the Op start chain.
    batch_base_ = Rel(NowNs());
    prev_op_start_ = batch_base_;
  }
  ++records_;
  return wire_.BeginRecord();
}

void Writer::EndRecord(size_t at) { wire_.EndRecord(at); }

void Writer::WriteOut() {
  if (wire_.size() == 0 || !file_.open()) return;
  Wire h(head_buf_, sizeof(head_buf_));
  size_t at = h.BeginRecord();
  size_t m = h.BeginMessage(tf::Record::kBatch);
  h.U64(tf::Batch::kSeq, ++batch_seq_);
  h.U64(tf::Batch::kTimeNs, batch_base_);
  h.U64(tf::Batch::kRecordsBefore, file_.records_written());
  h.EndMessage(m);
  h.EndRecord(at);
  const bool ok = file_.AppendBatch(h.data(), h.size(), wire_.data(), wire_.size(), records_ + 1);
  records_ = 0;
  wire_.Reset();
  if (ok) return;
  // A failed write (disk full, RLIMIT_FSIZE, I/O error): the batch is lost
  // and counted; definitions in it must be written again before use.
  if (!write_error_logged_) {
    write_error_logged_ = true;
    prof_->Log(nccl::kLogWarn, "writing %s failed (%s); records are being dropped and counted until writes succeed",
               file_.path().c_str(), file_.last_error().c_str());
  }
  string_ptr_ids_.clear();
  string_ids_.clear();
  gpu_base_set_ = false;
  reannounce_ = true;
  // The loss itself must show in the file: a batch of its own with the drop
  // counts and a heartbeat (a few dozen bytes; see TraceFile::AppendNotice).
  file_.AppendNotice(3, [this](uint8_t* buf, size_t cap) -> size_t {
    Wire w(buf, cap);
    const uint64_t now = NowNs();
    size_t at = w.BeginRecord();
    size_t m = w.BeginMessage(tf::Record::kBatch);
    w.U64(tf::Batch::kSeq, ++batch_seq_);
    w.U64(tf::Batch::kTimeNs, Rel(now));
    w.U64(tf::Batch::kRecordsBefore, file_.records_written());
    w.EndMessage(m);
    w.EndRecord(at);
    at = w.BeginRecord();
    EncodeDrops(&w, now);
    w.EndRecord(at);
    at = w.BeginRecord();
    m = w.BeginMessage(tf::Record::kHeartbeat);
    w.U64(tf::Heartbeat::kTimeNs, Rel(now));
    w.U64(tf::Heartbeat::kOpsInFlight, in_flight_.size());
    w.EndMessage(m);
    w.EndRecord(at);
    return w.ok() ? w.size() : 0;
  });
}

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

void Writer::DropCounts(uint64_t* ring_full, uint64_t* pool, uint64_t* no_slot, uint64_t* foreign, uint64_t* bad) const {
  *ring_full = *pool = *foreign = *bad = 0;
  for (uint32_t i = 0; i < prof_->thread_count(); ++i) {
    const ThreadCounters& c = prof_->thread_buf(i)->counters;
    *ring_full += c.ring_full.load(std::memory_order_relaxed);
    *pool += c.pool_exhausted.load(std::memory_order_relaxed);
    *foreign += c.foreign_parent.load(std::memory_order_relaxed);
    *bad += c.bad_parent.load(std::memory_order_relaxed);
  }
  *no_slot = prof_->no_thread_slot();
}

uint64_t Writer::UntrackedOps() const {
  uint64_t n = 0;
  for (uint32_t i = 0; i < prof_->thread_count(); ++i)
    n += prof_->thread_buf(i)->counters.untracked_ops.load(std::memory_order_relaxed);
  return n;
}

void Writer::EncodeDrops(Wire* w, uint64_t now) const {
  uint64_t ring_full, pool, no_slot, foreign, bad;
  DropCounts(&ring_full, &pool, &no_slot, &foreign, &bad);
  size_t m = w->BeginMessage(tf::Record::kDrops);
  w->U64(tf::Drops::kTimeNs, Rel(now));
  w->U64(tf::Drops::kRingFull, ring_full);
  w->U64(tf::Drops::kPoolExhausted, pool);
  w->U64(tf::Drops::kNoThreadSlot, no_slot);
  w->U64(tf::Drops::kWriteFailed, file_.records_lost());
  w->U64(tf::Drops::kForeignParent, foreign);
  w->U64(tf::Drops::kBadParent, bad);
  w->Bytes(tf::Drops::kLastWriteError, file_.last_error().data(), file_.last_error().size());
  w->U64(tf::Drops::kCompletionUntracked, UntrackedOps());
  w->EndMessage(m);
}

void Writer::MaybeEncodeDrops(uint64_t now, bool force) {
  uint64_t ring_full, pool, no_slot, foreign, bad;
  DropCounts(&ring_full, &pool, &no_slot, &foreign, &bad);
  const uint64_t untracked = UntrackedOps();
  uint64_t sum = ring_full + pool + foreign + bad + no_slot + file_.records_lost() + untracked;
  if (!force && sum == last_drops_sum_) return;
  if (force && sum == 0) return;
  last_drops_sum_ = sum;
  if (!warned_pool_ && pool + untracked > 0) {
    warned_pool_ = true;
    LogHandleExhaustion(now);
  }
  // Once per file: events lost for want of room (write failures have their own warning).
  if (!warned_drops_ && ring_full + pool + no_slot > 0) {
    warned_drops_ = true;
    // A larger buffer gives more threads their rings, and larger rings; the
    // handles per thread are fixed (LogHandleExhaustion says what holds them).
    char hint[96] = "";
    if (ring_full + no_slot > 0)
      snprintf(hint, sizeof(hint), "; a larger NCCLWATCH_BUFFER_MB (now %llu) makes room",
               static_cast<unsigned long long>(prof_->config().buffer_mb));
    prof_->Log(nccl::kLogWarn,
               "events are being dropped (%llu: per-thread buffer full %llu, event handles exhausted %llu, "
               "threads without a buffer %llu); the file counts them%s",
               static_cast<unsigned long long>(ring_full + pool + no_slot), static_cast<unsigned long long>(ring_full),
               static_cast<unsigned long long>(pool), static_cast<unsigned long long>(no_slot), hint);
  }
  size_t at = BeginRecord();
  EncodeDrops(&wire_, now);
  EndRecord(at);
}

void Writer::LogHandleExhaustion(uint64_t now) {
  // What holds the handles: a thread's slots are live from an operation's
  // start until its completion (every kernel channel stopped, and every proxy
  // operation when those are captured). Which operations are in flight, and
  // how far their channels got, tells a backlog (channels still arriving)
  // from operations that will never complete (channels missing).
  uint32_t worst = 0;
  uint64_t worst_count = 0;
  for (uint32_t i = 0; i < prof_->thread_count(); ++i) {
    const ThreadCounters& tc = prof_->thread_buf(i)->counters;
    uint64_t c = tc.pool_exhausted.load(std::memory_order_relaxed) + tc.untracked_ops.load(std::memory_order_relaxed);
    if (c > worst_count) {
      worst_count = c;
      worst = i;
    }
  }
  ThreadBuf* tb = prof_->thread_buf(worst);
  uint32_t live = 0, live_ops = 0, waiting_channels = 0;
  const Slot* oldest = nullptr;
  for (uint32_t k = 0; k < tb->nslots; ++k) {
    const Slot& s = tb->slots[k];
    if (s.state.load(std::memory_order_acquire) != kSlotLive) continue;
    ++live;
    uint32_t kind = s.kind.load(std::memory_order_relaxed);
    if (kind != kEvColl && kind != kEvP2p) continue;
    ++live_ops;
    if (s.kernel_stopped.load(std::memory_order_relaxed) < s.expect_channels.load(std::memory_order_relaxed))
      ++waiting_channels;
    if (oldest == nullptr || s.id.load(std::memory_order_relaxed) < oldest->id.load(std::memory_order_relaxed))
      oldest = &s;
  }
  char what[512] = "none";
  if (oldest != nullptr) {
    const uint64_t id = oldest->id.load(std::memory_order_relaxed);
    // Its name and age come from its Op record, if already drained.
    const InFlightTable::Op* f = in_flight_.Find(id);
    char who[128];
    if (f != nullptr && now >= f->start_ns)
      snprintf(who, sizeof(who), "%s (event %llu, %.1f ms ago)", f->func != nullptr ? f->func : "?",
               static_cast<unsigned long long>(id), double(now - f->start_ns) / 1e6);
    else
      snprintf(who, sizeof(who), "an operation whose record is not yet written (event %llu)",
               static_cast<unsigned long long>(id));
    snprintf(what, sizeof(what),
             "%s: kernel channels %u expected, %u started, %u stopped; proxy operations "
             "%u started, %u stopped; enqueued %u",
             who, oldest->expect_channels.load(std::memory_order_relaxed),
             oldest->kernel_started.load(std::memory_order_relaxed),
             oldest->kernel_stopped.load(std::memory_order_relaxed),
             oldest->proxy_started.load(std::memory_order_relaxed),
             oldest->proxy_stopped.load(std::memory_order_relaxed), oldest->enqueued.load(std::memory_order_relaxed));
  }
  prof_->Log(nccl::kLogWarn,
             "event handles exhausted on thread %u: %u of %u handles in use, %u by operations in flight (%u waiting "
             "for kernel channels); %zu operations in flight in all; the oldest: %s. Operations go on being recorded, "
             "without completion tracking, until handles are free",
             tb->tid.load(std::memory_order_relaxed), live, tb->nslots, live_ops, waiting_channels, in_flight_.size(),
             what);
}

void Writer::LogSummary() {
  uint64_t ring_full, pool, no_slot, foreign, bad;
  DropCounts(&ring_full, &pool, &no_slot, &foreign, &bad);
  const uint64_t dropped = ring_full + pool + no_slot + file_.records_lost();
  prof_->Log(dropped > 0 ? nccl::kLogWarn : nccl::kLogInfo,
             "closed %s: %llu records, %llu bytes; dropped %llu events (buffer full %llu, handles exhausted %llu, "
             "no buffer %llu, write failed %llu); %llu operations without completion tracking (handles exhausted); "
             "%llu completions implied by a later one",
             file_.path().c_str(), static_cast<unsigned long long>(file_.records_written()),
             static_cast<unsigned long long>(file_.bytes_written()), static_cast<unsigned long long>(dropped),
             static_cast<unsigned long long>(ring_full), static_cast<unsigned long long>(pool),
             static_cast<unsigned long long>(no_slot), static_cast<unsigned long long>(file_.records_lost()),
             static_cast<unsigned long long>(UntrackedOps()), static_cast<unsigned long long>(in_flight_.lost_completions()));
}

Slot* Writer::SlotOf(uint64_t id) {
  const uint32_t ti = ThreadOfId(id);
  if (ti < 1 || ti > prof_->thread_count()) return nullptr;
  ThreadBuf* tb = prof_->thread_buf(ti - 1);
  for (uint32_t k = 0; k < tb->nslots; ++k)
    if (tb->slots[k].id.load(std::memory_order_relaxed) == id) return &tb->slots[k];
  return nullptr;
}

void Writer::ReclaimLost(uint64_t now) {
  // The file keeps the facts (the Op without a completion); only the watch
  // and the handle end. See InFlightTable.
  const uint64_t before = in_flight_.lost_completions();
  const uint64_t found = in_flight_.ReclaimLost(now, [this](uint64_t id) {
    // Free its handle, unless its completion is being pushed right now.
    if (Slot* s = SlotOf(id)) {
      uint32_t z = 0;
      if (s->state.load(std::memory_order_acquire) == kSlotLive && s->done.compare_exchange_strong(z, 1))
        s->state.store(kSlotDone, std::memory_order_release);
    }
  });
  if (found > 0 && before == 0)
    prof_->Log(nccl::kLogInfo,
               "an operation's kernel-channel events did not all arrive from NCCL; a later operation on its "
               "communicator completed, so it did too: no longer watched (counted in the closing line)");
}

void Writer::MaybeStuckReport(uint64_t now) {
  const double stuck_sec = prof_->config().stuck_sec;
  if (stuck_sec <= 0 || in_flight_.empty()) return;
  const uint64_t threshold = static_cast<uint64_t>(stuck_sec * 1e9);
  const uint64_t trigger = in_flight_.StuckTrigger(now, threshold);
  if (trigger == 0) return;

  // Live progress of every proxy operation serving an op in flight.
  std::unordered_map<uint64_t, std::vector<const Slot*>> proxies;
  for (const Slot* s = prof_->slots_begin(); s < prof_->slots_end(); ++s) {
    if (s->state.load(std::memory_order_acquire) == kSlotFree) continue;
    if (s->kind.load(std::memory_order_relaxed) != kEvProxyOp) continue;
    uint64_t op = s->op_id.load(std::memory_order_relaxed);
    if (op != 0 && in_flight_.Has(op)) proxies[op].push_back(s);
  }
  std::vector<std::pair<uint64_t, InFlightTable::Op*>> ops = in_flight_.OldestFirst(kMaxStuckOps);
  std::vector<uint32_t> funcs;
  for (auto& o : ops) funcs.push_back(Intern(o.second->func));

  size_t at = BeginRecord();
  size_t m = wire_.BeginMessage(tf::Record::kStuck);
  wire_.U64(tf::StuckReport::kTimeNs, Rel(now));
  wire_.Double(tf::StuckReport::kThresholdSec, stuck_sec);
  wire_.U64(tf::StuckReport::kTriggerEventId, trigger);
  for (size_t i = 0; i < ops.size(); ++i) {
    uint64_t id = ops[i].first;
    InFlightTable::Op& f = *ops[i].second;
    f.reported = true;
    size_t o = wire_.BeginMessage(tf::StuckReport::kOps);
    wire_.U64(tf::InFlightOp::kEventId, id);
    wire_.U64(tf::InFlightOp::kComm, f.comm);
    wire_.U64(tf::InFlightOp::kKind, OpKindOf(f.kind));
    wire_.U64(tf::InFlightOp::kSeq, f.seq);
    wire_.U64(tf::InFlightOp::kFunc, funcs[i]);
    wire_.U64(tf::InFlightOp::kCount, f.count);
    if (f.kind == kEvP2p) wire_.S64(tf::InFlightOp::kPeer, f.peer);
    wire_.U64(tf::InFlightOp::kStartNs, Rel(f.start_ns));
    wire_.U64(tf::InFlightOp::kAgeNs, now - f.start_ns);
    wire_.Bool(tf::InFlightOp::kEnqueued, true);  // the table holds only enqueued ops (Op records)
    wire_.U64(tf::InFlightOp::kNchannels, f.nchannels);
    // The op's slot, if it still holds this op.
    const Slot* slot = SlotOf(id);
    if (slot != nullptr) {
      wire_.U64(tf::InFlightOp::kKernelChannelsStarted, slot->kernel_started.load(std::memory_order_relaxed));
      wire_.U64(tf::InFlightOp::kKernelChannelsStopped, slot->kernel_stopped.load(std::memory_order_relaxed));
      wire_.U64(tf::InFlightOp::kProxyOpsStarted, slot->proxy_started.load(std::memory_order_relaxed));
      wire_.U64(tf::InFlightOp::kProxyOpsStopped, slot->proxy_stopped.load(std::memory_order_relaxed));
    }
    auto pit = proxies.find(id);
    if (pit != proxies.end()) {
      for (const Slot* p : pit->second) {
        uint64_t d = p->px_desc.load(std::memory_order_relaxed);
        uint64_t g = p->px_progress.load(std::memory_order_relaxed);
        size_t q = wire_.BeginMessage(tf::InFlightOp::kProxy);
        wire_.U64(tf::ProxyProgress::kChannel, PxChannel(d));
        wire_.S64(tf::ProxyProgress::kPeer, PxPeer(d));
        wire_.Bool(tf::ProxyProgress::kIsSend, PxIsSend(d));
        wire_.I32(tf::ProxyProgress::kNsteps, PxNsteps(d));
        wire_.I32(tf::ProxyProgress::kLastStep, PxStep(g));
        wire_.U64(tf::ProxyProgress::kLastState, PxState(g));
        wire_.U64(tf::ProxyProgress::kLastUpdateNs, Rel(ticks_.ToNs(p->px_update_ns.load(std::memory_order_relaxed))));
        wire_.Bool(tf::ProxyProgress::kStopped, PxStopped(g));
        wire_.EndMessage(q);
      }
    }
    wire_.EndMessage(o);
  }
  wire_.EndMessage(m);
  EndRecord(at);
  WriteOut();
  prof_->Log(nccl::kLogWarn, "operation in flight for over %.1f s: wrote a stuck report of %zu operations to %s",
             stuck_sec, ops.size(), file_.path().c_str());
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
