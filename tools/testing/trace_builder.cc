#include "tools/testing/trace_builder.h"

#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "plugin/abi/event_kind.h"
#include "plugin/writer/cycle.h"
#include "plugin/writer/encoder.h"
#include "plugin/writer/in_flight.h"
#include "plugin/writer/wire.h"
#include "tools/model/semantics.h"

namespace ncclwatch::tools::testing {
namespace {

using plugin::TraceEncoder;

constexpr uint64_t kGpuLaunchNs = 5 * kUs;
constexpr uint64_t kPollDelayNs = 3 * kUs;
constexpr size_t kMaxRecordBytes = 4 << 20;

void Check(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("TraceBuilder: ") + what);
}

// A record's length prefix, framed as the plugin frames its own.
void AppendVarint(uint64_t v, std::string* out) {
  uint8_t buf[10];
  out->append(reinterpret_cast<const char*>(buf), plugin::Wire::PutVarint(buf, v) - buf);
}

std::string SafeName(const std::string& s) {
  std::string out;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    out += (std::isalnum(u) || c == '-' || c == '.' || c == '_') ? c : '_';
  }
  return out.empty() ? "host" : out;
}


// The records of the batch being encoded: TraceEncoder writes each into a
// scratch Wire, which is appended here before the next one begins.
class PendingBatch final : public plugin::RecordSink {
 public:
  PendingBatch() : buf_(kMaxRecordBytes), wire_(buf_.data(), buf_.size()) {}

  plugin::Wire* NextRecord() override {
    Settle();
    ++records_;
    return &wire_;
  }
  // A record encoded elsewhere (TraceBuilder::AddRecord).
  void AddSerialized(const std::string& message) {
    Settle();
    AppendVarint(message.size(), &bytes_);
    bytes_ += message;
    ++records_;
  }
  bool empty() const { return records_ == 0; }
  size_t records() const { return records_; }
  // The batch's records, after which it is empty.
  std::string Take() {
    Settle();
    std::string out;
    out.swap(bytes_);
    records_ = 0;
    return out;
  }

 private:
  void Settle() {
    Check(wire_.ok(), "a record over the scratch buffer");
    bytes_.append(reinterpret_cast<const char*>(wire_.data()), wire_.size());
    wire_.Reset();
  }

  std::vector<uint8_t> buf_;
  plugin::Wire wire_;
  std::string bytes_;
  size_t records_ = 0;
};

}  // namespace

// Plays the writer thread over a TraceBuilder's timeline: when each record
// is encoded and written is decided here; how, by the plugin's encoder.
class Player {
 public:
  explicit Player(const TraceBuilder& b) : b_(b), s_(b.spec_), enc_(&pending_, b.spec_.delta_starts) {
    tick_ = plugin::DrainPeriodNs(s_.flush_ms);
    if (tick_ == 0) tick_ = plugin::kMaxDrainPeriodNs;
    flush_ = std::max<uint64_t>(uint64_t{s_.flush_ms} * kMs, tick_);
  }

  std::string Run();

 private:
  using Kind = TraceBuilder::Kind;
  struct Ev {
    uint64_t cycle;
    int cls;
    uint64_t sort_t;
    size_t order;
    Kind kind;
    size_t ref;
    int sub = 0;  // kOp: 0 Op (not folded), 1 Op folded, 2 OpDone; kStuck: 1 auto
    bool clean = false;
    uint64_t t_ns = 0;
  };

  // Where the writer writes what an item stands for within its drain cycle.
  plugin::CycleStep StepOf(Kind kind, int sub, size_t ref) const {
    using Step = plugin::CycleStep;
    switch (kind) {
      case Kind::kMask:
        return Step::kMaskChange;
      case Kind::kCommInit:
        return Step::kCommInit;
      case Kind::kOp:
        // A completion from the launch's CUDA events is found after the
        // drain; any other comes with the records.
        return sub == 2 && b_.ops_[ref].opts.from_event ? Step::kLaunchCompletions : Step::kRecords;
      case Kind::kRecord:
      case Kind::kPhases:
        return Step::kRecords;
      case Kind::kCommFinalize:
        return Step::kCommFinalize;
      case Kind::kDrops:
        return Step::kDrops;
      case Kind::kHeartbeat:
        return Step::kHeartbeat;
      case Kind::kStuck:
        return Step::kStuckReport;
      case Kind::kFlush:
        return Step::kWrite;
      case Kind::kFinalize:
        return Step::kFinalize;
    }
    return Step::kRecords;
  }
  uint64_t CeilTick(uint64_t t) const { return (t + tick_ - 1) / tick_ * tick_; }
  uint64_t CeilFlush(uint64_t t) const { return (t + flush_ - 1) / flush_ * flush_; }
  // The drain that encodes something that happened at t.
  uint64_t Cycle(uint64_t t) const {
    uint64_t c = CeilTick(t);
    auto it = forced_.lower_bound(t);
    if (it != forced_.end() && *it < c) c = *it;
    return c;
  }
  uint64_t EnqueuedAt(const TraceBuilder::OpRec& o) const { return o.start_ns + o.opts.enqueue_ns; }
  uint64_t DoneAt(const TraceBuilder::OpRec& o) const {
    return std::max<uint64_t>(static_cast<uint64_t>(o.done_ns), EnqueuedAt(o));
  }
  bool HasDone(const TraceBuilder::OpRec& o) const { return o.tracked && o.done_ns >= 0; }

  plugin::DoneFields DoneOf(const TraceBuilder::OpRec& o) const;
  void Begin(uint64_t now) {
    if (pending_.empty()) {
      batch_base_ = now;
      batch_first_cycle_ = now;
      enc_.StartBatch(now);
    }
  }
  void Write(uint64_t at);
  void EncodeOp(const Ev& e);
  void EncodeDone(const Ev& e);
  void EncodeStuck(const Ev& e);
  void EncodeDrops(uint64_t t, const DropCounts& d);
  void EncodePhases(uint64_t t, const TraceBuilder::PhasesItem& p);
  std::vector<size_t> InFlightOldestFirst() const;

  const TraceBuilder& b_;
  const ProcSpec& s_;
  PendingBatch pending_;
  TraceEncoder enc_;
  uint64_t tick_, flush_;
  std::set<uint64_t> forced_;
  std::optional<uint64_t> life_end_;

  std::string out_;
  uint64_t batch_base_ = 0, batch_first_cycle_ = 0;
  uint64_t batch_seq_ = 0, records_written_ = 0, bytes_written_ = 0;
  std::map<int, std::pair<uint64_t, uint64_t>> counts_;  // comm: enqueued, completed
  std::map<uint64_t, size_t> in_flight_;                 // event_id: op index
  std::set<uint64_t> reported_;
  std::set<int> announced_;
  uint64_t recorded_ = 0;
  uint64_t next_phase_id_ = 1;
  const DropCounts* last_drops_ = nullptr;
};

void Player::Write(uint64_t at) {
  if (pending_.empty()) return;
  const size_t n = pending_.records();
  std::string records = pending_.Take();
  if (b_.kill_ns_ && at > *b_.kill_ns_) return;  // killed before this write(2)
  uint8_t head[64];
  plugin::Wire h(head, sizeof(head));
  TraceEncoder::Batch(&h, ++batch_seq_, batch_base_, records_written_);
  out_.append(reinterpret_cast<const char*>(h.data()), h.size());
  out_ += records;
  records_written_ += n + 1;
  bytes_written_ += h.size() + records.size();
}

plugin::DoneFields Player::DoneOf(const TraceBuilder::OpRec& o) const {
  plugin::DoneFields d;
  d.event_id = o.event_id;
  d.done_ns = DoneAt(o);
  d.from_event = o.opts.from_event;
  if (o.opts.from_event && o.opts.event_started_ns >= 0) d.started_ns = static_cast<uint64_t>(o.opts.event_started_ns);
  d.from_later_event = o.opts.from_event && o.opts.launch_without_event;
  if (o.opts.gpu_timing && !o.opts.from_event) {
    uint64_t g0 = o.opts.gpu_start_ns >= 0 ? static_cast<uint64_t>(o.opts.gpu_start_ns) : EnqueuedAt(o) + kGpuLaunchNs;
    uint64_t g1 = o.opts.gpu_stop_ns >= 0 ? static_cast<uint64_t>(o.opts.gpu_stop_ns)
                                          : (d.done_ns > kPollDelayNs ? d.done_ns - kPollDelayNs : 0);
    if (g1 < g0) g1 = g0;
    d.has_gpu = true;
    d.gpu_start = b_.GpuTime(g0);
    d.gpu_stop = b_.GpuTime(g1);
  }
  d.kernel_channels = o.opts.kernel_channels ? o.opts.kernel_channels : o.opts.nchannels;
  d.proxy_ops = o.opts.proxy_ops;
  d.proxy_bytes = o.opts.proxy_bytes;
  return d;
}

void Player::EncodeOp(const Ev& e) {
  const auto& o = b_.ops_[e.ref];
  const bool folded = e.sub == 1;
  const bool coll = !o.p2p;
  plugin::OpFields f;
  f.func = enc_.Intern(o.func);
  f.datatype = enc_.Intern(o.opts.datatype);
  f.algo = enc_.Intern(o.opts.algo ? *o.opts.algo : (coll ? "RING" : ""));
  f.proto = enc_.Intern(o.opts.proto ? *o.opts.proto : (coll ? "SIMPLE" : ""));
  const auto& comm = b_.comms_[o.comm - 1];
  if (comm.from_event && !announced_.count(o.comm)) {
    announced_.insert(o.comm);
    plugin::CommInitFields ci;
    ci.comm = static_cast<uint32_t>(o.comm);
    ci.comm_hash = comm.hash;
    ci.time_ns = comm.t_ns;
    ci.from_event = true;
    enc_.CommInit(ci);
  }
  auto& counts = counts_[o.comm];
  ++counts.first;
  if (folded) ++counts.second;
  ++recorded_;
  if (folded) ++recorded_;
  if (!folded || s_.raw_capture) f.event_id = o.event_id;
  f.comm = static_cast<uint32_t>(o.comm);
  f.p2p = o.p2p;
  f.seq = o.seq;
  f.count = o.count;
  f.root = o.opts.root;
  f.peer = o.peer;
  f.nchannels = o.opts.nchannels;
  f.nwarps = o.opts.nwarps;
  f.start_ns = o.start_ns;
  f.enqueue_ns = o.opts.enqueue_ns;
  f.parent_id = o.opts.parent_id;
  f.p2p_seq = o.p2p_seq;
  f.completion_tracked = o.tracked;
  f.launch_without_event = o.opts.launch_without_event;
  if (!o.tracked) f.no_completion = o.opts.no_completion;
  if (folded) {
    const plugin::DoneFields d = DoneOf(o);
    enc_.Op(f, &d);
  } else {
    enc_.Op(f, nullptr);
  }
  if (o.tracked && !folded) in_flight_[o.event_id] = e.ref;
}

void Player::EncodeDone(const Ev& e) {
  const auto& o = b_.ops_[e.ref];
  enc_.OpDone(DoneOf(o));
  ++counts_[o.comm].second;
  ++recorded_;
  in_flight_.erase(o.event_id);
}

std::vector<size_t> Player::InFlightOldestFirst() const {
  std::vector<size_t> ops;
  for (const auto& [id, idx] : in_flight_) ops.push_back(idx);
  std::sort(ops.begin(), ops.end(), [&](size_t a, size_t c) {
    return std::tie(b_.ops_[a].start_ns, a) < std::tie(b_.ops_[c].start_ns, c);
  });
  return ops;
}

void Player::EncodeStuck(const Ev& e) {
  const bool is_auto = e.sub == 1;
  const uint64_t now = e.t_ns;
  Begin(e.cycle);
  std::vector<StuckOp> list;
  uint64_t trigger = 0;
  double threshold = s_.stuck_sec;
  if (is_auto) {
    // The plugin's trigger: the oldest op in flight, not yet reported, past
    // the threshold.
    const uint64_t thr = plugin::StuckThresholdNs(s_.stuck_sec);
    for (size_t idx : InFlightOldestFirst()) {
      const auto& o = b_.ops_[idx];
      if (!reported_.count(o.event_id) && plugin::PastStuckThreshold(now, o.start_ns, thr)) {
        trigger = o.event_id;
        break;
      }
    }
    if (trigger == 0) return;
    for (size_t idx : InFlightOldestFirst()) list.push_back({b_.ops_[idx].event_id, std::nullopt, true});
  } else {
    const auto& st = b_.stucks_[e.ref];
    if (st.threshold >= 0) threshold = st.threshold;
    if (st.ops.empty()) {
      for (size_t idx : InFlightOldestFirst()) list.push_back({b_.ops_[idx].event_id, std::nullopt, true});
    } else {
      list = st.ops;
    }
    trigger = st.trigger ? st.trigger : (list.empty() ? 0 : list.front().event_id);
  }
  plugin::StuckFields report;
  report.time_ns = now;
  report.threshold_sec = threshold;
  report.trigger_event_id = trigger;
  for (const auto& so : list) {
    const TraceBuilder::OpRec* op = nullptr;
    for (const auto& x : b_.ops_)
      if (x.event_id == so.event_id) op = &x;
    Check(op != nullptr, "Stuck() names an event_id that is not an operation of this builder");
    const auto& o = *op;
    const InFlightProgress& p = so.progress ? *so.progress : o.opts.progress;
    reported_.insert(o.event_id);
    plugin::InFlightFields f;
    f.event_id = o.event_id;
    f.comm = static_cast<uint32_t>(o.comm);
    f.p2p = o.p2p;
    f.seq = o.seq;
    f.func = enc_.Intern(o.func);
    f.count = o.count;
    f.peer = o.peer;
    f.start_ns = o.start_ns;
    f.age_ns = now > o.start_ns ? now - o.start_ns : 0;
    f.enqueued = so.enqueued;
    f.nchannels = o.opts.nchannels;
    f.has_progress = p.gpu == 0;
    f.gpu = p.gpu;
    f.window_first_event_id = p.window_first_event_id;
    f.window_last_event_id = p.window_last_event_id;
    f.kernel_channels_started = static_cast<uint64_t>(
        p.kernel_channels_started >= 0 ? p.kernel_channels_started : static_cast<int32_t>(o.opts.nchannels));
    f.kernel_channels_stopped = static_cast<uint64_t>(p.kernel_channels_stopped);
    f.proxy_ops_started = p.proxy_ops_started;
    f.proxy_ops_stopped = p.proxy_ops_stopped;
    for (const auto& px : p.proxy)
      f.proxy.push_back({px.channel, px.peer, px.is_send, px.nsteps, px.last_step, px.last_state, px.last_update_ns,
                         px.stopped});
    report.ops.push_back(std::move(f));
  }
  enc_.Stuck(report);
  Write(e.cycle);  // at once
}

// As the plugin's writer stages what NCCL's profiler thread reported.
void Player::EncodePhases(uint64_t t, const TraceBuilder::PhasesItem& p) {
  uint16_t comm = 0;  // the op's, when the parent is one
  for (const auto& o : b_.ops_)
    if (o.event_id == p.parent_id) comm = static_cast<uint16_t>(o.comm);
  for (int i = 0; i < 3; ++i) {
    if (p.bounds[i] >= p.bounds[i + 1]) continue;  // NCCL skips a phase of no length
    plugin::Rec r{};
    r.kind = plugin::kRecEvStart;
    r.etype = plugin::kEvKernelPhase;
    r.comm = comm;
    r.flags = plugin::kFlagHasGpu;
    r.id = (uint64_t{2} << 40) | next_phase_id_++;  // NCCL's profiler thread: thread 2's ids
    r.parent_id = p.parent_id;
    r.t1 = 2;
    r.px.channel = static_cast<int32_t>(p.channel);
    r.px.step = i;
    r.px.ptimer = b_.GpuTime(p.bounds[i]);
    enc_.EvStart(r, t, plugin::EvStartStrings());
    plugin::Rec st{};
    st.kind = plugin::kRecEvState;
    st.etype = plugin::kEvKernelPhase;
    st.flags = plugin::kFlagHasGpu;
    st.id = r.id;
    st.st.state = kStateKernelPhaseStop;
    st.st.ptimer = b_.GpuTime(p.bounds[i + 1]);
    enc_.EvState(st, t);
    st.flags = 0;
    enc_.EvStop(st, t);
    recorded_ += 3;
  }
}

void Player::EncodeDrops(uint64_t t, const DropCounts& d) {
  plugin::DropFields x;
  x.time_ns = t;
  x.ring_full = d.ring_full;
  x.pool_exhausted = d.pool_exhausted;
  x.no_thread_slot = d.no_thread_slot;
  x.write_failed = d.write_failed;
  x.foreign_parent = d.foreign_parent;
  x.bad_parent = d.bad_parent;
  x.last_write_error = d.last_write_error;
  x.completions_lost = d.completions_lost;
  x.completions_counted = d.completions_counted;
  enc_.Drops(x);
  last_drops_ = &d;
}

std::string Player::Run() {
  const auto& items = b_.items_;
  // Forced writes: FlushNow at comm finalize and on request, stuck reports, finalize.
  std::optional<uint64_t> finalize_at;
  for (const auto& it : items) {
    if (it.kind == Kind::kFlush || it.kind == Kind::kCommFinalize || it.kind == Kind::kStuck ||
        it.kind == Kind::kFinalize)
      forced_.insert(it.t_ns);
    if (it.kind == Kind::kFinalize && (!finalize_at || it.t_ns < *finalize_at)) finalize_at = it.t_ns;
  }
  if (b_.kill_ns_) life_end_ = b_.kill_ns_;
  if (finalize_at && (!life_end_ || *finalize_at < *life_end_)) life_end_ = finalize_at;

  std::vector<Ev> evs;
  size_t order = 0;
  auto push = [&](uint64_t cycle, Kind kind, uint64_t sort_t, size_t ref, int sub, uint64_t t, bool clean) {
    const int cls = plugin::CycleRank(StepOf(kind, sub, ref));
    evs.push_back({cycle, cls, sort_t, order++, kind, ref, sub, clean, t});
  };
  std::vector<std::optional<uint64_t>> op_cycle(b_.ops_.size()), done_cycle(b_.ops_.size());
  for (const auto& it : items) {
    switch (it.kind) {
      case Kind::kOp: {
        const auto& o = b_.ops_[it.ref];
        const uint64_t enq = EnqueuedAt(o);
        if (!HasDone(o)) {
          op_cycle[it.ref] = Cycle(enq);
          push(*op_cycle[it.ref], Kind::kOp, enq, it.ref, 0, enq, false);
          break;
        }
        const uint64_t done = DoneAt(o);
        const bool fold = o.opts.completion == Completion::kFolded ||
                          (o.opts.completion == Completion::kAuto && Cycle(done) == Cycle(enq));
        if (fold) {
          const bool forced = o.opts.completion == Completion::kFolded;
          push(Cycle(done), Kind::kOp, forced ? done : enq, it.ref, 1, enq, false);
        } else {
          op_cycle[it.ref] = Cycle(enq);
          done_cycle[it.ref] = Cycle(done);
          push(*op_cycle[it.ref], Kind::kOp, enq, it.ref, 0, enq, false);
          push(*done_cycle[it.ref], Kind::kOp, done, it.ref, 2, done, false);
        }
        break;
      }
      case Kind::kStuck:
      case Kind::kFlush:
      case Kind::kFinalize:
      case Kind::kCommFinalize:
        push(it.t_ns, it.kind, it.t_ns, it.ref, 0, it.t_ns, it.clean);
        break;
      default:
        push(Cycle(it.t_ns), it.kind, it.t_ns, it.ref, 0, it.t_ns, it.clean);
        break;
    }
  }
  uint64_t last = s_.open_ns;
  for (const auto& e : evs) last = std::max(last, e.cycle);
  const uint64_t alive_until = life_end_ ? *life_end_ : last;
  // Stuck reports the plugin would write: candidates, checked when encoded.
  if (s_.auto_stuck && s_.stuck_sec > 0) {
    const uint64_t thr = plugin::StuckThresholdNs(s_.stuck_sec);
    for (size_t i = 0; i < b_.ops_.size(); ++i) {
      if (!op_cycle[i] || !b_.ops_[i].tracked) continue;
      uint64_t at = std::max(CeilTick(b_.ops_[i].start_ns + thr), *op_cycle[i]);
      if (at > alive_until) continue;
      if (done_cycle[i] && *done_cycle[i] <= at) continue;
      push(at, Kind::kStuck, at, i, 1, at, false);
    }
  }
  std::sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& c) {
    return std::tie(a.cycle, a.cls, a.sort_t, a.order) < std::tie(c.cycle, c.cls, c.sort_t, c.order);
  });

  // The header, alone in the first write.
  {
    Begin(s_.open_ns);
    plugin::HeaderFields h;
    h.plugin_version = s_.plugin_version;
    h.profiler_api_version = s_.api;
    h.hostname = s_.host;
    h.pid = s_.pid;
    h.mono_base_ns = s_.mono_base_ns;
    h.realtime_base_ns = s_.realtime_base_ns;
    h.clock_pair_error_ns = s_.clock_pair_error_ns;
    h.launcher_rank = s_.launcher_rank;
    h.launcher_world_size = s_.launcher_world_size;
    h.launcher_local_rank = s_.launcher_local_rank;
    h.launcher_rank_source = !s_.launcher_rank_source.empty() ? std::string_view(s_.launcher_rank_source)
                             : s_.launcher_rank >= 0         ? std::string_view("RANK")
                                                             : std::string_view();
    h.cuda_device = s_.cuda_device;
    h.event_mask = s_.event_mask;
    h.events_config = s_.events_config;
    h.flush_ms = s_.flush_ms;
    h.heartbeat_ms = s_.heartbeat_ms;
    h.stuck_sec = s_.stuck_sec;
    h.buffer_bytes = 64ull << 20;
    h.job_id = s_.job_id;
    h.argv = &s_.argv;
    h.nccl_version = s_.nccl_version;
    h.cuda_driver_version = s_.cuda_driver_version;
    h.completions = s_.completions;
    h.completion_source = s_.completion_source;
    enc_.Header(h);
    Write(s_.open_ns);
  }

  for (const Ev& e : evs) {
    if (e.cycle > alive_until) break;
    // A due write(2) between the pending records' drain and this one.
    if (!pending_.empty()) {
      uint64_t due = std::max(CeilFlush(batch_first_cycle_), batch_first_cycle_);
      if (due < e.cycle) Write(due);
    }
    switch (e.kind) {
      case Kind::kCommInit: {
        const auto& c = b_.comms_[e.ref];
        if (c.from_event) break;  // written with its first operation
        Begin(e.cycle);
        plugin::CommInitFields ci;
        ci.comm = static_cast<uint32_t>(e.ref + 1);
        ci.comm_hash = c.hash;
        ci.name = c.name;
        ci.nranks = c.nranks;
        ci.nnodes = c.nnodes;
        ci.rank = c.rank;
        ci.time_ns = c.t_ns;
        enc_.CommInit(ci);
        break;
      }
      case Kind::kOp:
        Begin(e.cycle);
        if (e.sub == 2) {
          EncodeDone(e);
        } else {
          EncodeOp(e);
        }
        break;
      case Kind::kRecord:
        Begin(e.cycle);
        pending_.AddSerialized(b_.records_[e.ref].SerializeAsString());
        break;
      case Kind::kPhases:
        Begin(e.cycle);
        EncodePhases(e.t_ns, b_.phases_[e.ref]);
        break;
      case Kind::kCommFinalize: {
        Begin(e.cycle);
        const int comm = static_cast<int>(e.ref);
        enc_.CommFinalize(static_cast<uint32_t>(comm), e.t_ns, counts_[comm].first, counts_[comm].second);
        for (auto it = in_flight_.begin(); it != in_flight_.end();)
          it = b_.ops_[it->second].comm == comm ? in_flight_.erase(it) : std::next(it);
        Write(e.cycle);
        break;
      }
      case Kind::kDrops:
        Begin(e.cycle);
        EncodeDrops(e.t_ns, b_.drops_[e.ref]);
        break;
      case Kind::kMask:
        Begin(e.cycle);
        enc_.MaskChange(b_.masks_[e.ref]);
        break;
      case Kind::kHeartbeat: {
        Begin(e.cycle);
        plugin::HeartbeatFields hb;
        hb.time_ns = e.t_ns;
        hb.ops_in_flight = in_flight_.size();
        hb.events_recorded = recorded_;
        if (last_drops_ != nullptr)
          hb.events_dropped = last_drops_->ring_full + last_drops_->pool_exhausted + last_drops_->no_thread_slot +
                              last_drops_->write_failed;
        hb.bytes_written = bytes_written_;
        enc_.Heartbeat(hb);
        break;
      }
      case Kind::kStuck:
        EncodeStuck(e);
        break;
      case Kind::kFlush:
        Write(e.cycle);
        break;
      case Kind::kFinalize:
        Write(e.cycle);
        Begin(e.cycle);
        if (last_drops_ != nullptr) {
          const DropCounts* d = last_drops_;
          if (d->ring_full + d->pool_exhausted + d->no_thread_slot + d->write_failed + d->foreign_parent +
                  d->bad_parent >
              0)
            EncodeDrops(e.t_ns, *d);
        }
        enc_.Finalize(e.t_ns, e.clean);
        Write(e.cycle);
        break;
    }
  }
  if (!pending_.empty()) Write(std::max(CeilFlush(batch_first_cycle_), batch_first_cycle_));
  return out_;
}

// ---------------------------------------------------------------- TraceBuilder

TraceBuilder::TraceBuilder(const ProcSpec& spec) : spec_(spec) {}

std::string TraceBuilder::FileName() const {
  return SafeName(spec_.host) + "-" + std::to_string(spec_.pid) + "-" + std::to_string(spec_.realtime_base_ns / kMs) +
         ".ncclwatch";
}

int TraceBuilder::AddComm(uint64_t hash, const std::string& name, int nranks, int rank, uint64_t t_ns, int nnodes) {
  comms_.push_back({hash, name, nranks, nnodes, rank, t_ns, false});
  p2p_counters_.emplace_back(2 * static_cast<size_t>(std::max(nranks, 0)), 0);
  items_.push_back({Kind::kCommInit, t_ns, comms_.size() - 1});
  return static_cast<int>(comms_.size());
}

int TraceBuilder::AddCommFromEvent(uint64_t hash, uint64_t t_ns) {
  comms_.push_back({hash, "", 0, 0, 0, t_ns, true});
  p2p_counters_.emplace_back();
  items_.push_back({Kind::kCommInit, t_ns, comms_.size() - 1});
  return static_cast<int>(comms_.size());
}

uint64_t TraceBuilder::AddOp(int comm, bool p2p, const std::string& func, uint64_t seq, uint64_t count, int peer,
                             uint64_t start_ns, int64_t done_ns, const OpOpts& opts) {
  Check(comm >= 1 && comm <= static_cast<int>(comms_.size()), "unknown comm");
  Check(done_ns < 0 || static_cast<uint64_t>(done_ns) >= start_ns, "done before start");
  OpRec o;
  o.event_id = (uint64_t{1} << 40) | next_id_++;  // thread 1's ids, like the plugin's
  o.comm = comm;
  o.p2p = p2p;
  o.seq = seq;
  o.func = func;
  o.count = count;
  o.peer = peer;
  o.start_ns = start_ns;
  o.done_ns = done_ns;
  o.opts = opts;
  o.tracked = opts.completion_tracked ? *opts.completion_tracked : spec_.api >= 4;
  o.p2p_seq = 0;
  if (p2p) {
    o.p2p_seq = opts.p2p_seq;
    auto& counters = p2p_counters_[comm - 1];
    const size_t slot = 2 * static_cast<size_t>(std::max(peer, 0)) + (IsRecv(FuncFromName(func)) ? 1 : 0);
    if (slot >= counters.size()) counters.resize(slot + 2, 0);
    if (o.p2p_seq == 0) {
      // Profiler API v1 to v3 give no communicator size, so the plugin
      // numbers no point-to-point operation there: it writes 0.
      o.p2p_seq = spec_.api <= 3 ? 0 : ++counters[slot];
    } else {
      counters[slot] = std::max(counters[slot], o.p2p_seq);
    }
  }
  ops_.push_back(std::move(o));
  items_.push_back({Kind::kOp, start_ns, ops_.size() - 1});
  return ops_.back().event_id;
}

uint64_t TraceBuilder::Coll(int comm, const std::string& func, uint64_t seq, uint64_t count, uint64_t start_ns,
                            int64_t done_ns, const OpOpts& opts) {
  return AddOp(comm, false, func, seq, count, -1, start_ns, done_ns, opts);
}

uint64_t TraceBuilder::Send(int comm, int peer, uint64_t count, uint64_t start_ns, int64_t done_ns,
                            const OpOpts& opts) {
  return AddOp(comm, true, "Send", 0, count, peer, start_ns, done_ns, opts);
}

uint64_t TraceBuilder::Recv(int comm, int peer, uint64_t count, uint64_t start_ns, int64_t done_ns,
                            const OpOpts& opts) {
  return AddOp(comm, true, "Recv", 0, count, peer, start_ns, done_ns, opts);
}

void TraceBuilder::Heartbeat(uint64_t t_ns) { items_.push_back({Kind::kHeartbeat, t_ns, 0}); }

void TraceBuilder::Heartbeats(uint64_t from_ns, uint64_t to_ns, uint64_t every_ns) {
  if (every_ns == 0) every_ns = uint64_t{spec_.heartbeat_ms} * kMs;
  Check(every_ns > 0, "heartbeat interval 0");
  for (uint64_t t = from_ns; t <= to_ns; t += every_ns) Heartbeat(t);
}

void TraceBuilder::Stuck(uint64_t t_ns, std::vector<StuckOp> ops, uint64_t trigger_event_id, double threshold_sec) {
  stucks_.push_back({std::move(ops), trigger_event_id, threshold_sec});
  items_.push_back({Kind::kStuck, t_ns, stucks_.size() - 1});
}

void TraceBuilder::MaskChange(uint64_t t_ns, uint64_t old_mask, uint64_t new_mask, uint64_t since_ns,
                              uint64_t completion_source) {
  plugin::MaskChangeFields m;
  m.time_ns = t_ns;
  m.old_mask = old_mask;
  m.new_mask = new_mask;
  m.since_ns = since_ns;
  m.completion_source = completion_source;
  masks_.push_back(m);
  items_.push_back({Kind::kMask, t_ns, masks_.size() - 1});
}

void TraceBuilder::Drops(uint64_t t_ns, const DropCounts& counts) {
  drops_.push_back(counts);
  items_.push_back({Kind::kDrops, t_ns, drops_.size() - 1});
}

void TraceBuilder::FinalizeComm(int comm, uint64_t t_ns) {
  Check(comm >= 1 && comm <= static_cast<int>(comms_.size()), "unknown comm");
  items_.push_back({Kind::kCommFinalize, t_ns, static_cast<size_t>(comm)});
}

void TraceBuilder::Finalize(uint64_t t_ns, bool clean) {
  Item it{Kind::kFinalize, t_ns, 0};
  it.clean = clean;
  items_.push_back(it);
}

void TraceBuilder::Kill(uint64_t t_ns) { kill_ns_ = t_ns; }

void TraceBuilder::Flush(uint64_t t_ns) { items_.push_back({Kind::kFlush, t_ns, 0}); }

void TraceBuilder::KernelPhases(uint64_t parent_id, uint32_t channel, uint64_t t_ns,
                                const std::array<uint64_t, 4>& bounds) {
  phases_.push_back({parent_id, channel, bounds});
  items_.push_back({Kind::kPhases, t_ns, phases_.size() - 1});
}

void TraceBuilder::AddRecord(uint64_t t_ns, const trace::Record& record) {
  records_.push_back(record);
  items_.push_back({Kind::kRecord, t_ns, records_.size() - 1});
}

std::string TraceBuilder::Bytes() const { return Player(*this).Run(); }

bool TraceBuilder::WriteTo(const std::string& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const std::string b = Bytes();
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
  return static_cast<bool>(f);
}

// ---------------------------------------------------------------- jobs

uint64_t JobPlan::Local(int rank, uint64_t true_ns) const {
  const RankPlan& r = ranks[rank];
  const int64_t d = static_cast<int64_t>(true_ns) - static_cast<int64_t>(r.start_ns);
  Check(d >= 0, "a rank's event before its process started");
  return static_cast<uint64_t>(std::llround(static_cast<double>(d) * (1.0 + r.drift_ppm * 1e-6)));
}

std::vector<TraceBuilder> BuildJob(const JobSpec& spec, JobPlan* plan_out) {
  const int n = spec.nranks;
  Check(n > 0, "nranks");
  const int rph = std::max(1, spec.ranks_per_host);
  JobPlan plan;

  // Communicators.
  std::vector<CommSpec> comms = spec.comms;
  if (comms.empty()) comms.push_back({"world", 0, {}});
  for (size_t c = 0; c < comms.size(); ++c) {
    if (comms[c].ranks.empty())
      for (int r = 0; r < n; ++r) comms[c].ranks.push_back(r);
    if (comms[c].hash == 0) comms[c].hash = 0x9e3779b97f4a7c15ull * (c + 1) ^ 0x5bd1e995ull;
    for (int r : comms[c].ranks) Check(r >= 0 && r < n, "comm rank out of range");
  }
  auto comm_rank = [&](int c, int global) {
    const auto& v = comms[c].ranks;
    return static_cast<int>(std::find(v.begin(), v.end(), global) - v.begin());
  };

  // Ranks.
  for (int r = 0; r < n; ++r) {
    RankPlan rp;
    const int host = r / rph;
    rp.start_ns = 500 * kMs + static_cast<uint64_t>(r) * 3 * kMs;
    rp.proc.host = "node" + std::to_string(host);
    rp.proc.pid = 4000 + 17 * r;
    rp.proc.launcher_rank = r;
    rp.proc.launcher_world_size = n;
    rp.proc.launcher_local_rank = r % rph;
    rp.proc.cuda_device = r % rph;
    rp.proc.api = spec.api;
    rp.proc.heartbeat_ms = spec.heartbeat_ms;
    rp.proc.stuck_sec = spec.stuck_sec;
    rp.proc.job_id = "job42";
    if (spec.rank_hook) spec.rank_hook(r, rp);
    // The host's monotonic clock counts from its boot; its realtime clock may be off.
    const uint64_t boot = static_cast<uint64_t>(host + 1) * 100'000 * kSec + static_cast<uint64_t>(host) * 7'777'777;
    rp.proc.mono_base_ns = boot + rp.start_ns;
    rp.proc.realtime_base_ns =
        static_cast<uint64_t>(static_cast<int64_t>(1'700'000'000 * kSec + rp.start_ns) + rp.realtime_error_ns);
    plan.ranks.push_back(rp);
  }

  // The schedule.
  std::vector<JobOp> sched = spec.ops;
  if (sched.empty()) {
    for (int k = 0; k < spec.ncolls; ++k) {
      JobOp op;
      op.func = spec.funcs.empty() ? "AllReduce" : spec.funcs[k % spec.funcs.size()];
      op.count = spec.count;
      op.start_ns = spec.first_op_ns + static_cast<uint64_t>(k) * spec.step_ns;
      op.duration_ns = spec.duration_ns;
      sched.push_back(op);
    }
  }
  plan.ops.resize(n);
  std::vector<std::vector<std::pair<int, size_t>>> parts(sched.size());  // (rank, index in plan.ops[rank])
  for (size_t i = 0; i < sched.size(); ++i) {
    const JobOp& j = sched[i];
    Check(j.comm >= 0 && j.comm < static_cast<int>(comms.size()), "JobOp.comm out of range");
    const auto& members = comms[j.comm].ranks;
    auto add = [&](int global, bool p2p, bool is_send, const std::string& func, int peer) {
      OpPlan p;
      p.index = static_cast<int>(i);
      p.comm = j.comm;
      p.p2p = p2p;
      p.is_send = is_send;
      p.func = func;
      p.count = j.count;
      p.peer = peer;
      p.start_ns = j.start_ns;
      p.duration_ns = j.duration_ns;
      p.opts = j.opts;
      if (spec.op_hook) spec.op_hook(global, static_cast<int>(i), p);
      plan.ops[global].push_back(p);
      parts[i].push_back({global, plan.ops[global].size() - 1});
    };
    if (j.func == "Send") {
      Check(j.src >= 0 && j.src < static_cast<int>(members.size()) && j.dst >= 0 &&
                j.dst < static_cast<int>(members.size()),
            "JobOp src/dst out of range");
      add(members[j.src], true, true, "Send", j.dst);
      add(members[j.dst], true, false, "Recv", j.src);
    } else {
      for (int g : members) add(g, false, false, j.func, -1);
    }
  }

  // Issued, issue order per rank and comm, seq.
  std::vector<std::map<int, std::vector<size_t>>> order(n);  // [rank][comm] -> indices into plan.ops[rank]
  for (int r = 0; r < n; ++r) {
    const RankPlan& rp = plan.ranks[r];
    auto& ops = plan.ops[r];
    for (auto& p : ops) {
      p.issued = !p.skip && p.start_ns >= rp.start_ns &&
                 (rp.dies_at_ns < 0 || p.start_ns <= static_cast<uint64_t>(rp.dies_at_ns)) &&
                 (rp.idle_after_ns < 0 || p.start_ns <= static_cast<uint64_t>(rp.idle_after_ns));
    }
    std::vector<size_t> idx;
    for (size_t k = 0; k < ops.size(); ++k)
      if (ops[k].issued) idx.push_back(k);
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return ops[a].start_ns < ops[b].start_ns; });
    std::map<std::pair<int, std::string>, uint64_t> next_seq;  // NCCL: per communicator and function
    for (size_t k : idx) {
      order[r][ops[k].comm].push_back(k);
      if (!ops[k].p2p) {
        uint64_t& s = next_seq[{ops[k].comm, ops[k].func}];
        if (!ops[k].seq) ops[k].seq = s;
        s = *ops[k].seq + 1;
      }
    }
  }

  // Completion times: resolve in dependency order (previous op on each
  // participant's stream first); what cannot be resolved never completes.
  std::vector<std::vector<int>> state(n);  // 0 unresolved, 1 resolved
  for (int r = 0; r < n; ++r) state[r].assign(plan.ops[r].size(), 0);
  auto prev_of = [&](int r, size_t k) -> std::optional<size_t> {
    const auto& v = order[r][plan.ops[r][k].comm];
    auto it = std::find(v.begin(), v.end(), k);
    if (it == v.begin() || it == v.end()) return std::nullopt;
    return *(it - 1);
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t i = 0; i < sched.size(); ++i) {
      if (parts[i].empty() || state[parts[i][0].first][parts[i][0].second]) continue;
      bool ready = true, never = false;
      uint64_t at = 0, dur = 0;
      for (auto [r, k] : parts[i]) {
        const OpPlan& p = plan.ops[r][k];
        if (!p.issued) {
          never = true;
          continue;
        }
        auto prev = prev_of(r, k);
        uint64_t ready_at = p.start_ns;
        if (prev) {
          if (!state[r][*prev]) {
            ready = false;
            break;
          }
          const OpPlan& q = plan.ops[r][*prev];
          if (q.done_ns < 0) never = true;
          else ready_at = std::max<uint64_t>(ready_at, static_cast<uint64_t>(q.done_ns));
        }
        at = std::max(at, ready_at + p.gpu_held_ns);
        dur = std::max(dur, p.duration_ns);
      }
      if (!ready) continue;
      const uint64_t done = at + dur;
      for (auto [r, k] : parts[i]) {
        const int64_t dies = plan.ranks[r].dies_at_ns;
        if (dies >= 0 && done > static_cast<uint64_t>(dies)) never = true;
      }
      for (auto [r, k] : parts[i]) {
        OpPlan& p = plan.ops[r][k];
        p.done_ns = (never || !p.issued || p.never_completes) ? kNever : static_cast<int64_t>(done);
        if (p.done_ns >= 0) {
          uint64_t ready_at = p.start_ns;
          if (auto prev = prev_of(r, k)) ready_at = std::max<uint64_t>(ready_at, plan.ops[r][*prev].done_ns);
          p.reached_ns = static_cast<int64_t>(ready_at + p.gpu_held_ns);
        }
        state[r][k] = 1;
      }
      progress = true;
    }
  }

  // The end of the job.
  uint64_t end = 0;
  if (spec.end_ns >= 0) {
    end = static_cast<uint64_t>(spec.end_ns);
  } else {
    uint64_t last = spec.init_ns;
    std::optional<uint64_t> first_hang;
    for (int r = 0; r < n; ++r)
      for (const auto& p : plan.ops[r]) {
        if (!p.issued) continue;
        last = std::max(last, p.done_ns >= 0 ? static_cast<uint64_t>(p.done_ns) : p.start_ns);
        if (p.done_ns < 0 && (!first_hang || p.start_ns < *first_hang)) first_hang = p.start_ns;
      }
    end = last + kSec;
    if (first_hang && spec.stuck_sec > 0)
      end = std::max(end, *first_hang + plugin::StuckThresholdNs(spec.stuck_sec) + kSec);
  }
  plan.end_ns = end;

  // The files.
  std::vector<TraceBuilder> files;
  for (int r = 0; r < n; ++r) {
    const RankPlan& rp = plan.ranks[r];
    TraceBuilder b(rp.proc);
    std::map<int, int> local_comm;
    for (size_t c = 0; c < comms.size(); ++c) {
      const auto& m = comms[c].ranks;
      if (std::find(m.begin(), m.end(), r) == m.end()) continue;
      std::set<int> hosts;
      for (int g : m) hosts.insert(g / rph);
      local_comm[static_cast<int>(c)] =
          b.AddComm(comms[c].hash, comms[c].name, static_cast<int>(m.size()), comm_rank(static_cast<int>(c), r),
                    plan.Local(r, std::max(spec.init_ns + static_cast<uint64_t>(r) * 100 * kUs, rp.start_ns)),
                    static_cast<int>(hosts.size()));
    }
    auto& ops = plan.ops[r];
    std::vector<size_t> idx;
    for (size_t k = 0; k < ops.size(); ++k)
      if (ops[k].issued) idx.push_back(k);
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t c) { return ops[a].start_ns < ops[c].start_ns; });
    for (size_t k : idx) {
      OpPlan& p = ops[k];
      const int comm = local_comm.at(p.comm);
      const uint64_t start = plan.Local(r, p.start_ns);
      int64_t done = p.done_ns >= 0 ? static_cast<int64_t>(plan.Local(r, static_cast<uint64_t>(p.done_ns))) : kNever;
      OpOpts o = p.opts;
      o.from_event = o.from_event || spec.event_completions;
      if (o.from_event && o.event_started_ns < 0 && p.reached_ns >= 0)
        o.event_started_ns = static_cast<int64_t>(plan.Local(r, static_cast<uint64_t>(p.reached_ns)));
      if (o.gpu_start_ns >= 0) o.gpu_start_ns = static_cast<int64_t>(plan.Local(r, static_cast<uint64_t>(o.gpu_start_ns)));
      if (o.gpu_stop_ns >= 0) o.gpu_stop_ns = static_cast<int64_t>(plan.Local(r, static_cast<uint64_t>(o.gpu_stop_ns)));
      if (p.p2p) {
        p.event_id = p.is_send ? b.Send(comm, p.peer, p.count, start, done, o) : b.Recv(comm, p.peer, p.count, start, done, o);
      } else {
        p.event_id = b.Coll(comm, p.func, p.seq.value_or(0), p.count, start, done, o);
      }
    }
    const bool all_done = std::all_of(ops.begin(), ops.end(), [](const OpPlan& p) { return !p.issued || p.done_ns >= 0; });
    RankEnd how = rp.end;
    uint64_t life_end = end;
    if (rp.dies_at_ns >= 0 && static_cast<uint64_t>(rp.dies_at_ns) < end) {
      how = RankEnd::kKilled;
      life_end = static_cast<uint64_t>(rp.dies_at_ns);
    } else if (how == RankEnd::kAuto) {
      how = all_done ? RankEnd::kClean : RankEnd::kKilled;
    }
    const uint64_t hb = uint64_t{rp.proc.heartbeat_ms} * kMs;
    const uint64_t local_end = plan.Local(r, life_end);
    if (hb > 0 && local_end >= hb) b.Heartbeats(hb, how == RankEnd::kClean ? local_end - kMs : local_end, hb);
    switch (how) {
      case RankEnd::kClean:
        for (const auto& [c, lc] : local_comm) b.FinalizeComm(lc, local_end - kMs);
        b.Finalize(local_end, true);
        break;
      case RankEnd::kUnclean:
        b.Finalize(local_end, false);
        break;
      case RankEnd::kKilled:
        b.Kill(local_end);
        break;
      default:
        break;
    }
    files.push_back(std::move(b));
  }
  if (plan_out != nullptr) *plan_out = std::move(plan);
  return files;
}

std::vector<std::string> WriteJob(const std::vector<TraceBuilder>& files, const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& f : files) {
    paths.push_back(dir + "/" + f.FileName());
    Check(f.WriteTo(paths.back()), "cannot write a trace file");
  }
  return paths;
}

std::string NewTestDir(const std::string& prefix) {
  const char* env = getenv("TEST_TMPDIR");
  const std::string base = env != nullptr ? env : "/tmp";
  std::string tmpl = base + "/" + prefix + "XXXXXX";
  const char* d = mkdtemp(&tmpl[0]);
  return d != nullptr ? std::string(d) : base;
}

}  // namespace ncclwatch::tools::testing
