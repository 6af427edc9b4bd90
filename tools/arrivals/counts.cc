#include "tools/arrivals/counts.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "tools/model/gpu_held.h"

namespace ncclwatch::tools::arrivals {
namespace {

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

// Whether CountSampled judges `sc`'s positions.
bool Judgeable(const Model& m, const SampledComm& sc) {
  const size_t n = sc.procs.size();
  return n >= 2 && sc.comm < m.comms.size() && sc.local_starts_ns.size() == sc.positions.size() * n;
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

}  // namespace

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2), v.end());
  const double hi = v[n / 2];
  if (n % 2) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2));
  return (lo + hi) / 2;
}

// Across hosts, arrivals are known to the clock alignment's error. On one
// host the processes share one clock, and that "error" is only how far
// apart the ranks saw one collective end (57 ms with 4 ranks sharing a
// GPU over sockets), which says nothing about when they arrived.
double Threshold(const Model& m, const StragglerOptions& o) {
  const double clock_error = m.hosts.size() > 1 ? 2 * m.alignment_error_ns / 1e9 : 0.0;
  return std::max(o.straggler_threshold_ms * 1e-3, clock_error);
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

std::vector<uint32_t> SampledTotals(const Model& m) {
  std::vector<uint32_t> total(m.procs.size(), 0);
  for (const SampledComm& sc : m.sampled)
    if (Judgeable(m, sc))
      for (uint32_t pi : sc.procs) total[pi] += static_cast<uint32_t>(sc.positions.size());
  return total;
}

std::vector<std::vector<uint32_t>> SampledOf(const Model& m) {
  std::vector<std::vector<uint32_t>> of(m.procs.size());
  for (uint32_t k = 0; k < m.sampled.size(); ++k)
    if (!m.sampled[k].positions.empty())
      for (uint32_t pi : m.sampled[k].procs)
        if (pi < of.size() && (of[pi].empty() || of[pi].back() != k)) of[pi].push_back(k);
  return of;
}

bool UsesDigest(const Proc& p, double thr, double fraction) {
  return p.digested && p.arrivals.valid && p.arrivals.threshold_s == thr && p.arrivals.fraction == fraction;
}

double HeldBar(double thr) { return std::max(thr, 2.0 * static_cast<double>(kGpuHeldResolutionNs) / 1e9); }

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

HeldJudged Judged(const HeldRow& r) {
  HeldJudged j{r.total, r.late, MedianOf(r.lags), 0, MedianOf(r.host_lags)};
  if (!r.lags.empty()) j.max_lag = *std::max_element(r.lags.begin(), r.lags.end());
  return j;
}

StragglerCounts CountForStragglers(const Model& m, const StragglerOptions& o) {
  StragglerCounts n;
  const double thr = Threshold(m, o), bar = HeldBar(thr);
  n.window = Count(m, thr, o.straggler_duration_fraction);
  n.sampled = CountSampled(m, thr, o.straggler_duration_fraction);
  n.held_window = CountHeld(m, bar);
  // Only where some process may be judged from them (FindGpuHeld).
  const std::vector<bool> by_samples = SampledProcs(m), lacks = WindowLacks(m);
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi)
    if (by_samples[pi] && lacks[pi] && m.procs[pi].samples_held) {
      n.held_sampled = CountHeldSampled(m, bar);
      break;
    }
  return n;
}

}  // namespace ncclwatch::tools::arrivals
