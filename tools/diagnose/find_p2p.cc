#include "tools/diagnose/find_p2p.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tools/model/semantics.h"

namespace ncclwatch::tools::diagnose_internal {

std::vector<Ranked> FindP2p(const Ctx& c) {
  const Model& m = c.m;
  std::vector<Ranked> out;
  std::set<std::tuple<uint32_t, int32_t, int32_t>> reported;  // (comm, src, dst)
  std::vector<uint32_t> order;
  for (uint32_t mi = 0; mi < m.matches.size(); ++mi)
    if (m.matches[mi].kind == OpKind::kP2p) order.push_back(mi);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Match &x = m.matches[a], &y = m.matches[b];
    return std::tie(x.comm, x.src, x.dst, x.seq) < std::tie(y.comm, y.src, y.dst, y.seq);
  });
  for (uint32_t mi : order) {
    const Match& mt = m.matches[mi];
    auto key = std::make_tuple(mt.comm, mt.src, mt.dst);
    if (reported.count(key)) continue;
    const uint32_t send = mt.ops.size() > 0 ? mt.ops[0] : kNone;
    const uint32_t recv = mt.ops.size() > 1 ? mt.ops[1] : kNone;
    const std::string where = c.CommLabel(mt.comm);
    if (send != kNone && recv != kNone) {
      const Op &s = m.ops[send], &r = m.ops[recv];
      const int sb = DatatypeSize(c.Str(s.datatype)), rb = DatatypeSize(c.Str(r.datatype));
      const bool differ = (sb > 0 && rb > 0) ? s.count * sb != r.count * rb : (s.count != r.count || s.datatype != r.datatype);
      if (differ) {
        Finding f;
        f.set_kind(report::UNMATCHED_P2P);
        f.set_p2p(true);
        SetComm(c, mt.comm, &f);
        f.set_func("Send");
        f.set_seq(mt.seq);
        SetOp(mt, &f);
        *f.add_culprits() = c.Ref(s.proc, mt.comm);
        *f.add_culprits() = c.Ref(r.proc, mt.comm);
        auto size = [&](const Op& o) { return Thousands(o.count) + (c.Str(o.datatype).empty() ? "" : " x " + c.Str(o.datatype)); };
        f.set_summary("UNMATCHED P2P: sizes disagree on " + where + ": " + c.Name(s.proc) + "'s Send #" +
                      std::to_string(mt.seq) + " to " + c.Name(r.proc) + " carries " + size(s) + " but " + c.Name(r.proc) +
                      "'s Recv expects " + size(r));
        AddEvidence(&f, c.Name(s.proc), c.OpName(s) + ": " + size(s) + (s.state == OpState::kCompleted ? ", completed" : ", never completed"));
        AddEvidence(&f, c.Name(r.proc), c.OpName(r) + ": " + size(r) + (r.state == OpState::kCompleted ? ", completed" : ", never completed"));
        reported.insert(key);
        Emit(&out, std::min(s.start_ns, r.start_ns), std::move(f));
      } else if (c.Hung(send) || c.Hung(recv)) {
        // Both sides posted, never finished: stuck in progress.
        Finding f;
        f.set_kind(report::STUCK_IN_PROGRESS);
        f.set_p2p(true);
        SetComm(c, mt.comm, &f);
        f.set_func("Send");
        f.set_seq(mt.seq);
        SetOp(mt, &f);
        double waited = 1e300;
        for (uint32_t oi : {send, recv}) {
          const Op& op = m.ops[oi];
          if (op.state == OpState::kCompleted) {
            AddEvidence(&f, c.Name(op.proc), c.OpName(op) + " completed");
            continue;
          }
          *f.add_culprits() = c.Ref(op.proc, mt.comm);
          waited = std::min(waited, c.WaitSec(op));
          AddEvidence(&f, c.Name(op.proc), c.OpName(op) + " in flight since " + At(c.T(op.start_ns)));
        }
        f.set_waited_sec(waited);
        f.set_summary("STUCK: Send #" + std::to_string(mt.seq) + " from " + c.Name(s.proc) + " to " + c.Name(r.proc) +
                      " on " + where + " was posted on both sides and never finished (in flight " + Dur(waited) + ")");
        reported.insert(key);
        Emit(&out, std::min(s.start_ns, r.start_ns), std::move(f));
      }
      continue;
    }
    const uint32_t have = send != kNone ? send : recv;
    if (have == kNone || !c.Hung(have)) continue;
    const Op& op = m.ops[have];
    const bool is_send = have == send;
    const int32_t other_rank = is_send ? mt.dst : mt.src;
    // The other side's file is damaged before it: its side is unknown, not
    // missing (the hang is found where it can be seen, or the verdict says
    // it cannot tell).
    if (c.HasFile(mt.comm, other_rank) && m.procs[m.comms[mt.comm].proc_of_rank[other_rank]].damaged_end) continue;
    Finding f;
    f.set_kind(report::UNMATCHED_P2P);
    f.set_p2p(true);
    SetComm(c, mt.comm, &f);
    f.set_func(c.Str(op.func));
    f.set_seq(mt.seq);
    SetOp(have, &f);
    f.set_waited_sec(c.WaitSec(op));
    *f.add_waiting() = c.Ref(op.proc, mt.comm);
    std::string fate;
    if (c.HasFile(mt.comm, other_rank)) {
      const uint32_t other = m.comms[mt.comm].proc_of_rank[other_rank];
      FateInfo fi = FateOf(c, other, mt.comm);
      *f.add_culprits() = c.Ref(other, mt.comm);
      f.add_fates(fi.fate);
      fate = "; " + c.Name(other) + " " + fi.brief;
      AddEvidence(&f, c.Name(other), fi.evidence);
    } else {
      ProcRef* pr = f.add_culprits();
      pr->set_name("comm rank " + std::to_string(other_rank));
      pr->set_launcher_rank(-1);
      pr->set_comm_rank(other_rank);
      f.add_fates(report::FATE_NO_FILE);
      fate = "; it gave no trace file";
    }
    const std::string other_name = c.PeerName(mt.comm, other_rank);
    std::string size = Thousands(op.count) + (c.Str(op.datatype).empty() ? "" : " x " + c.Str(op.datatype));
    f.set_summary("UNMATCHED P2P: " + c.Name(op.proc) + (is_send ? " sent " : " posted a receive of ") + size +
                  (is_send ? " to " : " from ") + other_name + " on " + where + " (" + c.Str(op.func) + " #" +
                  std::to_string(mt.seq) + " between them); " + other_name + " never posted the matching " +
                  (is_send ? "Recv" : "Send") + "; " + c.Name(op.proc) + " waited " + Dur(c.WaitSec(op)) + fate);
    AddEvidence(&f, c.Name(op.proc), c.OpName(op) + " enqueued at " + At(c.T(op.start_ns)) + ", never completed");
    reported.insert(key);
    Emit(&out, op.start_ns, std::move(f));
  }
  return out;
}

}  // namespace ncclwatch::tools::diagnose_internal
