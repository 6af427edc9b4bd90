// AlignClocks (model.h): every process onto one timeline.

#include <algorithm>
#include <map>
#include <vector>

#include "tools/model/model.h"

namespace ncclwatch::tools {
namespace {

int64_t EndOf(const Op& o) {
  if (o.has_gpu) return o.gpu_end_ns();
  return o.state == OpState::kCompleted ? o.done_ns : kNoTime;
}

int64_t Median(std::vector<int64_t>* v) {
  if (v->empty()) return 0;
  auto mid = v->begin() + static_cast<std::ptrdiff_t>(v->size() / 2);
  std::nth_element(v->begin(), mid, v->end());
  return *mid;
}

// Each process's places in the communicators' member lists, so that a
// shift visits its own (a scan of every communicator for each process was
// processes x communicators: BENCHMARKS.md).
std::vector<std::vector<CommMember*>> MembersOf(Model* m) {
  std::vector<std::vector<CommMember*>> of(m->procs.size());
  for (Comm& c : m->comms)
    for (CommMember& mem : c.members)
      if (mem.proc < of.size()) of[mem.proc].push_back(&mem);
  return of;
}

void Shift(Model* m, const std::vector<std::vector<CommMember*>>& members_of, uint32_t pi, int64_t d) {
  Proc& p = m->procs[pi];
  p.offset_ns = SaturatingAdd(p.offset_ns, d);
  auto sh = [d](int64_t* t) {
    if (*t != kNoTime) *t = SaturatingAdd(*t, d);
  };
  sh(&p.first_ns);
  sh(&p.last_ns);
  sh(&p.last_heartbeat_ns);
  for (MaskChange& c : p.mask_changes) {
    sh(&c.time_ns);
    sh(&c.since_ns);
  }
  for (StuckReport& r : p.stucks) {
    sh(&r.time_ns);
    for (StuckOp& s : r.ops)
      for (ProxyState& x : s.proxy) sh(&x.last_update_ns);
  }
  for (uint32_t oi : p.ops) {
    Op& o = m->ops[oi];
    sh(&o.start_ns);
    sh(&o.done_ns);
    sh(&o.gpu_start_ns);
  }
  for (KernelPhaseSpan& ph : p.phases) {
    sh(&ph.start_ns);
    sh(&ph.stop_ns);
  }
  for (CommMember* mem : members_of[pi]) {
    sh(&mem->init_ns);
    sh(&mem->finalize_ns);
  }
}

}  // namespace

void AlignClocks(Model* m) {
  const std::vector<std::vector<CommMember*>> members_of = MembersOf(m);
  // 1. The header's clock pair puts each process on CLOCK_REALTIME.
  for (uint32_t pi = 0; pi < m->procs.size(); ++pi) {
    Proc& p = m->procs[pi];
    Shift(m, members_of, pi, p.RealtimeMinusMono() - p.offset_ns);
  }
  // 2. Processes of one host share its clocks; hosts differ by their NTP
  // error. Refine each host's offset with collective end times, which every
  // rank reaches at nearly the same moment: breadth-first from the host with
  // the most processes, each host corrected by the median difference of end
  // times with the hosts already placed.
  std::vector<uint32_t> host_of(m->procs.size());
  for (uint32_t pi = 0; pi < m->procs.size(); ++pi)
    host_of[pi] = static_cast<uint32_t>(std::find(m->hosts.begin(), m->hosts.end(), m->procs[pi].host) - m->hosts.begin());
  const size_t nh = m->hosts.size();
  uint64_t samples_used = 0;
  if (nh > 1) {
    // diffs[(a, b)]: end(a) - end(b) for one collective seen on hosts a < b.
    // Each collective pairs its first host with each other host it spans, so
    // the cost is linear in the ranks of the collective.
    std::map<std::pair<uint32_t, uint32_t>, std::vector<int64_t>> diffs;
    constexpr size_t kMaxSamples = 2000;
    std::vector<int64_t> end_of_host(nh, kNoTime);
    std::vector<uint32_t> present;
    for (const Match& match : m->matches) {
      if (match.kind != OpKind::kColl) continue;
      present.clear();
      for (uint32_t oi : match.ops) {
        if (oi == kNone) continue;
        const uint32_t h = host_of[m->ops[oi].proc];
        int64_t e = EndOf(m->ops[oi]);
        if (e != kNoTime && end_of_host[h] == kNoTime) {
          end_of_host[h] = e;
          present.push_back(h);
        }
      }
      for (size_t i = 1; i < present.size(); ++i) {
        uint32_t a = present[0], b = present[i];
        int64_t d = end_of_host[a] - end_of_host[b];
        if (a > b) std::swap(a, b), d = -d;
        auto& v = diffs[{a, b}];
        if (v.size() < kMaxSamples) v.push_back(d);
      }
      for (uint32_t h : present) end_of_host[h] = kNoTime;
    }
    std::vector<uint32_t> procs_on(nh, 0);
    for (uint32_t h : host_of) ++procs_on[h];
    uint32_t ref = static_cast<uint32_t>(std::max_element(procs_on.begin(), procs_on.end()) - procs_on.begin());
    std::vector<bool> placed(nh, false);
    placed[ref] = true;
    std::vector<int64_t> correction(nh, 0);
    // Samples of each host against the hosts placed so far, kept as hosts
    // are placed: recounting them for every host at every step was cubic in
    // the hosts (16 s of a 16,384-rank merge of 2,048 hosts).
    std::vector<size_t> against(nh, 0);
    auto count_against = [&](uint32_t g) {
      for (uint32_t h = 0; h < nh; ++h) {
        if (placed[h] || h == g) continue;
        auto it = diffs.find({std::min(g, h), std::max(g, h)});
        if (it != diffs.end()) against[h] += it->second.size();
      }
    };
    count_against(ref);
    for (bool progress = true; progress;) {
      progress = false;
      // Place the unplaced host with the most samples against placed hosts.
      size_t best_n = 0;
      uint32_t best = 0;
      for (uint32_t h = 0; h < nh; ++h)
        if (!placed[h] && against[h] > best_n) best_n = against[h], best = h;
      if (best_n == 0) break;
      std::vector<int64_t> d;  // end(placed) - end(best), corrected
      for (uint32_t g = 0; g < nh; ++g) {
        if (!placed[g]) continue;
        auto it = diffs.find({std::min(g, best), std::max(g, best)});
        if (it == diffs.end()) continue;
        for (int64_t x : it->second) d.push_back(SaturatingAdd(g < best ? x : -x, correction[g]));
      }
      correction[best] = Median(&d);
      samples_used += d.size();
      placed[best] = true;
      count_against(best);
      progress = true;
    }
    for (uint32_t pi = 0; pi < m->procs.size(); ++pi)
      if (correction[host_of[pi]] != 0) Shift(m, members_of, pi, correction[host_of[pi]]);
    size_t unplaced = static_cast<size_t>(std::count(placed.begin(), placed.end(), false));
    m->alignment_method = std::to_string(nh) + " hosts: header clock pairs, refined by " +
                          std::to_string(samples_used) + " collective end-time differences" +
                          (unplaced ? "; " + std::to_string(unplaced) + " host(s) share no completed collective and keep their header clock" : "");
  } else {
    m->alignment_method = "one host: its processes share one clock";
  }
  // Quality: median spread of a collective's end times across ranks.
  std::vector<int64_t> spread;
  for (const Match& match : m->matches) {
    if (match.kind != OpKind::kColl) continue;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    int n = 0;
    for (uint32_t oi : match.ops) {
      if (oi == kNone) continue;
      int64_t e = EndOf(m->ops[oi]);
      if (e == kNoTime) continue;
      lo = std::min(lo, e);
      hi = std::max(hi, e);
      ++n;
    }
    if (n >= 2) spread.push_back(hi - lo);
    if (spread.size() >= 100000) break;
  }
  m->alignment_error_ns = static_cast<double>(Median(&spread));
}

}  // namespace ncclwatch::tools
