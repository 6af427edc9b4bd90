// MISMATCH and ORDER_MISMATCH within one communicator: ranks that issued
// different functions, counts, datatypes or roots at one position.

#include "tools/diagnose/finders.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tools/model/semantics.h"
#include "tools/model/collectives.h"

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

ChainMismatches FindChainMismatches(const Ctx& c, const std::vector<Ranked>& earlier) {
  ChainMismatches res;
  res.absorbed.assign(earlier.size(), false);
  // Per communicator, when the operations put back for the second round
  // were issued (Model::asked_ops): a finding of the operation-level
  // finders there names one of them.
  std::vector<std::pair<int64_t, int64_t>> asked_span(c.m.comms.size(), {INT64_MAX, INT64_MIN});
  for (uint32_t oi : c.m.asked_ops) {
    const Op& op = c.m.ops[oi];
    if (op.comm >= asked_span.size() || op.start_ns == kNoTime) continue;
    asked_span[op.comm].first = std::min(asked_span[op.comm].first, op.start_ns);
    asked_span[op.comm].second = std::max(asked_span[op.comm].second, op.start_ns);
  }
  auto named = [&](uint32_t comm) {
    // Copies, not a structured binding: the lambda below captures them.
    const int64_t lo = asked_span[comm].first, hi = asked_span[comm].second;
    auto names = [&](const Ranked& r) {
      return (r.f.kind() == report::MISMATCH || r.f.kind() == report::ORDER_MISMATCH) &&
             r.f.comm_hash() == c.m.comms[comm].hash && r.when >= lo && r.when <= hi;
    };
    for (size_t i = 0; i < earlier.size(); ++i)
      if (!res.absorbed[i] && names(earlier[i])) return true;
    return std::any_of(res.found.begin(), res.found.end(), names);
  };
  for (const ChainMismatch& cm : c.m.chain_mismatches) {
    if (cm.comm >= c.m.comms.size() || cm.odd.empty()) continue;
    // That finding is the range's, said once.
    if (cm.asked && named(cm.comm)) continue;
    Finding f;
    f.set_kind(report::MISMATCH);
    SetComm(c, cm.comm, &f);
    for (uint32_t p : cm.odd) *f.add_culprits() = c.Ref(p, cm.comm);
    const std::string range = cm.from == cm.to ? "at collective #" + std::to_string(cm.to)
                                               : "between collectives #" + std::to_string(cm.from) + " and #" +
                                                     std::to_string(cm.to);
    const std::string who =
        cm.rest.empty() ? c.Names(cm.odd) + " issued collectives on " + c.CommLabel(cm.comm) +
                              " that differ, with no majority (both sides are named),"
                        : c.Names(cm.odd) + " issued collectives on " + c.CommLabel(cm.comm) + " that differ from " +
                              c.Names(cm.rest) + "'s";
    const std::string how =
        cm.asked ? "the summaries hold these collectives, yet no one of them differs on its own: diagnose the "
                   "traces to name the operation"
                 : "to name the operation, summarize the nodes again adding --collectives=" +
                       FormatCollectiveRanges(RangesToAsk(c.m.comms[cm.comm].hash, cm.from, cm.to)) +
                       " (diagnose --refine-args prints it), or diagnose the traces";
    f.set_summary("MISMATCH: " + who + " in function, count, datatype or root " + range +
                  " of the communicator (counted over its functions; seen by the per-node summaries' signature "
                  "chains: " + how + ")");
    for (uint32_t p : cm.odd)
      AddEvidence(&f, c.Name(p), "its chain of collective signatures differs from the majority's " + range);
    if (!cm.asked) {
      // A collective issued out of turn before the windows shifts every
      // later one of its ranks against the others' (a rank's functions
      // are counted apart): the windows then show later collectives of the
      // same ranks in another order, a consequence of this divergence, not
      // a fault of its own (the traces name the first). One that blames
      // another rank stays, and so does a MISMATCH of an operation's own
      // arguments, which names its operation exactly.
      std::set<std::string> odd_names;
      for (uint32_t p : cm.odd) odd_names.insert(c.Ref(p, cm.comm).name());
      const uint64_t hash = c.m.comms[cm.comm].hash;
      auto follows = [&](const Ranked& r) {
        if (r.f.kind() != report::ORDER_MISMATCH) return false;
        if (r.f.comm_hash() != hash || r.f.culprits_size() == 0) return false;
        for (const report::ProcRef& p : r.f.culprits())
          if (!odd_names.count(p.name())) return false;
        return true;
      };
      for (size_t i = 0; i < earlier.size(); ++i) {
        if (res.absorbed[i] || !follows(earlier[i])) continue;
        AddEvidence(&f, "", "in the windows, later: " + earlier[i].f.summary());
        res.absorbed[i] = true;
      }
    }
    // Before every operation the windows hold: the collectives it names
    // came earlier (strictly: it goes before a finding of the first of them).
    int64_t when = INT64_MAX;
    for (const Op& op : c.m.ops)
      if (op.comm == cm.comm && op.start_ns != kNoTime) when = std::min(when, op.start_ns);
    Emit(&res.found, when == INT64_MAX ? 0 : when == INT64_MIN ? when : when - 1, std::move(f));
  }
  return res;
}

Mismatches FindMismatches(const Ctx& c) {
  const Model& m = c.m;
  Mismatches res;
  res.first_seq.assign(m.comms.size(), 0);
  for (uint32_t ci = 0; ci < m.comms.size(); ++ci) {
    const std::vector<uint32_t>& ms = c.colls_of_comm[ci];
    // Rooted-ness by the majority function, so a differing root is compared only where it matters.
    for (size_t idx = 0; idx < ms.size(); ++idx) {
      const Match& mt = m.matches[ms[idx]];
      auto present = Present(m, mt);
      if (present.size() < 2) continue;
      std::map<uint16_t, int> funcs;
      for (auto& [r, oi] : present) ++funcs[m.ops[oi].func];
      uint16_t maj_func = std::max_element(funcs.begin(), funcs.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
      const bool rooted = IsRooted(FuncFromName(c.Str(maj_func)));
      std::map<Sig, std::vector<int32_t>> groups;
      // An op whose record failed a consistency check (a damaged file):
      // unknown, not different.
      if (std::any_of(present.begin(), present.end(), [&](const auto& x) { return m.ops[x.second].suspect; }))
        continue;
      for (auto& [r, oi] : present) groups[SigOf(c, m.ops[oi], rooted)].push_back(r);
      if (groups.size() < 2) continue;
      res.first_seq[ci] = mt.seq;

      // The majority: the strictly largest group.
      std::vector<std::pair<Sig, std::vector<int32_t>>> g(groups.begin(), groups.end());
      std::stable_sort(g.begin(), g.end(), [](auto& a, auto& b) { return a.second.size() > b.second.size(); });
      const bool majority = g[0].second.size() > g[1].second.size();
      const Sig ref = g[0].first;
      const int32_t ref_rank = g[0].second[0];
      auto proc_of = [&](int32_t r) { return m.comms[ci].proc_of_rank[r]; };
      auto names_of = [&](const std::vector<int32_t>& rs) {
        std::vector<uint32_t> ps;
        for (int32_t r : rs) ps.push_back(proc_of(r));
        return c.Names(ps);
      };
      // Signatures from #seq onwards on one rank, by seq (stops at the first hole).
      auto window = [&](int32_t rank, size_t n) {
        std::vector<Sig> w;
        for (size_t j = idx; j < ms.size() && w.size() < n; ++j) {
          const Match& x = m.matches[ms[j]];
          if (x.seq != mt.seq + w.size()) break;
          const uint32_t oi = OpOfRank(m, x, rank);
          if (oi == kNone) break;
          w.push_back(SigOf(c, m.ops[oi], rooted));
        }
        return w;
      };
      // Order: is each odd group's window a permutation of the reference's?
      const size_t wmax = static_cast<size_t>(std::max(2, c.o.order_window));
      const std::vector<Sig> ref_w = window(ref_rank, wmax);
      size_t order_len = 0;  // the shortest permutation window that fits every group
      bool permuted = true;
      for (size_t gi = 1; gi < g.size() && permuted; ++gi) {
        std::vector<Sig> w = window(g[gi].second[0], wmax);
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
        if (found == 0) permuted = false;
        order_len = std::max(order_len, found);
      }
      // Skipped or extra operation: the odd rank's sequence is the reference's
      // shifted by `shift` (> 0: it skipped that many; < 0: it issued extra ones).
      int shift = 0;
      std::vector<Sig> odd_w = majority && g.size() == 2 ? window(g[1].second[0], wmax) : std::vector<Sig>();
      if (majority && g.size() == 2 && !(odd_w.size() > 1 && ref_w.size() > 1 && odd_w[1] == ref_w[1])) {
        const std::vector<Sig>& w = odd_w;
        for (int sh = 1; sh <= 3 && shift == 0; ++sh)
          for (int sign : {1, -1}) {
            const std::vector<Sig>& a = sign > 0 ? w : ref_w;  // a[i] == b[i + sh]
            const std::vector<Sig>& b = sign > 0 ? ref_w : w;
            if (b.size() <= static_cast<size_t>(sh)) continue;
            const size_t n = std::min(a.size(), b.size() - sh);
            if (n < 1 || (n < 2 && a.size() > 1)) continue;
            bool ok = true;
            for (size_t i = 0; i < n && ok; ++i) ok = a[i] == b[i + sh];
            if (ok) {
              shift = sign * sh;
              break;
            }
          }
      }
      // A swap restores agreement after its window; a skip does not.
      if (permuted && shift != 0) {
        for (size_t gi = 1; gi < g.size(); ++gi) {
          std::vector<Sig> w = window(g[gi].second[0], wmax);
          for (size_t i = order_len; i < std::min({w.size(), ref_w.size(), order_len + 2}); ++i)
            if (!(w[i] == ref_w[i])) permuted = false;
        }
      }
      // Later disagreeing positions on this comm (consequences, counted).
      size_t later = 0;
      for (size_t j = idx + 1; j < ms.size(); ++j) {
        std::set<Sig> s;
        for (auto& [r, oi] : Present(m, m.matches[ms[j]])) s.insert(SigOf(c, m.ops[oi], rooted));
        if (s.size() > 1) ++later;
      }

      Finding f;
      SetComm(c, ci, &f);
      f.set_func(c.Str(ref.func));
      f.set_seq(mt.seq);
      SetOp(mt, &f);
      std::vector<int32_t> culprit_ranks, agree_ranks;
      for (size_t gi = majority ? 1 : 0; gi < g.size(); ++gi)
        culprit_ranks.insert(culprit_ranks.end(), g[gi].second.begin(), g[gi].second.end());
      if (majority) agree_ranks = g[0].second;
      std::sort(culprit_ranks.begin(), culprit_ranks.end());
      for (int32_t r : culprit_ranks) *f.add_culprits() = c.Ref(proc_of(r), ci);
      for (int32_t r : agree_ranks) *f.add_waiting() = c.Ref(proc_of(r), ci);
      const std::string where = c.CommLabel(ci);
      const std::string no_maj = majority ? "" : " (no majority: every side is named)";
      if (permuted && order_len >= 2) {
        f.set_kind(report::ORDER_MISMATCH);
        auto seq_text = [&](int32_t rank) {
          std::vector<Sig> w = window(rank, order_len);
          std::string s;
          for (size_t i = 0; i < w.size(); ++i) s += (i ? " then " : "") + SigShort(c, w[i]);
          return s;
        };
        std::string sum = "ORDER MISMATCH: " + where + " #" + std::to_string(mt.seq) + "-#" +
                          std::to_string(mt.seq + order_len - 1) + ": ";
        for (size_t gi = majority ? 1 : 0; gi < g.size(); ++gi)
          sum += (gi > (majority ? 1u : 0u) ? "; " : "") + names_of(g[gi].second) + " issued " + seq_text(g[gi].second[0]);
        if (majority) sum += " where " + names_of(g[0].second) + " issued " + seq_text(ref_rank);
        f.set_summary(sum + no_maj);
        for (auto& grp : g) AddEvidence(&f, names_of(grp.second), "#" + std::to_string(mt.seq) + ": " + seq_text(grp.second[0]));
      } else if (shift != 0) {
        f.set_kind(report::MISMATCH);
        const int n = std::abs(shift);
        std::string ops;
        const std::vector<Sig> ref_ops = window(ref_rank, static_cast<size_t>(n));
        const std::vector<Sig> odd_ops = window(g[1].second[0], static_cast<size_t>(n));
        const std::vector<Sig>& list = shift > 0 ? ref_ops : odd_ops;
        for (size_t i = 0; i < list.size(); ++i) ops += (i ? ", " : "") + SigShort(c, list[i]);
        const std::string odd = names_of(g[1].second), maj = names_of(g[0].second);
        const std::string upto = "#" + std::to_string(mt.seq + n - 1);
        const std::string range = "#" + std::to_string(mt.seq) + (n > 1 ? "-" + upto : "");
        if (shift > 0)
          f.set_summary("MISMATCH: " + odd + " skipped " + ops + " " + range + " on " + where + ": its #" +
                        std::to_string(mt.seq) + " is the #" + std::to_string(mt.seq + n) + " of " + maj);
        else
          f.set_summary("MISMATCH: " + odd + " issued " + ops + " as " + range + " on " + where + ", which " + maj +
                        " never issued: its #" + std::to_string(mt.seq + n) + " is their #" + std::to_string(mt.seq));
        for (auto& grp : g) AddEvidence(&f, names_of(grp.second), "from #" + std::to_string(mt.seq) + ": " + [&] {
          std::vector<Sig> w = window(grp.second[0], 4);
          std::string t;
          for (size_t i = 0; i < w.size(); ++i) t += (i ? ", " : "") + SigShort(c, w[i]);
          return t;
        }());
      } else {
        f.set_kind(report::MISMATCH);
        // Which fields differ, from the reference.
        bool dfunc = false, dcount = false, ddtype = false, droot = false;
        for (size_t gi = 1; gi < g.size(); ++gi) {
          dfunc |= g[gi].first.func != ref.func;
          dcount |= g[gi].first.count != ref.count;
          ddtype |= g[gi].first.datatype != ref.datatype;
          droot |= g[gi].first.root != ref.root;
        }
        const bool show_count = dcount || dfunc;
        std::string sum = "MISMATCH: " + c.Str(ref.func) + " #" + std::to_string(mt.seq) + " on " + where + ": ";
        for (size_t gi = majority ? 1 : 0; gi < g.size(); ++gi)
          sum += (gi > (majority ? 1u : 0u) ? "; " : "") + names_of(g[gi].second) + " called " +
                 SigText(c, g[gi].first, dfunc || !majority, show_count, ddtype, droot);
        if (majority)
          sum += " where " + names_of(g[0].second) + " called " + SigText(c, ref, dfunc, show_count, ddtype, droot);
        f.set_summary(sum + no_maj);
        for (size_t gi = 1; gi <= g.size(); ++gi)  // the odd ones out first, the majority last
          for (int32_t r : g[gi % g.size()].second) {
            const auto& grp = g[gi % g.size()];
            const Op& op = m.ops[OpOfRank(m, mt, r)];
            AddEvidence(&f, c.Name(proc_of(r)),
                        SigShort(c, grp.first) + " enqueued at " + At(c.T(op.start_ns)) +
                            (op.state == OpState::kCompleted ? ", completed" : ", never completed"));
          }
      }
      {
        // Completed anyway (the network transport ran mismatched calls
        // against each other): silent data corruption, which must read as
        // loudly as a hang.
        bool done = true;
        size_t present = 0;
        for (auto& [r, oi] : Present(m, mt)) {
          ++present;
          done = done && m.ops[oi].state == OpState::kCompleted && !m.ops[oi].ended_by_abort;
        }
        if (done && present == mt.ops.size() && SlotsAreRanks(m, mt) && present > 0) {
          f.set_completed(true);
          f.set_summary(f.summary() + "; it completed on every rank: the results are wrong");
        }
      }
      if (later > 0) AddEvidence(&f, "", Plural(later, "later position", "later positions") + " of this communicator disagree too");
      std::vector<uint32_t> ops;
      for (auto& pr : present) ops.push_back(pr.second);
      Emit(&res.found, EarliestStart(m, ops), std::move(f));
      break;  // later positions follow from this one
    }
  }
  return res;
}

}  // namespace ncclwatch::tools::diagnose_internal
