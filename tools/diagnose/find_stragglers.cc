#include "tools/diagnose/find_stragglers.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tools/arrivals/counts.h"

namespace ncclwatch::tools::diagnose_internal {

using namespace arrivals;  // NOLINT: the counts this finder judges
namespace {

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

std::vector<Ranked> FindStragglers(const Ctx& c, StragglerCounts counts) {
  const Model& m = c.m;
  std::vector<Ranked> out;
  const size_t np = m.procs.size();
  const double thr = Threshold(m, c.o);
  const std::vector<std::vector<uint32_t>> sampled_of = SampledOf(m);
  const HostArrivals a = JudgeHostArrivals(c, thr, sampled_of, &counts);
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
  std::vector<Ranked> held = FindGpuHeld(c, thr, named, sampled_of, counts.held_window, counts.held_sampled);
  out.insert(out.end(), std::make_move_iterator(held.begin()), std::make_move_iterator(held.end()));
  return out;
}

}  // namespace ncclwatch::tools::diagnose_internal
