// The Writer's accounting and reports: drop counts and their warnings, the
// closing summary, lost completions, and stuck reports (writer.h).

#include <stdio.h>

#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

#include "plugin/writer/writer.h"

namespace ncclwatch::plugin {

namespace {

// A stuck report is one record, which the reader takes up to 64 MiB and the
// encode buffer up to 8 MiB: at most this many operations, each with at
// most this many proxy operations (about 1 MiB in all).
constexpr size_t kMaxStuckOps = 1024;
constexpr size_t kMaxStuckProxies = 32;

}  // namespace

void Writer::DropCounts(uint64_t* ring_full, uint64_t* pool, uint64_t* no_slot, uint64_t* foreign, uint64_t* bad) const {
  *ring_full = *pool = *foreign = *bad = 0;
  for (uint32_t i = 0; i < core_->thread_count(); ++i) {
    const ThreadCounters& c = core_->thread_buf(i)->counters;
    *ring_full += c.ring_full.load(std::memory_order_relaxed);
    *pool += c.pool_exhausted.load(std::memory_order_relaxed);
    *foreign += c.foreign_parent.load(std::memory_order_relaxed);
    *bad += c.bad_parent.load(std::memory_order_relaxed);
  }
  *no_slot = core_->no_thread_slot();
}

uint64_t Writer::UntrackedOps() const {
  uint64_t n = 0;
  for (uint32_t i = 0; i < core_->thread_count(); ++i)
    n += core_->thread_buf(i)->counters.untracked_ops.load(std::memory_order_relaxed);
  return n;
}

DropFields Writer::DropsOf(uint64_t now) const {
  DropFields d;
  d.time_ns = Rel(now);
  DropCounts(&d.ring_full, &d.pool_exhausted, &d.no_thread_slot, &d.foreign_parent, &d.bad_parent);
  d.write_failed = RecordsLost();
  d.last_write_error = file_.last_error();
  d.completion_untracked = UntrackedOps();
  d.completions_lost = file_.completions_lost() + launches_gone_;
  return d;
}

void Writer::MaybeEncodeDrops(uint64_t now, bool force) {
  uint64_t ring_full, pool, no_slot, foreign, bad;
  DropCounts(&ring_full, &pool, &no_slot, &foreign, &bad);
  const uint64_t untracked = UntrackedOps();
  uint64_t sum = ring_full + pool + foreign + bad + no_slot + RecordsLost() + untracked + launches_gone_;
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
               static_cast<unsigned long long>(core_->config().buffer_mb));
    core_->Log(nccl::kLogWarn,
               "events are being dropped (%llu: per-thread buffer full %llu, event handles exhausted %llu, "
               "threads without a buffer %llu); the file counts them%s",
               static_cast<unsigned long long>(ring_full + pool + no_slot), static_cast<unsigned long long>(ring_full),
               static_cast<unsigned long long>(pool), static_cast<unsigned long long>(no_slot), hint);
  }
  enc_.Drops(DropsOf(now));
}

void Writer::LogHandleExhaustion(uint64_t now) {
  // What holds the handles: a thread's slots are live from an operation's
  // start until its completion (every kernel channel stopped, and every proxy
  // operation when those are captured). Which operations are in flight, and
  // how far their channels got, tells a backlog (channels still arriving)
  // from operations that will never complete (channels missing).
  uint32_t worst = 0;
  uint64_t worst_count = 0;
  for (uint32_t i = 0; i < core_->thread_count(); ++i) {
    const ThreadCounters& tc = core_->thread_buf(i)->counters;
    uint64_t c = tc.pool_exhausted.load(std::memory_order_relaxed) + tc.untracked_ops.load(std::memory_order_relaxed);
    if (c > worst_count) {
      worst_count = c;
      worst = i;
    }
  }
  ThreadBuf* tb = core_->thread_buf(worst);
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
  core_->Log(nccl::kLogWarn,
             "event handles exhausted on thread %u: %u of %u handles in use, %u by operations in flight (%u waiting "
             "for kernel channels); %zu operations in flight in all; the oldest: %s. Operations go on being recorded, "
             "without completion tracking, until handles are free",
             tb->tid.load(std::memory_order_relaxed), live, tb->nslots, live_ops, waiting_channels, in_flight_.size(),
             what);
}

void Writer::LogSummary() {
  uint64_t ring_full, pool, no_slot, foreign, bad;
  DropCounts(&ring_full, &pool, &no_slot, &foreign, &bad);
  const uint64_t dropped = ring_full + pool + no_slot + RecordsLost();
  core_->Log(dropped > 0 ? nccl::kLogWarn : nccl::kLogInfo,
             "closed %s: %llu records, %llu bytes; dropped %llu events (buffer full %llu, handles exhausted %llu, "
             "no buffer %llu, write failed %llu); %llu operations without completion tracking (handles exhausted); "
             "%llu completions implied by a later one; %llu operations let go without a completion source (mask "
             "changed)",
             file_.path().c_str(), static_cast<unsigned long long>(file_.records_written()),
             static_cast<unsigned long long>(file_.bytes_written()), static_cast<unsigned long long>(dropped),
             static_cast<unsigned long long>(ring_full), static_cast<unsigned long long>(pool),
             static_cast<unsigned long long>(no_slot), static_cast<unsigned long long>(RecordsLost()),
             static_cast<unsigned long long>(UntrackedOps()), static_cast<unsigned long long>(in_flight_.lost_completions()),
             static_cast<unsigned long long>(unsure_released_));
  if (core_->events() && core_->config().event_interval_us > 0) {
    // Sampled events: how many launches the interval spared their records.
    const LaunchTable::Stats& s = launches_.stats();
    core_->Log(nccl::kLogInfo,
               "NCCLWATCH_EVENT_INTERVAL_US=%u: %llu of %llu kernel launches recorded no CUDA events of their own",
               core_->config().event_interval_us, static_cast<unsigned long long>(s.without_events),
               static_cast<unsigned long long>(s.launches));
  }
}

Slot* Writer::SlotOf(uint64_t id) {
  const uint32_t ti = ThreadOfId(id);
  if (ti < 1 || ti > core_->thread_count()) return nullptr;
  ThreadBuf* tb = core_->thread_buf(ti - 1);
  for (uint32_t k = 0; k < tb->nslots; ++k)
    if (tb->slots[k].id.load(std::memory_order_relaxed) == id) return &tb->slots[k];
  return nullptr;
}

bool Writer::ReleaseHandle(uint64_t id) {
  Slot* s = SlotOf(id);
  // No longer its slot, or no longer waiting: nothing to free.
  if (s == nullptr || s->state.load(std::memory_order_acquire) != kSlotLive) return true;
  uint32_t z = 0;
  if (!s->done.compare_exchange_strong(z, 1)) return false;  // its completion is being pushed
  s->state.store(kSlotDone, std::memory_order_release);
  return true;
}

void Writer::ReclaimLost(uint64_t now) {
  // The file keeps the facts (the Op without a completion); only the watch
  // and the handle end. See InFlightTable.
  const uint64_t before = in_flight_.lost_completions();
  const uint64_t found = in_flight_.ReclaimLost(now, [this](uint64_t id) { ReleaseHandle(id); });
  if (found > 0 && before == 0)
    core_->Log(nccl::kLogInfo,
               "an operation's kernel-channel events did not all arrive from NCCL; a later operation on its "
               "communicator completed, so it did too: no longer watched (counted in the closing line)");
}

void Writer::CheckMask(uint64_t now) {
  // Reading NCCL's int needs no lock: it lives in NCCL's library, and this
  // thread runs only from the first init to the last finalize, which joins
  // it (Profiler::Release) before it returns to NCCL. So NCCL is loaded for
  // every read: it unloads the plugin (2.23 to 2.26, 2.30) or itself only
  // after that finalize has returned. The lock finalize takes (the global
  // mutex) would not do: Release holds it while it joins this thread.
  int* addr = core_->nccl_mask_address();
  if (addr == nullptr) return;
  const uint64_t mask = static_cast<uint32_t>(__atomic_load_n(addr, __ATOMIC_RELAXED));
  MaskWatch::Change c;
  if (!mask_watch_.Read(mask, now, &c)) return;
  MaskChangeFields f;
  f.time_ns = Rel(now);
  f.old_mask = c.old_mask;
  f.new_mask = c.new_mask;
  f.since_ns = Rel(c.since_ns);
  f.completion_source = mask_watch_.source();
  enc_.MaskChange(f);
  if (c.source_lost) {
    if (core_->events()) {
      // Their completions would be an earlier launch's (see ForgetFrom).
      unsure_released_ += in_flight_.ForgetFrom(c.since_ns);
    } else {
      in_flight_.MarkUnsure(c.since_ns, now);
    }
  }
  std::string what;
  const auto lost = [&](uint64_t bits) { return (c.old_mask & bits) != 0 && (c.new_mask & bits) == 0; };
  if (c.source_lost)
    what += core_->events() ? "; completions (CUDA events at kernel launches, which need KernelLaunch) stop"
                            : "; completions (kernel channels, KernelCh) stop";
  if (lost(nccl::kColl)) what += "; collectives are no longer reported";
  if (lost(nccl::kP2p)) what += "; point-to-point operations are no longer reported";
  if (what.empty()) what = "; nothing ncclwatch needs was taken away";
  if (c.source_lost)
    what += ": operations enqueued from now on are recorded without completion and never reported as stuck";
  core_->Log(warned_mask_ ? nccl::kLogInfo : nccl::kLogWarn,
             "NCCL's profiler event mask changed from 0x%llx to 0x%llx after init (NCCL 2.31 lets RAS set it for "
             "the whole job)%s; %s records it",
             static_cast<unsigned long long>(c.old_mask), static_cast<unsigned long long>(c.new_mask), what.c_str(),
             file_.path().c_str());
  warned_mask_ = true;
}

void Writer::ReleaseUnsure(uint64_t now) {
  unsure_released_ += in_flight_.ReleaseUnsure(now, [this](uint64_t id) { return ReleaseHandle(id); });
}

void Writer::MaybeStuckReport(uint64_t now) {
  const double stuck_sec = core_->config().stuck_sec;
  if (stuck_sec <= 0 || in_flight_.empty()) return;
  const uint64_t threshold = StuckThresholdNs(stuck_sec);
  const uint64_t trigger = in_flight_.StuckTrigger(now, threshold);
  if (trigger == 0) return;

  // Live progress of every proxy operation serving an op in flight.
  std::unordered_map<uint64_t, std::vector<const Slot*>> proxies;
  for (const Slot* s = core_->slots_begin(); s < core_->slots_end(); ++s) {
    if (s->state.load(std::memory_order_acquire) == kSlotFree) continue;
    if (s->kind.load(std::memory_order_relaxed) != kEvProxyOp) continue;
    uint64_t op = s->op_id.load(std::memory_order_relaxed);
    if (op != 0 && in_flight_.Has(op)) proxies[op].push_back(s);
  }
  std::vector<std::pair<uint64_t, InFlightTable::Op*>> ops = in_flight_.OldestFirst(kMaxStuckOps);
  StuckFields report;
  report.time_ns = Rel(now);
  report.threshold_sec = stuck_sec;
  WriteOut();  // the report starts an empty buffer: it gets all of it
  report.trigger_event_id = trigger;
  for (auto& [id, op] : ops) {
    InFlightTable::Op& f = *op;
    f.reported = true;
    InFlightFields o;
    o.event_id = id;
    o.comm = f.comm;
    o.p2p = f.kind == kEvP2p;
    o.seq = f.seq;
    o.func = Intern(f.func);
    o.count = f.count;
    o.peer = f.peer;
    o.start_ns = Rel(f.start_ns);
    o.age_ns = now - f.start_ns;
    o.enqueued = true;  // the table holds only enqueued ops (Op records)
    o.nchannels = f.nchannels;
    if (core_->events()) {
      // Its slot was freed at its stop: what the GPU did comes from its
      // launch's events.
      o.gpu = static_cast<uint32_t>(launches_.ProgressOf(id));
      if (o.gpu == static_cast<uint32_t>(GpuProgress::kInWindow))
        launches_.WindowOf(id, &o.window_first_event_id, &o.window_last_event_id);
    } else if (const Slot* slot = SlotOf(id)) {
      // The op's slot, if it still holds this op. NCCL's threads go on
      // while this runs: each stop is read before its start, so that a
      // channel starting and stopping in between never shows more stopped
      // than started (the reader calls that damage), and the slot must
      // still hold the op afterwards (freed and taken by another op, its
      // counts are that op's).
      const uint64_t kernel_stopped = slot->kernel_stopped.load(std::memory_order_acquire);
      const uint64_t proxy_stopped = slot->proxy_stopped.load(std::memory_order_acquire);
      const uint64_t kernel_started = slot->kernel_started.load(std::memory_order_acquire);
      const uint64_t proxy_started = slot->proxy_started.load(std::memory_order_acquire);
      if (slot->id.load(std::memory_order_acquire) == id && kernel_started <= f.nchannels) {
        o.has_progress = true;
        o.kernel_channels_started = kernel_started;
        o.kernel_channels_stopped = std::min(kernel_stopped, kernel_started);
        o.proxy_ops_started = proxy_started;
        o.proxy_ops_stopped = std::min(proxy_stopped, proxy_started);
      }
    }
    auto pit = proxies.find(id);
    if (pit != proxies.end()) {
      for (const Slot* p : pit->second) {
        if (o.proxy.size() >= kMaxStuckProxies) break;
        const uint64_t d = p->px_desc.load(std::memory_order_relaxed);
        const uint64_t g = p->px_progress.load(std::memory_order_relaxed);
        ProxyProgressFields q;
        q.channel = PxChannel(d);
        q.peer = PxPeer(d);
        q.is_send = PxIsSend(d);
        q.nsteps = PxNsteps(d);
        q.last_step = PxStep(g);
        q.last_state = PxState(g);
        q.last_update_ns = Rel(ticks_.ToNs(p->px_update_ns.load(std::memory_order_relaxed)));
        q.stopped = PxStopped(g);
        o.proxy.push_back(q);
      }
    }
    report.ops.push_back(std::move(o));
  }
  enc_.Stuck(report);
  WriteOut();
  core_->Log(nccl::kLogWarn, "operation in flight for over %.1f s: wrote a stuck report of %zu operations to %s",
             stuck_sec, ops.size(), file_.path().c_str());
  if (on_stuck_.prepared() && !ops.empty()) StartOnStuck(ops[0].second->comm);
}

void Writer::StartOnStuck(uint16_t comm) {
  // %r: the launcher's rank; without one, the process's rank in the
  // communicator of the oldest stuck operation.
  int64_t rank = info_.launcher_rank;
  if (rank < 0) {
    for (Context* c : core_->ContextsSnapshot())
      if (c->comm == comm) rank = c->rank;
  }
  const Config& cfg = core_->config();
  LogOnStuck(on_stuck_.Start(info_.pid, rank, file_.path(), cfg.on_stuck_timeout_sec, cfg.on_stuck_max_bytes));
}

void Writer::LogOnStuck(const OnStuckRunner::Event& e) {
  switch (e.kind) {
    case OnStuckRunner::Event::kNone:
      return;
    case OnStuckRunner::Event::kFailed:
    case OnStuckRunner::Event::kKilled:
    case OnStuckRunner::Event::kCut:
      core_->Log(nccl::kLogWarn, "%s", e.text.c_str());
      return;
    default:
      core_->Log(nccl::kLogInfo, "%s", e.text.c_str());
  }
}

}  // namespace ncclwatch::plugin
