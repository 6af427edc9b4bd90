// STRAGGLER: a rank that repeatedly joins collectives late.

#include "tools/diagnose/finders.h"
#include "tools/model/gpu_held.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ncclwatch::tools::diagnose_internal {
namespace {

// The median by selection, not a full sort: it runs once per collective
// over every rank (10 M values for 1,024 ranks x 10,000 collectives).
double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2), v.end());
  const double hi = v[n / 2];
  if (n % 2) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2));
  return (lo + hi) / 2;
}

// Each process's arrivals at the collectives of `m` seen complete on every
// rank: how many, how often last and late, and its lags behind the median
// rank, in all and per (communicator, function).
struct Row {
  uint32_t total = 0, late = 0;
  std::vector<double> lags;
  void Reserve(size_t more) { lags.reserve(lags.size() + more); }
};
struct Tally {
  std::vector<uint32_t> total, late;
  std::vector<std::vector<double>> lags;
  std::vector<std::map<uint32_t, uint32_t>> late_comm;
  // Per process and (communicator, function): a rank late at only one of
  // the step's functions (it sleeps before each all_reduce) is late at a
  // minority of all its collectives, and a straggler all the same.
  std::vector<std::map<std::pair<uint32_t, uint16_t>, Row>> rows;
  // Counted with each collective's weight: 1 for whole arrivals, the
  // stride for samples (each stands for that many of its communicator's),
  // so that a communicator sampled one in 4 does not weigh as much as one
  // sampled one in 16 in a rank's share of late arrivals.
  std::vector<uint64_t> weighted_total, weighted_late;
};

// Across hosts, arrivals are known to the clock alignment's error. On one
// host the processes share one clock, and that "error" is only how far
// apart the ranks saw one collective end (57 ms with 4 ranks sharing a
// GPU over sockets), which says nothing about when they arrived.
double Threshold(const Model& m, const DiagnoseOptions& o) {
  const double clock_error = m.hosts.size() > 1 ? 2 * m.alignment_error_ns / 1e9 : 0.0;
  return std::max(o.straggler_threshold_ms * 1e-3, clock_error);
}

Tally NewTally(size_t np) {
  Tally t;
  t.total.assign(np, 0);
  t.late.assign(np, 0);
  t.weighted_total.assign(np, 0);
  t.weighted_late.assign(np, 0);
  t.lags.resize(np);
  t.late_comm.resize(np);
  t.rows.resize(np);
  return t;
}

// One collective's arrivals, whole (Count) or sampled (CountSampled): per
// rank its process, start and duration. Each process's lag behind the
// median start is counted, and the last arriver is late when by more than
// `thr` and `fraction` of its own collective's length. One rule for both,
// so that samples are judged as the traces are.
void Judge(const std::vector<uint32_t>& procs, const std::vector<Row*>& rows, const std::vector<double>& starts,
           const std::vector<double>& durs, uint32_t comm, uint64_t weight, double thr, double fraction, Tally* t) {
  const double med = MedianOf(starts);
  size_t last = 0;
  for (size_t i = 0; i < procs.size(); ++i) {
    const uint32_t pr = procs[i];
    ++t->total[pr];
    t->weighted_total[pr] += weight;
    t->lags[pr].push_back(starts[i] - med);
    ++rows[i]->total;
    rows[i]->lags.push_back(starts[i] - med);
    if (starts[i] > starts[last]) last = i;
  }
  // The collective's own length is the last arriver's: the others'
  // include their wait for it (the straggler's own delay).
  const double dur = durs[last];
  const double lag = starts[last] - med;
  if (lag > thr && lag > fraction * dur) {
    const uint32_t pr = procs[last];
    ++t->late[pr];
    t->weighted_late[pr] += weight;
    ++t->late_comm[pr][comm];
    ++rows[last]->late;
  }
}

Tally Count(const Model& m, double thr, double fraction) {
  Tally t = NewTally(m.procs.size());
  std::vector<double> starts, durs;
  std::vector<uint32_t> procs;
  std::vector<Row*> rows;
  for (const Match& mt : m.matches) {
    if (mt.kind != OpKind::kColl) continue;
    auto present = Present(m, mt);
    if (present.size() < 2 || static_cast<int32_t>(present.size()) < m.comms[mt.comm].nranks) continue;
    // Put back from summaries for the mismatch finder only: a rank's
    // arrivals around them are gone.
    if (std::any_of(present.begin(), present.end(), [&](const auto& x) { return AskedOp(m, x.second); })) continue;
    bool all_done = true;
    starts.clear();
    durs.clear();
    procs.clear();
    rows.clear();
    const std::pair<uint32_t, uint16_t> key{mt.comm, m.ops[present[0].second].func};
    for (auto& [r, oi] : present) {
      const Op& op = m.ops[oi];
      if (op.state != OpState::kCompleted || op.start_ns == kNoTime || op.done_ns == kNoTime) {
        all_done = false;
        break;
      }
      starts.push_back(static_cast<double>(op.start_ns) / 1e9);
      durs.push_back(static_cast<double>(op.done_ns - op.start_ns) / 1e9);
      procs.push_back(op.proc);
      rows.push_back(&t.rows[op.proc][key]);
    }
    if (!all_done) continue;
    Judge(procs, rows, starts, durs, mt.comm, 1, thr, fraction, &t);
  }
  return t;
}

// Processes whose arrivals the windows do not hold whole: theirs lacks
// some collectives (let go by a summary or cut by its cap, or put back from
// summaries: AskedOp), or a peer's on one of their communicators does,
// since a collective counts only where every rank holds it (a trace file
// read whole beside other nodes' summaries is judged over their windows).
std::vector<bool> WindowLacks(const Model& m) {
  std::vector<bool> lacks(m.procs.size(), false);
  for (uint32_t oi : m.asked_ops)
    if (m.ops[oi].proc < lacks.size()) lacks[m.ops[oi].proc] = true;
  for (size_t pi = 0; pi < m.procs.size(); ++pi)
    lacks[pi] = lacks[pi] || m.procs[pi].settled_ops > 0 || m.procs[pi].cut_ops > 0;
  std::vector<bool> peers = lacks;
  for (const Comm& c : m.comms) {
    bool any = false;
    for (const CommMember& mem : c.members) any = any || (mem.proc < lacks.size() && lacks[mem.proc]);
    if (!any) continue;
    for (const CommMember& mem : c.members)
      if (mem.proc < peers.size()) peers[mem.proc] = true;
  }
  return peers;
}

// Which processes the summaries' arrival samples judge (Model::sampled):
// those each of whose communicators is covered by them.
std::vector<bool> SampledProcs(const Model& m) {
  std::vector<bool> covered(m.comms.size(), false);
  for (const SampledComm& sc : m.sampled)
    if (sc.comm < covered.size()) covered[sc.comm] = sc.covered;
  std::vector<bool> judged(m.procs.size(), false), any(m.procs.size(), false);
  for (size_t ci = 0; ci < m.comms.size(); ++ci)
    for (const CommMember& mem : m.comms[ci].members)
      if (mem.proc < m.procs.size()) any[mem.proc] = true;
  for (size_t pi = 0; pi < m.procs.size(); ++pi) judged[pi] = any[pi];
  for (size_t ci = 0; ci < m.comms.size(); ++ci)
    for (const CommMember& mem : m.comms[ci].members)
      if (mem.proc < m.procs.size() && !covered[ci]) judged[mem.proc] = false;
  return judged;
}

// The sampled arrivals judged as Count judges whole ones, on the aligned
// clock (each member's start plus its Proc::offset_ns).
// Whether CountSampled judges `sc`'s positions.
bool Judgeable(const Model& m, const SampledComm& sc) {
  const size_t n = sc.procs.size();
  return n >= 2 && sc.comm < m.comms.size() && sc.local_starts_ns.size() == sc.positions.size() * n;
}

// How many sampled collectives CountSampled judges per process (its
// Tally::total), without judging them.
std::vector<uint32_t> SampledTotals(const Model& m) {
  std::vector<uint32_t> total(m.procs.size(), 0);
  for (const SampledComm& sc : m.sampled)
    if (Judgeable(m, sc))
      for (uint32_t pi : sc.procs) total[pi] += static_cast<uint32_t>(sc.positions.size());
  return total;
}

// Each member's row per function of `sc` (rows: per process, by
// (communicator, function)), found once and sized for the function's
// positions: 'world' of 16,384 members at ~250 positions is 4 M values,
// which growing lists copied again and again.
template <typename R>
std::map<uint16_t, std::vector<R*>> RowsPerFunc(const SampledComm& sc,
                                                std::vector<std::map<std::pair<uint32_t, uint16_t>, R>>* rows) {
  std::map<uint16_t, size_t> positions;
  for (uint16_t f : sc.funcs) ++positions[f];
  std::map<uint16_t, std::vector<R*>> of_func;
  for (const auto& [f, count] : positions) {
    std::vector<R*>& of = of_func[f];
    for (uint32_t pi : sc.procs) {
      of.push_back(&(*rows)[pi][{sc.comm, f}]);
      of.back()->Reserve(count);
    }
  }
  return of_func;
}

Tally CountSampled(const Model& m, double thr, double fraction) {
  Tally t = NewTally(m.procs.size());
  // Each process's lag list sized once, as RowsPerFunc sizes the rows'.
  const std::vector<uint32_t> totals = SampledTotals(m);
  for (size_t pi = 0; pi < totals.size(); ++pi) t.lags[pi].reserve(totals[pi]);
  std::vector<double> starts, durs;
  for (const SampledComm& sc : m.sampled) {
    const size_t n = sc.procs.size();
    if (!Judgeable(m, sc)) continue;
    std::map<uint16_t, std::vector<Row*>> of_func = RowsPerFunc(sc, &t.rows);
    for (size_t k = 0; k < sc.positions.size(); ++k) {
      starts.clear();
      durs.clear();
      for (size_t j = 0; j < n; ++j) {
        const int64_t at = SaturatingAdd(sc.local_starts_ns[k * n + j], m.procs[sc.procs[j]].offset_ns);
        starts.push_back(static_cast<double>(at) / 1e9);
        durs.push_back(static_cast<double>(sc.durations_ns[k * n + j]) / 1e9);
      }
      Judge(sc.procs, of_func[sc.funcs[k]], starts, durs, sc.comm, sc.stride, thr, fraction, &t);
    }
  }
  return t;
}

// Each process's sampled communicators (Model::sampled indices, those
// with positions), listed once: looked up per process and communicator,
// 'world' of 16,384 members made this quadratic.
std::vector<std::vector<uint32_t>> SampledOf(const Model& m) {
  std::vector<std::vector<uint32_t>> of(m.procs.size());
  for (uint32_t k = 0; k < m.sampled.size(); ++k)
    if (!m.sampled[k].positions.empty())
      for (uint32_t pi : m.sampled[k].procs)
        if (pi < of.size() && (of[pi].empty() || of[pi].back() != k)) of[pi].push_back(k);
  return of;
}

// "every collective", "one in 2", "one in 16": not "every n-th", since
// summarize picks them by a hash of their position (SampledPosition).
std::string EveryNth(uint64_t n) { return n <= 1 ? "every collective" : "one in " + Thousands(n); }

// "one in 16 on comm 'world' (8 ranks)", for each of a process's sampled
// communicators (`of_proc`, Model::sampled indices).
std::string SampledWhere(const Ctx& c, const std::vector<uint32_t>& of_proc) {
  std::string s;
  for (uint32_t k : of_proc) {
    const SampledComm& sc = c.m.sampled[k];
    s += (s.empty() ? "" : ", ") + EveryNth(sc.stride) + " on " + c.CommLabel(sc.comm);
  }
  return s;
}

// A summary's process judged from its digest (all its collectives), not
// from its window, when the digest was made with the thresholds used now.
bool UsesDigest(const Proc& p, double thr, double fraction) {
  return p.digested && p.arrivals.valid && p.arrivals.threshold_s == thr && p.arrivals.fraction == fraction;
}

// The GPU-held finder's rows (FindGpuHeld), per process and (communicator,
// function): collectives whose every rank's held time is known, those where
// it was held longest and past the bar, its held lags and its host's
// arrival lags behind the median rank's.
struct HeldRow {
  uint32_t total = 0, late = 0;
  std::vector<double> lags, host_lags;
  void Reserve(size_t more) {
    lags.reserve(lags.size() + more);
    host_lags.reserve(host_lags.size() + more);
  }
};
using HeldRows = std::vector<std::map<std::pair<uint32_t, uint16_t>, HeldRow>>;

// Late on the GPU means held more than the median rank by more than the
// threshold and two polling intervals (a held time is known to one).
double HeldBar(double thr) { return std::max(thr, 2.0 * static_cast<double>(kGpuHeldResolutionNs) / 1e9); }

// One collective's held times and host arrivals (s), per rank its row (its
// process's, at this communicator and function): one rule for windows,
// digests and samples.
void JudgeHeld(const std::vector<HeldRow*>& rows, const std::vector<double>& helds, const std::vector<double>& starts,
               double bar) {
  const double med = MedianOf(helds), med_start = MedianOf(starts);
  size_t last = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    HeldRow& row = *rows[i];
    ++row.total;
    row.lags.push_back(helds[i] - med);
    row.host_lags.push_back(starts[i] - med_start);
    if (helds[i] > helds[last]) last = i;
  }
  if (helds[last] - med > bar) ++rows[last]->late;
}

// Over the windows' collectives seen on every rank.
HeldRows CountHeld(const Model& m, double bar) {
  HeldRows rows(m.procs.size());
  const std::vector<int64_t> held = GpuHeldNs(m);
  std::vector<double> helds, starts;
  std::vector<HeldRow*> of;
  for (const Match& mt : m.matches) {
    if (mt.kind != OpKind::kColl) continue;
    auto present = Present(m, mt);
    if (present.size() < 2 || static_cast<int32_t>(present.size()) < m.comms[mt.comm].nranks) continue;
    if (std::any_of(present.begin(), present.end(), [&](const auto& x) { return AskedOp(m, x.second); }))
      continue;  // as in Count
    if (std::any_of(present.begin(), present.end(), [&](const auto& x) { return held[x.second] == kNoTime; }))
      continue;
    helds.clear();
    starts.clear();
    of.clear();
    const std::pair<uint32_t, uint16_t> key{mt.comm, m.ops[present[0].second].func};
    for (auto& [r, oi] : present) {
      helds.push_back(static_cast<double>(held[oi]) / 1e9);
      starts.push_back(static_cast<double>(m.ops[oi].start_ns) / 1e9);
      of.push_back(&rows[m.ops[oi].proc][key]);
    }
    JudgeHeld(of, helds, starts, bar);
  }
  return rows;
}

// Over the summaries' samples (SampledComm::held_ns), on the aligned clock.
HeldRows CountHeldSampled(const Model& m, double bar) {
  HeldRows rows(m.procs.size());
  std::vector<double> helds, starts;
  for (const SampledComm& sc : m.sampled) {
    const size_t n = sc.procs.size();
    if (!Judgeable(m, sc) || sc.held_ns.size() != sc.positions.size() * n) continue;
    std::map<uint16_t, std::vector<HeldRow*>> of_func = RowsPerFunc(sc, &rows);
    for (size_t k = 0; k < sc.positions.size(); ++k) {
      helds.clear();
      starts.clear();
      for (size_t j = 0; j < n; ++j) {
        const int64_t h = sc.held_ns[k * n + j];
        if (h == kNoTime) break;
        helds.push_back(static_cast<double>(h) / 1e9);
        starts.push_back(static_cast<double>(SaturatingAdd(sc.local_starts_ns[k * n + j],
                                                           m.procs[sc.procs[j]].offset_ns)) /
                         1e9);
      }
      if (helds.size() != n) continue;
      JudgeHeld(of_func[sc.funcs[k]], helds, starts, bar);
    }
  }
  return rows;
}

// A row's counts and lags (s): what the finder reads, from rows counted
// here or from a summary's digest.
struct HeldJudged {
  uint32_t total = 0, late = 0;
  double median_lag = 0, max_lag = 0, host_lag = 0;
};
HeldJudged Judged(const HeldRow& r) {
  HeldJudged j{r.total, r.late, MedianOf(r.lags), 0, MedianOf(r.host_lags)};
  if (!r.lags.empty()) j.max_lag = *std::max_element(r.lags.begin(), r.lags.end());
  return j;
}

// A rank whose kernels wait on its GPU behind other work (GpuHeldNs) while
// its host enqueues in time: the others wait for it on their GPUs, and no
// host arrival shows it. Judged per (communicator, function) with the
// stricter per-function bar of the host-side finder (five collectives at
// least, late at three in four), late meaning held more than the median
// rank by more than the threshold and two polling intervals
// (HeldBar). Where summaries let operations go, a process is judged as the
// host-side finder judges it: from its digest (every collective, on its
// node's communicators), else from the samples across the job, else from
// its window. `host_named`: processes the host-side finder already named;
// `sampled_of`: SampledOf(m).
std::vector<Ranked> FindGpuHeld(const Ctx& c, double thr, const std::vector<bool>& host_named,
                                const std::vector<std::vector<uint32_t>>& sampled_of, const HeldRows& window,
                                const HeldRows& sampled) {
  const Model& m = c.m;
  std::vector<Ranked> out;
  const double bar = HeldBar(thr);
  const std::vector<bool> by_samples = SampledProcs(m), lacks = WindowLacks(m);
  const uint32_t min_n = std::max<uint32_t>(5, static_cast<uint32_t>(std::max(1, c.o.straggler_min_collectives)));
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    if (host_named[pi]) continue;
    const Proc& p = m.procs[pi];
    std::map<std::pair<uint32_t, uint16_t>, HeldJudged> rows;
    bool from_samples = false;
    if (UsesDigest(p, thr, c.o.straggler_duration_fraction) && p.arrivals.gpu_held) {
      for (const ArrivalRow& r : p.arrivals.rows) {
        auto ci = m.comm_of_hash.find(r.comm_hash);
        auto fi = m.string_ids.find(r.func);
        if (ci == m.comm_of_hash.end() || fi == m.string_ids.end() || r.held_total == 0) continue;
        rows[{ci->second, fi->second}] =
            HeldJudged{r.held_total, r.held_late, r.held_median_lag_s, r.held_max_lag_s, r.held_host_lag_s};
      }
    } else if (by_samples[pi] && lacks[pi] && p.samples_held) {
      for (const auto& [key, r] : sampled[pi]) rows[key] = Judged(r);
      from_samples = true;
    } else {
      for (const auto& [key, r] : window[pi]) rows[key] = Judged(r);
    }
    const std::pair<const std::pair<uint32_t, uint16_t>, HeldJudged>* worst = nullptr;
    for (const auto& kv : rows) {
      const HeldJudged& r = kv.second;
      if (r.total < min_n || 4 * r.late < 3 * r.total) continue;
      if (worst == nullptr || r.late * worst->second.total > worst->second.late * r.total) worst = &kv;
    }
    if (worst == nullptr) continue;
    const HeldJudged& r = worst->second;
    const double rf = static_cast<double>(r.late) / r.total;
    Finding f;
    f.set_kind(report::STRAGGLER);
    *f.add_culprits() = c.Ref(pi);
    SetComm(c, worst->first.first, &f);
    f.set_func(c.Str(worst->first.second));
    report::StragglerStats* st = f.mutable_straggler();
    st->set_collectives(r.total);
    st->set_late(r.late);
    st->set_late_fraction(rf);
    st->set_median_lag_ms(r.median_lag * 1e3);
    st->set_max_lag_ms(r.max_lag * 1e3);
    // Which of its communicators were sampled, and how often.
    // At stride 1 the samples are every collective: the traces' count,
    // said in the traces' words, as FindStragglers does.
    bool say_sampled = false;
    if (from_samples)
      for (uint32_t k : sampled_of[pi]) say_sampled = say_sampled || m.sampled[k].stride > 1;
    const std::string where = SampledWhere(c, sampled_of[pi]);
    f.set_summary("STRAGGLER: " + c.Name(pi) + "'s GPU got to " + c.Str(worst->first.second) + " on " +
                  c.CommLabel(worst->first.first) + " last at " + Thousands(r.late) + " of " + Thousands(r.total) +
                  (say_sampled ? " sampled across the job (" + where + Printf("; %.0f%%)", rf * 100)
                               : Printf(" (%.0f%%)", rf * 100)) +
                  ", a median " + Dur(r.median_lag) + " after the median rank's (max " + Dur(r.max_lag) +
                  "), behind other work on its GPU; its host enqueued them " +
                  (r.host_lag < bar ? std::string("in time") : "a median " + Dur(r.host_lag) + " late"));
    AddEvidence(&f, c.Name(pi),
                "its kernels waited behind other work on its GPU (the stream reached them late, as the plugin's "
                "CUDA events saw it, every ~10 ms); threshold " + Dur(bar) +
                    (say_sampled ? "; over the collectives the summaries sampled across the job" : ""));
    Emit(&out, 0, std::move(f));
    out.back().sampled = from_samples;
  }
  return out;
}

}  // namespace

struct StragglerCounts {
  Tally window, sampled;               // arrivals on the host
  HeldRows held_window, held_sampled;  // GPU-held times (FindGpuHeld)
};

void StragglerCountsDeleter::operator()(StragglerCounts* p) const { delete p; }

StragglerCountsPtr CountForStragglers(const Model& m, const DiagnoseOptions& o) {
  StragglerCountsPtr n(new StragglerCounts);
  const double thr = Threshold(m, o), bar = HeldBar(thr);
  n->window = Count(m, thr, o.straggler_duration_fraction);
  n->sampled = CountSampled(m, thr, o.straggler_duration_fraction);
  n->held_window = CountHeld(m, bar);
  // Only where some process may be judged from them (FindGpuHeld).
  const std::vector<bool> by_samples = SampledProcs(m), lacks = WindowLacks(m);
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi)
    if (by_samples[pi] && lacks[pi] && m.procs[pi].samples_held) {
      n->held_sampled = CountHeldSampled(m, bar);
      break;
    }
  return n;
}

namespace {

using RowKey = std::pair<uint32_t, uint16_t>;  // (communicator, function)

// Each process's arrivals as the host-side finder judges them: from its
// window, from the samples across the job where they stand for it, or from
// its summary's digest (UsesDigest).
struct HostArrivals {
  Tally t;  // counts, lags, late per communicator and rows, per process
  // Judged from samples; said so (not at stride 1, where the samples are
  // every collective: the traces' count, said in the traces' words); its
  // communicators sampled at different strides, so that its share of late
  // arrivals is weighted by them, and said so.
  std::vector<bool> from_samples, say_sampled, mixed;
  std::vector<double> med_all, max_all;  // the median and maximum lag
  std::vector<std::map<RowKey, std::pair<double, double>>> row_lag;  // per row: median and maximum lag

  std::pair<double, double> RowLag(uint32_t pi, const RowKey& key) const {
    auto it = row_lag[pi].find(key);
    return it == row_lag[pi].end() ? std::pair<double, double>{0, 0} : it->second;
  }
};

// Where summaries sampled every communicator of a process, its samples
// stand for the whole job, its window only for the last operations. A
// whole window is the exact count: judged from it, as from the traces.
// Moves the samples' counts into `a->t` where they stand.
void UseSamples(const Ctx& c, double thr, const std::vector<std::vector<uint32_t>>& sampled_of, Tally* sampled,
                HostArrivals* a) {
  const Model& m = c.m;
  const std::vector<bool> by_samples = SampledProcs(m);
  const std::vector<bool> lacks = WindowLacks(m);
  Tally& t = a->t;
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    if (!by_samples[pi] || !lacks[pi] || UsesDigest(m.procs[pi], thr, c.o.straggler_duration_fraction) ||
        sampled->total[pi] < kMinSampledCollectives)
      continue;
    a->from_samples[pi] = true;
    uint64_t stride = 0;
    for (uint32_t k : sampled_of[pi]) {
      const SampledComm& sc = m.sampled[k];
      a->say_sampled[pi] = a->say_sampled[pi] || sc.stride > 1;
      a->mixed[pi] = a->mixed[pi] || (stride != 0 && sc.stride != stride);
      stride = sc.stride;
    }
    t.total[pi] = sampled->total[pi];
    t.weighted_total[pi] = sampled->weighted_total[pi];
    t.weighted_late[pi] = sampled->weighted_late[pi];
    t.late[pi] = sampled->late[pi];
    t.lags[pi] = std::move(sampled->lags[pi]);
    t.late_comm[pi] = std::move(sampled->late_comm[pi]);
    t.rows[pi] = std::move(sampled->rows[pi]);
  }
}

// Medians and maxima of the lags: of the window's (or samples'), or a
// summary's whole from its digest, whose counts replace the window's.
void TakeLags(const Ctx& c, double thr, HostArrivals* a) {
  const Model& m = c.m;
  Tally& t = a->t;
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    const Proc& p = m.procs[pi];
    if (UsesDigest(p, thr, c.o.straggler_duration_fraction)) {
      t.total[pi] = p.arrivals.total;
      t.late[pi] = p.arrivals.late;
      a->med_all[pi] = p.arrivals.median_lag_s;
      a->max_all[pi] = p.arrivals.max_lag_s;
      t.rows[pi].clear();
      t.late_comm[pi].clear();
      for (const ArrivalRow& r : p.arrivals.rows) {
        auto ci = m.comm_of_hash.find(r.comm_hash);
        auto fi = m.string_ids.find(r.func);
        if (ci == m.comm_of_hash.end() || fi == m.string_ids.end()) continue;
        const RowKey key{ci->second, fi->second};
        Row& row = t.rows[pi][key];
        row.total = r.total;
        row.late = r.late;
        a->row_lag[pi][key] = {r.median_lag_s, r.max_lag_s};
        if (r.late > 0) t.late_comm[pi][ci->second] += r.late;
      }
      continue;
    }
    if (!t.lags[pi].empty()) {
      a->med_all[pi] = MedianOf(t.lags[pi]);
      a->max_all[pi] = *std::max_element(t.lags[pi].begin(), t.lags[pi].end());
    }
    for (const auto& [key, row] : t.rows[pi])
      if (!row.lags.empty())
        a->row_lag[pi][key] = {MedianOf(row.lags), *std::max_element(row.lags.begin(), row.lags.end())};
  }
}

// A STRAGGLER late at one function: held to a stricter bar (three in four,
// and five at least), since one function's rows are few. False where no
// row of `pi` passes it.
bool OneFunctionStraggler(const Ctx& c, const HostArrivals& a, uint32_t pi, double thr, uint32_t min_n,
                          const std::vector<uint32_t>& sampled_of, Finding* out) {
  const Tally& t = a.t;
  const std::pair<const RowKey, Row>* worst = nullptr;
  for (const auto& kv : t.rows[pi]) {
    const Row& r = kv.second;
    if (r.total < std::max(min_n, 5u) || 4 * r.late < 3 * r.total) continue;
    if (worst == nullptr || r.late * worst->second.total > worst->second.late * r.total) worst = &kv;
  }
  if (worst == nullptr) return false;
  const Row& r = worst->second;
  const double rf = static_cast<double>(r.late) / r.total;
  Finding f;
  f.set_kind(report::STRAGGLER);
  *f.add_culprits() = c.Ref(pi);
  SetComm(c, worst->first.first, &f);
  f.set_func(c.Str(worst->first.second));
  report::StragglerStats* st = f.mutable_straggler();
  st->set_collectives(r.total);
  st->set_late(r.late);
  st->set_late_fraction(rf);
  const auto [med, mx] = a.RowLag(pi, worst->first);
  st->set_median_lag_ms(med * 1e3);
  st->set_max_lag_ms(mx * 1e3);
  if (!a.say_sampled[pi]) {
    f.set_summary("STRAGGLER: " + c.Name(pi) + " arrived last at " + Thousands(r.late) + " of " + Thousands(r.total) +
                  " " + c.Str(worst->first.second) + " on " + c.CommLabel(worst->first.first) +
                  Printf(" (%.0f%%)", rf * 100) + ", a median " + Dur(med) + " after the median rank (max " + Dur(mx) +
                  "); at its other collectives it is on time");
    AddEvidence(&f, c.Name(pi), "late at " + Thousands(t.late[pi]) + " of all its " + Thousands(t.total[pi]) +
                                    " collectives; threshold " + Dur(thr));
  } else {
    f.set_summary("STRAGGLER: " + c.Name(pi) + " arrived last at " + Thousands(r.late) + " of " + Thousands(r.total) +
                  " " + c.Str(worst->first.second) + " on " + c.CommLabel(worst->first.first) +
                  " sampled across the job (" + SampledWhere(c, sampled_of) + Printf("; %.0f%%)", rf * 100) +
                  ", a median " + Dur(med) + " after the median rank (max " + Dur(mx) +
                  "); at its other collectives it is on time");
    AddEvidence(&f, c.Name(pi), "late at " + Thousands(t.late[pi]) + " of its " + Thousands(t.total[pi]) +
                                    " collectives sampled across the job by the summaries; threshold " + Dur(thr));
  }
  *out = std::move(f);
  return true;
}

// A STRAGGLER late at `frac` of all its collectives.
Finding Straggler(const Ctx& c, const HostArrivals& a, uint32_t pi, double thr, double frac,
                  const std::vector<uint32_t>& sampled_of) {
  const Tally& t = a.t;
  Finding f;
  f.set_kind(report::STRAGGLER);
  *f.add_culprits() = c.Ref(pi);
  report::StragglerStats* st = f.mutable_straggler();
  st->set_collectives(t.total[pi]);
  st->set_late(t.late[pi]);
  st->set_late_fraction(frac);
  const double med = a.med_all[pi];
  const double mx = a.max_all[pi];
  st->set_median_lag_ms(med * 1e3);
  st->set_max_lag_ms(mx * 1e3);
  if (t.late_comm[pi].size() == 1) SetComm(c, t.late_comm[pi].begin()->first, &f);
  if (!a.say_sampled[pi])
    f.set_summary("STRAGGLER: " + c.Name(pi) + " arrived last at " + Thousands(t.late[pi]) + " of " +
                  Plural(t.total[pi], "collective", "collectives") + Printf(" (%.0f%%)", frac * 100) + ", a median " +
                  Dur(med) + " after the median rank (max " + Dur(mx) + ")");
  else
    f.set_summary("STRAGGLER: " + c.Name(pi) + " arrived last at " + Thousands(t.late[pi]) + " of " +
                  Plural(t.total[pi], "collective", "collectives") + " sampled across the job (" +
                  SampledWhere(c, sampled_of) +
                  Printf(a.mixed[pi] ? "; %.0f%% of the collectives they stand for)" : "; %.0f%%)", frac * 100) +
                  ", a median " + Dur(med) + " after the median rank (max " + Dur(mx) + ")");
  std::string comms;
  for (auto& [ci, n] : t.late_comm[pi]) comms += (comms.empty() ? "" : ", ") + c.CommLabel(ci) + ": " + Thousands(n);
  AddEvidence(&f, c.Name(pi), "late at: " + comms + "; threshold " + Dur(thr) + " and " +
                                  Printf("%.0f%%", c.o.straggler_duration_fraction * 100) +
                                  " of the collective's duration" +
                                  (a.say_sampled[pi] ? "; over the collectives the summaries sampled across the job"
                                                     : ""));
  return f;
}

HostArrivals JudgeHostArrivals(const Ctx& c, double thr, const std::vector<std::vector<uint32_t>>& sampled_of,
                               StragglerCounts* counts) {
  const size_t np = c.m.procs.size();
  HostArrivals a;
  a.t = std::move(counts->window);
  a.from_samples.assign(np, false);
  a.say_sampled.assign(np, false);
  a.mixed.assign(np, false);
  a.med_all.assign(np, 0);
  a.max_all.assign(np, 0);
  a.row_lag.resize(np);
  UseSamples(c, thr, sampled_of, &counts->sampled, &a);
  TakeLags(c, thr, &a);
  return a;
}

}  // namespace

std::vector<Ranked> FindStragglers(const Ctx& c, StragglerCountsPtr counts) {
  const Model& m = c.m;
  std::vector<Ranked> out;
  const size_t np = m.procs.size();
  const double thr = Threshold(m, c.o);
  if (counts == nullptr) counts = CountForStragglers(m, c.o);
  const std::vector<std::vector<uint32_t>> sampled_of = SampledOf(m);
  const HostArrivals a = JudgeHostArrivals(c, thr, sampled_of, counts.get());
  const Tally& t = a.t;
  const uint32_t min_n = static_cast<uint32_t>(std::max(1, c.o.straggler_min_collectives));
  std::vector<bool> named(np, false);
  for (uint32_t pi = 0; pi < np; ++pi) {
    if (t.total[pi] < min_n) continue;
    const double frac = a.from_samples[pi] && t.weighted_total[pi] > 0
                            ? static_cast<double>(t.weighted_late[pi]) / static_cast<double>(t.weighted_total[pi])
                            : static_cast<double>(t.late[pi]) / t.total[pi];
    Finding f;
    if (t.late[pi] == 0 || frac < c.o.straggler_min_fraction) {
      if (!OneFunctionStraggler(c, a, pi, thr, min_n, sampled_of[pi], &f)) continue;
    } else {
      f = Straggler(c, a, pi, thr, frac, sampled_of[pi]);
    }
    Emit(&out, 0, std::move(f));
    out.back().sampled = a.from_samples[pi];
    named[pi] = true;
  }
  std::vector<Ranked> held = FindGpuHeld(c, thr, named, sampled_of, counts->held_window, counts->held_sampled);
  out.insert(out.end(), std::make_move_iterator(held.begin()), std::make_move_iterator(held.end()));
  return out;
}

}  // namespace ncclwatch::tools::diagnose_internal

namespace ncclwatch::tools {

std::vector<ArrivalDigest> DigestArrivals(const Model& m, const DiagnoseOptions& opts) {
  using namespace diagnose_internal;
  std::vector<ArrivalDigest> out(m.procs.size());
  std::vector<bool> whole(m.comms.size(), false);
  for (size_t ci = 0; ci < m.comms.size(); ++ci) {
    std::set<int32_t> ranks;
    for (const CommMember& mem : m.comms[ci].members)
      if (mem.proc != kNone && mem.rank >= 0) ranks.insert(mem.rank);
    whole[ci] = m.comms[ci].nranks > 0 && static_cast<int32_t>(ranks.size()) >= m.comms[ci].nranks;
  }
  const double thr = Threshold(m, opts);
  const Tally t = Count(m, thr, opts.straggler_duration_fraction);
  HeldRows held;  // counted once, where some process shows GPU-held times
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    ArrivalDigest& d = out[pi];
    d.valid = true;
    for (size_t ci = 0; ci < m.comms.size(); ++ci)
      for (const CommMember& mem : m.comms[ci].members)
        if (mem.proc == pi && !whole[ci]) d.valid = false;
    if (!d.valid) continue;
    d.threshold_s = thr;
    d.fraction = opts.straggler_duration_fraction;
    d.total = t.total[pi];
    d.late = t.late[pi];
    if (!t.lags[pi].empty()) {
      d.median_lag_s = MedianOf(t.lags[pi]);
      d.max_lag_s = *std::max_element(t.lags[pi].begin(), t.lags[pi].end());
    }
    for (const auto& [key, row] : t.rows[pi]) {
      ArrivalRow r;
      r.comm_hash = m.comms[key.first].hash;
      r.func = m.Str(key.second);
      r.total = row.total;
      r.late = row.late;
      if (!row.lags.empty()) {
        r.median_lag_s = MedianOf(row.lags);
        r.max_lag_s = *std::max_element(row.lags.begin(), row.lags.end());
      }
      // Rows are keyed by hash in the job: an unhashed communicator (API
      // v1 to v3 without a hash) cannot be placed.
      if (r.comm_hash == 0) d.valid = false;
      d.rows.push_back(std::move(r));
    }
    // Completions from CUDA events may show a rank held on its GPU: the
    // GPU-held finder's rows too, beside the host's (a row of either).
    if (!ShowsGpuHeld(m, m.procs[pi])) continue;
    if (held.empty()) held = CountHeld(m, HeldBar(thr));
    d.gpu_held = true;
    for (const auto& [key, row] : held[pi]) {
      const uint64_t hash = m.comms[key.first].hash;
      const std::string func = m.Str(key.second);
      auto it = std::find_if(d.rows.begin(), d.rows.end(),
                             [&](const ArrivalRow& r) { return r.comm_hash == hash && r.func == func; });
      if (it == d.rows.end()) {
        d.rows.push_back(ArrivalRow{});
        it = d.rows.end() - 1;
        it->comm_hash = hash;
        it->func = func;
      }
      const HeldJudged j = Judged(row);
      it->held_total = j.total;
      it->held_late = j.late;
      it->held_median_lag_s = j.median_lag;
      it->held_max_lag_s = j.max_lag;
      it->held_host_lag_s = j.host_lag;
    }
  }
  return out;
}

bool ArrivalsWhole(const Model& m, const DiagnoseOptions& opts) {
  using namespace diagnose_internal;
  const double thr = Threshold(m, opts);
  // Operations put back from summaries (Model::asked_ops) are not judged.
  const std::vector<bool> lacks = WindowLacks(m);
  const std::vector<bool> by_samples = SampledProcs(m);
  // Only how many: FindStragglers has judged them (at 16,384 ranks a
  // median over every member at every position, done once).
  const std::vector<uint32_t> sampled_total = SampledTotals(m);
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    const Proc& p = m.procs[pi];
    // With completions from CUDA events, the GPU-held finder's too: a
    // digest or samples from a summary made before they carried it judge
    // only the host's arrivals.
    const bool gpu = ShowsGpuHeld(m, p);
    if (UsesDigest(p, thr, opts.straggler_duration_fraction) && (!gpu || p.arrivals.gpu_held)) continue;
    // Judged from samples across the whole job, as FindStragglers does.
    if (by_samples[pi] && sampled_total[pi] >= kMinSampledCollectives && (!gpu || p.samples_held)) continue;
    if (lacks[pi]) return false;
  }
  return true;
}

}  // namespace ncclwatch::tools
