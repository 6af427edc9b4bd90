// DigestProcesses (stats.h): what a per-node summary keeps of each process
// for `ncclwatch stats`.

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tools/stats/samples.h"
#include "tools/stats/stats.h"

namespace ncclwatch::tools {

using namespace stats_internal;  // NOLINT: the implementation's own parts

std::vector<ProcDigest> DigestProcesses(const Model& m, const StatsOptions& opts) {
  std::vector<ProcDigest> out(m.procs.size());
  // The communicators whose every rank is in `m`.
  std::vector<bool> whole(m.comms.size(), false), not_whole(m.comms.size(), true);
  for (size_t ci = 0; ci < m.comms.size(); ++ci) {
    const Comm& c = m.comms[ci];
    std::set<int32_t> ranks;
    for (const CommMember& mem : c.members)
      if (mem.proc != kNone && mem.rank >= 0) ranks.insert(mem.rank);
    whole[ci] = c.nranks > 0 && static_cast<int32_t>(ranks.size()) >= c.nranks;
    not_whole[ci] = !whole[ci];
  }
  struct Slot {
    RowDigest d;
    uint32_t warmed = 0;  // StatsOptions::warmup_per_rank
  };
  std::vector<std::map<RowKey, Slot>> rows(m.procs.size());
  // The row of (communicator, function, bucket) ids, without building its
  // key's strings per operation (a node's summarize digests millions).
  using IdKey = std::tuple<uint32_t, uint16_t, int32_t>;
  std::vector<std::map<IdKey, Slot*>> by_id(m.procs.size());
  auto slot_of = [&](const Op& o, double* bytes, bool* known) -> Slot& {
    const Comm& c = m.comms[o.comm];
    const int32_t bucket = BucketOf(m, o, bytes, known);
    Slot*& fast = by_id[o.proc][IdKey{o.comm, o.func, bucket}];
    if (fast == nullptr) {
      RowKey k{CommKey(c), FuncName(m, o.func), bucket};
      Slot& sl = rows[o.proc][k];
      if (sl.d.ops == 0 && sl.d.nranks == 0) {
        sl.d.comm = k.comm;
        sl.d.func = m.Str(o.func);
        sl.d.bucket = k.bucket;
      }
      fast = &sl;
    }
    fast->d.nranks = std::max(fast->d.nranks, c.nranks);
    return *fast;
  };
  auto row_of = [&](const Op& o, double* bytes, bool* known) -> RowDigest& { return slot_of(o, bytes, known).d; };
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    for (uint32_t oi : m.procs[pi].ops) {
      const Op& o = m.ops[oi];
      if (o.comm >= m.comms.size()) continue;
      double bytes = 0;
      bool known = false;
      Slot& sl = slot_of(o, &bytes, &known);
      RowDigest& d = sl.d;
      if (known) {
        d.bytes_sum += bytes;
        ++d.bytes_n;
      }
      ++d.ops;
      if (o.match == kNone) {
        ++d.calls;
      } else if (whole[o.comm]) {
        // Counted once per row: by the first of the match's ops in it.
        uint32_t first = kNone;
        for (uint32_t oj : m.matches[o.match].ops) {
          if (oj == kNone) continue;
          if (oj == oi) {
            first = oi;
            break;
          }
          double b2;
          bool k2;
          const Op& q = m.ops[oj];
          if (q.comm == o.comm && q.func == o.func && BucketOf(m, q, &b2, &k2) == d.bucket) break;
        }
        if (first == oi) ++d.calls;
      }
      const OpSample smp = Sample(o, &sl.warmed, opts);
      d.incomplete += smp.incomplete;
      d.warmup += smp.warmup;
      if (smp.gpu) d.gpu.Add(smp.gpu_ns);
      if (smp.delay) d.delay.Add(smp.delay_ns);
      if (smp.cpu) d.cpu.Add(smp.cpu_ns);
      if (smp.polled) d.polled.Add(smp.cpu_ns);
    }
  }
  for (const Match& match : m.matches) {
    uint32_t first;
    int64_t skew;
    if (match.comm >= whole.size() || !whole[match.comm] || !Skew(m, match, &first, &skew)) continue;
    double bytes;
    bool known;
    row_of(m.ops[first], &bytes, &known).skew.Add(skew);
  }
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi)
    for (auto& [k, sl] : rows[pi]) out[pi].rows.push_back(std::move(sl.d));
  for (auto& [key, a] : Lateness(m, not_whole)) {
    // The rank's samples with its first process; each process of it named.
    for (size_t i = 0; i < a.proc_ids.size(); ++i) {
      RankDigest d;
      d.comm = key.comm;
      d.nranks = key.nranks;
      d.rank = key.rank;
      if (i == 0)
        for (int64_t v : a.lateness) d.lateness.Add(v);
      out[a.proc_ids[i]].ranks.push_back(std::move(d));
    }
  }
  for (size_t ci = 0; ci < m.comms.size(); ++ci) {
    if (!whole[ci]) continue;
    for (const CommMember& mem : m.comms[ci].members)
      if (mem.proc < out.size()) out[mem.proc].whole_comms.push_back(CommKey(m.comms[ci]));
  }
  return out;
}

}  // namespace ncclwatch::tools
