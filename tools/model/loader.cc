#include "tools/model/loader.h"

#include <ctype.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "proto/trace.pb.h"
#include "tools/model/inputs.h"
#include "tools/reader/reader.h"

namespace ncclwatch::tools {

// The open file's maps and counts (ModelLoader::BeginFile to EndFile).
struct ModelLoader::FileState {
  bool have_header = false;
  bool window = false;  // BeginWindow: not a whole file
  std::unordered_map<uint32_t, uint16_t> strings;          // file id -> model id
  std::unordered_map<uint32_t, uint32_t> comms;            // file comm -> model comm
  // file comm -> index in Comm::members of the model comm it maps to now (a
  // file comm that a later CommInit maps to another hash gets a new member).
  std::unordered_map<uint32_t, uint32_t> member_of_comm;
  std::unordered_map<uint64_t, uint32_t> op_by_event;      // event_id -> model op
  std::unordered_map<uint64_t, trace::OpDone> early_done;  // OpDone before its Op
  uint64_t early_done_offset = UINT64_MAX;                 // the first one's record
  uint64_t base = 0;                                       // header.mono_base_ns
  // File string ids defined twice with different texts (damage): an op
  // naming one is suspect.
  std::unordered_set<uint32_t> conflicted_strings;
  // Offsets of this file's ops' records, in file order (as Proc::ops is
  // until OrderProc).
  std::vector<uint64_t> op_offsets;
  // Batches (trace.proto): each opens a write and says how many records
  // were written before it, its sequence number and its time. Records of
  // the write stay within it (see TimeInLine).
  uint64_t records = 0;                // records read so far
  bool in_batch = false;
  uint64_t batch_seq = 0, batch_offset = 0;
  int64_t batch_time = 0;              // relative to base, the write's
  int64_t prev_batch_time = kNoTime;   // the write before's
  size_t batch_first_op = 0;           // Proc::ops index of the write's first op
  uint32_t damage_issues = 0;          // consistency issues listed (at most kMaxDamageIssues)
  // Ops without completion tracking, none saying why (Op.no_completion),
  // and the first one's offset; whether any op had it.
  uint64_t untracked = 0, untracked_offset = 0;
  bool any_tracked = false;
  // Profiler API v1 to v3 give no communicator size, so the plugin numbers
  // no point-to-point operation (Op.p2p_seq 0): the loader numbers them in
  // call order per (file comm, peer, direction), as the plugin does from v4.
  bool numbers_p2p = false;
  std::unordered_map<uint64_t, uint64_t> p2p_count;
  // LoadOptions::kernel_phases: raw KernelCh event_id -> its parent's (an
  // op's), and the phases read, their op named by event_id until EndFile
  // (a folded Op record follows its phases: it waits for its completion,
  // which the last channel's stop brings, after that channel's phases).
  std::unordered_map<uint64_t, uint64_t> kernel_ch_parent;
  std::unordered_map<uint64_t, size_t> phase_by_event;  // -> phases
  std::vector<std::pair<uint64_t, KernelPhaseSpan>> phases;  // parent event_id, span (op unset)
};

namespace {

using FileState = ModelLoader::FileState;

constexpr uint32_t kMaxDamageIssues = 8;

// How far a record's time may lie outside its write: after the write's
// time (the batch's) or before the previous write's. Records of real files
// (testdata/, every one) lie within 0.1 s after and 0.24 s before; a
// damaged byte from the fifth of a time's varint on moves it by 34 s or more.
constexpr int64_t kWriteSlackNs = 1'000'000'000;
// How far a write's time may go back from the write before (files the
// tests build go back a little; the plugin's one writer never does).
constexpr int64_t kBatchBackSlackNs = 250'000'000;

// Times in a file are bounded so that no arithmetic on them can overflow,
// whatever a corrupt file says: CLOCK_MONOTONIC bases and times relative to
// them up to kMaxRelNs (9 years), CLOCK_REALTIME up to kMaxRealtimeNs (the
// year 2116). Real files are far inside.
constexpr int64_t kMaxRelNs = int64_t{1} << 58;
constexpr uint64_t kMaxRealtimeNs = uint64_t{1} << 62;

int64_t Rel(uint64_t t) { return static_cast<int64_t>(std::min<uint64_t>(t, kMaxRelNs)); }


void Seen(Proc* p, int64_t t) {
  if (t == kNoTime) return;
  if (p->first_ns == kNoTime || t < p->first_ns) p->first_ns = t;
  if (p->last_ns == kNoTime || t > p->last_ns) p->last_ns = t;
}

// `base` is the file's time base, which OpDone.started_ns is relative to.
void ApplyDone(const trace::OpDone& d, int64_t done_abs, int64_t base, Op* op) {
  op->state = OpState::kCompleted;
  op->done_ns = done_abs;
  op->polled = d.from_event();
  op->polled_held_ns = 0;
  if (d.from_event() && d.started_ns() != 0) {
    const int64_t started = base + Rel(d.started_ns());
    if (started <= done_abs)
      op->polled_held_ns = static_cast<uint32_t>(std::min<int64_t>(done_abs - started, UINT32_MAX));
  }
  if (d.gpu_duration_ns() > 0 || d.gpu_timing()) {
    op->has_gpu = true;
    // gpu (CPU clock) = reference + delta, the reference being the completion time.
    op->gpu_start_ns = done_abs + std::clamp<int64_t>(d.gpu_start_delta_ns(), -kMaxRelNs, kMaxRelNs);
    op->gpu_duration_ns = static_cast<uint32_t>(std::min<uint64_t>(d.gpu_duration_ns(), UINT32_MAX));
  }
}

// The file is damaged at `off`: a value there failed a consistency check
// (`what`, one phrase). The first few are listed in the file's issues.
void Damaged(Proc* p, uint32_t* listed, uint64_t off, const std::string& what) {
  if (!p->damaged || off < p->damaged_at) p->damaged_at = off;
  p->damaged = true;
  if ((*listed)++ < kMaxDamageIssues)
    p->issues.push_back(p->path + ": offset " + std::to_string(off) + ": " + what + " (damaged)");
}

// Whether a record's time `t` (relative to the base) lies within the write
// that holds it (kWriteSlackNs). Without batches (older files) any time does.
bool TimeInLine(const FileState& fs, int64_t t) {
  if (!fs.in_batch) return true;
  if (t > SaturatingAdd(fs.batch_time, kWriteSlackNs)) return false;
  return fs.prev_batch_time == kNoTime || t >= fs.prev_batch_time - kWriteSlackNs;
}

uint32_t CommFor(Model* m, FileState* fs, uint32_t file_comm) {
  auto it = fs->comms.find(file_comm);
  return it == fs->comms.end() ? kNone : it->second;
}

// Why an operation's record cannot be what NCCL and the plugin wrote ("" when
// it can): no function or datatype, or one NCCL does not have, a function of the
// other kind (a collective called Send), count 0 on a collective (NCCL
// enqueues none), a point-to-point numbered 0 (they count from 1), a root or
// peer beyond the communicator, a time outside its write.
std::string OpInconsistency(const Model& m, const FileState& fs, const trace::Op& o, const Op& op) {
  const std::string& fn = m.Str(op.func);
  const std::string& dt = m.Str(op.datatype);
  const bool p2p = op.kind == OpKind::kP2p;
  const bool p2p_fn = op.fn == Func::kSend || op.fn == Func::kRecv || op.fn == Func::kSendRecv;
  if (fn.empty()) return "an operation of no function";
  if (op.fn == Func::kOther) return "an operation called '" + fn + "', which is no NCCL function";
  if (!fn.empty() && p2p != p2p_fn) return std::string(p2p ? "a point-to-point" : "a collective") + " operation called " + fn;
  if (!dt.empty() && !IsNcclDatatype(dt)) return "an operation of datatype '" + dt + "', which is no NCCL datatype";
  if (dt.empty() && op.fn != Func::kOther) return "an operation of no datatype";
  if (!p2p && op.count == 0) return "a collective of count 0";
  // NCCL names both or neither (point-to-point operations: neither), but
  // a symmetric kernel of NCCL 2.31 (API v7) comes with no protocol.
  if ((op.algo == 0) != (op.proto == 0) && !o.is_sym_coll())
    return "an operation with an algorithm and no protocol, or the reverse";
  // Unused by the plugin (trace.proto); where set, it is the op's own rank.
  if (o.nccl_rank() != 0 && o.nccl_rank() != op.rank) return "an operation issued by another rank";
  if (p2p && op.seq == 0) return "a point-to-point operation numbered 0";
  const int32_t nranks = m.comms[op.comm].nranks;
  if (nranks > 0 && (p2p || IsRooted(op.fn)) && (op.peer_or_root < 0 || op.peer_or_root >= nranks))
    return std::string(p2p ? "peer " : "root ") + std::to_string(op.peer_or_root) + " of a communicator of " +
           std::to_string(nranks) + " ranks";
  if (!TimeInLine(fs, Rel(o.start_ns())) ||
      (o.has_completion() && !TimeInLine(fs, Rel(o.start_ns()) + Rel(o.completion().done_after_start_ns()))))
    return "an operation time outside its write";
  return "";
}

// NCCL numbers each communicator's collectives per function from 0, and
// point-to-point operations per peer and direction from 1 (Op::seq): a
// file that lost no events has each number once, none missing. A number
// seen twice or beyond the count is damage in that record (suspect), a
// number missing is damage somewhere before the next one (an operation
// moved elsewhere by a damaged byte). One exception: without kernel
// channels in its mask, NCCL (2.26 and later) does not count the calls it
// captured into a CUDA graph, so the next call takes the same number, and
// so does each replay; with completions from CUDA events their records say
// so (captured, or run without a launch of their own from CUDA's
// host-callback thread: Proc::graph_like_ops). A number held again where it
// or its first holder is one of those is no damage: MatchOps leaves it
// unmatched and counts it (Proc::graph_repeats), in every view (this check
// runs on whole files only).
void CheckSequences(Model* m, uint32_t pi, FileState* fs) {
  Proc* p = &m->procs[pi];
  if (p->drops.lost() > 0) return;  // lost events leave gaps
  // (comm, kind, function or peer and direction) -> (seq, k: index in p->ops)
  std::map<std::tuple<uint32_t, OpKind, int64_t>, std::vector<std::pair<uint64_t, size_t>>> lines;
  for (size_t k = 0; k < p->ops.size(); ++k) {
    const Op& op = m->ops[p->ops[k]];
    if (op.suspect || op.fn == Func::kOther) continue;
    const int64_t key = op.kind == OpKind::kP2p ? int64_t{op.peer_or_root} * 2 + IsRecv(op.fn)
                                                : static_cast<int64_t>(op.fn);
    lines[{op.comm, op.kind, key}].push_back({op.seq, k});
  }
  for (auto& [key, ops] : lines) {
    std::stable_sort(ops.begin(), ops.end());
    uint64_t expected = std::get<1>(key) == OpKind::kP2p ? 1 : 0;
    size_t holder = 0;  // k of the op that took the last number
    for (const auto& [seq, k] : ops) {
      if (seq == expected) {
        ++expected;
        holder = k;
        continue;
      }
      if (seq + 1 == expected && (GraphLike(*m, p->ops[k]) || GraphLike(*m, p->ops[holder]))) continue;
      Op& op = m->ops[p->ops[k]];
      op.suspect = true;
      Damaged(p, &fs->damage_issues, fs->op_offsets[k],
              std::string(seq < expected ? "an operation numbered again (" : "an operation out of line (") + "#" +
                  std::to_string(seq) + " where #" + std::to_string(expected) + " comes next on its communicator)");
      if (seq > expected) expected = seq + 1;
    }
  }
}

// One opened file (or in-memory bytes) into the model; `whole`: a whole
// file, not a window of one (LoadOptions::windows).
}  // namespace

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

// How long an operation must have been in flight for its completion to be
// taken for an abort's: a watchdog fires only after its timeout, which
// users set above the plugin's stuck limit (NCCLWATCH_STUCK_SEC, in the
// header) and frameworks at 10 s or more; so the stuck limit, at most 5 s,
// and never under kAbortMinWaitSec. A straggler's collectives wait 1 to 2 s
// and complete shortly before a clean destroy (seen on H100 with NCCL
// 2.28.9, 4 ranks over sockets, one sleeping 250 ms per step): those are
// real completions.
double AbortMinWaitSec(const Proc& p) {
  const double limit = p.stuck_sec > 0 ? std::min(p.stuck_sec, 5.0) : 5.0;
  return std::max(kAbortMinWaitSec, limit);
}

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
    if (static_cast<double>(o.done_ns - o.start_ns) / 1e9 < AbortMinWaitSec(m->procs[o.proc])) continue;
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

}  // namespace

namespace {

// What only a file's end tells: its sequence numbers, completions it should
// have, operations whose completion it may have lost. `whole`: a whole file.
void CheckFileEnd(Model* m, uint32_t pi, FileState* fs, bool whole) {
  Proc* p = &m->procs[pi];
  const std::string& path = p->path;
  if (whole) CheckSequences(m, pi, fs);
  // Where completions are tracked, the plugin counts the operations it
  // could not track (Drops.completion_untracked): one more is damage (a
  // flipped completion_tracked).
  if (whole && fs->any_tracked && fs->untracked > p->drops.completion_untracked)
    Damaged(p, &fs->damage_issues, fs->untracked_offset,
            "an operation without completion tracking that the file's counts do not have");
  // The plugin writes an operation before its completion, unless it lost it.
  if (!fs->early_done.empty() && p->drops.lost() == 0 && whole)
    Damaged(p, &fs->damage_issues, fs->early_done_offset, "a completion of an operation the file does not have");
  if (!fs->early_done.empty())
    p->issues.push_back(path + ": " + std::to_string(fs->early_done.size()) +
                        " completion record(s) name operations the file does not have");
  // Operations still without a completion whose completion may be among
  // those the file lost (p->ops is still in file order here).
  for (size_t k = 0; k < p->drops.ops_before_completion_loss && k < p->ops.size(); ++k) {
    Op& op = m->ops[p->ops[k]];
    if (op.state == OpState::kInFlight) op.completion_maybe_lost = true;
  }
  // Operations that may have been enqueued under a mask without the
  // completion source: started after the plugin's last read of the old mask
  // and before it saw the new one (later ones it wrote NO_COMPLETION_MASK).
  // A completion from a CUDA event there may be an earlier launch's (NCCL
  // reports no launch for it): not taken. One from kernel channels is real.
  // A damaged change cannot say when the source came back: every later
  // operation is unsure.
  for (const MaskChange& c : p->mask_changes) {
    if (!c.LostSource() && !c.damaged) continue;
    const int64_t until = c.damaged ? INT64_MAX : c.time_ns;
    for (uint32_t oi : p->ops) {
      Op& op = m->ops[oi];
      if (op.start_ns < c.since_ns || op.start_ns > until) continue;
      op.mask_unseen = true;
      if (op.state == OpState::kCompleted && op.polled) {
        op.state = OpState::kInFlight;
        op.done_ns = kNoTime;
        op.polled = false;
      }
    }
  }
}

// "FILE: offset N: what" for each issue, as TraceReader::IssueLines says them.
std::vector<std::string> IssueLines(const std::string& path, const std::vector<ReadIssue>& issues) {
  std::vector<std::string> out;
  for (const ReadIssue& i : issues) out.push_back(path + ": offset " + std::to_string(i.offset) + ": " + i.what);
  return out;
}

// Asks for transparent huge pages over a large array about to be filled:
// one fault per 2 MiB instead of per 4 KiB. A 10 M-operation model is a
// gigabyte of Op; on VMs where a page fault is expensive (PVM guests), the
// 250,000 faults of 4 KiB pages were a quarter of the load's time
// (BENCHMARKS.md). Advice only: nothing changes where THP is off.
void AdviseHugePages(void* p, size_t bytes) {
  constexpr uintptr_t kHuge = 2u << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

// The file's kernel phases, each given its op. Left out: those whose op
// the file lacks (dropped, or named by a damaged record), and those without
// both times or with a time outside the file's span (a damaged GPU delta:
// a phase ran after the process started and before the record saying so).
void KeepPhases(Model* m, uint32_t pi, FileState* fs) {
  Proc* p = &m->procs[pi];
  for (auto& [parent, span] : fs->phases) {
    if (span.start_ns == kNoTime || span.stop_ns == kNoTime || span.start_ns > span.stop_ns ||
        span.start_ns < p->first_ns || span.stop_ns > p->last_ns)
      continue;
    uint64_t id = parent;
    auto ch = fs->kernel_ch_parent.find(id);
    if (ch != fs->kernel_ch_parent.end()) id = ch->second;
    auto op = fs->op_by_event.find(id);
    if (op == fs->op_by_event.end()) continue;
    span.op = op->second;
    p->phases.push_back(span);
  }
  std::stable_sort(p->phases.begin(), p->phases.end(), [](const KernelPhaseSpan& a, const KernelPhaseSpan& b) {
    return std::tie(a.op, a.channel, a.start_ns) < std::tie(b.op, b.channel, b.start_ns);
  });
}

}  // namespace

ModelLoader::ModelLoader(const LoadOptions& opts) : opts_(opts) {}

ModelLoader::~ModelLoader() = default;

void ModelLoader::ReserveForBytes(uint64_t file_bytes) { ReserveOps(file_bytes / 44 + 16); }

void ModelLoader::ReserveOps(uint64_t ops) {
  model_.ops.reserve(model_.ops.size() + ops);
  AdviseHugePages(model_.ops.data(), model_.ops.capacity() * sizeof(Op));
}

void ModelLoader::AddError(std::string error) { model_.errors.push_back(std::move(error)); }

void ModelLoader::AddNote(std::string note) { model_.notes.push_back(std::move(note)); }

bool ModelLoader::FileError(std::string error) {
  model_.errors.push_back(std::move(error));
  if (!opts_.keep_going && stop_error_.empty()) stop_error_ = model_.errors.back();
  return stop_error_.empty();
}

void ModelLoader::BeginFile(const std::string& path) {
  pi_ = static_cast<uint32_t>(model_.procs.size());
  model_.procs.emplace_back();
  model_.procs.back().path = path;
  fs_ = std::make_unique<FileState>();
}

void ModelLoader::BeginWindow(const std::string& path) {
  BeginFile(path);
  fs_->window = true;
}

void ModelLoader::Add(const trace::Record& rec, uint64_t off) {
  Model* m = &model_;
  FileState& fs = *fs_;
  const uint32_t pi = pi_;
  Proc* p = &m->procs[pi];
  const bool whole = !opts_.windows && !fs.window;
  bool& have_header = fs.have_header;
  const uint64_t records_before = fs.records++;
  if (!have_header && !rec.has_header() && !rec.has_batch()) return;  // reported by the reader
  const int64_t base = static_cast<int64_t>(fs.base);
  // A record time outside its write: the file is damaged there.
  auto check_time = [&](uint64_t t, const char* what) {
    if (TimeInLine(fs, Rel(t))) return true;
    Damaged(p, &fs.damage_issues, off, std::string(what) + " time outside its write");
    return false;
  };
  switch (rec.body_case()) {
    case trace::Record::kHeader: {
      const auto& h = rec.header();
      have_header = true;
      p->header_offset = off;
      p->host = h.hostname();
      // gethostname(2)'s names: letters, digits, '-', '.' and '_'.
      for (char ch : p->host)
        if (!isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.' && ch != '_') {
          Damaged(p, &fs.damage_issues, off, "a process header whose host name holds a '" + std::string(1, ch) + "'");
          break;
        }
      p->pid = h.pid();
      // A rank beyond any communicator's size is corrupt: no rank.
      p->launcher_rank = h.launcher_rank() < kMaxCommRanks ? std::max(h.launcher_rank(), -1) : -1;
      p->launcher_world_size = h.launcher_world_size();
      if (p->launcher_world_size > 0 && p->launcher_rank >= p->launcher_world_size)
        Damaged(p, &fs.damage_issues, off, "a process header whose launcher rank is beyond its world size");
      p->api_version = h.profiler_api_version();
      fs.numbers_p2p = h.profiler_api_version() >= 1 && h.profiler_api_version() <= 3;
      p->event_completions = h.completions() == "events";
      p->mono_base_ns = std::min<uint64_t>(h.mono_base_ns(), kMaxRelNs);
      p->realtime_base_ns = std::min<uint64_t>(h.realtime_base_ns(), kMaxRealtimeNs);
      p->heartbeat_ms = h.heartbeat_ms();
      p->flush_ms = h.flush_ms();
      p->nccl_version = h.nccl_version().substr(0, 64);
      p->cuda_driver_version = h.cuda_driver_version();
      p->stuck_sec = h.stuck_sec();
      fs.base = p->mono_base_ns;
      Seen(p, static_cast<int64_t>(fs.base));
      break;
    }
    case trace::Record::kBatch: {
      const auto& b = rec.batch();
      const int64_t t = Rel(b.time_ns());
      if (!whole) {
        if (have_header) Seen(p, base + t);
        break;
      }
      if (fs.in_batch) {
        // The write before this one holds records_before minus what came
        // before it, or the framing inside it was damaged into records
        // that still parse. A jump in the sequence with more records
        // before is writes the plugin lost (Drops), not damage. Files of
        // plugins that did not count records say 0.
        const bool next = b.seq() == fs.batch_seq + 1;
        const bool counted = b.records_before() != 0;
        const bool lost_writes = b.seq() > fs.batch_seq + 1 && b.records_before() > records_before;
        std::string why;
        if (counted && (next ? b.records_before() != records_before : !lost_writes))
          why = "a write whose records do not add up to the next batch's count (" +
                std::to_string(b.records_before()) + " records before batch " + std::to_string(b.seq()) + ", " +
                std::to_string(records_before) + " read)";
        else if (t < fs.batch_time - kBatchBackSlackNs)
          why = "a write whose time goes back from the write before";
        if (!why.empty()) {
          Damaged(p, &fs.damage_issues, fs.batch_offset, why);
          for (size_t k = fs.batch_first_op; k < p->ops.size(); ++k) m->ops[p->ops[k]].suspect = true;
        }
      }
      fs.prev_batch_time = fs.in_batch ? fs.batch_time : kNoTime;
      fs.in_batch = true;
      fs.batch_seq = b.seq();
      fs.batch_offset = off;
      fs.batch_time = t;
      fs.batch_first_op = p->ops.size();
      if (have_header) Seen(p, base + t);
      break;
    }
    case trace::Record::kStringDef: {
      // The plugin defines an id once; again with another text is damage
      // in one of the two.
      const auto& d = rec.string_def();
      const uint16_t id = m->Intern(d.text());
      auto known = fs.strings.find(d.id());
      if (known != fs.strings.end() && known->second != id) {
        fs.conflicted_strings.insert(d.id());
        Damaged(p, &fs.damage_issues, off, "string " + std::to_string(d.id()) + " defined again with another text");
      }
      fs.strings[d.id()] = id;
      break;
    }
    case trace::Record::kCommInit: {
      const auto& c = rec.comm_init();
      if (c.nranks() > kMaxCommRanks || (!c.from_event() && (c.rank() < 0 || c.rank() >= kMaxCommRanks)) ||
          (!c.from_event() && c.nranks() > 0 && c.rank() >= c.nranks())) {
        Damaged(p, &fs.damage_issues, off,
                "communicator " + std::to_string(c.comm()) + " with rank " + std::to_string(c.rank()) + " of " +
                    std::to_string(c.nranks()) + " ranks (at most " + std::to_string(kMaxCommRanks) + "), skipped");
        break;
      }
      check_time(c.time_ns(), "a communicator init");
      // By hash through an index: a scan of every communicator for each
      // CommInit was quadratic in them (BENCHMARKS.md, issue 28).
      uint32_t ci = kNone;
      if (c.comm_hash() != 0) {
        auto known_hash = m->comm_of_hash.find(c.comm_hash());
        if (known_hash != m->comm_of_hash.end()) ci = known_hash->second;
      }
      if (ci == kNone) {
        ci = static_cast<uint32_t>(m->comms.size());
        m->comms.emplace_back();
        m->comms.back().hash = c.comm_hash();
        if (c.comm_hash() != 0) m->comm_of_hash.emplace(c.comm_hash(), ci);
      }
      Comm& comm = m->comms[ci];
      if (!c.name().empty()) comm.name = c.name();
      if (c.nranks() > comm.nranks) comm.nranks = c.nranks();
      auto known = fs.member_of_comm.find(c.comm());
      auto mapped = fs.comms.find(c.comm());
      if (known == fs.member_of_comm.end() || mapped == fs.comms.end() || mapped->second != ci) {
        CommMember mem;
        mem.proc = pi;
        // An init that gives neither size nor hash (API v1 to v3) says 0
        // for our rank without knowing it.
        mem.rank = c.from_event() || (c.nranks() <= 0 && c.comm_hash() == 0) ? -1 : c.rank();
        mem.init_ns = base + Rel(c.time_ns());
        mem.init_offset = off;
        mem.name = c.name();
        mem.nranks = c.nranks();
        fs.member_of_comm[c.comm()] = static_cast<uint32_t>(comm.members.size());
        comm.members.push_back(mem);
      }
      fs.comms[c.comm()] = ci;
      Seen(p, base + Rel(c.time_ns()));
      break;
    }
    case trace::Record::kCommFinalize: {
      const auto& c = rec.comm_finalize();
      uint32_t ci = CommFor(m, &fs, c.comm());
      auto mi = fs.member_of_comm.find(c.comm());
      if (ci != kNone && mi != fs.member_of_comm.end())
        m->comms[ci].members[mi->second].finalize_ns = base + Rel(c.time_ns());
      check_time(c.time_ns(), "a communicator finalize");
      Seen(p, base + Rel(c.time_ns()));
      break;
    }
    case trace::Record::kOp: {
      const auto& o = rec.op();
      uint32_t ci = CommFor(m, &fs, o.comm());
      if (ci == kNone) {
        Damaged(p, &fs.damage_issues, off, "an operation on communicator " + std::to_string(o.comm()) +
                                 ", which the file never defined, skipped");
        break;
      }
      Op op;
      op.proc = pi;
      op.comm = ci;
      op.rank = m->comms[ci].members[fs.member_of_comm[o.comm()]].rank;
      op.kind = o.kind() == trace::OP_KIND_P2P ? OpKind::kP2p : OpKind::kColl;
      op.seq = op.kind == OpKind::kP2p ? o.p2p_seq() : o.seq();
      auto str = [&](uint32_t id) -> uint16_t {
        auto it = fs.strings.find(id);
        if (it != fs.strings.end() && !fs.conflicted_strings.count(id)) return it->second;
        if (id != 0) {
          op.suspect = true;
          Damaged(p, &fs.damage_issues, off,
                  "an operation names string " + std::to_string(id) +
                      (it == fs.strings.end() ? ", which the file never defines" : ", which the file defines twice"));
        }
        return 0;
      };
      m->SetFunc(&op, str(o.func()));
      op.datatype = str(o.datatype());
      op.algo = str(o.algo());
      op.proto = str(o.proto());
      if (op.kind == OpKind::kP2p && op.seq == 0 && fs.numbers_p2p) {
        const uint64_t key = uint64_t{o.comm()} << 33 | uint64_t{static_cast<uint32_t>(o.peer())} << 1 |
                             (op.fn == Func::kRecv ? 1 : 0);
        op.seq = ++fs.p2p_count[key];
      }
      op.count = o.count();
      op.peer_or_root = op.kind == OpKind::kP2p ? o.peer() : o.root();
      op.nchannels = static_cast<uint8_t>(std::min<uint32_t>(o.nchannels(), 255));
      op.start_ns = base + Rel(o.start_ns());
      op.enqueue_ns = static_cast<uint32_t>(std::min<uint64_t>(o.enqueue_ns(), UINT32_MAX));
      op.state = o.completion_tracked() ? OpState::kInFlight : OpState::kUntracked;
      op.mask_unseen = o.no_completion() == trace::NO_COMPLETION_MASK;
      op.without_event = o.launch_without_event();
      if (o.has_completion()) {
        ApplyDone(o.completion(), op.start_ns + Rel(o.completion().done_after_start_ns()), base, &op);
      }
      if (o.completion_tracked() || o.has_completion()) {
        fs.any_tracked = true;
      } else if (o.no_completion() == trace::NO_COMPLETION_UNSPECIFIED && fs.untracked++ == 0) {
        fs.untracked_offset = off;
      }
      if (!op.suspect) {
        const std::string why = OpInconsistency(*m, fs, o, op);
        if (!why.empty()) {
          op.suspect = true;
          Damaged(p, &fs.damage_issues, off, why);
        }
      }
      const uint32_t oi = static_cast<uint32_t>(m->ops.size());
      if (o.event_id() != 0) {
        auto early = fs.early_done.find(o.event_id());
        if (early != fs.early_done.end()) {
          ApplyDone(early->second, base + Rel(early->second.done_ns()), base, &op);
          fs.early_done.erase(early);
        }
        fs.op_by_event[o.event_id()] = oi;
      }
      Seen(p, op.start_ns);
      if (op.state == OpState::kCompleted) Seen(p, op.done_ns);
      m->ops.push_back(op);
      p->ops.push_back(oi);
      fs.op_offsets.push_back(off);
      if (o.no_completion() == trace::NO_COMPLETION_NO_LAUNCH || o.no_completion() == trace::NO_COMPLETION_GRAPH)
        p->graph_like_ops.push_back(oi);
      break;
    }
    case trace::Record::kOpDone: {
      const auto& d = rec.op_done();
      const int64_t t = base + Rel(d.done_ns());
      auto it = fs.op_by_event.find(d.event_id());
      const bool in_line = check_time(d.done_ns(), "a completion");
      if (it != fs.op_by_event.end()) {
        ApplyDone(d, t, base, &m->ops[it->second]);
        if (!in_line) m->ops[it->second].suspect = true;
      } else {
        fs.early_done[d.event_id()] = d;
        fs.early_done_offset = std::min(fs.early_done_offset, off);
      }
      Seen(p, t);
      break;
    }
    case trace::Record::kHeartbeat: {
      if (!check_time(rec.heartbeat().time_ns(), "a heartbeat")) break;
      const int64_t t = base + Rel(rec.heartbeat().time_ns());
      p->last_heartbeat_ns = std::max(p->last_heartbeat_ns, t);
      ++p->heartbeats;
      Seen(p, t);
      break;
    }
    case trace::Record::kStuck: {
      const auto& s = rec.stuck();
      check_time(s.time_ns(), "a stuck report");
      StuckReport r;
      r.time_ns = base + Rel(s.time_ns());
      r.threshold_sec = s.threshold_sec();
      for (const auto& f : s.ops()) {
        StuckOp so;
        auto it = fs.op_by_event.find(f.event_id());
        if (it != fs.op_by_event.end()) so.op = it->second;
        // The report repeats what the file said of the operation, and
        // counts channels of at most its own: any other value is damage.
        if (it != fs.op_by_event.end()) {
          Op& y = m->ops[it->second];
          const auto sf = fs.strings.find(f.func());
          if (CommFor(m, &fs, f.comm()) != y.comm || (y.kind == OpKind::kColl && f.seq() != y.seq) ||
              f.count() != y.count || sf == fs.strings.end() || sf->second != y.func) {
            y.suspect = true;
            Damaged(p, &fs.damage_issues, off, "a stuck report that describes its operation otherwise than the file");
          }
        }
        if (f.kernel_channels_started() > f.nchannels() || f.kernel_channels_stopped() > f.kernel_channels_started() ||
            f.proxy_ops_stopped() > f.proxy_ops_started())
          Damaged(p, &fs.damage_issues, off, "a stuck report counting more channels or proxy operations stopped than started");
        so.comm = CommFor(m, &fs, f.comm());
        so.seq = f.seq();
        auto sit = fs.strings.find(f.func());
        so.func = sit == fs.strings.end() ? 0 : sit->second;
        so.age_ns = Rel(f.age_ns());
        so.nchannels = f.nchannels();
        so.kernel_started = f.kernel_channels_started();
        so.kernel_stopped = f.kernel_channels_stopped();
        so.proxy_started = f.proxy_ops_started();
        so.proxy_stopped = f.proxy_ops_stopped();
        so.gpu = static_cast<uint8_t>(f.gpu());
        if (so.gpu == trace::GPU_IN_WINDOW) {
          auto wf = fs.op_by_event.find(f.window_first_event_id());
          auto wl = fs.op_by_event.find(f.window_last_event_id());
          if (wf != fs.op_by_event.end()) so.window_first = wf->second;
          if (wl != fs.op_by_event.end()) so.window_last = wl->second;
        }
        for (const auto& x : f.proxy()) {
          ProxyState ps;
          ps.channel = x.channel();
          ps.peer = x.peer();
          ps.is_send = x.is_send();
          ps.nsteps = x.nsteps();
          ps.last_step = x.last_step();
          ps.last_state = x.last_state();
          ps.last_update_ns = base + Rel(x.last_update_ns());
          ps.stopped = x.stopped();
          so.proxy.push_back(ps);
        }
        r.ops.push_back(std::move(so));
      }
      p->stucks.push_back(std::move(r));
      Seen(p, base + Rel(s.time_ns()));
      break;
    }
    case trace::Record::kDrops: {
      const auto& d = rec.drops();
      check_time(d.time_ns(), "a drops record");
      p->drops.ring_full = d.ring_full();
      p->drops.pool_exhausted = d.pool_exhausted();
      p->drops.completion_untracked = d.completion_untracked();
      p->drops.no_thread_slot = d.no_thread_slot();
      p->drops.write_failed = d.write_failed();
      p->drops.foreign_parent = d.foreign_parent();
      p->drops.bad_parent = d.bad_parent();
      p->drops.last_write_error = d.last_write_error();
      // Older plugins lost completions to any of these drops, uncounted.
      const uint64_t lost = d.completions_counted()
                                ? d.completions_lost()
                                : d.ring_full() + d.pool_exhausted() + d.no_thread_slot() + d.write_failed();
      if (lost > p->drops.completions_lost) {
        p->drops.completions_lost = lost;
        p->drops.ops_before_completion_loss = p->ops.size();  // a lost completion is of an op recorded before
      }
      Seen(p, base + Rel(d.time_ns()));
      break;
    }
    case trace::Record::kMaskChange: {
      const auto& c = rec.mask_change();
      // Its times must lie in its write like any record's; one that does
      // not cannot say when, and the damage makes the verdict incomplete.
      if (!check_time(c.time_ns(), "a mask change") || !check_time(c.since_ns(), "a mask change's last read")) break;
      MaskChange mc;
      mc.time_ns = base + Rel(c.time_ns());
      mc.since_ns = base + Rel(c.since_ns());
      mc.old_mask = c.old_mask();
      mc.new_mask = c.new_mask();
      mc.completion_source = c.completion_source();
      std::string why;
      if (c.old_mask() > kMaskMax || c.new_mask() > kMaskMax)
        why = "a mask change past NCCL's 32-bit mask";
      else if (c.old_mask() == c.new_mask())
        why = "a mask change that changes nothing";
      else if (c.completion_source() != 0 && c.completion_source() != kMaskKernelCh &&
               c.completion_source() != kMaskKernelLaunch)
        why = "a mask change naming a completion source the plugin never has";
      else if (c.since_ns() > c.time_ns())
        why = "a mask change whose last read of the old mask follows the change";
      if (!why.empty()) {
        mc.damaged = true;
        mc.since_ns = std::min(mc.since_ns, mc.time_ns);
        Damaged(p, &fs.damage_issues, off, why);
      }
      p->mask_changes.push_back(mc);
      Seen(p, mc.time_ns);
      break;
    }
    case trace::Record::kEventStart: {
      const auto& e = rec.event_start();
      if (!opts_.kernel_phases || !whole || e.event_id() == 0) break;
      if (e.type() == trace::KERNEL_CH) {
        fs.kernel_ch_parent[e.event_id()] = e.parent_id();
      } else if (e.type() == trace::KERNEL_PHASE && e.has_kernel_phase() && e.parent_id() != 0 &&
                 TimeInLine(fs, Rel(e.time_ns()))) {
        // One out of line is left out, the file not called damaged: only
        // export keeps phases, and its --around-finding must judge the
        // files as diagnose does.
        const auto& d = e.kernel_phase();
        KernelPhaseSpan ph;
        ph.channel = d.channel();
        ph.phase = static_cast<uint8_t>(d.phase());
        if (d.has_gpu_start())
          ph.start_ns = base + Rel(e.time_ns()) + std::clamp<int64_t>(d.gpu_start_delta_ns(), -kMaxRelNs, kMaxRelNs);
        fs.phase_by_event[e.event_id()] = fs.phases.size();
        fs.phases.push_back({e.parent_id(), ph});
      }
      break;
    }
    case trace::Record::kEventState: {
      const auto& e = rec.event_state();
      if (!opts_.kernel_phases || !whole || e.state() != kStateKernelPhaseStop || !e.has_gpu()) break;
      auto it = fs.phase_by_event.find(e.event_id());
      if (it == fs.phase_by_event.end() || !TimeInLine(fs, Rel(e.time_ns()))) break;
      fs.phases[it->second].second.stop_ns =
          base + Rel(e.time_ns()) + std::clamp<int64_t>(e.gpu_delta_ns(), -kMaxRelNs, kMaxRelNs);
      break;
    }
    case trace::Record::kFinalize:
      check_time(rec.finalize().time_ns(), "a finalize");
      p->finalized = true;
      p->clean = rec.finalize().clean();
      Seen(p, base + Rel(rec.finalize().time_ns()));
      break;
    default:
      break;  // raw events, GPU clock: not needed by the analyses
  }
}

bool ModelLoader::EndFile(bool cut_tail, const std::vector<ReadIssue>& issues) {
  Model* m = &model_;
  const uint32_t pi = pi_;
  Proc* p = &m->procs[pi];
  const std::string path = p->path;
  p->cut_tail = cut_tail;
  for (const ReadIssue& i : issues) {
    if (i.kind != ReadIssue::kCorrupt && i.kind != ReadIssue::kUnparsable && i.kind != ReadIssue::kIoError) continue;
    if (!p->damaged || i.offset < p->damaged_at) p->damaged_at = i.offset;
    p->damaged = true;
    p->damaged_end |= i.kind != ReadIssue::kUnparsable;  // the others stop the read
  }
  // Damage that broke the framing ends the file in a "cut tail" well before
  // its real end: that is not a killed process's last write.
  if (p->damaged && p->cut_tail) p->damaged_end = true;
  for (const std::string& line : IssueLines(path, issues)) p->issues.push_back(line);
  const bool have_header = fs_->have_header;
  if (have_header) {
    CheckFileEnd(m, pi, fs_.get(), !opts_.windows && !fs_->window);
    KeepPhases(m, pi, fs_.get());
  } else {
    m->errors.push_back(path + ": no process header; not an ncclwatch trace file" +
                        (issues.empty() ? std::string() : " (" + IssueLines(path, issues)[0] + ")"));
    // Drop what this file added (its ops are the last ones).
    m->ops.resize(m->ops.size() - p->ops.size());
    for (Comm& c : m->comms)
      c.members.erase(std::remove_if(c.members.begin(), c.members.end(),
                                     [&](const CommMember& mem) { return mem.proc == pi; }),
                      c.members.end());
    m->procs.pop_back();
  }
  fs_.reset();
  pi_ = kNone;
  if (!have_header && !opts_.keep_going && stop_error_.empty()) stop_error_ = m->errors.back();
  return stop_error_.empty();
}

bool ModelLoader::Read(TraceReader* reader) {
  BeginFile(reader->path());
  trace::Record rec;
  uint64_t offset = 0;
  while (reader->Next(&rec, &offset)) Add(rec, offset);
  return EndFile(reader->cut_tail(), reader->issues());
}

bool ModelLoader::Finish(Model* model, std::string* error) {
  const bool ok = stop_error_.empty() ? FinishLoad(&model_, error) : (*error = stop_error_, false);
  *model = std::move(model_);
  model_ = Model();
  return ok;
}

}  // namespace ncclwatch::tools
