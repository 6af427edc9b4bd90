#include "tools/model/loader_internal.h"

#include <stdio.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>

#include "tools/model/inputs.h"

namespace ncclwatch::tools {

using loader_internal::Damaged;

namespace {

// Program order: by enqueue start, file order breaking ties.
void OrderProc(Model* m, uint32_t pi) {
  Proc& p = m->procs[pi];
  std::stable_sort(p.ops.begin(), p.ops.end(),
                   [&](uint32_t a, uint32_t b) { return m->ops[a].start_ns < m->ops[b].start_ns; });
  for (uint32_t i = 0; i < p.ops.size(); ++i) m->ops[p.ops[i]].index = i;
}

// The ends an abort may precede on process `proc` for communicator `comm`:
// the end of the process's file and its finalizes of `comm` (kNoTime: none).
std::vector<int64_t> AbortEnds(const Model& m, uint32_t proc, uint32_t comm) {
  std::vector<int64_t> ends{m.procs[proc].last_ns};
  for (const CommMember& mem : m.comms[comm].members)
    if (mem.proc == proc) ends.push_back(mem.finalize_ns);
  return ends;
}

// Whether a completion at `done` fell in an abort's window (model.h): less
// than kAbortWindowSec before one of `ends` (AbortEnds).
bool InAbortWindow(const std::vector<int64_t>& ends, int64_t done) {
  for (int64_t end : ends) {
    if (end == kNoTime) continue;
    const double before = static_cast<double>(end - done) / 1e9;
    if (before >= 0 && before < kAbortWindowSec) return true;
  }
  return false;
}

// See LoadModel (model.h): operations in flight that a later completed
// operation on the same communicator shows to have completed.
// An operation its own stuck report saw finish (every kernel channel
// stopped, and every proxy operation) completed, though its completion
// record never reached the file: lost on the way (a thread without a
// buffer, a full ring). It is not a hang.
void ProveByStuckReports(Model* m, uint32_t pi) {
  for (const StuckReport& r : m->procs[pi].stucks)
    for (const StuckOp& so : r.ops) {
      if (so.op == kNone || so.nchannels == 0) continue;
      Op& y = m->ops[so.op];
      if (y.state != OpState::kInFlight || y.ended_by_abort) continue;
      if (so.kernel_stopped < so.nchannels || so.proxy_stopped < so.proxy_started) continue;
      y.state = OpState::kCompleted;
      y.completion_lost = true;
      y.done_ns = kNoTime;
      y.has_gpu = false;
    }
}

}  // namespace

// A watchdog fires only after its timeout, which users set above the
// plugin's stuck limit (NCCLWATCH_STUCK_SEC, in the header) and frameworks
// at 10 s or more; so the stuck limit, at most 5 s, and never under
// kAbortMinWaitSec. A straggler's collectives wait 1 to 2 s and complete
// shortly before a clean destroy (seen on H100 with NCCL 2.28.9, 4 ranks
// over sockets, one sleeping 250 ms per step): those are real completions.
double AbortMinWaitSec(double stuck_sec) {
  const double limit = stuck_sec > 0 ? std::min(stuck_sec, 5.0) : 5.0;
  return std::max(kAbortMinWaitSec, limit);
}

namespace {

// Completed well within the time a watchdog allows: no abort's doing.
bool Prompt(const Op& z) {
  return z.state == OpState::kCompleted && z.done_ns != kNoTime && z.start_ns != kNoTime &&
         static_cast<double>(z.done_ns - z.start_ns) / 1e9 < kAbortMinWaitSec;
}

// Per (process, communicator): the latest enqueue of an operation that
// completed promptly (kNoTime: none).
std::map<std::pair<uint32_t, uint32_t>, int64_t> LastPromptStarts(const Model& m) {
  std::map<std::pair<uint32_t, uint32_t>, int64_t> out;
  for (const Op& o : m.ops) {
    auto it = out.emplace(std::make_pair(o.proc, o.comm), kNoTime).first;
    if (Prompt(o)) it->second = std::max(it->second, o.start_ns);
  }
  return out;
}

void ImplyLostCompletions(Model* m, uint32_t pi) {
  const Proc& p = m->procs[pi];
  struct Later {
    int64_t start;
    int64_t done;  // the earliest completion among this and every later entry
    bool near_end;
  };
  std::unordered_map<uint32_t, std::vector<uint32_t>> by_comm;  // program order
  for (uint32_t oi : p.ops) by_comm[m->ops[oi].comm].push_back(oi);
  for (auto& [comm, ops] : by_comm) {
    bool any = false;
    for (uint32_t oi : ops) any |= m->ops[oi].state == OpState::kInFlight && !m->ops[oi].ended_by_abort;
    if (!any) continue;
    const std::vector<int64_t> ends = AbortEnds(*m, pi, comm);
    std::vector<Later> later;  // by start: p.ops is (OrderProc)
    for (uint32_t oi : ops) {
      const Op& x = m->ops[oi];
      if (x.state != OpState::kCompleted || x.ended_by_abort || x.done_ns == kNoTime || x.start_ns == kNoTime) continue;
      later.push_back({x.start_ns, x.done_ns, InAbortWindow(ends, x.done_ns)});
    }
    if (later.empty()) continue;
    // Suffix minimum of the completion, and whether some completion from
    // there on is far from the end.
    std::vector<bool> far(later.size());
    for (size_t i = later.size(); i-- > 0;) {
      far[i] = !later[i].near_end || (i + 1 < later.size() && far[i + 1]);
      if (i + 1 < later.size()) later[i].done = std::min(later[i].done, later[i + 1].done);
    }
    // A completion the communicator did more work after (a later operation
    // enqueued after it completed promptly) was no abort's doing: in a job a
    // few seconds long every completion lies near the end.
    int64_t last_start = kNoTime;
    for (uint32_t oi : ops) {
      const Op& z = m->ops[oi];
      if (Prompt(z)) last_start = std::max(last_start, z.start_ns);
    }
    for (uint32_t oi : ops) {
      Op& y = m->ops[oi];
      if (y.state != OpState::kInFlight || y.ended_by_abort || y.start_ns == kNoTime) continue;
      const int64_t enqueued = y.start_ns + static_cast<int64_t>(y.enqueue_ns);
      auto it = std::upper_bound(later.begin(), later.end(), enqueued,
                                 [](int64_t t, const Later& l) { return t < l.start; });
      if (it == later.end()) continue;
      const size_t i = static_cast<size_t>(it - later.begin());
      const bool soon = static_cast<double>(later[i].done - y.start_ns) / 1e9 < kAbortMinWaitSec;
      const bool followed = later[i].done < last_start;
      if (!soon && !far[i] && !followed) continue;
      y.state = OpState::kCompleted;
      y.completion_lost = true;
      y.done_ns = kNoTime;
      y.has_gpu = false;
    }
  }
}

}  // namespace

bool InAbortWindowOf(const Model& m, const Op& op) {
  return op.done_ns != kNoTime && InAbortWindow(AbortEnds(m, op.proc, op.comm), op.done_ns);
}

bool AfterAPeerEnded(const Model& m, const Op& op) {
  if (op.done_ns == kNoTime || op.comm >= m.comms.size() || op.proc >= m.procs.size()) return false;
  // Before AlignClocks each process's times are its CLOCK_MONOTONIC; its
  // header's clock pair puts them on CLOCK_REALTIME, to the hosts' clock
  // error (ms with NTP; the same clocks on one host), far inside the window.
  auto realtime = [&](uint32_t pi, int64_t t) { return t + m.procs[pi].RealtimeMinusMono(); };
  const int64_t done = realtime(op.proc, op.done_ns);
  for (const CommMember& mem : m.comms[op.comm].members) {
    if (mem.proc == op.proc || mem.proc >= m.procs.size()) continue;
    for (int64_t end : AbortEnds(m, mem.proc, op.comm)) {
      if (end == kNoTime) continue;
      if (static_cast<double>(realtime(mem.proc, end) - done) / 1e9 < kAbortWindowSec) return true;
    }
  }
  return false;
}


namespace {

// Processes of one job share communicators (every rank is in the world
// one); groups of processes that share none are separate jobs, mixed by
// mistake. Processes that recorded no communicator join no group.
bool OneJob(const Model& m, std::string* error) {
  std::vector<uint32_t> root(m.procs.size());
  for (uint32_t i = 0; i < root.size(); ++i) root[i] = i;
  auto find = [&](uint32_t x) {
    while (root[x] != x) x = root[x] = root[root[x]];
    return x;
  };
  std::vector<bool> in_comm(m.procs.size(), false);
  for (const Comm& c : m.comms)
    for (const CommMember& mem : c.members) {
      in_comm[mem.proc] = true;
      root[find(mem.proc)] = find(c.members.front().proc);
    }
  std::map<uint32_t, std::vector<std::string>> groups;
  for (uint32_t i = 0; i < m.procs.size(); ++i)
    if (in_comm[i]) groups[find(i)].push_back(m.procs[i].path);
  if (groups.size() <= 1) return true;
  *error = "the files hold " + std::to_string(groups.size()) + " jobs (processes that share no communicator): ";
  size_t g = 0;
  for (const auto& [r, files] : groups) {
    *error += (g++ ? "; " : "") + std::to_string(files.size()) + " files: " + ListFew(files);
  }
  // Without job ids --job cannot pick one: say how to get them.
  *error += "; give one job's files (these carry no job id for --job: set NCCLWATCH_JOB_ID, or run under Slurm or "
            "torchrun, and each job's files can be picked with --job)";
  return false;
}

// The members of one communicator (one hash, from several files) must
// agree on its name and size and hold distinct ranks: where they do not, a
// member's CommInit was damaged. The strict majority is believed and the
// others' files are damaged at their CommInit; without one, all of them are.
void CheckMembers(Model* m) {
  for (Comm& c : m->comms) {
    if (c.hash == 0 || c.members.size() < 2) continue;
    // Members that said nothing (no name; API v1 to v3: no size) do not vote.
    auto agree = [&](auto value_of, auto none, auto use, const char* what) {
      std::map<decltype(value_of(c.members[0])), size_t> votes;
      for (const CommMember& mem : c.members)
        if (value_of(mem) != none) ++votes[value_of(mem)];
      if (votes.size() < 2) return;
      auto best = votes.begin();
      bool strict = true;
      for (auto it = votes.begin(); it != votes.end(); ++it) {
        if (it == best) continue;
        if (it->second > best->second) best = it, strict = true;
        else if (it->second == best->second) strict = false;
      }
      for (const CommMember& mem : c.members) {
        if (value_of(mem) == none || (strict && value_of(mem) == best->first)) continue;
        uint32_t listed = 0;
        Damaged(&m->procs[mem.proc], &listed, mem.init_offset,
                std::string("a communicator init whose ") + what + " its other members' files do not share");
      }
      if (strict) use(best->first);
    };
    agree([](const CommMember& mem) { return mem.name; }, std::string(), [&](const std::string& n) { c.name = n; },
          "name");
    agree([](const CommMember& mem) { return std::max(mem.nranks, 0); }, 0, [&](int32_t n) { c.nranks = n; }, "size");
    std::map<int32_t, std::vector<const CommMember*>> by_rank;
    for (const CommMember& mem : c.members)
      if (mem.rank >= 0) by_rank[mem.rank].push_back(&mem);
    for (const auto& [rank, mems] : by_rank) {
      bool other_proc = false;
      for (const CommMember* mem : mems) other_proc |= mem->proc != mems[0]->proc;
      if (!other_proc) continue;
      for (const CommMember* mem : mems) {
        uint32_t listed = 0;
        Damaged(&m->procs[mem->proc], &listed, mem->init_offset,
                "a communicator init for rank " + std::to_string(rank) + ", which another file holds too");
      }
    }
  }
}

// Processes of one host read one CLOCK_REALTIME and one CLOCK_MONOTONIC:
// their headers' realtime minus monotonic bases agree, but for NTP's slewing
// while they started (well under kHostClockSlackNs). A header that fewer
// than half of its host's other processes agree with was damaged
// (AlignClocks would place the process years away); of two that disagree,
// both are suspect.
constexpr int64_t kHostClockSlackNs = 2'000'000'000;

// The launcher gives each process of a job its own rank: two that claim
// one had a header damaged, either.
void CheckLauncherRanks(Model* m) {
  std::map<int32_t, std::vector<uint32_t>> by_rank;
  for (uint32_t pi = 0; pi < m->procs.size(); ++pi)
    if (m->procs[pi].launcher_rank >= 0) by_rank[m->procs[pi].launcher_rank].push_back(pi);
  for (const auto& [rank, procs] : by_rank) {
    if (procs.size() < 2) continue;
    for (uint32_t pi : procs) {
      uint32_t listed = 0;
      Damaged(&m->procs[pi], &listed, m->procs[pi].header_offset,
              "a process header claiming launcher rank " + std::to_string(rank) + ", which another file claims too");
    }
  }
}

void CheckHostClocks(Model* m) {
  std::map<std::string, std::vector<uint32_t>> by_host;
  for (uint32_t pi = 0; pi < m->procs.size(); ++pi) by_host[m->procs[pi].host].push_back(pi);
  for (const auto& [host, procs] : by_host) {
    if (procs.size() < 2) continue;
    std::vector<int64_t> d;
    for (uint32_t pi : procs)
      d.push_back(m->procs[pi].RealtimeMinusMono());
    for (size_t k = 0; k < procs.size(); ++k) {
      size_t agree = 0;
      for (size_t j = 0; j < procs.size(); ++j) agree += j != k && std::abs(d[k] - d[j]) <= kHostClockSlackNs;
      if (2 * agree >= procs.size() - 1) continue;
      uint32_t listed = 0;
      Damaged(&m->procs[procs[k]], &listed, m->procs[procs[k]].header_offset,
              "a process header whose clock bases disagree with the other processes of host " + host);
    }
  }
}


}  // namespace

namespace loader_internal {

bool FinishLoad(Model* m, std::string* error) {
  if (m->procs.empty()) {
    *error = m->errors.empty() ? "no trace files given" : m->errors.front();
    if (m->errors.size() > 1) *error += " (and " + std::to_string(m->errors.size() - 1) + " more)";
    return false;
  }
  CheckMembers(m);
  CheckHostClocks(m);
  CheckLauncherRanks(m);
  // Ranks of communicators the file named only by their events (API v1..v3):
  // the launcher's rank stands in.
  for (Comm& c : m->comms) {
    int32_t max_rank = -1;
    c.size_guessed = c.nranks <= 0;
    std::vector<CommMember*> unranked;
    for (CommMember& mem : c.members) {
      if (mem.rank < 0) mem.rank = m->procs[mem.proc].launcher_rank;
      if (mem.rank < 0) unranked.push_back(&mem);
      max_rank = std::max(max_rank, mem.rank);
    }
    // No launcher rank either: number them by host and pid, after the
    // ranks known, so who issued what can still be compared.
    if (c.size_guessed && !unranked.empty()) {
      std::sort(unranked.begin(), unranked.end(), [&](const CommMember* a, const CommMember* b) {
        const Proc& pa = m->procs[a->proc];
        const Proc& pb = m->procs[b->proc];
        return std::tie(pa.host, pa.pid) < std::tie(pb.host, pb.pid);
      });
      for (CommMember* mem : unranked) mem->rank = ++max_rank;
      c.ranks_by_order = true;
    }
    if (c.nranks <= max_rank) c.nranks = max_rank + 1;
    c.proc_of_rank.assign(static_cast<size_t>(std::max(c.nranks, 0)), kNone);
    for (const CommMember& mem : c.members)
      if (mem.rank >= 0 && mem.rank < c.nranks) c.proc_of_rank[static_cast<size_t>(mem.rank)] = mem.proc;
  }
  if (!OneJob(*m, error)) return false;
  for (Op& o : m->ops)
    if (o.rank < 0) {
      for (const CommMember& mem : m->comms[o.comm].members)
        if (mem.proc == o.proc) o.rank = mem.rank;
    }
  // Completions that were the abort's doing (see model.h): after a long time
  // in flight, shortly before the communicator's finalize (the abort) or the
  // end of the process's file (a framework that aborts, then SIGABRTs).
  // Not one the communicator did more work after, on that process: a later
  // operation enqueued after it that completed promptly. An aborted
  // communicator completes nothing more (PyTorch may still enqueue the next
  // step's collective there, which never completes). A first collective
  // that set up its connections for 1 s, in a job killed 2 s later, is no
  // abort's (seen on H100 with NCCL 2.28.9 over sockets).
  const std::map<std::pair<uint32_t, uint32_t>, int64_t> last_start = LastPromptStarts(*m);
  for (Op& o : m->ops) {
    if (o.state != OpState::kCompleted || o.done_ns == kNoTime) continue;
    if (static_cast<double>(o.done_ns - o.start_ns) / 1e9 < AbortMinWaitSec(m->procs[o.proc].stuck_sec)) continue;
    if (last_start.at({o.proc, o.comm}) > o.done_ns) continue;
    if (InAbortWindow(AbortEnds(*m, o.proc, o.comm), o.done_ns)) {
      o.state = OpState::kInFlight;
      o.ended_by_abort = true;
      o.has_gpu = false;
      o.done_ns = kNoTime;
    }
  }
  for (uint32_t pi = 0; pi < m->procs.size(); ++pi) OrderProc(m, pi);
  for (uint32_t pi = 0; pi < m->procs.size(); ++pi) {
    ImplyLostCompletions(m, pi);
    ProveByStuckReports(m, pi);
  }
  // Communicators sharing a name get a tag naming their members.
  std::unordered_map<std::string, size_t> named;
  for (const Comm& c : m->comms) ++named[c.name];
  for (Comm& c : m->comms) {
    if (named[c.name] < 2) continue;
    if (c.members.size() <= 8) {
      std::string t;
      for (uint32_t pr : c.proc_of_rank) {
        if (pr == kNone) continue;
        std::string n = ProcName(*m, pr);
        if (n.rfind("rank ", 0) == 0) n = n.substr(5);
        t += (t.empty() ? "" : ",") + n;
      }
      c.tag = " {" + t + "}";
    } else {
      char buf[32];
      snprintf(buf, sizeof(buf), " [0x%04llx]", static_cast<unsigned long long>(c.hash & 0xffff));
      c.tag = buf;
    }
  }
  for (const Proc& p : m->procs)
    if (std::find(m->hosts.begin(), m->hosts.end(), p.host) == m->hosts.end()) m->hosts.push_back(p.host);
  return true;
}

}  // namespace loader_internal
}  // namespace ncclwatch::tools
