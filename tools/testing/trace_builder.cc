#include "tools/testing/trace_builder.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "tools/model/semantics.h"

namespace ncclwatch::tools::testing {
namespace {

constexpr uint64_t kTickNs = 10 * kMs;  // the writer's drain period (at most)
constexpr uint64_t kGpuLaunchNs = 5 * kUs;
constexpr uint64_t kPollDelayNs = 3 * kUs;

void Check(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("TraceBuilder: ") + what);
}

void Frame(const trace::Record& r, std::string* out) {
  google::protobuf::io::StringOutputStream s(out);
  google::protobuf::io::CodedOutputStream c(&s);
  c.WriteVarint32(static_cast<uint32_t>(r.ByteSizeLong()));
  r.SerializeToCodedStream(&c);
}

std::string SafeName(const std::string& s) {
  std::string out;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    out += (std::isalnum(u) || c == '-' || c == '.' || c == '_') ? c : '_';
  }
  return out.empty() ? "host" : out;
}

// Ordering of records within one drain cycle (plugin/writer.cc Cycle()).
// TraceBuilder::Kind is declared in cycle order; raw records drain with the ops.
int ClassOf(int kind) { return kind == 2 ? 1 : kind; }

}  // namespace

// Plays the writer thread over a TraceBuilder's timeline.
class Encoder {
 public:
  explicit Encoder(const TraceBuilder& b) : b_(b), s_(b.spec_) {
    tick_ = std::min<uint64_t>(kTickNs, uint64_t{s_.flush_ms} * kMs);
    if (tick_ == 0) tick_ = kTickNs;
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

  uint32_t Intern(const std::string& s);
  void DefineGpuClock(uint64_t gpu_ns, uint64_t cpu_ns);
  int64_t GpuDelta(uint64_t gpu_ns, uint64_t ref_cpu_ns) {
    DefineGpuClock(gpu_ns, ref_cpu_ns);
    return static_cast<int64_t>(gpu_ns - (ref_cpu_ns + (gpu_base_ - gpu_cpu_)));
  }
  void FillDone(const TraceBuilder::OpRec& o, trace::OpDone* d, bool folded);
  void Begin(uint64_t now) {
    if (pending_.empty()) {
      batch_base_ = now;
      batch_first_cycle_ = now;
      prev_op_start_ = now;
    }
  }
  void Add(trace::Record r) { pending_.push_back(std::move(r)); }
  void Write(uint64_t at);
  void EncodeOp(const Ev& e);
  void EncodeDone(const Ev& e);
  void EncodeStuck(const Ev& e);
  void EncodeDrops(uint64_t t, const DropCounts& d);
  std::vector<size_t> InFlightOldestFirst() const;

  const TraceBuilder& b_;
  const ProcSpec& s_;
  uint64_t tick_, flush_;
  std::set<uint64_t> forced_;
  std::optional<uint64_t> life_end_;

  std::string out_;
  std::vector<trace::Record> pending_;
  uint64_t batch_base_ = 0, batch_first_cycle_ = 0, prev_op_start_ = 0;
  uint64_t batch_seq_ = 0, records_written_ = 0, bytes_written_ = 0;
  std::map<std::string, uint32_t> strings_;
  bool gpu_set_ = false;
  uint64_t gpu_base_ = 0, gpu_cpu_ = 0;
  std::map<int, std::pair<uint64_t, uint64_t>> counts_;  // comm: enqueued, completed
  std::map<uint64_t, size_t> in_flight_;                 // event_id: op index
  std::set<uint64_t> reported_;
  std::set<int> finalized_comms_;
  std::set<int> announced_;
  uint64_t recorded_ = 0;
  const DropCounts* last_drops_ = nullptr;
};

uint32_t Encoder::Intern(const std::string& s) {
  if (s.empty()) return 0;
  auto it = strings_.find(s);
  if (it != strings_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(strings_.size() + 1);
  strings_.emplace(s, id);
  trace::Record r;
  r.mutable_string_def()->set_id(id);
  r.mutable_string_def()->set_text(s);
  Add(std::move(r));
  return id;
}

void Encoder::DefineGpuClock(uint64_t gpu_ns, uint64_t cpu_ns) {
  if (gpu_set_) return;
  gpu_set_ = true;
  gpu_base_ = gpu_ns;
  gpu_cpu_ = cpu_ns;
  trace::Record r;
  r.mutable_gpu_clock()->set_gpu_base_ns(gpu_ns);
  r.mutable_gpu_clock()->set_cpu_ns(cpu_ns);
  Add(std::move(r));
}

void Encoder::Write(uint64_t at) {
  if (pending_.empty()) return;
  if (b_.kill_ns_ && at > *b_.kill_ns_) {  // killed before this write(2)
    pending_.clear();
    return;
  }
  trace::Record batch;
  batch.mutable_batch()->set_seq(++batch_seq_);
  batch.mutable_batch()->set_time_ns(batch_base_);
  batch.mutable_batch()->set_records_before(records_written_);
  size_t before = out_.size();
  Frame(batch, &out_);
  for (const auto& r : pending_) Frame(r, &out_);
  records_written_ += pending_.size() + 1;
  bytes_written_ += out_.size() - before;
  pending_.clear();
}

void Encoder::FillDone(const TraceBuilder::OpRec& o, trace::OpDone* d, bool folded) {
  const uint64_t done = DoneAt(o);
  if (folded) {
    d->set_done_after_start_ns(done - o.start_ns);
  } else {
    d->set_event_id(o.event_id);
    d->set_done_ns(done);
  }
  if (o.opts.gpu_timing) {
    uint64_t g0 = o.opts.gpu_start_ns >= 0 ? static_cast<uint64_t>(o.opts.gpu_start_ns) : EnqueuedAt(o) + kGpuLaunchNs;
    uint64_t g1 = o.opts.gpu_stop_ns >= 0 ? static_cast<uint64_t>(o.opts.gpu_stop_ns)
                                          : (done > kPollDelayNs ? done - kPollDelayNs : 0);
    if (g1 < g0) g1 = g0;
    d->set_gpu_start_delta_ns(GpuDelta(b_.GpuTime(g0), done));
    d->set_gpu_duration_ns(g1 - g0);
    if (g1 == g0) d->set_gpu_timing(true);
  }
  uint32_t kch = o.opts.kernel_channels ? o.opts.kernel_channels : o.opts.nchannels;
  if (!folded || kch != o.opts.nchannels) d->set_kernel_channels(kch);
  d->set_proxy_ops(o.opts.proxy_ops);
  d->set_proxy_bytes(o.opts.proxy_bytes);
}

void Encoder::EncodeOp(const Ev& e) {
  const auto& o = b_.ops_[e.ref];
  const bool folded = e.sub == 1;
  const bool coll = !o.p2p;
  uint32_t func = Intern(o.func);
  uint32_t dtype = Intern(o.opts.datatype);
  uint32_t algo = Intern(o.opts.algo ? *o.opts.algo : (coll ? "RING" : ""));
  uint32_t proto = Intern(o.opts.proto ? *o.opts.proto : (coll ? "SIMPLE" : ""));
  if (folded && o.opts.gpu_timing) {
    // Anchored on the kernel stop and the CPU time it was seen, like the plugin.
    uint64_t done = DoneAt(o);
    uint64_t g1 = o.opts.gpu_stop_ns >= 0 ? static_cast<uint64_t>(o.opts.gpu_stop_ns)
                                          : (done > kPollDelayNs ? done - kPollDelayNs : 0);
    DefineGpuClock(b_.GpuTime(g1), done);
  }
  const auto& comm = b_.comms_[o.comm - 1];
  if (comm.from_event && !announced_.count(o.comm)) {
    announced_.insert(o.comm);
    trace::Record r;
    r.mutable_comm_init()->set_comm(o.comm);
    r.mutable_comm_init()->set_comm_hash(comm.hash);
    r.mutable_comm_init()->set_time_ns(comm.t_ns);
    r.mutable_comm_init()->set_from_event(true);
    Add(std::move(r));
  }
  auto& counts = counts_[o.comm];
  ++counts.first;
  if (folded) ++counts.second;
  ++recorded_;
  if (folded) ++recorded_;
  trace::Record r;
  trace::Op* op = r.mutable_op();
  if (!folded || s_.raw_capture) op->set_event_id(o.event_id);
  op->set_comm(o.comm);
  op->set_kind(o.p2p ? trace::OP_KIND_P2P : trace::OP_KIND_COLL);
  op->set_seq(o.seq);
  op->set_func(func);
  op->set_count(o.count);
  op->set_datatype(dtype);
  if (coll) op->set_root(o.opts.root);
  if (!coll) op->set_peer(o.peer);
  op->set_algo(algo);
  op->set_proto(proto);
  op->set_nchannels(o.opts.nchannels);
  op->set_nwarps(o.opts.nwarps);
  if (s_.delta_starts) {
    op->set_start_delta_ns(static_cast<int64_t>(o.start_ns - prev_op_start_));
    prev_op_start_ = o.start_ns;
  } else {
    op->set_start_ns(o.start_ns);
  }
  op->set_enqueue_ns(o.opts.enqueue_ns);
  op->set_parent_id(o.opts.parent_id);
  op->set_p2p_seq(o.p2p_seq);
  if (folded) {
    FillDone(o, op->mutable_completion(), true);
  } else {
    op->set_completion_tracked(o.tracked);
  }
  Add(std::move(r));
  if (o.tracked && !folded) in_flight_[o.event_id] = e.ref;
}

void Encoder::EncodeDone(const Ev& e) {
  const auto& o = b_.ops_[e.ref];
  trace::Record r;
  if (o.opts.gpu_timing) {
    uint64_t done = DoneAt(o);
    uint64_t g1 = o.opts.gpu_stop_ns >= 0 ? static_cast<uint64_t>(o.opts.gpu_stop_ns)
                                          : (done > kPollDelayNs ? done - kPollDelayNs : 0);
    DefineGpuClock(b_.GpuTime(g1), done);
  }
  FillDone(o, r.mutable_op_done(), false);
  Add(std::move(r));
  ++counts_[o.comm].second;
  ++recorded_;
  in_flight_.erase(o.event_id);
}

std::vector<size_t> Encoder::InFlightOldestFirst() const {
  std::vector<size_t> ops;
  for (const auto& [id, idx] : in_flight_) ops.push_back(idx);
  std::sort(ops.begin(), ops.end(), [&](size_t a, size_t c) {
    return std::tie(b_.ops_[a].start_ns, a) < std::tie(b_.ops_[c].start_ns, c);
  });
  return ops;
}

void Encoder::EncodeStuck(const Ev& e) {
  const bool is_auto = e.sub == 1;
  const uint64_t now = e.t_ns;
  Begin(e.cycle);
  std::vector<StuckOp> list;
  uint64_t trigger = 0;
  double threshold = s_.stuck_sec;
  if (is_auto) {
    // The plugin: the first op in flight, not yet reported, stuck_sec old.
    const uint64_t thr = static_cast<uint64_t>(std::llround(s_.stuck_sec * 1e9));
    for (size_t idx : InFlightOldestFirst()) {
      const auto& o = b_.ops_[idx];
      if (!reported_.count(o.event_id) && now > o.start_ns && now - o.start_ns >= thr) {
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
  std::vector<const TraceBuilder::OpRec*> recs;
  std::vector<uint32_t> funcs;
  for (const auto& so : list) {
    const TraceBuilder::OpRec* o = nullptr;
    for (const auto& x : b_.ops_)
      if (x.event_id == so.event_id) o = &x;
    Check(o != nullptr, "Stuck() names an event_id that is not an operation of this builder");
    recs.push_back(o);
    funcs.push_back(Intern(o->func));
  }
  trace::Record r;
  trace::StuckReport* sr = r.mutable_stuck();
  sr->set_time_ns(now);
  sr->set_threshold_sec(threshold);
  sr->set_trigger_event_id(trigger);
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& o = *recs[i];
    const InFlightProgress& p = list[i].progress ? *list[i].progress : o.opts.progress;
    reported_.insert(o.event_id);
    trace::InFlightOp* f = sr->add_ops();
    f->set_event_id(o.event_id);
    f->set_comm(o.comm);
    f->set_kind(o.p2p ? trace::OP_KIND_P2P : trace::OP_KIND_COLL);
    f->set_seq(o.seq);
    f->set_func(funcs[i]);
    f->set_count(o.count);
    if (o.p2p) f->set_peer(o.peer);
    f->set_start_ns(o.start_ns);
    f->set_age_ns(now > o.start_ns ? now - o.start_ns : 0);
    f->set_enqueued(list[i].enqueued);
    f->set_nchannels(o.opts.nchannels);
    f->set_kernel_channels_started(p.kernel_channels_started >= 0 ? p.kernel_channels_started : o.opts.nchannels);
    f->set_kernel_channels_stopped(p.kernel_channels_stopped);
    f->set_proxy_ops_started(p.proxy_ops_started);
    f->set_proxy_ops_stopped(p.proxy_ops_stopped);
    for (const auto& px : p.proxy) {
      trace::ProxyProgress* q = f->add_proxy();
      q->set_channel(px.channel);
      q->set_peer(px.peer);
      q->set_is_send(px.is_send);
      q->set_nsteps(px.nsteps);
      q->set_last_step(px.last_step);
      q->set_last_state(px.last_state);
      q->set_last_update_ns(px.last_update_ns);
      q->set_stopped(px.stopped);
    }
  }
  Add(std::move(r));
  Write(e.cycle);  // at once
}

void Encoder::EncodeDrops(uint64_t t, const DropCounts& d) {
  trace::Record r;
  trace::Drops* x = r.mutable_drops();
  x->set_time_ns(t);
  x->set_ring_full(d.ring_full);
  x->set_pool_exhausted(d.pool_exhausted);
  x->set_no_thread_slot(d.no_thread_slot);
  x->set_write_failed(d.write_failed);
  x->set_foreign_parent(d.foreign_parent);
  x->set_bad_parent(d.bad_parent);
  x->set_last_write_error(d.last_write_error);
  Add(std::move(r));
  last_drops_ = &d;
}

std::string Encoder::Run() {
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
    evs.push_back({cycle, ClassOf(static_cast<int>(kind)), sort_t, order++, kind, ref, sub, clean, t});
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
    const uint64_t thr = static_cast<uint64_t>(std::llround(s_.stuck_sec * 1e9));
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
    trace::Record r;
    trace::ProcessHeader* h = r.mutable_header();
    h->set_schema_version(trace::SCHEMA_VERSION_CURRENT);
    h->set_plugin_version(s_.plugin_version);
    h->set_profiler_api_version(s_.api);
    h->set_hostname(s_.host);
    h->set_pid(s_.pid);
    h->set_mono_base_ns(s_.mono_base_ns);
    h->set_realtime_base_ns(s_.realtime_base_ns);
    h->set_clock_pair_error_ns(s_.clock_pair_error_ns);
    h->set_launcher_rank(s_.launcher_rank);
    h->set_launcher_world_size(s_.launcher_world_size);
    h->set_launcher_local_rank(s_.launcher_local_rank);
    h->set_launcher_rank_source(!s_.launcher_rank_source.empty() ? s_.launcher_rank_source
                                : s_.launcher_rank >= 0         ? "RANK"
                                                                : "");
    h->set_cuda_device(s_.cuda_device);
    h->set_event_mask(s_.event_mask);
    h->set_events_config(s_.events_config);
    h->set_flush_ms(s_.flush_ms);
    h->set_heartbeat_ms(s_.heartbeat_ms);
    h->set_stuck_sec(s_.stuck_sec);
    h->set_buffer_bytes(64ull << 20);
    h->set_job_id(s_.job_id);
    for (const auto& a : s_.argv) h->add_argv(a);
    Add(std::move(r));
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
        trace::Record r;
        trace::CommInit* ci = r.mutable_comm_init();
        ci->set_comm(static_cast<uint32_t>(e.ref + 1));
        ci->set_comm_hash(c.hash);
        ci->set_name(c.name);
        ci->set_nranks(c.nranks);
        ci->set_nnodes(c.nnodes);
        ci->set_rank(c.rank);
        ci->set_time_ns(c.t_ns);
        Add(std::move(r));
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
        Add(b_.records_[e.ref]);
        break;
      case Kind::kCommFinalize: {
        Begin(e.cycle);
        const int comm = static_cast<int>(e.ref);
        trace::Record r;
        r.mutable_comm_finalize()->set_comm(comm);
        r.mutable_comm_finalize()->set_time_ns(e.t_ns);
        r.mutable_comm_finalize()->set_ops_enqueued(counts_[comm].first);
        r.mutable_comm_finalize()->set_ops_completed(counts_[comm].second);
        Add(std::move(r));
        finalized_comms_.insert(comm);
        for (auto it = in_flight_.begin(); it != in_flight_.end();)
          it = b_.ops_[it->second].comm == comm ? in_flight_.erase(it) : std::next(it);
        Write(e.cycle);
        break;
      }
      case Kind::kDrops:
        Begin(e.cycle);
        EncodeDrops(e.t_ns, b_.drops_[e.ref]);
        break;
      case Kind::kHeartbeat: {
        Begin(e.cycle);
        trace::Record r;
        trace::Heartbeat* hb = r.mutable_heartbeat();
        hb->set_time_ns(e.t_ns);
        hb->set_ops_in_flight(static_cast<uint32_t>(in_flight_.size()));
        hb->set_events_recorded(recorded_);
        if (last_drops_ != nullptr)
          hb->set_events_dropped(last_drops_->ring_full + last_drops_->pool_exhausted + last_drops_->no_thread_slot +
                                 last_drops_->write_failed);
        hb->set_bytes_written(bytes_written_);
        Add(std::move(r));
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
        {
          trace::Record r;
          r.mutable_finalize()->set_time_ns(e.t_ns);
          r.mutable_finalize()->set_clean(e.clean);
          Add(std::move(r));
        }
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
      o.p2p_seq = ++counters[slot];
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

void TraceBuilder::AddRecord(uint64_t t_ns, const trace::Record& record) {
  records_.push_back(record);
  items_.push_back({Kind::kRecord, t_ns, records_.size() - 1});
}

std::string TraceBuilder::Bytes() const { return Encoder(*this).Run(); }

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
        at = std::max(at, ready_at);
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
      end = std::max(end, *first_hang + static_cast<uint64_t>(std::llround(spec.stuck_sec * 1e9)) + kSec);
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

}  // namespace ncclwatch::tools::testing
