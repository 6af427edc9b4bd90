#include "tools/arrivals/digest.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tools/arrivals/counts.h"
#include "tools/model/gpu_held.h"

namespace ncclwatch::tools {

std::vector<ArrivalDigest> DigestArrivals(const Model& m, const StragglerOptions& opts) {
  using namespace arrivals;
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

bool ArrivalsWhole(const Model& m, const StragglerOptions& opts) {
  using namespace arrivals;
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
