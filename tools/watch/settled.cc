#include "tools/watch/settled.h"

#include <algorithm>
#include <map>
#include <utility>

namespace ncclwatch::tools {
namespace {

bool Finished(const Model& m, const Liveness& live, uint32_t oi) {
  if (live.of_op[oi] == OpLiveness::kFinished) return true;
  // Without completion tracking nothing finishes; every rank issued it
  // (the caller checks) and nothing proves it unfinished. What could later
  // prove it (rule 2 of MarkUnfinished) flows from earlier operations on
  // the same rank and communicator, which stay unless they settle too.
  return m.ops[oi].state == OpState::kUntracked && live.of_op[oi] == OpLiveness::kUnknown;
}

// Every side of `mt` is there and finished.
bool Eligible(const Model& m, const Liveness& live, const Match& mt) {
  if (mt.comm >= m.comms.size()) return false;
  if (mt.kind == OpKind::kP2p) {
    return mt.ops.size() == 2 && mt.ops[0] != kNone && mt.ops[1] != kNone && Finished(m, live, mt.ops[0]) &&
           Finished(m, live, mt.ops[1]);
  }
  const int32_t nranks = m.comms[mt.comm].nranks;
  if (nranks <= 0 || mt.ops.size() < static_cast<size_t>(nranks)) return false;
  for (int32_t r = 0; r < nranks; ++r) {
    const uint32_t oi = OpOfRank(m, mt, r);
    if (!HasFile(m, mt.comm, r) || oi == kNone || !Finished(m, live, oi)) return false;
  }
  return true;
}

bool AllCompleted(const Model& m, const Match& mt) {
  for (uint32_t oi : mt.ops)
    if (oi != kNone && m.ops[oi].state != OpState::kCompleted) return false;
  return true;
}

}  // namespace

std::vector<bool> SettledOps(const Model& m, const Liveness& live, uint64_t keep_recent) {
  std::vector<bool> eligible(m.matches.size(), false);
  for (uint32_t mi = 0; mi < m.matches.size(); ++mi) eligible[mi] = Eligible(m, live, m.matches[mi]);
  // Each communicator's latest collective of each function completed on
  // every rank stays: diagnose names the last one done before a problem.
  std::map<std::pair<uint32_t, uint16_t>, uint32_t> latest;
  for (uint32_t mi = 0; mi < m.matches.size(); ++mi) {
    const Match& mt = m.matches[mi];
    if (!eligible[mi] || mt.kind != OpKind::kColl || !AllCompleted(m, mt)) continue;
    auto [it, fresh] = latest.emplace(std::make_pair(mt.comm, MatchFunc(m, mt)), mi);
    if (!fresh && m.matches[it->second].seq < mt.seq) it->second = mi;
  }
  for (const auto& [key, mi] : latest) eligible[mi] = false;

  // Each (process, communicator)'s operations in program order, and how far
  // from its start they may go (`frontier`: positions before it).
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> list_of;
  std::vector<std::vector<uint32_t>> lists;
  std::vector<uint32_t> list(m.ops.size(), kNone), pos(m.ops.size(), 0);
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi)
    for (uint32_t oi : m.procs[pi].ops) {
      auto [it, fresh] = list_of.emplace(std::make_pair(pi, m.ops[oi].comm), static_cast<uint32_t>(lists.size()));
      if (fresh) lists.emplace_back();
      list[oi] = it->second;
      pos[oi] = static_cast<uint32_t>(lists[it->second].size());
      lists[it->second].push_back(oi);
    }
  std::vector<size_t> frontier(lists.size());
  for (size_t l = 0; l < lists.size(); ++l) {
    const std::vector<uint32_t>& ops = lists[l];
    size_t f = ops.size() > keep_recent ? ops.size() - keep_recent : 0;
    for (size_t k = 0; k < f; ++k) {
      const uint32_t mi = m.ops[ops[k]].match;
      if (mi == kNone || !eligible[mi]) f = k;
    }
    frontier[l] = f;
  }
  // A match kept on one rank is kept on every rank: lowering one frontier
  // may lower others', until nothing moves. Each position is passed once.
  std::vector<bool> blocked(m.matches.size(), false);
  std::vector<std::pair<size_t, size_t>> work;  // (list, old frontier) after a lowering
  for (size_t l = 0; l < lists.size(); ++l) work.push_back({l, lists[l].size()});
  while (!work.empty()) {
    const auto [l, old] = work.back();
    work.pop_back();
    for (size_t k = frontier[l]; k < old; ++k) {
      const uint32_t mi = m.ops[lists[l][k]].match;
      if (mi == kNone || blocked[mi]) continue;
      blocked[mi] = true;
      for (uint32_t oi : m.matches[mi].ops) {
        if (oi == kNone || list[oi] == kNone) continue;
        const size_t other = list[oi];
        if (pos[oi] >= frontier[other]) continue;
        work.push_back({other, frontier[other]});
        frontier[other] = pos[oi];
      }
    }
  }
  std::vector<bool> out(m.ops.size(), false);
  for (uint32_t oi = 0; oi < m.ops.size(); ++oi) out[oi] = list[oi] != kNone && pos[oi] < frontier[list[oi]];
  return out;
}

}  // namespace ncclwatch::tools
