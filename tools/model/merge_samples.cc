#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "tools/model/arrival_samples.h"
#include "tools/model/summary_merge_internal.h"

namespace ncclwatch::tools::merge_internal {

// Each communicator's samples at the positions every member sampled:
// those of the largest stride among them (SampledPosition: the sets nest,
// so each member sampled those unless its collective there was not: no
// completion, a file that began later or ended sooner), where each
// member's is the same collective (function and seq: after a collective
// one rank skipped, positions name different ones). A position some member
// lacks is left out, never guessed. One member is decoded at a time: at
// 16,384 ranks the decoded samples of all would be hundreds of MB beside
// the table kept.
// `damaged`: members whose samples do not decode (their communicator gets
// none), as (piece, communicator hash).
std::vector<LinedUp> LineUpSamples(std::vector<SummaryPiece>* pieces_in, const std::vector<bool>& keep,
                                   std::vector<std::pair<size_t, uint64_t>>* damaged) {
  const std::vector<SummaryPiece>& pieces = *pieces_in;
  std::map<uint64_t, std::vector<std::pair<size_t, int>>> of;  // hash -> (process, index in its samples)
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!keep[i]) continue;
    std::set<uint64_t> here;  // a summary naming a communicator twice: its first
    for (int k = 0; k < pieces[i].sp.samples_size(); ++k) {
      const uint64_t h = pieces[i].sp.samples(k).comm_hash();
      if (h != 0 && here.insert(h).second) of[h].emplace_back(i, k);
    }
  }
  std::vector<LinedUp> out;
  std::vector<ArrivalSample> v;
  for (const auto& [hash, members] : of) {
    LinedUp l;
    l.hash = hash;
    uint32_t log2 = 0;
    for (const auto& [i, k] : members) {
      log2 = std::max(log2, std::min<uint32_t>(pieces[i].sp.samples(k).stride_log2(), 62));
      l.most = std::max<uint64_t>(l.most, pieces[i].sp.samples(k).collectives());
    }
    l.stride = uint64_t{1} << log2;
    const size_t n = members.size();
    std::vector<bool> present;
    bool ok = true;
    for (size_t j = 0; j < n && ok; ++j) {
      const summary::ArrivalSamples& a = pieces[members[j].first].sp.samples(members[j].second);
      l.members.push_back(members[j].first);
      if (!DecodeSamples(a, &v)) {
        damaged->emplace_back(members[j].first, hash);
        ok = false;
        break;
      }
      if (j == 0) {
        for (const ArrivalSample& x : v)
          if (SampledPosition(x.position, log2)) {
            l.positions.push_back(x.position);
            const std::string& f = a.functions(static_cast<int>(x.func));
            auto known = std::find(l.names.begin(), l.names.end(), f);
            if (known == l.names.end()) {
              // More functions than an index holds: that communicator's
              // samples are not lined up (NCCL has a dozen).
              if (l.names.size() > UINT8_MAX) {
                ok = false;
                break;
              }
              known = l.names.insert(l.names.end(), f);
            }
            l.funcs.push_back(static_cast<uint8_t>(known - l.names.begin()));
            l.seqs.push_back(x.seq);
            l.buckets.push_back(x.bucket);
            l.warmup_seqs.push_back(UINT64_MAX);
          }
        present.assign(l.positions.size(), true);
        l.starts.assign(l.positions.size() * n, 0);
        l.durations.assign(l.positions.size() * n, 0);
      }
      if (!a.held().empty() && l.held.empty()) l.held.assign(l.positions.size() * n, kNoTime);
      size_t at = 0;
      for (size_t c = 0; c < l.positions.size(); ++c) {
        while (at < v.size() && v[at].position < l.positions[c]) ++at;
        if (at == v.size() || v[at].position != l.positions[c] || v[at].seq != l.seqs[c] ||
            a.functions(static_cast<int>(v[at].func)) != l.names[l.funcs[c]]) {
          present[c] = false;
          continue;
        }
        l.starts[c * n + j] = v[at].start_ns;
        l.durations[c * n + j] = static_cast<int64_t>(std::min<uint64_t>(v[at].duration_ns, uint64_t{1} << 58));
        if (!l.held.empty()) l.held[c * n + j] = v[at].held_ns < 0 ? kNoTime : v[at].held_ns;
        if (v[at].bucket == kNoBucket || a.first_seqs_size() == 0) l.stats_ok = false;
        else l.warmup_seqs[c] = std::min<uint64_t>(l.warmup_seqs[c], a.first_seqs(static_cast<int>(v[at].func)));
      }
      // Read: its bytes go now, not after every communicator's table is
      // built (at 16,384 ranks they were as large as the tables).
      summary::ArrivalSamples* done =
          (*pieces_in)[members[j].first].sp.mutable_samples(members[j].second);
      std::string().swap(*done->mutable_packed());
      std::string().swap(*done->mutable_held());
      std::string().swap(*done->mutable_buckets());
    }
    if (!ok) continue;
    // Only the positions every member has.
    size_t kept = 0;
    for (size_t c = 0; c < l.positions.size(); ++c) {
      if (!present[c]) continue;
      if (kept != c) {
        l.positions[kept] = l.positions[c];
        l.funcs[kept] = l.funcs[c];
        l.seqs[kept] = l.seqs[c];
        l.buckets[kept] = l.buckets[c];
        l.warmup_seqs[kept] = l.warmup_seqs[c];
        std::copy_n(l.starts.begin() + static_cast<std::ptrdiff_t>(c * n), n,
                    l.starts.begin() + static_cast<std::ptrdiff_t>(kept * n));
        std::copy_n(l.durations.begin() + static_cast<std::ptrdiff_t>(c * n), n,
                    l.durations.begin() + static_cast<std::ptrdiff_t>(kept * n));
        if (!l.held.empty())
          std::copy_n(l.held.begin() + static_cast<std::ptrdiff_t>(c * n), n,
                      l.held.begin() + static_cast<std::ptrdiff_t>(kept * n));
      }
      ++kept;
    }
    l.positions.resize(kept);
    l.funcs.resize(kept);
    l.seqs.resize(kept);
    l.buckets.resize(kept);
    l.warmup_seqs.resize(kept);
    if (!l.stats_ok) {
      l.buckets.clear();
      l.warmup_seqs.clear();
    }
    l.starts.resize(kept * n);
    l.durations.resize(kept * n);
    if (!l.held.empty()) l.held.resize(kept * n);
    l.starts.shrink_to_fit();
    l.durations.shrink_to_fit();
    l.held.shrink_to_fit();
    out.push_back(std::move(l));
  }
  return out;
}

void AddSampled(std::vector<LinedUp>* lined_up, const std::vector<SummaryPiece>& pieces,
                const std::unordered_map<std::string, uint32_t>& proc_of, Model* m) {
  // The arrival samples, per communicator whose every rank sampled: on
  // each member's own clock (Proc::mono_base_ns), with the model's indices.
  for (LinedUp& l : *lined_up) {
    auto ci = m->comm_of_hash.find(l.hash);
    if (ci == m->comm_of_hash.end()) continue;
    const size_t n = l.members.size();
    SampledComm sc;
    sc.comm = ci->second;
    sc.stride = l.stride;
    std::set<uint32_t> distinct;
    for (size_t i : l.members) {
      auto pi = proc_of.find(pieces[i].sp.path());
      if (pi == proc_of.end()) break;
      sc.procs.push_back(pi->second);
      distinct.insert(pi->second);
    }
    if (sc.procs.size() != n || distinct.size() != n || static_cast<int32_t>(n) != m->comms[sc.comm].nranks) continue;
    std::vector<uint16_t> ids;
    for (const std::string& f : l.names) ids.push_back(m->Intern(f));
    for (uint8_t f : l.funcs) sc.funcs.push_back(ids[f]);
    sc.positions = std::move(l.positions);
    sc.local_starts_ns = std::move(l.starts);
    for (size_t c = 0; c < sc.positions.size(); ++c)
      for (size_t j = 0; j < n; ++j) {
        int64_t& t = sc.local_starts_ns[c * n + j];
        t = SaturatingAdd(t, static_cast<int64_t>(m->procs[sc.procs[j]].mono_base_ns));
      }
    sc.durations_ns = std::move(l.durations);
    sc.held_ns = std::move(l.held);
    sc.buckets = std::move(l.buckets);
    for (size_t c = 0; c < l.warmup_seqs.size(); ++c) sc.warmup.push_back(l.seqs[c] == l.warmup_seqs[c]);
    // Enough, or every collective (the stride 1, and each member's every
    // collective sampled: none is missing).
    sc.covered = sc.positions.size() >= kMinSampledCollectives || (sc.stride == 1 && sc.positions.size() == l.most);
    if (!sc.positions.empty() || sc.covered) m->sampled.push_back(std::move(sc));
  }
  lined_up->clear();
  std::sort(m->sampled.begin(), m->sampled.end(),
            [](const SampledComm& a, const SampledComm& b) { return a.comm < b.comm; });  // in the model's order
}

}  // namespace ncclwatch::tools::merge_internal
