#include "tools/stats/samples.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "tools/model/gpu_held.h"

namespace ncclwatch::tools::stats_internal {

std::string FuncName(const Model& m, uint16_t id) {
  return m.Str(id).empty() ? std::string("(unknown)") : m.Str(id);
}

int32_t BucketOf(const Model& m, const Op& o, double* bytes, bool* known) {
  const int32_t b = BucketLog2(o.fn, m.Str(o.datatype), o.count, m.comms[o.comm].nranks, bytes);
  *known = b != -2;
  return b;
}

OpSample Sample(const Op& o, uint32_t* warmed, const StatsOptions& opts) {
  OpSample s;
  if (o.state != OpState::kCompleted) {
    s.incomplete = true;
    return s;
  }
  if (o.has_gpu || (o.start_ns != kNoTime && o.done_ns != kNoTime)) {
    if (*warmed < opts.warmup_per_rank) {
      ++*warmed;
      s.warmup = true;
      return s;
    }
  }
  if (o.has_gpu) {
    s.gpu = true;
    s.gpu_ns = o.gpu_duration_ns;
    if (o.start_ns != kNoTime && o.gpu_start_ns != kNoTime) s.delay = true, s.delay_ns = o.gpu_start_ns - o.start_ns;
  }
  if (o.start_ns != kNoTime && o.done_ns != kNoTime) {
    (o.polled ? s.polled : s.cpu) = true;
    s.cpu_ns = o.done_ns - o.start_ns;
  }
  return s;
}

bool Skew(const Model& m, const Match& match, uint32_t* first, int64_t* skew) {
  if (match.kind != OpKind::kColl) return false;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  int n = 0;
  *first = kNone;
  for (uint32_t oi : match.ops) {
    if (oi == kNone || m.ops[oi].start_ns == kNoTime) continue;
    if (*first == kNone) *first = oi;
    lo = std::min(lo, m.ops[oi].start_ns);
    hi = std::max(hi, m.ops[oi].start_ns);
    ++n;
  }
  if (n < 2) return false;
  *skew = hi - lo;
  return true;
}

int64_t LowerMedian(std::vector<int64_t>* v) {
  auto mid = v->begin() + static_cast<std::ptrdiff_t>((v->size() - 1) / 2);
  std::nth_element(v->begin(), mid, v->end());
  return *mid;
}

std::map<RankKey, RankAcc> Lateness(const Model& m, const std::vector<bool>& skip_comm) {
  std::map<RankKey, RankAcc> out;
  std::map<std::pair<uint32_t, uint16_t>, uint64_t> first_seq;  // (comm, func) -> lowest seq
  for (const Match& match : m.matches) {
    if (match.kind != OpKind::kColl || match.comm >= m.comms.size()) continue;
    for (uint32_t oi : match.ops) {
      if (oi == kNone) continue;
      auto k = std::make_pair(match.comm, m.ops[oi].func);
      auto it = first_seq.find(k);
      if (it == first_seq.end() || match.seq < it->second) first_seq[k] = match.seq;
      break;
    }
  }
  const std::vector<int64_t> held = GpuHeldNs(m);
  std::vector<int64_t> starts, arrivals;
  for (const Match& match : m.matches) {
    if (match.kind != OpKind::kColl || match.comm >= m.comms.size() || skip_comm[match.comm]) continue;
    starts.clear();
    arrivals.clear();
    uint16_t func = 0;
    for (uint32_t oi : match.ops)
      if (oi != kNone && m.ops[oi].start_ns != kNoTime) {
        starts.push_back(m.ops[oi].start_ns);
        func = m.ops[oi].func;
        if (held[oi] != kNoTime) arrivals.push_back(held[oi]);
      }
    if (starts.size() < 2 || first_seq[std::make_pair(match.comm, func)] == match.seq) continue;
    const int64_t median = LowerMedian(&starts);
    const int64_t gpu_median = arrivals.size() >= 2 ? LowerMedian(&arrivals) : kNoTime;
    const Comm& c = m.comms[match.comm];
    for (uint32_t oi : match.ops) {
      if (oi == kNone || m.ops[oi].start_ns == kNoTime) continue;
      const Op& o = m.ops[oi];
      RankAcc& a = out[RankKey{CommKey(c), c.nranks, o.rank}];
      a.lateness.push_back(o.start_ns - median);
      if (gpu_median != kNoTime && held[oi] != kNoTime) a.gpu_lateness[o.func].push_back(held[oi] - gpu_median);
      const std::string name = ProcName(m, o.proc);
      if (std::find(a.procs.begin(), a.procs.end(), name) == a.procs.end()) {
        a.procs.push_back(name);
        a.proc_ids.push_back(o.proc);
      }
    }
  }
  return out;
}

}  // namespace ncclwatch::tools::stats_internal
