#include "tools/diagnose/find_late.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ncclwatch::tools::diagnose_internal {

namespace {

constexpr double kLateSec = 10.0;

// 1: the rank's report saw its GPU not in the op; 2: in it; 0: unknown.
int GpuSeen(const Ctx& c, uint32_t oi) {
  int64_t t = kNoTime;
  const StuckOp* s = StuckOf(c, oi, &t);
  if (s == nullptr) return 0;
  if (s->gpu == 1) return 1;
  if (s->gpu == 2) return 2;
  // In a window (sampled events): the GPU may be before, in or past it.
  // With CUDA events and no gpu (no event before the kernel, or its pair
  // taken over), the report has no channel counts to read: unknown.
  if (s->gpu == 3 || c.m.procs[c.m.ops[oi].proc].event_completions) return 0;
  if (s->nchannels == 0) return 0;
  return s->kernel_started == 0 ? 1 : 2;
}

// What `proc` had in flight between `from` and `to`, besides `skip`: the
// operation it waited in elsewhere, or kNone (idle outside NCCL).
uint32_t BusyBetween(const Ctx& c, uint32_t proc, int64_t from, int64_t to, uint32_t skip) {
  for (uint32_t oi : c.m.procs[proc].ops) {
    const Op& o = c.m.ops[oi];
    if (oi == skip || o.start_ns == kNoTime || o.start_ns > from) continue;
    const int64_t end = o.done_ns != kNoTime ? o.done_ns : (c.live.Unfinished(oi) ? INT64_MAX : kNoTime);
    if (end != kNoTime && end >= to) return oi;
  }
  return kNone;
}

}  // namespace

std::vector<Ranked> FindLate(const Ctx& c) {
  const Model& m = c.m;
  std::vector<Ranked> out;
  for (uint32_t ci = 0; ci < m.comms.size(); ++ci) {
    // One finding per late rank and communicator: the first operation it
    // was late for; the rest of that step is late with it.
    std::set<uint32_t> found;
    for (uint32_t mi : c.colls_of_comm[ci]) {
      const Match& mt = m.matches[mi];
      if (static_cast<int32_t>(mt.ops.size()) != m.comms[ci].nranks || mt.ops.size() < 2) continue;
      bool all = true, completed = true;
      for (uint32_t oi : mt.ops) {
        all = all && oi != kNone && m.ops[oi].start_ns != kNoTime;
        completed = completed && oi != kNone && m.ops[oi].state == OpState::kCompleted;
      }
      if (!all) continue;
      std::vector<uint32_t> by_start(mt.ops.begin(), mt.ops.end());
      std::sort(by_start.begin(), by_start.end(),
                [&](uint32_t a, uint32_t b) { return m.ops[a].start_ns < m.ops[b].start_ns; });
      const Op& last = m.ops[by_start.back()];
      const Op& before = m.ops[by_start[by_start.size() - 2]];
      const double gap = static_cast<double>(last.start_ns - before.start_ns) / 1e9;
      bool named = false;
      for (size_t i = 0; i + 1 < by_start.size(); ++i) named |= c.stuck_ops.count(by_start[i]) > 0;

      std::vector<uint32_t> late, waited;
      bool by_gpu = false;
      double gpu_wait = 0;  // by GPU: issued to completed on every rank
      // Named by the waiters' stuck reports, the gap must still reach their
      // stuck limit: under load (8 ranks sharing a GPU) arrivals 1.5 s apart
      // happen with nothing wrong.
      double stuck_limit = c.o.min_wait_sec;
      for (size_t i = 0; i + 1 < by_start.size(); ++i)
        stuck_limit = std::max(stuck_limit, m.procs[m.ops[by_start[i]].proc].stuck_sec);
      if (gap >= kLateSec || (named && gap >= stuck_limit)) {
        late.push_back(by_start.back());
        for (size_t i = 0; i + 1 < by_start.size(); ++i) waited.push_back(by_start[i]);
      } else if (completed && named) {
        for (uint32_t oi : mt.ops) (GpuSeen(c, oi) == 1 ? late : waited).push_back(oi);
        bool started = false;
        for (uint32_t oi : waited) started |= GpuSeen(c, oi) == 2;
        // It held the others for kLateSec at least: a GPU shared by eight
        // ranks starts a kernel 4 s late with nothing wrong.
        int64_t done = kNoTime, first = INT64_MAX;
        for (uint32_t oi : mt.ops) done = std::max(done, m.ops[oi].done_ns), first = std::min(first, m.ops[oi].start_ns);
        gpu_wait = static_cast<double>(done - first) / 1e9;
        if (late.empty() || !started || gpu_wait < kLateSec) continue;
        by_gpu = true;
      } else {
        continue;
      }

      bool seen = true;
      for (uint32_t oi : late) seen = seen && found.count(m.ops[oi].proc) > 0;
      if (seen) continue;
      for (uint32_t oi : late) found.insert(m.ops[oi].proc);
      Finding f;
      f.set_kind(report::LATE_RANK);
      SetComm(c, ci, &f);
      f.set_func(c.Str(last.func));
      f.set_seq(mt.seq);
      SetOp(mt, &f);
      std::vector<uint32_t> late_procs, waiting_procs;
      for (uint32_t oi : late) late_procs.push_back(m.ops[oi].proc);
      for (uint32_t oi : waited) waiting_procs.push_back(m.ops[oi].proc);
      for (uint32_t p : late_procs) *f.add_culprits() = c.Ref(p, ci);
      for (uint32_t p : waiting_procs) *f.add_waiting() = c.Ref(p, ci);
      const std::string opname = c.OpName(last) + " on " + c.CommLabel(ci);
      std::string sum;
      if (!by_gpu) {
        f.set_waited_sec(gap);
        const uint32_t busy = BusyBetween(c, last.proc, before.start_ns, last.start_ns, by_start.back());
        sum = "LATE: " + c.Name(last.proc) + " reached " + opname + " " + Dur(gap) + " after " +
              c.Names(waiting_procs) + ", which waited in it" + (named ? " (their stuck reports name it)" : "");
        if (busy != kNone) {
          const Op& b = m.ops[busy];
          sum += "; meanwhile it was in " + c.OpName(b) + " on " + c.CommLabel(b.comm);
          SetCause(&f, report::CAUSE_UNKNOWN,
                   "cannot tell: " + c.Name(last.proc) + " waited in " + c.OpName(b) + " on " + c.CommLabel(b.comm) +
                       "; what held that operation holds this one, and its finding tells");
        } else {
          sum += "; it was idle outside NCCL until then";
          // Idle outside NCCL is what a busy host leaves, and what a
          // program doing other work on that rank leaves too.
          SetCause(&f, report::CAUSE_UNKNOWN,
                   "cannot tell: " + c.Name(last.proc) + " was idle outside NCCL until then, and a host busy outside "
                   "NCCL (a data loader, the GIL, a blocked thread) and a program doing other work on that rank "
                   "(a checkpoint, a sleep, a store) leave the same records; what would tell: " +
                       IdleWouldTell(c, {last.proc}, /*p2p=*/false));
        }
        AddEvidence(&f, c.Name(last.proc), "enqueued it at " + At(c.T(last.start_ns)));
        AddEvidence(&f, c.Names(waiting_procs), "enqueued it by " + At(c.T(before.start_ns)) + ", waited " + Dur(gap));
      } else {
        const double wait = gpu_wait;  // every op completed (checked above)
        f.set_waited_sec(wait);
        sum = "LATE: " + std::string(late_procs.size() == 1 ? c.Name(late_procs[0]) + "'s GPU" : "the GPUs of " + c.Names(late_procs)) +
              " had not started " + opname + " when the stuck reports were written, while " + c.Names(waiting_procs) +
              " were in it; it completed " + Dur(wait) + " after it was issued: earlier work on " +
              (late_procs.size() == 1 ? "its stream" : "their streams") + " held it";
        SetCause(&f, report::CAUSE_RESOURCES, c.Names(late_procs) + "'s GPU was busy with earlier work on its stream",
                 "stuck reports: " + c.Names(late_procs) + "'s GPU had not started it while the others were in it");
        for (uint32_t oi : late) AddEvidence(&f, c.Name(m.ops[oi].proc), "its stuck report: its GPU had not started it");
        for (uint32_t oi : waited)
          AddEvidence(&f, c.Name(m.ops[oi].proc),
                      std::string("its stuck report: ") + (GpuSeen(c, oi) == 2 ? "its GPU was in it" : "no word on its GPU"));
      }
      f.set_summary(sum);
      Emit(&out, before.start_ns, std::move(f));
    }
  }
  return out;
}

}  // namespace ncclwatch::tools::diagnose_internal
