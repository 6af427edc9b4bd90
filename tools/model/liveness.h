// The one judgement of whether each operation finished, that diagnose,
// export and merge all read: finished, in flight, hung, or unknown.
//
//  - finished: the plugin saw it complete (or a later completion proves it).
//  - hung: not finished, and its process waited at least min_wait_sec after
//    enqueuing it (until its last sign of life, or an abort's finalize), or a
//    stuck report names it, or its process died with it in flight. Without
//    completion tracking a long wait proves nothing, so such an operation is
//    hung only where MarkUnfinished proves from who issued what that it never
//    finished.
//  - in flight: not finished, not (yet) a hang: the files end while it runs.
//  - unknown: no completion tracking, or no completion where the file says
//    it may lack completions (Op::completion_maybe_lost) or NCCL's mask may
//    not have let it report one (Op::mask_unseen), and nothing proves it
//    unfinished.
//
// Along the way it derives what the judgement rests on, which diagnose's
// findings read too: dead processes, the last collective seq each process
// issued, the operations stuck reports name, and the proof of unfinished.
//
// Built on one thread after the model; read-only afterwards.

#ifndef TOOLS_MODEL_LIVENESS_H_
#define TOOLS_MODEL_LIVENESS_H_

#include <stdint.h>

#include <map>
#include <set>
#include <vector>

#include "tools/model/model.h"

namespace ncclwatch::tools {

enum class OpLiveness : uint8_t { kFinished = 0, kInFlight, kHung, kUnknown };

struct LivenessOptions {
  // An operation in flight is a hang once its process stayed alive this long
  // after enqueuing it (or a stuck report names it).
  double min_wait_sec = 1.0;
  // A process is dead when its last sign of life is earlier than the job's
  // last record by more than max(dead_heartbeats x its heartbeat interval,
  // dead_min_sec), and its file has no Finalize. A file whose damage ended
  // the read proves nothing of the kind (Proc::damaged_end).
  double dead_heartbeats = 3.0;
  double dead_min_sec = 2.0;
};

// NCCL counts seqNumber per communicator and function: a collective's
// sequence is keyed by both.
inline uint64_t SeqKey(uint32_t comm, uint16_t func) { return uint64_t{comm} << 16 | func; }

struct Liveness {
  int64_t t0 = 0, t_end = 0;  // the job's first and last record
  std::vector<bool> dead;     // per proc
  // Per proc: SeqKey(comm, func) -> highest collective seq issued.
  std::vector<std::map<uint64_t, uint64_t>> last_seq;
  std::set<uint32_t> stuck_ops;  // ops a stuck report names
  // Per op: proven never to have finished, from enqueue records alone.
  std::vector<bool> unfinished;
  std::vector<OpLiveness> of_op;  // the judgement, per op

  bool Hung(uint32_t oi) const { return of_op[oi] == OpLiveness::kHung; }
  // Not finished, as far as the files show: in flight or hung.
  bool Unfinished(uint32_t oi) const { return of_op[oi] == OpLiveness::kInFlight || Hung(oi); }
};

Liveness JudgeLiveness(const Model& m, const LivenessOptions& o = {});

// Whether stuck-report entry `s` of op's process is about `op`: by the op's
// index where the file had its record, else by communicator, function and
// seq (NCCL counts seqNumber per communicator and function). An entry whose
// function the file never defined names no op.
inline bool StuckNames(const StuckOp& s, const Model& m, uint32_t oi) {
  if (s.op != kNone) return s.op == oi;
  const Op& op = m.ops[oi];
  return op.kind == OpKind::kColl && s.func != 0 && s.comm == op.comm && s.func == op.func && s.seq == op.seq;
}

// Seconds an op's process waited after enqueuing it: until its last sign of
// life, or until its communicator was finalized there (an abort, when the op
// was still in flight: NCCL calls the profiler's finalize from ncclCommAbort
// too, as a framework's watchdog does).
double WaitSec(const Model& m, const Op& op);
// When `proc` finalized `comm` (kNoTime: it did not).
int64_t FinalizeOf(const Model& m, uint32_t proc, uint32_t comm);
// Whether some file holds `rank` of `comm`.
bool HasFile(const Model& m, uint32_t comm, int32_t rank);
// The function of a collective match's ops (0: none).
uint16_t MatchFunc(const Model& m, const Match& mt);

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_LIVENESS_H_
