#include "tools/diagnose/find_dead.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace ncclwatch::tools::diagnose_internal {

std::vector<Ranked> FindDead(const Ctx& c) {
  const Model& m = c.m;
  std::vector<Ranked> out;
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    if (!c.dead[pi]) continue;
    const Proc& p = m.procs[pi];
    const double silent = static_cast<double>(c.t_end - p.last_ns) / 1e9;
    Finding f;
    f.set_kind(report::DEAD_RANK);
    *f.add_culprits() = c.Ref(pi);
    f.set_t_last_sign_of_life_sec(c.T(p.last_ns));
    f.set_silent_sec(silent);
    std::string sum = "DEAD: " + c.Name(pi) + " stopped without finalizing at " + At(c.T(p.last_ns)) + " (" + Dur(silent) +
                      " before the job's last record)";
    const uint32_t busy = c.oldest_inflight[pi];
    if (busy != kNone) {
      const Op& b = m.ops[busy];
      SetComm(c, b.comm, &f);
      f.set_func(c.Str(b.func));
      f.set_seq(b.seq);
      SetOp(busy, &f);
      f.set_p2p(b.kind == OpKind::kP2p);
      std::vector<uint32_t> waiting;
      if (b.match != kNone)
        for (uint32_t oi : m.matches[b.match].ops)
          if (oi != kNone && oi != busy && m.ops[oi].state != OpState::kCompleted) waiting.push_back(m.ops[oi].proc);
      for (uint32_t w : waiting) *f.add_waiting() = c.Ref(w, b.comm);
      sum += ", inside " + c.OpName(b) + " on " + c.CommLabel(b.comm);
      if (!waiting.empty()) {
        double wait = 1e300;
        for (uint32_t oi : m.matches[b.match].ops)
          if (oi != kNone && oi != busy && m.ops[oi].state != OpState::kCompleted) wait = std::min(wait, c.WaitSec(m.ops[oi]));
        f.set_waited_sec(wait);
        sum += "; " + c.Names(waiting) + " wait in it (" + Dur(wait) + ")";
      }
    } else {
      std::string after;
      const std::string lost = LostTail(c, pi, kNone, &after);
      sum += lost.empty() ? "; its last operation: " + LastOpText(c, pi, kNone)
                          : "; its file ends early: the others completed" + after.substr(6) + " with it";
    }
    f.set_summary(sum);
    std::string ev = "last sign of life at " + At(c.T(p.last_ns));
    if (p.heartbeats > 0) ev += ", last heartbeat at " + At(c.T(p.last_heartbeat_ns)) + Printf(" (every %u ms)", p.heartbeat_ms);
    else ev += ", no heartbeat recorded";
    ev += "; no finalize";
    if (p.cut_tail) ev += "; its file ends mid-record (killed)";
    AddEvidence(&f, c.Name(pi), ev);
    Emit(&out, p.last_ns, std::move(f));
  }
  return out;
}

}  // namespace ncclwatch::tools::diagnose_internal
