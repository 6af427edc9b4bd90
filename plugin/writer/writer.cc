#include "plugin/writer/writer.h"

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "plugin/core/clock.h"
#include "plugin/core/version.h"
#include "plugin/writer/own_file.h"

namespace ncclwatch::plugin {

namespace {

constexpr size_t kBufBytes = 8 << 20;         // encode buffer
constexpr size_t kWriteThreshold = 4 << 20;   // write early past this
constexpr size_t kRecordHeadroom = 64 << 10;  // room kept for one record
constexpr uint32_t kDrainPerRing = 1 << 16;

// Records whose Rec::t1 is a time in ticks (an Op's enqueue end); elsewhere
// it holds other things (an EvStart's thread id).
bool HasEndTicks(const Rec& r) { return r.kind == kRecOp; }
// A launch record has no times: the launching thread reads no clock for
// it (a launch captured raw has its times in its EvStart and EvStop).
bool HasTicks(const Rec& r) { return r.kind != kRecLaunch; }

}  // namespace

Writer::Writer(std::unique_ptr<CoreView> core, std::string file_name_override)
    : core_(std::move(core)),
      override_(std::move(file_name_override)),
      buf_(kBufBytes),
      wire_(buf_.data(), buf_.size()) {}

Writer::~Writer() = default;

bool Writer::Open(std::string* error) {
  const Config& c = core_->config();
  ticks_.Init(c.clock, ReadClockFacts(core_->clock_probe()));
  info_ = ReadProcessInfo();
  ClockPair cp = ReadClockPair();
  mono_base_ = cp.mono_ns;
  realtime_base_ = cp.realtime_ns;
  clock_error_ = cp.error_ns;

  struct stat st;
  if (StatPath(c.dir, true, &st) != 0 || !S_ISDIR(st.st_mode)) {
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
  if (!file_.Create(base, override_.empty() ? ".ncclwatch" : "", c.file_mode, error)) return false;
  if (!file_.taken().empty())
    core_->Log(nccl::kLogWarn, "trace file: %s (someone else's?); writing %s instead", file_.taken().c_str(),
               file_.path().c_str());
  EncodeHeader();
  WriteOut();
  if (file_.records_lost() > 0) {
    *error = "cannot write trace file '" + file_.path() + "': " + file_.last_error();
    file_.Discard();
    return false;
  }
  // The command's output file now, beside the trace, never later: a name
  // planted there later cannot catch us.
  if (!c.on_stuck.empty()) {
    std::string why, note;
    if (!on_stuck_.Prepare(c.on_stuck, file_.path() + ".on_stuck.txt", c.file_mode, &why, file_.fd(), file_.path(),
                           &note))
      core_->Log(nccl::kLogWarn, "NCCLWATCH_ON_STUCK is off: %s", why.c_str());
    else if (!note.empty())
      core_->Log(nccl::kLogWarn, "NCCLWATCH_ON_STUCK: %s", note.c_str());
  }
  uint64_t now = NowNs();
  // Where completions come from, as decided at init (Profiler::
  // ChooseCompletions): the launch's CUDA events, or kernel channels (API v4+
  // with KernelCh in the mask); nothing is tracked otherwise.
  uint64_t source = 0;
  if (core_->events()) {
    source = nccl::kKernelLaunch;
  } else if (core_->api_version() >= 4 && (c.nccl_mask & nccl::kKernelCh) != 0) {
    source = nccl::kKernelCh;
  }
  mask_watch_ = MaskWatch(static_cast<uint32_t>(c.nccl_mask), source, now);
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
    cv_.NotifyAll();
    thread_.join();
    running_ = false;
  }
  on_stuck_.Close();  // a running command goes on under its keeper
  file_.Close();
}

void Writer::NotifyCommInit(Context* ctx) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cold_.push_back({Cold::kInit, ctx, ctx->init_ns});
  }
  cv_.NotifyAll();
}

void Writer::NotifyCommFinalize(Context* ctx, uint64_t time_ns) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cold_.push_back({Cold::kFinalize, ctx, time_ns});
  }
  cv_.NotifyAll();
}

void Writer::FlushNow() {
  if (!running_) return;
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t want = ++flush_req_;
  cv_.NotifyAll();
  // Bounded: a stalled disk must not hang NCCL's finalize.
  done_cv_.WaitFor(lock, 5000000000ull, [&] { return flush_done_ >= want || stop_; });
}

void Writer::Loop() {
  const Config& c = core_->config();
  const uint64_t tick_ns = DrainPeriodNs(c.flush_ms);
  // During a burst the rings are drained every millisecond (writes still
  // follow NCCLWATCH_FLUSH_MS): the hot path never waits, so the only guard
  // against a full ring is a consumer that keeps up.
  const uint64_t burst_tick_ns = 1000000;
  for (;;) {
    bool stopping;
    uint64_t req;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.WaitFor(lock, burst_ ? burst_tick_ns : tick_ns, [&] { return stop_ || flush_req_ > flush_done_; });
      stopping = stop_;
      req = flush_req_;
    }
    uint64_t now = NowNs();
    bool want_write = stopping || req > flush_done_ || now >= next_flush_;
    Cycle(now, want_write);
    if (stopping) {
      // Final records: drops and a clean finalize if every communicator ended.
      Enter(CycleStep::kFinalize);
      bool clean = true;
      for (Context* ctx : core_->ContextsSnapshot())
        if (!ctx->finalized.load(std::memory_order_acquire)) clean = false;
      MaybeEncodeDrops(now, true);
      enc_.Finalize(Rel(NowNs()), clean);
      WriteOut();
      LogSummary();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      flush_done_ = std::max(flush_done_, req);
    }
    done_cv_.NotifyAll();
    if (stopping) return;
  }
}

void Writer::Cycle(uint64_t now, bool force_write) {
  cycle_now_ = now;
  cycle_step_ = CycleStep::kMaskChange;
  // Before the drain: the operations drained now are judged by the newest
  // mask.
  Enter(CycleStep::kMaskChange);
  CheckMask(now);
  // Finalizes noted before this drain: everything their communicators
  // recorded before them is in the rings now, so they follow it.
  const std::vector<Cold> finalizes = TakeCold(Cold::kFinalize);
  // After a lost write, communicators are defined again.
  Enter(CycleStep::kCommInit);
  if (reannounce_) {
    reannounce_ = false;
    comm_announced_.clear();
    for (Context* ctx : core_->ContextsSnapshot())
      if (!ctx->finalized.load(std::memory_order_acquire)) {
        EncodeCommInit(ctx, false, ctx->comm_hash);
        comm_announced_[ctx->comm] = ctx->comm_hash != 0;
      }
  }
  ticks_.Refine();  // before the first conversion of ticks
  if (core_->events() && core_->config().event_interval_us > 0)
    core_->SetEventIntervalTicks(ticks_.TicksOf(uint64_t{core_->config().event_interval_us} * 1000));
  if (drain_paused_.load(std::memory_order_relaxed)) {
    staged_.clear();
    staged_done_.clear();
  } else {
    DrainRings();
  }
  // Inits noted up to the end of the drain, before the operations that name
  // them: a communicator's init is noted before its first event, so every
  // drained record's communicator is among them or defined already.
  for (const Cold& c : TakeCold(Cold::kInit)) {
    EncodeCommInit(c.ctx, false, c.ctx->comm_hash);
    comm_announced_[c.ctx->comm] = c.ctx->comm_hash != 0;
  }
  Enter(CycleStep::kRecords);
  EncodeStaged();
  Enter(CycleStep::kCommFinalize);
  for (const Cold& c : finalizes) {
    EncodeCommFinalize(c.ctx, c.time_ns);
    in_flight_.CommFinalized(c.ctx->comm);
    comm_announced_.erase(c.ctx->comm);
    c.ctx->finalize_written.store(true, std::memory_order_release);
    core_->RecycleContext(c.ctx);
  }
  ReclaimThreads();
  Enter(CycleStep::kDrops);
  MaybeEncodeDrops(now, false);
  Enter(CycleStep::kHeartbeat);
  if (now >= next_heartbeat_) {
    enc_.Heartbeat(HeartbeatOf(now));
    next_heartbeat_ = now + uint64_t{core_->config().heartbeat_ms} * 1000000;
  }
  Enter(CycleStep::kLaunchCompletions);
  if (core_->events()) PollLaunches(now);
  ReclaimLost(now);
  ReleaseUnsure(now);
  Enter(CycleStep::kStuckReport);
  MaybeStuckReport(now);
  if (on_stuck_.running()) LogOnStuck(on_stuck_.Poll());
  Enter(CycleStep::kWrite);
  if (force_write || wire_.size() >= kWriteThreshold) {
    WriteOut();
    next_flush_ = now + uint64_t{core_->config().flush_ms} * 1000000;
  }
}

void Writer::Enter(CycleStep step) {
  assert(CycleRank(step) >= CycleRank(cycle_step_) && "Writer::Cycle out of cycle.h's order");
  cycle_step_ = step;
}

std::vector<Writer::Cold> Writer::TakeCold(Cold::Kind kind) {
  std::vector<Cold> out;
  std::lock_guard<std::mutex> lock(mu_);
  auto keep = std::stable_partition(cold_.begin(), cold_.end(), [&](const Cold& c) { return c.kind != kind; });
  out.assign(keep, cold_.end());
  cold_.erase(keep, cold_.end());
  return out;
}

void Writer::DrainRings() {
  staged_.clear();
  staged_done_.clear();
  auto stage = [&](const Rec& r) {
    if (r.kind == kRecOpDone) staged_done_[r.id] = staged_.size();
    // From here on, record times are CLOCK_MONOTONIC ns.
    staged_.push_back({r, HasTicks(r) ? ticks_.ToNs(r.t0_ticks) : 0, HasEndTicks(r) ? ticks_.ToNs(r.t1) : 0});
  };
  const uint32_t n = core_->thread_count();
  // Completions waiting in their ops' slots (ThreadBuf::done_in_slot), taken
  // before the rings: an op's record was in its ring before its completion
  // was built, so every op these complete is in this drain or an earlier
  // one. Each slot is freed once read.
  from_slots_.clear();
  for (uint32_t i = 0; i < n; ++i) {
    ThreadBuf* tb = core_->thread_buf(i);
    tb->done_in_slot.Collect([&](size_t k) {
      Slot* s = &tb->slots[k];
      from_slots_.push_back(s->rec);
      s->state.store(kSlotDone, std::memory_order_release);
    });
  }
  // The lane too: its ops' completions come from slots.
  from_lane_.clear();
  core_->lane().Drain([&](const Rec& r) { from_lane_.push_back(r); });
  uint32_t busiest = 0;
  for (uint32_t i = 0; i < n; ++i) {
    ThreadBuf* tb = core_->thread_buf(i);
    if (tb->owner.load(std::memory_order_acquire) == kBufFree) continue;
    const uint32_t got = tb->ring.Drain(kDrainPerRing, stage);
    busiest = std::max(busiest, got * 8 / tb->ring.capacity());
  }
  // After the rings, so that an OpDone follows its Op and they fold.
  for (const Rec& r : from_lane_) stage(r);
  for (const Rec& r : from_slots_) stage(r);
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
      enc_.EvStop(r, Rel(r.t0_ns));
      break;
    case kRecEvState:
      enc_.EvState(r, Rel(r.t0_ns));
      break;
    case kRecLaunch:
      NoteLaunch(r);
      break;
    default:
      break;
  }
}

void Writer::ReclaimThreads() {
  const uint32_t n = core_->thread_count();
  for (uint32_t i = 0; i < n; ++i) {
    ThreadBuf* tb = core_->thread_buf(i);
    if (tb->owner.load(std::memory_order_acquire) != kBufOrphaned || !tb->ring.Empty()) continue;
    bool live = false;
    for (uint32_t k = 0; k < tb->nslots && !live; ++k)
      live = tb->slots[k].state.load(std::memory_order_acquire) == kSlotLive;
    if (!live) {
      tb->owner.store(kBufFree, std::memory_order_release);
      core_->BufferFreed();
    }
  }
}

void Writer::DropOversizeRecord() {
  if (wire_.ok()) return;
  // The last record begun did not fit the encode buffer (every write after
  // the overflow was refused): cut it off whole, so the batch stays
  // readable, and count it.
  wire_.Truncate(record_mark_);
  --records_;
  ++oversize_;
  if (!oversize_logged_) {
    oversize_logged_ = true;
    core_->Log(nccl::kLogWarn, "a record larger than the %zu MiB encode buffer was dropped (counted as lost)",
               buf_.size() >> 20);
  }
}

Wire* Writer::NextRecord() {
  DropOversizeRecord();
  if (wire_.size() + kRecordHeadroom > buf_.size()) WriteOut();
  if (wire_.size() == 0) {
    // A new batch: its base time opens the Op start chain.
    batch_base_ = Rel(NowNs());
    enc_.StartBatch(batch_base_);
  }
  ++records_;
  record_mark_ = wire_.size();
  return &wire_;
}

void Writer::WriteOut() {
  DropOversizeRecord();
  if (wire_.size() == 0 || !file_.open()) return;
  Wire h(head_buf_, sizeof(head_buf_));
  // The range of the batch's record times: a record may be far older than
  // its write (it waited in a ring while this thread was busy or starved of
  // CPU), and a batch may stay open past a second (NCCLWATCH_FLUSH_MS).
  TraceEncoder::Batch(&h, ++batch_seq_, batch_base_, file_.records_written(), &enc_.batch_times());
  const bool ok = file_.AppendBatch(h.data(), h.size(), wire_.data(), wire_.size(), records_ + 1, completions_);
  records_ = 0;
  completions_ = 0;
  wire_.Reset();
  if (ok) return;
  // A failed write (disk full, RLIMIT_FSIZE, I/O error): the batch is lost
  // and counted; definitions in it must be written again before use.
  if (!write_error_logged_) {
    write_error_logged_ = true;
    core_->Log(nccl::kLogWarn, "writing %s failed (%s); records are being dropped and counted until writes succeed",
               file_.path().c_str(), file_.last_error().c_str());
  }
  string_ptr_ids_.clear();
  enc_.ForgetDefinitions();
  reannounce_ = true;
  // The loss itself must show in the file: a batch of its own with the drop
  // counts and a heartbeat (a few dozen bytes; see TraceFile::AppendNotice).
  file_.AppendNotice(3, [this](uint8_t* buf, size_t cap) -> size_t {
    Wire w(buf, cap);
    const uint64_t now = NowNs();
    TimeRange times;
    times.Note(Rel(now));
    TraceEncoder::Batch(&w, ++batch_seq_, Rel(now), file_.records_written(), &times);
    TraceEncoder::Drops(&w, DropsOf(now));
    HeartbeatFields hb;
    hb.time_ns = Rel(now);
    hb.ops_in_flight = in_flight_.size();
    TraceEncoder::Heartbeat(&w, hb);
    return w.ok() ? w.size() : 0;
  });
}

}  // namespace ncclwatch::plugin
