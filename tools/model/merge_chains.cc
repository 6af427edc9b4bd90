#include <stdio.h>

#include <algorithm>
#include <iterator>
#include <set>

#include "tools/model/summary_merge_internal.h"

namespace ncclwatch::tools::merge_internal {

bool ChainMember::Stored(uint64_t pos, uint64_t* h) const {
  auto it = std::lower_bound(stored.begin(), stored.end(), std::make_pair(pos, uint64_t{0}));
  if (it == stored.end() || it->first != pos) return false;
  *h = it->second;
  return true;
}

bool ChainMember::At(uint64_t pos, uint64_t* h) const {
  if (pos == 0) return *h = 0, true;
  if (pos <= let_go) return Stored(pos, h);
  if (no_base || pos - let_go > window.size()) return false;  // no overflow: a summary's counts are anyone's
  *h = window[pos - let_go - 1];
  return true;
}

namespace {

// Chains that differ at a position and agree at a later one: no chain does
// that (each value is FNV over every signature before it), so one of them
// was edited. `groups`: the members' values at the first position where
// they differ (`from`, an iterator into `positions`). The members out of
// the largest group there that agree with another group later are named
// with `gap` (all of the groups involved where two are largest); false
// where none rejoins.
bool Rejoined(uint64_t hash, const std::vector<ChainMember>& members,
              const std::map<uint64_t, std::vector<size_t>>& groups, std::set<uint64_t>::const_iterator from,
              std::set<uint64_t>::const_iterator end, const std::vector<SummaryPiece>& pieces,
              const std::function<void(size_t, const std::string&)>& gap,
              const std::function<std::string(size_t)>& name) {
  const size_t kNone = SIZE_MAX;
  std::vector<size_t> group_of(members.size(), kNone);
  std::vector<size_t> sizes;
  for (const auto& [h, v] : groups) {
    for (size_t k : v) group_of[k] = sizes.size();
    sizes.push_back(v.size());
  }
  const uint64_t at = *from;
  for (auto it = std::next(from); it != end; ++it) {
    std::map<uint64_t, std::pair<size_t, size_t>> seen;  // value -> first member, its group
    for (size_t k = 0; k < members.size(); ++k) {
      uint64_t h;
      if (group_of[k] == kNone || !members[k].At(*it, &h)) continue;
      auto [s, fresh] = seen.try_emplace(h, k, group_of[k]);
      if (fresh || s->second.second == group_of[k]) continue;
      // Members k and j were apart at `at` and together at *it.
      const size_t j = s->second.first;
      const size_t gk = group_of[k], gj = group_of[j];
      for (size_t x : {j, k}) {
        const size_t g = group_of[x];
        if (sizes[g] > sizes[g == gk ? gj : gk]) continue;  // the larger side stands
        const SummaryPiece& piece = pieces[members[x].proc];
        const size_t y = x == k ? j : k;
        char comm[24];
        snprintf(comm, sizeof(comm), "0x%llx", static_cast<unsigned long long>(hash));
        gap(members[x].proc,
            "the summary of " + name(members[x].proc) +
                (piece.source.empty() ? std::string()
                                      : " (record " + std::to_string(piece.record) + " of " + piece.source + ")") +
                " is edited or damaged: its signature chain on comm " + comm + " differs from " +
                name(members[y].proc) + "'s at collective " + std::to_string(at) + " and equals it at collective " +
                std::to_string(*it) + ", which no chain does");
      }
      return true;
    }
  }
  return false;
}

// One communicator's chains (`members`, of communicator `hash`) compared:
// the first position where they differ and the windows no longer hold the
// collectives is a ChainMismatch; where none differ but a member's let-go
// collectives were never compared, a gap.
void CompareOne(uint64_t hash, const std::vector<ChainMember>& members, const Cuts& cuts,
                const std::vector<SummaryPiece>& pieces, const std::unordered_map<std::string, uint32_t>& proc_of,
                const std::function<void(size_t, const std::string&)>& gap,
                const std::function<std::string(size_t)>& name, Model* m) {
  // Where to compare: each member's checkpoints and prefix end, and in
  // each window every multiple of the checkpoint interval (a member that
  // let go less computes there what another stored).
  std::set<uint64_t> positions;
  uint64_t settled_max = 0;
  const uint64_t every = 64;
  for (const ChainMember& c : members) {
    settled_max = std::max(settled_max, c.let_go + c.dropped);
    if (c.let_go > 0) positions.insert(c.let_go);
    for (const auto& [pos, h] : c.stored) positions.insert(pos);
    for (uint64_t p = (c.let_go / every + 1) * every; p - c.let_go <= c.window.size() && p > c.let_go; p += every)
      positions.insert(p);
  }
  if (settled_max == 0) return;  // every window holds every collective
  std::vector<uint64_t> verified(members.size(), 0);
  uint64_t last_ok = 0;
  bool diverged = false;
  for (uint64_t pos : positions) {
    std::map<uint64_t, std::vector<size_t>> by_hash;
    for (size_t k = 0; k < members.size(); ++k) {
      uint64_t h;
      if (members[k].At(pos, &h)) by_hash[h].push_back(k);
    }
    size_t n = 0;
    for (auto& [h, v] : by_hash) n += v.size();
    if (n < 2) continue;
    if (by_hash.size() == 1) {
      last_ok = pos;
      for (size_t k : by_hash.begin()->second) verified[k] = pos;
      continue;
    }
    diverged = true;
    if (Rejoined(hash, members, by_hash, positions.find(pos), positions.end(), pieces, gap, name)) break;
    if (last_ok >= settled_max) break;  // the windows hold it: diagnose's finders see it
    size_t best = 0, best_n = 0, ties = 0;
    for (auto& [h, v] : by_hash) {
      if (v.size() > best_n) best_n = v.size(), best = v.front(), ties = 0;
      else if (v.size() == best_n) ++ties;
    }
    uint64_t major = 0;
    members[best].At(pos, &major);
    ChainMismatch cm;
    auto ci = m->comm_of_hash.find(hash);
    if (ci == m->comm_of_hash.end()) break;
    cm.comm = ci->second;
    cm.from = last_ok + 1;
    cm.to = pos;
    for (auto& [h, v] : by_hash)
      for (size_t k : v) {
        auto pi = proc_of.find(pieces[members[k].proc].sp.path());
        if (pi != proc_of.end()) (ties == 0 && h == major ? cm.rest : cm.odd).push_back(pi->second);
      }
    std::sort(cm.odd.begin(), cm.odd.end());
    std::sort(cm.rest.begin(), cm.rest.end());
    auto f = cuts.fed.find(hash);
    cm.asked = f != cuts.fed.end() && Covers(f->second, cm.from, cm.to);
    m->chain_mismatches.push_back(std::move(cm));
    break;
  }
  if (diverged) return;
  for (size_t k = 0; k < members.size(); ++k) {
    const uint64_t e = members[k].let_go + members[k].dropped;
    if (e > 0 && verified[k] < e) {
      gap(members[k].proc, "the summaries cannot compare the signatures of " + name(members[k].proc) +
                               "'s first " + std::to_string(e) + " collectives on a communicator with another rank's; "
                               "summarize with a larger --window");
      break;
    }
  }
}

}  // namespace

void CompareChains(const Chains& chains, const Cuts& cuts, const std::vector<SummaryPiece>& pieces,
                   const std::unordered_map<std::string, uint32_t>& proc_of,
                   const std::function<void(size_t, const std::string&)>& gap,
                   const std::function<std::string(size_t)>& name, Model* m) {
  for (const auto& [hash, members] : chains)
    if (members.size() >= 2) CompareOne(hash, members, cuts, pieces, proc_of, gap, name, m);
}

void SetSettledColls(const Chains& chains, const Cuts& cuts, Model* m) {
  for (Comm& c : m->comms) {
    auto it = chains.find(c.hash);
    if (it == chains.end() || c.hash == 0) continue;
    uint64_t n = 0;
    for (const ChainMember& cm : it->second) n = std::max(n, cm.let_go + cm.dropped);
    // Less those put back, which the model's matches count.
    uint64_t back = 0;
    auto f = cuts.fed.find(c.hash);
    if (f != cuts.fed.end())
      for (const auto& [from, to] : f->second)
        if (from <= n) back += std::min(to, n) - from + 1;
    c.settled_colls = n - std::min(back, n);
  }
}

}  // namespace ncclwatch::tools::merge_internal
