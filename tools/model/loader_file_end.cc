#include "tools/model/loader_internal.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

namespace ncclwatch::tools::loader_internal {

namespace {

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

}  // namespace

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

}  // namespace ncclwatch::tools::loader_internal
