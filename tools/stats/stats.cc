#include "tools/stats/stats.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tools/json.h"
#include "tools/stats/compare.h"
#include "tools/stats/samples.h"
#include "tools/text/safe_text.h"

namespace ncclwatch::tools {

using namespace stats_internal;  // NOLINT: the implementation's own parts

namespace {

constexpr char kFormat[] = "ncclwatch-stats/2";

std::vector<double> SamplesUs(const std::vector<int64_t>& ns) {
  std::vector<double> us;
  us.reserve(ns.size());
  for (int64_t v : ns) us.push_back(static_cast<double>(v) / 1000.0);
  return SketchSamples(std::move(us), kMaxRowSamples);
}

// Communicators spanning summaries whose arrivals stats takes from the
// summaries' samples across the job (Model::sampled indices; -1: from the
// windows): where some member's window lacks operations (a whole window is
// the exact count), the samples stand for the whole communicator
// (SampledComm::covered) and carry sizes and warm-ups (a summary made
// before them carries none).
std::vector<int32_t> SampledForStats(const Model& m, const std::vector<bool>& whole) {
  std::vector<int32_t> of(m.comms.size(), -1);
  for (size_t k = 0; k < m.sampled.size(); ++k) {
    const SampledComm& sc = m.sampled[k];
    const size_t n = sc.procs.size();
    if (sc.comm >= m.comms.size() || whole[sc.comm] || !sc.covered || sc.positions.empty() || n < 2 ||
        sc.buckets.size() != sc.positions.size() || sc.warmup.size() != sc.positions.size() ||
        sc.local_starts_ns.size() != sc.positions.size() * n)
      continue;
    bool lacks = false;
    for (uint32_t pi : sc.procs) lacks = lacks || m.procs[pi].settled_ops > 0 || m.procs[pi].cut_ops > 0;
    if (lacks) of[sc.comm] = static_cast<int32_t>(k);
  }
  return of;
}

// Each rank's lateness at the sampled collectives of `sc`, as Lateness
// counts it at every collective, on the aligned clock.
void SampledLateness(const Model& m, const SampledComm& sc, std::map<RankKey, RankAcc>* out) {
  const Comm& c = m.comms[sc.comm];
  const size_t n = sc.procs.size();
  // Each member's row, looked up once: 'world' of 16,384 members at ~250
  // positions is 4 M values (a lookup per value, or per member a scan of
  // the members, took seconds).
  std::vector<int32_t> rank_of(m.procs.size(), -1);
  for (const CommMember& mem : c.members)
    if (mem.proc < rank_of.size()) rank_of[mem.proc] = mem.rank;
  const std::string key = CommKey(c);
  std::vector<RankAcc*> acc(n, nullptr);
  for (size_t j = 0; j < n; ++j) {
    const int32_t rank = rank_of[sc.procs[j]];
    if (rank < 0) continue;
    RankAcc& a = (*out)[RankKey{key, c.nranks, rank}];
    acc[j] = &a;
    a.stride = std::max(a.stride, sc.stride);
    a.lateness.reserve(a.lateness.size() + sc.positions.size());
    const std::string name = ProcName(m, sc.procs[j]);
    if (std::find(a.procs.begin(), a.procs.end(), name) == a.procs.end()) {
      a.procs.push_back(name);
      a.proc_ids.push_back(sc.procs[j]);
    }
  }
  std::vector<int64_t> starts(n), sorted, helds;
  for (size_t k = 0; k < sc.positions.size(); ++k) {
    if (sc.warmup[k]) continue;
    for (size_t j = 0; j < n; ++j)
      starts[j] = SaturatingAdd(sc.local_starts_ns[k * n + j], m.procs[sc.procs[j]].offset_ns);
    sorted = starts;
    const int64_t median = LowerMedian(&sorted);
    helds.clear();
    if (sc.held_ns.size() == sc.positions.size() * n)
      for (size_t j = 0; j < n; ++j)
        if (sc.held_ns[k * n + j] != kNoTime) helds.push_back(sc.held_ns[k * n + j]);
    const int64_t gpu_median = helds.size() >= 2 ? LowerMedian(&helds) : kNoTime;
    for (size_t j = 0; j < n; ++j) {
      if (acc[j] == nullptr) continue;
      acc[j]->lateness.push_back(starts[j] - median);
      if (gpu_median != kNoTime && sc.held_ns[k * n + j] != kNoTime)
        acc[j]->gpu_lateness[sc.funcs[k]].push_back(sc.held_ns[k * n + j] - gpu_median);
    }
  }
}


// The most distinct caller tags a row lists (a framework's phases or
// layers; a step number in the tag would give one per call).
constexpr size_t kMaxRowTags = 16;

struct Acc {
  Func fn = Func::kOther;  // the row's function (its key holds the name)
  int32_t nranks = 0;
  double bytes_sum = 0;
  uint64_t bytes_n = 0;
  std::vector<uint32_t> matches;  // sorted and deduplicated at the end
  uint32_t unmatched = 0;
  uint32_t incomplete = 0;
  uint32_t warmup = 0;
  std::vector<uint32_t> warmed;  // per process: its timed ops of the row left out so far
  std::vector<int64_t> gpu, cpu, polled, delay, skew;
  // Where each process's samples start in gpu, cpu and polled (each
  // process's are together, in its program order): the series whose
  // neighbours IndependentShare measures.
  std::vector<std::array<size_t, 3>> series_starts;
  uint32_t series_proc = UINT32_MAX;
  uint64_t skew_stride = 0;  // skew from samples across the job (StatRow.skew_stride)
  std::set<uint64_t> tags;   // the callers' tags (StatRow.user_tags), at most kMaxRowTags + 1
  // From per-node summaries (Proc::row_digests): every operation of those
  // processes; their window ops are not counted again.
  bool sketched = false;
  uint64_t digest_calls = 0;                   // of communicators whole in summaries
  uint64_t digest_ops_max = 0, digest_ops_sum = 0;  // of the others
  Sketch sgpu, scpu, spolled, sdelay, sskew;
};

bool IsP2p(Func f) { return f == Func::kSend || f == Func::kRecv || f == Func::kSendRecv; }

// A row's samples: exact (reordered by a quantile), or where the row has
// summaries' digests, their merged sketch.
class Dist {
 public:
  Dist(std::vector<int64_t>* exact, const Sketch* sketch) : exact_(exact), sketch_(sketch) {}
  size_t size() const { return sketch_ != nullptr ? sketch_->count() : exact_->size(); }
  bool empty() const { return size() == 0; }
  int64_t Quantile(double p) const { return sketch_ != nullptr ? sketch_->Quantile(p) : Percentile(exact_, p); }
  std::vector<double> SamplesUs() const {
    if (sketch_ == nullptr) return ncclwatch::tools::SamplesUs(*exact_);
    std::vector<double> us;
    for (int64_t v : sketch_->Representatives(kMaxRowSamples)) us.push_back(static_cast<double>(v) / 1000.0);
    return us;
  }

 private:
  std::vector<int64_t>* exact_;
  const Sketch* sketch_;
};

double Us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

}  // namespace

int64_t Percentile(std::vector<int64_t>* v, double p) {
  // Nearest rank: ceil(p/100 * n), 1-based.
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v->size())));
  rank = std::min(std::max<size_t>(rank, 1), v->size());
  auto nth = v->begin() + static_cast<std::ptrdiff_t>(rank - 1);
  std::nth_element(v->begin(), nth, v->end());
  return *nth;
}


std::string CommKey(const Comm& c) {
  if (!c.name.empty()) return c.name;
  return "(unnamed, " + std::to_string(c.nranks) + " ranks)";
}

std::string BucketLabel(int32_t log2) {
  if (log2 == -2) return "unknown";
  if (log2 < 0) return "0 B";
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  return std::to_string(uint64_t{1} << (log2 % 10)) + " " + kUnits[log2 / 10];
}

namespace {

using Rows = std::map<RowKey, Acc>;

// The row of an operation (its communicator, function and size bucket), and
// its bytes when known.
Acc& RowOf(const Model& m, const Op& o, double* bytes, bool* known, Rows* rows) {
  const Comm& c = m.comms[o.comm];
  RowKey k{CommKey(c), FuncName(m, o.func), BucketOf(m, o, bytes, known)};
  Acc& a = (*rows)[k];
  a.nranks = std::max(a.nranks, c.nranks);
  a.fn = o.fn;
  return a;
}

// Where each communicator's skew and lateness come from.
struct Sources {
  bool any_digest = false;  // some process is a summary's (Proc::digested)
  // Whole from summaries: each member's summary held every rank of it (a
  // process read from its trace file instead brings its own samples, which
  // the digests lack); and their row keys.
  std::vector<bool> whole;
  std::set<std::string> whole_keys;
  std::vector<int32_t> sampled;  // SampledForStats
  // Whole or sampled: the digests or the samples give skew and lateness,
  // not the model's collectives.
  std::vector<bool> elsewhere;
};

Sources SourcesOf(const Model& m) {
  Sources src;
  for (const Proc& p : m.procs) src.any_digest |= p.digested;
  src.whole.assign(m.comms.size(), false);
  for (size_t ci = 0; ci < m.comms.size() && src.any_digest; ++ci) {
    const std::string key = CommKey(m.comms[ci]);
    bool all = !m.comms[ci].members.empty();
    for (const CommMember& mem : m.comms[ci].members) {
      const Proc* p = mem.proc < m.procs.size() ? &m.procs[mem.proc] : nullptr;
      all = all && p != nullptr && p->digested &&
            std::find(p->whole_comms.begin(), p->whole_comms.end(), key) != p->whole_comms.end();
    }
    src.whole[ci] = all;
  }
  for (size_t ci = 0; ci < m.comms.size(); ++ci)
    if (src.whole[ci]) src.whole_keys.insert(CommKey(m.comms[ci]));
  src.sampled = SampledForStats(m, src.whole);
  src.elsewhere.assign(m.comms.size(), false);
  for (size_t ci = 0; ci < m.comms.size(); ++ci) src.elsewhere[ci] = src.whole[ci] || src.sampled[ci] >= 0;
  return src;
}

// A summary's process brings every op as its digests (Proc::row_digests).
void AddDigests(const Proc& p, const Sources& src, Rows* rows) {
  for (const RowDigest& d : p.row_digests) {
    Acc& a = (*rows)[RowKey{d.comm, d.func.empty() ? std::string("(unknown)") : d.func, d.bucket}];
    a.nranks = std::max(a.nranks, d.nranks);
    a.fn = FuncFromName(d.func);
    a.sketched = true;
    a.bytes_sum += d.bytes_sum;
    a.bytes_n += d.bytes_n;
    if (src.whole_keys.count(d.comm)) {
      a.digest_calls += d.calls;
    } else {
      a.digest_ops_max = std::max(a.digest_ops_max, d.ops);
      a.digest_ops_sum += d.ops;
    }
    a.incomplete += static_cast<uint32_t>(d.incomplete);
    a.warmup += static_cast<uint32_t>(d.warmup);
    a.sgpu.Merge(d.gpu);
    a.scpu.Merge(d.cpu);
    a.spolled.Merge(d.polled);
    a.sdelay.Merge(d.delay);
    // Else the model's collectives give the skew.
    if (src.whole_keys.count(d.comm)) a.sskew.Merge(d.skew);
  }
}

// Process `pi`'s ops in program order: its first timed ops of a row are
// warm-up (StatsOptions), left out of the timings.
void AddOps(const Model& m, uint32_t pi, const StatsOptions& opts, Rows* rows) {
  for (uint32_t oi : m.procs[pi].ops) {
    const Op& o = m.ops[oi];
    if (o.comm >= m.comms.size()) continue;
    double bytes = 0;
    bool known = false;
    Acc& a = RowOf(m, o, &bytes, &known, rows);
    if (known) {
      a.bytes_sum += bytes;
      ++a.bytes_n;
    }
    if (o.match != kNone) a.matches.push_back(o.match);
    else ++a.unmatched;
    if (const uint64_t tag = UserTag(m, oi); tag != 0 && a.tags.size() <= kMaxRowTags) a.tags.insert(tag);
    if (a.series_proc != pi) {
      a.series_proc = pi;
      a.series_starts.push_back({a.gpu.size(), a.cpu.size(), a.polled.size()});
    }
    if (a.warmed.size() <= pi) a.warmed.resize(m.procs.size(), 0);
    const OpSample smp = Sample(o, &a.warmed[pi], opts);
    a.incomplete += smp.incomplete;
    a.warmup += smp.warmup;
    if (smp.gpu) a.gpu.push_back(smp.gpu_ns);
    if (smp.delay) a.delay.push_back(smp.delay_ns);
    if (smp.cpu) a.cpu.push_back(smp.cpu_ns);
    if (smp.polled) a.polled.push_back(smp.cpu_ns);
  }
}

// Arrival skew, per collective seen on two ranks or more, and at the
// collectives sampled across the job, on the aligned clock.
void AddSkew(const Model& m, const Sources& src, Rows* rows) {
  for (const Match& match : m.matches) {
    uint32_t first;
    int64_t skew;
    if (match.comm < src.elsewhere.size() && src.elsewhere[match.comm]) continue;  // in the digests or samples
    if (!Skew(m, match, &first, &skew)) continue;
    double bytes;
    bool known;
    RowOf(m, m.ops[first], &bytes, &known, rows).skew.push_back(skew);
  }
  for (int32_t k : src.sampled) {
    if (k < 0) continue;
    const SampledComm& sc = m.sampled[static_cast<size_t>(k)];
    const Comm& c = m.comms[sc.comm];
    const size_t n = sc.procs.size();
    for (size_t p = 0; p < sc.positions.size(); ++p) {
      int64_t lo = INT64_MAX, hi = INT64_MIN;
      for (size_t j = 0; j < n; ++j) {
        const int64_t t = SaturatingAdd(sc.local_starts_ns[p * n + j], m.procs[sc.procs[j]].offset_ns);
        lo = std::min(lo, t);
        hi = std::max(hi, t);
      }
      Acc& a = (*rows)[RowKey{CommKey(c), FuncName(m, sc.funcs[p]), sc.buckets[p]}];
      a.nranks = std::max(a.nranks, c.nranks);
      a.fn = FuncFromName(m.Str(sc.funcs[p]));
      a.skew.push_back(hi - lo);
      a.skew_stride = std::max(a.skew_stride, sc.stride);
    }
  }
}

// The share of a row's latency samples (`which`: 0 gpu, 1 cpu, 2 polled,
// in program order per process) that are independent draws.
double LatencyShare(const Acc& a, int which) {
  const std::vector<int64_t>& v = which == 0 ? a.gpu : which == 1 ? a.cpu : a.polled;
  std::vector<std::vector<double>> series;
  for (size_t i = 0; i < a.series_starts.size(); ++i) {
    const size_t from = a.series_starts[i][which];
    const size_t to = i + 1 < a.series_starts.size() ? a.series_starts[i + 1][which] : v.size();
    if (to > from) series.emplace_back(v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(to));
  }
  return IndependentShare(series);
}

// One row of the output from its accumulator (whose samples it reorders).
void WriteRow(const RowKey& key, Acc& a, stats::StatRow* r) {
  // Before any quantile reorders the samples.
  const int which = !a.gpu.empty() ? 0 : !a.cpu.empty() ? 1 : 2;
  const bool any = !a.gpu.empty() || !a.cpu.empty() || !a.polled.empty();
  const double share = a.sketched || !any ? 0 : LatencyShare(a, which);
  std::sort(a.matches.begin(), a.matches.end());
  a.matches.erase(std::unique(a.matches.begin(), a.matches.end()), a.matches.end());
  r->set_comm(SanitizeUtf8(key.comm));
  r->set_nranks(a.nranks);
  r->set_func(SanitizeUtf8(key.func));
  r->set_bucket_log2(key.bucket);
  r->set_bucket(BucketLabel(key.bucket));
  if (a.bytes_n > 0) r->set_bytes(a.bytes_sum / static_cast<double>(a.bytes_n));
  uint64_t calls = a.matches.size() + a.unmatched;
  // A summary keeps each rank's count: a collective is one call on every
  // rank, a send or receive one call of its own.
  if (a.sketched) {
    calls += a.digest_calls;
    calls = IsP2p(a.fn) ? calls + a.digest_ops_sum : std::max(calls, a.digest_ops_max);
  }
  r->set_calls(static_cast<uint32_t>(calls));
  if (share > 0 && calls > 0)
    r->set_independent_calls(static_cast<uint32_t>(std::max<double>(1.0, std::round(static_cast<double>(calls) * share))));
  for (uint64_t tag : a.tags) {
    if (static_cast<size_t>(r->user_tags_size()) == kMaxRowTags) {
      r->set_user_tags_cut(true);
      break;
    }
    r->add_user_tags(tag);
  }
  r->set_incomplete(a.incomplete);
  r->set_warmup(a.warmup);
  if (a.sketched) {
    // The exact samples of the other processes join the sketches.
    r->set_sketched(true);
    for (int64_t v : a.gpu) a.sgpu.Add(v);
    for (int64_t v : a.cpu) a.scpu.Add(v);
    for (int64_t v : a.polled) a.spolled.Add(v);
    for (int64_t v : a.delay) a.sdelay.Add(v);
    for (int64_t v : a.skew) a.sskew.Add(v);
  }
  auto dist = [&a](std::vector<int64_t>* v, const Sketch& sk) { return Dist(v, a.sketched ? &sk : nullptr); };
  const Dist gpu = dist(&a.gpu, a.sgpu), cpu = dist(&a.cpu, a.scpu), polled_d = dist(&a.polled, a.spolled);
  const Dist delay = dist(&a.delay, a.sdelay), skew = dist(&a.skew, a.sskew);
  // Completions seen by polling a CUDA event time the writer's look, not
  // the kernel: a latency bound, no bandwidth (0.08 GB/s of polling delay
  // was printed as a bus bandwidth before).
  const Dist* lat = !gpu.empty() ? &gpu : !cpu.empty() ? &cpu : !polled_d.empty() ? &polled_d : nullptr;
  const bool polled = lat == &polled_d;
  r->set_timing(!gpu.empty() ? "gpu" : !cpu.empty() ? "cpu" : polled ? "polled" : "none");
  if (lat != nullptr) {
    r->set_samples(static_cast<uint32_t>(lat->size()));
    const int64_t p50 = lat->Quantile(50);
    r->set_latency_p50_us(Us(p50));
    r->set_latency_p99_us(Us(lat->Quantile(99)));
    double factor;
    const bool has_factor = BusBwFactor(a.fn, a.nranks, &factor);
    if (has_factor) r->set_busbw_factor(factor);
    if (r->has_bytes() && p50 > 0 && !polled) {
      const double algbw = r->bytes() / static_cast<double>(p50);  // bytes per ns = GB/s
      r->set_algbw_gbps(algbw);
      if (has_factor) r->set_busbw_gbps(algbw * factor);
    }
  }
  if (!delay.empty()) {
    r->set_delay_p50_us(Us(delay.Quantile(50)));
    r->set_delay_p99_us(Us(delay.Quantile(99)));
  }
  r->set_skew_samples(static_cast<uint32_t>(skew.size()));
  if (a.skew_stride > 0) r->set_skew_stride(static_cast<uint32_t>(std::min<uint64_t>(a.skew_stride, UINT32_MAX)));
  if (!skew.empty()) {
    r->set_skew_p50_us(Us(skew.Quantile(50)));
    r->set_skew_p99_us(Us(skew.Quantile(99)));
  }
  if (lat != nullptr)
    for (double v : lat->SamplesUs()) r->add_latency_us(v);
  for (double v : delay.SamplesUs()) r->add_delay_us(v);
  for (double v : skew.SamplesUs()) r->add_skew_us(v);
}

// Each rank's lateness (RankRow): of the communicators whole in a summary
// from its digests, of the others from the collectives in the model
// (windows, for a summary's ranks) or the samples across the job.
void WriteRanks(const Model& m, const Sources& src, stats::Stats* out) {
  std::map<RankKey, RankAcc> late = Lateness(m, src.elsewhere);
  for (int32_t k : src.sampled)
    if (k >= 0) SampledLateness(m, m.sampled[static_cast<size_t>(k)], &late);
  std::map<RankKey, Sketch> late_sketch;
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    if (!m.procs[pi].digested) continue;
    for (const RankDigest& d : m.procs[pi].rank_digests) {
      if (!src.whole_keys.count(d.comm)) continue;  // the model's collectives give it
      const RankKey k{d.comm, d.nranks, d.rank};
      late_sketch[k].Merge(d.lateness);
      std::vector<std::string>& procs = late[k].procs;
      const std::string name = ProcName(m, pi);
      if (std::find(procs.begin(), procs.end(), name) == procs.end()) procs.push_back(name);
    }
  }
  for (auto& [key, a] : late) {
    auto sk = late_sketch.find(key);
    const bool sketched = sk != late_sketch.end();
    if (sketched)
      for (int64_t v : a.lateness) sk->second.Add(v);
    const Dist d(&a.lateness, sketched ? &sk->second : nullptr);
    if (d.empty()) continue;
    stats::RankRow* r = out->add_ranks();
    r->set_comm(SanitizeUtf8(key.comm));
    r->set_nranks(key.nranks);
    r->set_rank(key.rank);
    std::sort(a.procs.begin(), a.procs.end());
    for (const std::string& p : a.procs) r->add_procs(SanitizeUtf8(p));
    r->set_samples(static_cast<uint32_t>(d.size()));
    r->set_lateness_p50_us(Us(d.Quantile(50)));
    r->set_lateness_p99_us(Us(d.Quantile(99)));
    for (double v : d.SamplesUs()) r->add_lateness_us(v);
    if (sketched) r->set_sketched(true);
    if (a.stride > 0) r->set_stride(static_cast<uint32_t>(std::min<uint64_t>(a.stride, UINT32_MAX)));
    // The function at which the rank is the most held on its GPU, at the
    // median (of the model's collectives: summaries' windows).
    int64_t best_p50 = 0;
    for (auto& [func, v] : a.gpu_lateness) {
      const int64_t p50 = Percentile(&v, 50);
      if (r->has_gpu_lateness_p50_us() && p50 <= best_p50) continue;
      best_p50 = p50;
      r->set_gpu_func(SanitizeUtf8(m.Str(func)));
      r->set_gpu_samples(static_cast<uint32_t>(v.size()));
      r->set_gpu_lateness_p50_us(Us(p50));
      r->set_gpu_lateness_p99_us(Us(Percentile(&v, 99)));
    }
  }
}

// What the numbers rest on: summaries' sketches and windows, and which
// communicators are sampled, how often.
void AddNotes(const Model& m, const Sources& src, stats::Stats* out) {
  if (src.any_digest) {
    out->add_notes("quantiles and bandwidths marked '~' come from per-node summaries' sketches: each within 1% of the"
                   " exact value; counts are exact");
    bool partial = false;
    for (size_t ci = 0; ci < m.comms.size(); ++ci)
      if (!src.elsewhere[ci])
        for (const CommMember& mem : m.comms[ci].members)
          partial |= mem.proc < m.procs.size() && m.procs[mem.proc].digested;
    if (partial)
      out->add_notes("arrival skew and lateness of communicators spanning several summaries are of the summaries'"
                     " windows only (each rank's last operations)");
  }
  // Per row key once (thousands of 'tp' groups share one), its strides' range.
  std::map<std::string, std::pair<uint64_t, uint64_t>> strides;
  for (int32_t k : src.sampled) {
    if (k < 0) continue;
    const SampledComm& sc = m.sampled[static_cast<size_t>(k)];
    auto [it, fresh] = strides.try_emplace(CommKey(m.comms[sc.comm]), sc.stride, sc.stride);
    it->second = {std::min(it->second.first, sc.stride), std::max(it->second.second, sc.stride)};
  }
  std::string where;
  for (const auto& [key, range] : strides) {
    const auto [lo, hi] = range;
    where += std::string(where.empty() ? "" : ", ") +
             (hi <= 1 ? std::string("every collective")
                      : "one in " + (lo == hi ? std::to_string(hi) : std::to_string(lo) + " to " + std::to_string(hi))) +
             " on '" + key + "'";
  }
  if (!where.empty())
    out->add_notes("arrival skew and lateness of communicators spanning several summaries are of the collectives the"
                   " summaries sampled across the job: " + where + " (in JSON, the rows' skew_stride and stride)");
}

}  // namespace

stats::Stats ComputeStats(const Model& m, const StatsOptions& opts) {
  const Sources src = SourcesOf(m);
  Rows rows;
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    if (m.procs[pi].digested) AddDigests(m.procs[pi], src, &rows);
    else AddOps(m, pi, opts, &rows);
  }
  AddSkew(m, src, &rows);
  stats::Stats out;
  out.set_format(kFormat);
  out.set_processes(static_cast<uint32_t>(m.procs.size()));
  out.set_alignment_method(m.alignment_method);
  out.set_alignment_error_us(m.alignment_error_ns / 1000.0);
  for (auto& [key, a] : rows) WriteRow(key, a, out.add_rows());
  WriteRanks(m, src, &out);
  AddNotes(m, src, &out);
  return out;
}

std::string StatsToJson(const stats::Stats& s) {
  return ReportJson(s);
}

bool StatsFromJson(const std::string& json, stats::Stats* s, std::string* error) {
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  auto status = google::protobuf::util::JsonStringToMessage(json, s, o);
  if (!status.ok()) {
    *error = "not ncclwatch stats JSON: " + std::string(status.message());
    return false;
  }
  if (s->format() == "ncclwatch-stats/1") {
    *error = "format ncclwatch-stats/1 (an older ncclwatch) holds no samples, which 'check' tests; make the baseline"
             " again with this version's 'ncclwatch stats --format=json'";
    return false;
  }
  if (s->format() != kFormat) {
    *error = "not ncclwatch stats JSON (no \"format\": \"" + std::string(kFormat) +
             "\"; make one with 'ncclwatch stats --format=json')";
    return false;
  }
  return true;
}

}  // namespace ncclwatch::tools
