#include "tools/diagnose/find_chain_mismatch.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tools/model/collectives.h"

namespace ncclwatch::tools::diagnose_internal {

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

}  // namespace ncclwatch::tools::diagnose_internal
