#include "tools/diagnose/find_mismatch.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tools/model/semantics.h"

namespace ncclwatch::tools::diagnose_internal {
namespace {

struct Sig {
  uint16_t func = 0, datatype = 0;
  uint64_t count = 0;
  int32_t root = 0;
  bool rooted = false;
  bool operator<(const Sig& o) const {
    return std::tie(func, datatype, count, root, rooted) < std::tie(o.func, o.datatype, o.count, o.root, o.rooted);
  }
  bool operator==(const Sig& o) const { return !(*this < o) && !(o < *this); }
};

Sig SigOf(const Ctx& c, const Op& op, bool rooted) {
  Sig s;
  s.func = op.func;
  s.datatype = op.datatype;
  s.count = op.count;
  s.rooted = rooted;
  s.root = rooted ? op.peer_or_root : 0;
  return s;
}

std::string SigText(const Ctx& c, const Sig& s, bool func, bool count, bool dtype, bool root) {
  std::vector<std::string> parts;
  if (func) parts.push_back(c.Str(s.func).empty() ? "an unnamed operation" : c.Str(s.func));
  if (count) parts.push_back("count " + Thousands(s.count));
  if (dtype) parts.push_back(c.Str(s.datatype).empty() ? "no datatype" : c.Str(s.datatype));
  if (root && s.rooted) parts.push_back("root " + std::to_string(s.root));
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " " : "") + parts[i];
  return out;
}

std::string SigShort(const Ctx& c, const Sig& s) {
  std::string out = c.Str(s.func) + "(" + Thousands(s.count);
  if (!c.Str(s.datatype).empty()) out += " " + c.Str(s.datatype);
  if (s.rooted) out += ", root " + std::to_string(s.root);
  return out + ")";
}

}  // namespace

namespace {

// One position of a communicator's collectives where the ranks'
// signatures disagree.
struct Position {
  const Ctx& c;
  uint32_t comm;
  const std::vector<uint32_t>& ms;  // the communicator's collectives (Ctx::colls_of_comm)
  size_t idx;                       // this one's place in `ms`
  const Match& mt;
  bool rooted;  // roots compared: the majority function is rooted
  // The ranks by signature, the largest group first; `majority`: it is
  // strictly larger than the next.
  std::vector<std::pair<Sig, std::vector<int32_t>>> g;
  bool majority = false;

  uint32_t ProcOf(int32_t r) const { return c.m.comms[comm].proc_of_rank[r]; }
  std::string NamesOf(const std::vector<int32_t>& rs) const {
    std::vector<uint32_t> ps;
    for (int32_t r : rs) ps.push_back(ProcOf(r));
    return c.Names(ps);
  }
  // Signatures from #seq onwards on one rank, by seq (stops at the first hole).
  std::vector<Sig> Window(int32_t rank, size_t n) const {
    std::vector<Sig> w;
    for (size_t j = idx; j < ms.size() && w.size() < n; ++j) {
      const Match& x = c.m.matches[ms[j]];
      if (x.seq != mt.seq + w.size()) break;
      const uint32_t oi = OpOfRank(c.m, x, rank);
      if (oi == kNone) break;
      w.push_back(SigOf(c, c.m.ops[oi], rooted));
    }
    return w;
  }
  // "AllReduce(1,024 ncclFloat32), Broadcast(8, root 0)": the first `n` of
  // `rank`'s window, joined by `sep`.
  std::string WindowText(int32_t rank, size_t n, const char* sep) const {
    const std::vector<Sig> w = Window(rank, n);
    std::string t;
    for (size_t i = 0; i < w.size(); ++i) t += (i ? sep : "") + SigShort(c, w[i]);
    return t;
  }
};

// Order: whether each odd group's window is a permutation of the
// reference's (the majority's), and `order_len`, the shortest permutation
// window that fits every group.
bool Permuted(const Position& p, const std::vector<Sig>& ref_w, size_t wmax, size_t* order_len) {
  *order_len = 0;
  for (size_t gi = 1; gi < p.g.size(); ++gi) {
    std::vector<Sig> w = p.Window(p.g[gi].second[0], wmax);
    size_t found = 0;
    for (size_t len = 2; len <= std::min(w.size(), ref_w.size()); ++len) {
      std::vector<Sig> a(w.begin(), w.begin() + len), b(ref_w.begin(), ref_w.begin() + len);
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      if (a == b) {
        found = len;
        break;
      }
    }
    if (found == 0) return false;
    *order_len = std::max(*order_len, found);
  }
  return true;
}

// Skipped or extra operation: the odd rank's sequence is the reference's
// shifted by the result (> 0: it skipped that many; < 0: it issued extra
// ones; 0: neither). Only with a majority and one odd group.
int Shift(const Position& p, const std::vector<Sig>& ref_w, size_t wmax) {
  if (!p.majority || p.g.size() != 2) return 0;
  const std::vector<Sig> w = p.Window(p.g[1].second[0], wmax);
  if (w.size() > 1 && ref_w.size() > 1 && w[1] == ref_w[1]) return 0;
  for (int sh = 1; sh <= 3; ++sh)
    for (int sign : {1, -1}) {
      const std::vector<Sig>& a = sign > 0 ? w : ref_w;  // a[i] == b[i + sh]
      const std::vector<Sig>& b = sign > 0 ? ref_w : w;
      if (b.size() <= static_cast<size_t>(sh)) continue;
      const size_t n = std::min(a.size(), b.size() - sh);
      if (n < 1 || (n < 2 && a.size() > 1)) continue;
      bool ok = true;
      for (size_t i = 0; i < n && ok; ++i) ok = a[i] == b[i + sh];
      if (ok) return sign * sh;
    }
  return 0;
}

// A swap restores agreement after its window; a skip does not: whether
// every odd group agrees with the reference for two positions after
// `order_len`.
bool AgreesAfter(const Position& p, const std::vector<Sig>& ref_w, size_t wmax, size_t order_len) {
  for (size_t gi = 1; gi < p.g.size(); ++gi) {
    std::vector<Sig> w = p.Window(p.g[gi].second[0], wmax);
    for (size_t i = order_len; i < std::min({w.size(), ref_w.size(), order_len + 2}); ++i)
      if (!(w[i] == ref_w[i])) return false;
  }
  return true;
}

// Later disagreeing positions on the communicator (consequences, counted).
size_t LaterDisagreements(const Position& p) {
  size_t later = 0;
  for (size_t j = p.idx + 1; j < p.ms.size(); ++j) {
    std::set<Sig> s;
    for (auto& [r, oi] : Present(p.c.m, p.c.m.matches[p.ms[j]])) s.insert(SigOf(p.c, p.c.m.ops[oi], p.rooted));
    if (s.size() > 1) ++later;
  }
  return later;
}

// ORDER_MISMATCH: the same operations in different orders over the first
// `order_len` positions.
void DescribeOrder(const Position& p, size_t order_len, Finding* f) {
  const uint64_t seq = p.mt.seq;
  f->set_kind(report::ORDER_MISMATCH);
  auto seq_text = [&](int32_t rank) { return p.WindowText(rank, order_len, " then "); };
  std::string sum = "ORDER MISMATCH: " + p.c.CommLabel(p.comm) + " #" + std::to_string(seq) + "-#" +
                    std::to_string(seq + order_len - 1) + ": ";
  for (size_t gi = p.majority ? 1 : 0; gi < p.g.size(); ++gi)
    sum += (gi > (p.majority ? 1u : 0u) ? "; " : "") + p.NamesOf(p.g[gi].second) + " issued " +
           seq_text(p.g[gi].second[0]);
  if (p.majority) sum += " where " + p.NamesOf(p.g[0].second) + " issued " + seq_text(p.g[0].second[0]);
  f->set_summary(sum + (p.majority ? "" : " (no majority: every side is named)"));
  for (auto& grp : p.g)
    AddEvidence(f, p.NamesOf(grp.second), "#" + std::to_string(seq) + ": " + seq_text(grp.second[0]));
}

// MISMATCH of a skipped (`shift` > 0) or extra (< 0) operation.
void DescribeShift(const Position& p, int shift, Finding* f) {
  const uint64_t seq = p.mt.seq;
  f->set_kind(report::MISMATCH);
  const size_t n = static_cast<size_t>(std::abs(shift));
  const std::string ops = p.WindowText(shift > 0 ? p.g[0].second[0] : p.g[1].second[0], n, ", ");
  const std::string odd = p.NamesOf(p.g[1].second), maj = p.NamesOf(p.g[0].second), where = p.c.CommLabel(p.comm);
  const std::string upto = "#" + std::to_string(seq + n - 1);
  const std::string range = "#" + std::to_string(seq) + (n > 1 ? "-" + upto : "");
  if (shift > 0)
    f->set_summary("MISMATCH: " + odd + " skipped " + ops + " " + range + " on " + where + ": its #" +
                   std::to_string(seq) + " is the #" + std::to_string(seq + n) + " of " + maj);
  else
    f->set_summary("MISMATCH: " + odd + " issued " + ops + " as " + range + " on " + where + ", which " + maj +
                   " never issued: its #" + std::to_string(seq + n) + " is their #" + std::to_string(seq));
  for (auto& grp : p.g)
    AddEvidence(f, p.NamesOf(grp.second), "from #" + std::to_string(seq) + ": " + p.WindowText(grp.second[0], 4, ", "));
}

// MISMATCH of the operation's own arguments: which fields differ from the
// reference (the majority's, or the largest group's).
void DescribeArgs(const Position& p, Finding* f) {
  const Ctx& c = p.c;
  const Sig& ref = p.g[0].first;
  f->set_kind(report::MISMATCH);
  bool dfunc = false, dcount = false, ddtype = false, droot = false;
  for (size_t gi = 1; gi < p.g.size(); ++gi) {
    dfunc |= p.g[gi].first.func != ref.func;
    dcount |= p.g[gi].first.count != ref.count;
    ddtype |= p.g[gi].first.datatype != ref.datatype;
    droot |= p.g[gi].first.root != ref.root;
  }
  const bool show_count = dcount || dfunc;
  std::string sum =
      "MISMATCH: " + c.Str(ref.func) + " #" + std::to_string(p.mt.seq) + " on " + c.CommLabel(p.comm) + ": ";
  for (size_t gi = p.majority ? 1 : 0; gi < p.g.size(); ++gi)
    sum += (gi > (p.majority ? 1u : 0u) ? "; " : "") + p.NamesOf(p.g[gi].second) + " called " +
           SigText(c, p.g[gi].first, dfunc || !p.majority, show_count, ddtype, droot);
  if (p.majority)
    sum += " where " + p.NamesOf(p.g[0].second) + " called " + SigText(c, ref, dfunc, show_count, ddtype, droot);
  f->set_summary(sum + (p.majority ? "" : " (no majority: every side is named)"));
  for (size_t gi = 1; gi <= p.g.size(); ++gi)  // the odd ones out first, the majority last
    for (int32_t r : p.g[gi % p.g.size()].second) {
      const auto& grp = p.g[gi % p.g.size()];
      const Op& op = c.m.ops[OpOfRank(c.m, p.mt, r)];
      AddEvidence(f, c.Name(p.ProcOf(r)),
                  SigShort(c, grp.first) + " enqueued at " + At(c.T(op.start_ns)) +
                      (op.state == OpState::kCompleted ? ", completed" : ", never completed"));
    }
}

// The finding of a disagreeing position: an order mismatch, a skipped or
// extra operation, or arguments that differ.
Finding Explain(const Position& p) {
  const Ctx& c = p.c;
  const size_t wmax = static_cast<size_t>(std::max(2, c.o.order_window));
  const std::vector<Sig> ref_w = p.Window(p.g[0].second[0], wmax);
  size_t order_len = 0;
  bool permuted = Permuted(p, ref_w, wmax, &order_len);
  const int shift = Shift(p, ref_w, wmax);
  if (permuted && shift != 0) permuted = AgreesAfter(p, ref_w, wmax, order_len);

  Finding f;
  SetComm(c, p.comm, &f);
  f.set_func(c.Str(p.g[0].first.func));
  f.set_seq(p.mt.seq);
  SetOp(p.mt, &f);
  std::vector<int32_t> culprit_ranks;
  for (size_t gi = p.majority ? 1 : 0; gi < p.g.size(); ++gi)
    culprit_ranks.insert(culprit_ranks.end(), p.g[gi].second.begin(), p.g[gi].second.end());
  std::sort(culprit_ranks.begin(), culprit_ranks.end());
  for (int32_t r : culprit_ranks) *f.add_culprits() = c.Ref(p.ProcOf(r), p.comm);
  if (p.majority)
    for (int32_t r : p.g[0].second) *f.add_waiting() = c.Ref(p.ProcOf(r), p.comm);
  if (permuted && order_len >= 2) DescribeOrder(p, order_len, &f);
  else if (shift != 0) DescribeShift(p, shift, &f);
  else DescribeArgs(p, &f);
  // Completed anyway (the network transport ran mismatched calls against
  // each other): silent data corruption, which must read as loudly as a hang.
  bool done = true;
  size_t present = 0;
  for (auto& [r, oi] : Present(c.m, p.mt)) {
    ++present;
    done = done && c.m.ops[oi].state == OpState::kCompleted && !c.m.ops[oi].ended_by_abort;
  }
  if (done && present == p.mt.ops.size() && SlotsAreRanks(c.m, p.mt) && present > 0) {
    f.set_completed(true);
    f.set_summary(f.summary() + "; it completed on every rank: the results are wrong");
  }
  const size_t later = LaterDisagreements(p);
  if (later > 0)
    AddEvidence(&f, "", Plural(later, "later position", "later positions") + " of this communicator disagree too");
  return f;
}

}  // namespace

Mismatches FindMismatches(const Ctx& c) {
  const Model& m = c.m;
  Mismatches res;
  res.first_seq.assign(m.comms.size(), 0);
  for (uint32_t ci = 0; ci < m.comms.size(); ++ci) {
    const std::vector<uint32_t>& ms = c.colls_of_comm[ci];
    for (size_t idx = 0; idx < ms.size(); ++idx) {
      const Match& mt = m.matches[ms[idx]];
      auto present = Present(m, mt);
      if (present.size() < 2) continue;
      // Rooted-ness by the majority function, so a differing root is
      // compared only where it matters.
      std::map<uint16_t, int> funcs;
      for (auto& [r, oi] : present) ++funcs[m.ops[oi].func];
      uint16_t maj_func =
          std::max_element(funcs.begin(), funcs.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
      const bool rooted = IsRooted(FuncFromName(c.Str(maj_func)));
      // An op whose record failed a consistency check (a damaged file):
      // unknown, not different.
      if (std::any_of(present.begin(), present.end(), [&](const auto& x) { return m.ops[x.second].suspect; }))
        continue;
      std::map<Sig, std::vector<int32_t>> groups;
      for (auto& [r, oi] : present) groups[SigOf(c, m.ops[oi], rooted)].push_back(r);
      if (groups.size() < 2) continue;
      res.first_seq[ci] = mt.seq;
      Position p{c, ci, ms, idx, mt, rooted, {groups.begin(), groups.end()}};
      // The majority: the strictly largest group.
      std::stable_sort(p.g.begin(), p.g.end(), [](auto& a, auto& b) { return a.second.size() > b.second.size(); });
      p.majority = p.g[0].second.size() > p.g[1].second.size();
      std::vector<uint32_t> ops;
      for (auto& pr : present) ops.push_back(pr.second);
      Emit(&res.found, EarliestStart(m, ops), Explain(p));
      break;  // later positions follow from this one
    }
  }
  return res;
}

}  // namespace ncclwatch::tools::diagnose_internal
