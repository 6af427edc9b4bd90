#include <algorithm>
#include <iterator>

#include "tools/model/collectives.h"
#include "tools/model/semantics.h"
#include "tools/model/summary_merge_internal.h"

namespace ncclwatch::tools::merge_internal {
namespace {

Ranges Normalized(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& x : r) {
    // Touching or overlapping the last one: one range (no wrap at the top).
    if (!out.empty() && (out.back().second == UINT64_MAX || x.first <= out.back().second + 1))
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  }
  return out;
}

// One member's answer to `summarize --collectives` on a communicator.
struct AskedMember {
  uint64_t let_go = 0;  // CommPrefix.collectives
  bool holes = false;   // the cap cut its window: it chains nothing on
  Ranges asked;         // CommPrefix.asked
};

// The positions of a communicator every member can put back, normalized:
// each asked range whose collectives every member holds, as records it let
// go and was asked for, or in a window without holes. A range is put back
// whole or not at all: where one member could not answer (its node was not
// asked, or its window was cut), the others' half would look unmatched.
Ranges FedRanges(const std::vector<AskedMember>& members) {
  Ranges all;
  for (const AskedMember& a : members) all.insert(all.end(), a.asked.begin(), a.asked.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  Ranges fed;
  for (const auto& [from, to] : all) {
    bool every = true;
    for (const AskedMember& a : members) {
      const bool window_part = to > a.let_go;
      const bool let_go_part = from <= a.let_go;
      every = every && !(window_part && a.holes) && !(let_go_part && !Covers(a.asked, from, std::min(to, a.let_go)));
    }
    if (every) fed.emplace_back(from, to);
  }
  return Normalized(std::move(fed));
}

// What any member let go, per communicator and function (collectives) or
// sender, receiver and side (p2p).
void CollectLetGo(const std::vector<SummaryPiece>& pieces, const std::vector<bool>& keep, FuncIds* names, Cuts* cuts) {
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!keep[i]) continue;
    for (const summary::CommPrefix& p : pieces[i].sp.prefixes()) {
      if (p.comm_hash() == 0) continue;
      for (const summary::LastSeq& l : p.colls()) {
        auto [it, fresh] = cuts->coll.try_emplace({p.comm_hash(), names->Id(l.func())}, l.seq());
        if (!fresh) it->second = std::max(it->second, l.seq());
      }
      for (const summary::LastSeq& l : p.p2p()) {
        const bool recv = IsRecv(FuncFromName(l.func()));
        const P2pCut k = recv ? P2pCut{p.comm_hash(), l.peer(), p.rank()} : P2pCut{p.comm_hash(), p.rank(), l.peer()};
        // A send and its receive settle together: the cut is the pair's.
        for (bool side : {false, true}) {
          auto [it, fresh] = cuts->p2p.try_emplace({k, side}, l.seq());
          if (!fresh) it->second = std::max(it->second, l.seq());
        }
      }
    }
  }
}

// What the second round (summarize --collectives) can put back, per
// communicator.
void CollectFed(const std::vector<SummaryPiece>& pieces, const std::vector<bool>& keep, Cuts* cuts) {
  std::map<uint64_t, std::vector<AskedMember>> members;
  bool any = false;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!keep[i]) continue;
    const summary::SummaryProcess& sp = pieces[i].sp;
    for (const summary::CommPrefix& p : sp.prefixes()) {
      if (p.comm_hash() == 0) continue;
      AskedMember a;
      a.let_go = p.collectives();
      a.holes = sp.cut_ops() > 0 || sp.cut_stuck_ops() > 0;
      // Within what summarize writes (collectives.h): a damaged summary
      // cannot make the merge feed or compare without bound.
      for (const summary::PositionRange& r : p.asked())
        if (r.from() >= 1 && r.from() <= r.to() && r.to() - r.from() < kMaxAskedPerRange &&
            a.asked.size() < kMaxAskedRangesPerComm)
          a.asked.emplace_back(r.from(), r.to());
      any |= !a.asked.empty();
      members[p.comm_hash()].push_back(std::move(a));
    }
  }
  if (!any) return;
  for (const auto& [hash, v] : members) {
    Ranges f = FedRanges(v);
    if (!f.empty()) cuts->fed.emplace(hash, std::move(f));
  }
}

}  // namespace

bool Within(const Ranges& r, uint64_t pos) {
  auto it = std::upper_bound(r.begin(), r.end(), std::make_pair(pos, UINT64_MAX));
  return it != r.begin() && std::prev(it)->second >= pos;
}

bool Covers(const Ranges& r, uint64_t from, uint64_t to) {
  for (const auto& x : r)
    if (x.first <= from && x.second >= to) return true;
  return false;
}

Cuts CollectCuts(const std::vector<SummaryPiece>& pieces, const std::vector<bool>& keep, FuncIds* names) {
  Cuts cuts;
  CollectLetGo(pieces, keep, names, &cuts);
  CollectFed(pieces, keep, &cuts);
  return cuts;
}

}  // namespace ncclwatch::tools::merge_internal
