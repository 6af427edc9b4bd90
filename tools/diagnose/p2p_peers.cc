#include "tools/diagnose/p2p_peers.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ncclwatch::tools::diagnose_internal {
namespace {

// One send or receive of a rank's step: from its records (op) or, where
// they hold none, from Flight Recorder (fr).
struct Call {
  uint32_t proc = kNone;
  int32_t rank = -1;
  int32_t peer = -1;
  bool recv = false;
  uint32_t op = kNone;          // Model::ops index, or kNone
  const FrP2pCall* fr = nullptr;
  int paired_with = -1;         // index of the call it met
};

// "rank 1 receives from rank 2", "rank 0 sends to it".
std::string Does(const Ctx& c, uint32_t comm, const Call& x, int32_t it_rank) {
  const std::string peer = x.peer == it_rank ? "it" : c.PeerName(comm, x.peer);
  return c.Name(x.proc) + (x.recv ? " receives from " : " sends to ") + peer;
}

// The sends and receives of `proc` after its op `after` on `comm`, up to
// its next collective there; Flight Recorder's where its records end first.
void StepCalls(const Ctx& c, uint32_t comm, uint32_t proc, uint32_t after, std::vector<Call>* out) {
  const Model& m = c.m;
  const Proc& p = m.procs[proc];
  const int32_t rank = c.RankIn(proc, comm);
  auto it = std::find(p.ops.begin(), p.ops.end(), after);
  if (it == p.ops.end() || rank < 0) return;
  size_t before = out->size();
  bool next_coll = false;
  for (++it; it != p.ops.end(); ++it) {
    const Op& op = m.ops[*it];
    if (op.comm != comm) continue;
    if (op.kind == OpKind::kColl) {
      next_coll = true;
      break;
    }
    Call x;
    x.proc = proc;
    x.rank = rank;
    x.peer = op.peer_or_root;
    x.recv = IsRecv(op.fn);
    x.op = *it;
    out->push_back(x);
  }
  if (out->size() > before || next_coll) return;
  for (const FrP2pCall& f : p.fr_p2p) {
    if (f.comm != comm) continue;
    Call x;
    x.proc = proc;
    x.rank = rank;
    x.peer = f.peer;
    x.recv = f.recv;
    x.fr = &f;
    out->push_back(x);
  }
}

// The evidence line of one call.
std::string CallLine(const Ctx& c, uint32_t comm, const std::vector<Call>& calls, const Call& x) {
  std::string s;
  if (x.op != kNone) {
    const Op& op = c.m.ops[x.op];
    s = c.OpName(op) + " at " + At(c.T(op.start_ns)) + (op.state == OpState::kCompleted ? ", completed" : ", in flight");
  } else {
    s = "no NCCL record; Flight Recorder: " + x.fr->text;
  }
  if (x.paired_with >= 0) {
    const Call& y = calls[static_cast<size_t>(x.paired_with)];
    s += "; met " + c.Name(y.proc) + "'s " + (y.recv ? "receive" : "send");
  } else {
    s += "; no " + std::string(x.recv ? "send from " : "receive by ") + c.PeerName(comm, x.peer) + " meets it";
  }
  return s;
}

}  // namespace

PeersNeverMeet FindPeersNeverMeet(const Ctx& c, uint32_t comm, const std::vector<uint32_t>& absent) {
  const Model& m = c.m;
  PeersNeverMeet out;
  // The collective the absent ranks last issued on `comm`: one for all.
  uint32_t anchor = kNone;
  for (uint32_t pr : absent) {
    uint32_t last = kNone;
    for (auto it = m.procs[pr].ops.rbegin(); it != m.procs[pr].ops.rend(); ++it)
      if (m.ops[*it].comm == comm && m.ops[*it].kind == OpKind::kColl) {
        last = *it;
        break;
      }
    if (last == kNone || m.ops[last].match == kNone) return out;
    if (anchor != kNone && m.ops[last].match != anchor) return out;
    anchor = m.ops[last].match;
  }
  if (anchor == kNone) return out;
  const Comm& cm = m.comms[comm];
  std::vector<Call> calls;
  for (int32_t r = 0; r < cm.nranks; ++r) {
    if (!c.HasFile(comm, r)) continue;
    const uint32_t oi = OpOfRank(m, m.matches[anchor], r);
    if (oi != kNone) StepCalls(c, comm, cm.proc_of_rank[r], oi, &calls);
  }
  // A send from a to b meets a receive of b from a, in call order.
  for (size_t i = 0; i < calls.size(); ++i) {
    Call& x = calls[i];
    if (x.paired_with >= 0) continue;
    for (size_t j = 0; j < calls.size(); ++j) {
      Call& y = calls[j];
      if (j == i || y.paired_with >= 0 || y.rank != x.peer || y.peer != x.rank || y.recv == x.recv) continue;
      x.paired_with = static_cast<int>(j);
      y.paired_with = static_cast<int>(i);
      break;
    }
  }
  const std::set<uint32_t> absent_set(absent.begin(), absent.end());
  bool absent_left_over = false;
  for (const Call& x : calls) absent_left_over |= x.paired_with < 0 && absent_set.count(x.proc) > 0;
  if (!absent_left_over) return out;
  // A rank's calls, by comm rank.
  std::map<int32_t, std::vector<size_t>> of_rank;
  for (size_t i = 0; i < calls.size(); ++i) of_rank[calls[i].rank].push_back(i);
  // The rank to blame names a peer whose own calls all met someone else.
  std::vector<size_t> breaking, left_over;
  for (size_t i = 0; i < calls.size(); ++i) {
    const Call& x = calls[i];
    if (x.paired_with >= 0) continue;
    left_over.push_back(i);
    auto peer = of_rank.find(x.peer);
    if (peer == of_rank.end()) continue;
    bool all_met = true;
    for (size_t j : peer->second) all_met = all_met && calls[j].paired_with >= 0;
    if (all_met) breaking.push_back(i);
  }
  out.found = true;
  out.precise = !breaking.empty();
  const std::vector<size_t>& blamed = out.precise ? breaking : left_over;
  for (size_t i : blamed)
    if (std::find(out.culprits.begin(), out.culprits.end(), calls[i].proc) == out.culprits.end())
      out.culprits.push_back(calls[i].proc);
  std::string cause;
  for (size_t i : blamed) {
    const Call& x = calls[i];
    // What it meets instead: calls left over that name it, and its peer's
    // calls that met a third rank.
    std::vector<std::string> instead, held;
    for (size_t j : left_over)
      if (j != i && calls[j].peer == x.rank) {
        instead.push_back(Does(c, comm, calls[j], x.rank));
        held.push_back(c.Name(calls[j].proc) + "'s " + (calls[j].recv ? "receive from " : "send to ") + c.Name(x.proc));
      }
    auto peer = of_rank.find(x.peer);
    std::vector<std::string> peer_does;
    if (peer != of_rank.end())
      for (size_t j : peer->second)
        if (calls[j].paired_with >= 0) peer_does.push_back(Does(c, comm, calls[j], -1));
    for (const std::string& s : peer_does) instead.push_back(s);
    std::string sentence = Does(c, comm, x, -1);
    for (size_t k = 0; k < instead.size(); ++k) sentence += (k == 0 ? " while " : " and ") + instead[k];
    out.sentence += (out.sentence.empty() ? "" : "; ") + sentence;
    if (out.precise) {
      std::string one = c.Name(x.proc) + " names the wrong peer: its " + (x.recv ? "receive from " : "send to ") +
                        c.PeerName(comm, x.peer) + " meets no " + (x.recv ? "send" : "receive");
      if (!peer_does.empty()) one += " (" + RankList(peer_does) + ")";
      if (!held.empty()) one += ", which leaves " + RankList(held) + " unanswered";
      cause += (cause.empty() ? "" : "; ") + one;
    }
  }
  out.cause_text = "program logic: " + (out.precise ? cause
                                                     : c.Names(out.culprits) + " call sends and receives whose peers "
                                                       "never meet; which of them named the wrong peer the records "
                                                       "cannot tell");
  std::vector<size_t> order(calls.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return calls[a].rank < calls[b].rank; });
  for (size_t i : order) out.evidence.emplace_back(c.Name(calls[i].proc), CallLine(c, comm, calls, calls[i]));
  return out;
}

}  // namespace ncclwatch::tools::diagnose_internal
