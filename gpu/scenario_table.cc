// The table of scenarios (kScenarios): each fault's hooks, its row, and the
// lookups that resolve a row's defaults against the command line. A new fault
// is a new row with shape_step (edit a rank's ops of a step), before_op (skip
// an op, sleep, idle) and/or after_enqueue (crash, stop) hooks.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "gpu_common.h"
#include "scenario.h"

namespace ncclwatch::scenarios {
namespace {

constexpr size_t kSendNoRecvBytes = size_t(256) << 20;  // far more than NCCL buffers in flight
constexpr size_t kNetStallBytes = size_t(512) << 20;    // long enough to be caught mid-transfer

// ----- hooks

Verdict SkipBefore(const StepCtx& c, const Op& op) {
  if (AtFault(c) && IsWorldAllReduce(op)) {
    Log("scenario skip: skipping %s of step %d", Describe(op).c_str(), c.step);
    return Verdict::kSkip;
  }
  return Verdict::kRun;
}

void KillAfter(const StepCtx& c, const Op& op) {
  if (AtFault(c) && IsWorldAllReduce(op)) {
    Log("scenario kill: raising SIGKILL after enqueuing %s of step %d", Describe(op).c_str(),
        c.step);
    raise(SIGKILL);
  }
}

Verdict StragglerBefore(const StepCtx& c, const Op& op) {
  if (c.rank == c.fault_rank && IsWorldAllReduce(op)) {
    if (c.step == 0)
      Log("scenario straggler: sleeping %d ms before every world all_reduce", c.delay_ms);
    usleep(useconds_t(c.delay_ms) * 1000);
  }
  return Verdict::kRun;
}

// extra: one more world all_reduce, right after the step's own.
void ExtraShape(const StepCtx& c, std::vector<Op>* ops) {
  int i = AtFault(c) ? IndexOf(*ops, IsWorldAllReduce) : -1;
  if (i < 0) return;
  Op extra = (*ops)[i];
  extra.note = "extra: not issued by the other ranks";
  ops->insert(ops->begin() + i + 1, extra);
  Log("scenario extra: issuing an extra %s after the step's own in step %d",
      Describe(extra).c_str(), c.step);
}

void CountShape(const StepCtx& c, std::vector<Op>* ops) {
  int i = AtFault(c) ? IndexOf(*ops, IsWorldAllReduce) : -1;
  if (i < 0) return;
  Op& op = (*ops)[i];
  size_t want = ElemCount(op);
  op.count = std::max<size_t>(1, want / 2);
  op.note = "fault: half the count of the other ranks";
  Log("scenario count: %s of step %d with count %zu where the others use %zu",
      Describe(op).c_str(), c.step, op.count, want);
}

void DtypeShape(const StepCtx& c, std::vector<Op>* ops) {
  int i = AtFault(c) ? IndexOf(*ops, IsWorldAllReduce) : -1;
  if (i < 0) return;
  Op& op = (*ops)[i];
  op.count = ElemCount(op);  // same count, half the bytes
  op.dtype = ncclHalf;
  op.note = "fault: float16 where the other ranks use float32";
  Log("scenario dtype: %s of step %d", Describe(op).c_str(), c.step);
}

void FuncShape(const StepCtx& c, std::vector<Op>* ops) {
  int i = AtFault(c) ? IndexOf(*ops, IsWorldAllReduce) : -1;
  if (i < 0) return;
  Op& op = (*ops)[i];
  op.kind = OpKind::kBroadcast;  // same count and buffers as the all_reduce
  op.root = c.fault_rank == 0 ? 1 : 0;
  op.note = "fault: broadcast where the other ranks all_reduce";
  Log("scenario func: %s of step %d", Describe(op).c_str(), c.step);
}

void RootShape(const StepCtx& c, std::vector<Op>* ops) {
  int i = AtFault(c) ? IndexOf(*ops, IsWorldBroadcast) : -1;
  if (i < 0) return;
  Op& op = (*ops)[i];
  int want = op.root;
  op.root = (op.root + 1) % c.nranks;
  op.note = "fault: root differs from the other ranks'";
  Log("scenario root: %s of step %d with root %d where the others use root %d",
      Describe(op).c_str(), c.step, op.root, want);
}

// swap: the fault rank and the rank below it (ranks 0 and 1 for fault rank 0)
// issue the step's world all_reduce and world broadcast in swapped order.
void SwapShape(const StepCtx& c, std::vector<Op>* ops) {
  if (c.step != c.fault_step) return;
  int lo = c.fault_rank > 0 ? c.fault_rank - 1 : 0;
  if (c.rank != lo && c.rank != lo + 1) return;
  int a = IndexOf(*ops, IsWorldAllReduce), b = IndexOf(*ops, IsWorldBroadcast);
  if (a < 0 || b < 0) return;
  std::swap((*ops)[a], (*ops)[b]);
  (*ops)[a].note = "fault: broadcast issued before the all_reduce";
  (*ops)[b].note = "fault: all_reduce issued after the broadcast";
  Log("scenario swap: ranks %d and %d issue the world broadcast before the world all_reduce "
      "in step %d",
      lo, lo + 1, c.step);
}

const char* SwapCheck(const Options& o, int) {
  return o.nranks < 3 ? "swap needs --nranks >= 3 (someone must keep the healthy order)" : nullptr;
}

// send-no-recv: a large send to a peer that never posts the receive, in its
// own group, before the step's ops (so the rank's stream is stuck in it).
void SendNoRecvShape(const StepCtx& c, std::vector<Op>* ops) {
  if (!AtFault(c)) return;
  Op send{OpKind::kSend, kWorld, kSendNoRecvBytes, c.fault_rank == 0 ? 1 : 0};
  send.scratch = true;
  send.note = "fault: no rank posts the matching receive";
  ops->insert(ops->begin(), send);
  Log("scenario send-no-recv: %s in step %d", Describe(send).c_str(), c.step);
}

Verdict HostStuckBefore(const StepCtx& c, const Op&) {
  if (AtFault(c)) return Verdict::kIdle;  // before the step's first op
  return Verdict::kRun;
}

// gpu-blocked: a host function that never returns, queued on the fault
// rank's stream before the fault step's world all_reduce. Its host goes on
// enqueuing; its GPU never reaches the all_reduce, which the other ranks'
// GPUs start and wait in.
void CUDART_CB HoldForever(void*) {
  for (;;) pause();
}

Verdict GpuBlockedBefore(const StepCtx& c, const Op& op) {
  if (AtFault(c) && IsWorldAllReduce(op)) {
    Log("scenario gpu-blocked: a host function that never returns, queued before %s of step %d",
        Describe(op).c_str(), c.step);
    CUDA_CHECK(cudaLaunchHostFunc(static_cast<cudaStream_t>(c.stream), &HoldForever, nullptr));
  }
  return Verdict::kRun;
}

// cross-wait: every rank gets an extra all_reduce on tp in the fault step;
// the fault rank issues it before the world all_reduce, everyone else after.
// The fault rank waits in tp for its partner, which waits in world for it.
void CrossWaitShape(const StepCtx& c, std::vector<Op>* ops) {
  if (c.step != c.fault_step) return;
  int i = IndexOf(*ops, IsWorldAllReduce);
  if (i < 0) return;
  Op tp{OpKind::kAllReduce, kTp, (*ops)[i].bytes, 0};
  if (c.rank == c.fault_rank) {
    tp.note = "fault: tp all_reduce before the world all_reduce";
    ops->insert(ops->begin() + i, tp);
    Log("scenario cross-wait: all_reduce(tp) before all_reduce(world) in step %d", c.step);
  } else {
    tp.note = "cross-wait: tp all_reduce after the world all_reduce";
    ops->insert(ops->begin() + i + 1, tp);
  }
}

const char* CrossWaitCheck(const Options& o, int fault_rank) {
  return (fault_rank ^ 1) >= o.nranks
             ? "cross-wait: the fault rank needs a partner in its tp communicator (rank r^1)"
             : nullptr;
}

// net-stall: the fault step's world all_reduce is large for every rank; the
// fault rank stops its whole process (SIGSTOP) --delay-ms after enqueuing it.
void NetStallShape(const StepCtx& c, std::vector<Op>* ops) {
  if (c.step != c.fault_step) return;
  int i = IndexOf(*ops, IsWorldAllReduce);
  if (i < 0) return;
  Op& op = (*ops)[i];
  op.bytes = kNetStallBytes;
  op.scratch = true;
  op.note = "net-stall: enlarged on every rank";
}

void NetStallAfter(const StepCtx& c, const Op& op) {
  if (!AtFault(c) || !IsWorldAllReduce(op)) return;
  int ms = c.delay_ms;
  Log("scenario net-stall: stopping this process (SIGSTOP) %d ms after enqueuing %s of step %d",
      ms, Describe(op).c_str(), c.step);
  std::thread([ms] {
    usleep(useconds_t(ms) * 1000);
    Log("scenario net-stall: SIGSTOP");
    kill(getpid(), SIGSTOP);  // stops every thread: proxy, watchdog, plugin
  }).detach();
}

// Positional rows: name, summary, expected, min_ranks, default_fault_rank,
// uses_fault_step, before_op, after_enqueue, shape_step, scratch_bytes,
// default_delay_ms, check.
const Scenario kScenarios[] = {
    {"healthy", "every rank runs all steps; comms finalized and destroyed",
     "every rank exits 0", 1, 0, false, nullptr, nullptr},

    {"skip",
     "the fault rank (default: last) skips the world all_reduce of the fault step (default: S/2)",
     "the other ranks hang in that all_reduce, the fault rank in its next op; "
     "every watchdog fires: all ranks exit 124 (or 125 on an async NCCL error)",
     2, -1, true, SkipBefore, nullptr},

    {"kill",
     "the fault rank (default: 1) raises SIGKILL right after enqueuing the world all_reduce "
     "of the fault step (default: S/2)",
     "the fault rank dies by SIGKILL; the others time out (124) or see an async NCCL error (125)",
     2, 1, true, nullptr, KillAfter},

    {"straggler",
     "the fault rank (default: 0) sleeps --delay-ms (default 50) before every world all_reduce",
     "every rank exits 0; the others' world all_reduces each wait about the delay", 1, 0, false,
     StragglerBefore, nullptr, nullptr, 0, 50},

    {"extra",
     "the fault rank (default: last) issues one extra world all_reduce right after the world "
     "all_reduce of the fault step",
     "the fault rank hangs in the extra all_reduce; its tp partner hangs in the all_gather and "
     "the dp ranks in the reduce_scatter waiting for it: all ranks exit 124",
     2, -1, true, nullptr, nullptr, ExtraShape},

    {"count",
     "the fault rank (default: last) passes half the count to the world all_reduce of the "
     "fault step",
     "undefined in NCCL: usually a hang (all ranks 124), possibly completion with wrong data "
     "(0); the traces record both counts",
     2, -1, true, nullptr, nullptr, CountShape},

    {"dtype",
     "the fault rank (default: last) passes ncclHalf (float16, same count) instead of ncclFloat "
     "to the world all_reduce of the fault step",
     "undefined in NCCL: a hang (all ranks 124) or completion with wrong data (0); the traces "
     "record both datatypes",
     2, -1, true, nullptr, nullptr, DtypeShape},

    {"func",
     "the fault rank (default: last) calls ncclBroadcast (root 0, or 1 if it is rank 0; same "
     "count and buffers) "
     "instead of the world all_reduce of the fault step",
     "the others' all_reduce cannot complete: usually every rank exits 124 (mismatched NCCL "
     "calls are undefined, so a completion cannot be ruled out)",
     2, -1, true, nullptr, nullptr, FuncShape},

    {"root",
     "the fault rank (default: last) uses root (r+1)%N instead of r in the world broadcast of "
     "the fault step",
     "undefined in NCCL: usually a hang (all ranks 124) in that broadcast or a later op; "
     "possibly completion with wrong data (0)",
     2, -1, true, nullptr, nullptr, RootShape},

    {"swap",
     "the fault rank (default: last) and the rank below it issue the world broadcast before "
     "the world all_reduce in the fault step",
     "the others wait in the all_reduce while the pair runs the broadcast: all ranks exit 124",
     3, -1, true, nullptr, nullptr, SwapShape, 0, 0, SwapCheck},

    {"send-no-recv",
     "the fault rank (default: last) sends 256 MiB on world to rank 0 (1 if it is rank 0), in "
     "its own group, at the start of the fault step; nobody receives it",
     "the fault rank hangs in the send, the others in the world all_reduce of the step (queued "
     "behind the send on the fault rank): all ranks exit 124",
     2, -1, true, nullptr, nullptr, SendNoRecvShape, kSendNoRecvBytes},

    {"host-stuck",
     "the fault rank (default: last) stops calling NCCL at the fault step and sleeps in host "
     "code, alive, with its watchdog disarmed (no NCCL work outstanding)",
     "the others hang in the world all_reduce of the step and exit 124; the parent SIGKILLs "
     "the fault rank T+5 s after the first rank failed",
     2, -1, true, HostStuckBefore, nullptr},

    {"cross-wait",
     "every rank adds an all_reduce on tp to the fault step: the fault rank (default: 0) "
     "before the world all_reduce, the others after it",
     "the fault rank waits in tp for its partner, which waits in world for the fault rank (a "
     "cycle across communicators); the rest wait in world: all ranks exit 124",
     2, 0, true, nullptr, nullptr, CrossWaitShape, 0, 0, CrossWaitCheck},

    {"net-stall",
     "the fault step's world all_reduce is 512 MiB on every rank; the fault rank (default: "
     "last) SIGSTOPs its own process --delay-ms (default 10) after enqueuing it. Run with "
     "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 so the transfer needs the stopped proxy thread",
     "the transfer stalls; the others' watchdogs fire (124); the parent SIGKILLs the stopped "
     "rank once every other rank has exited (without --net the GPU finishes the step and the "
     "others hang in the next one)",
     2, -1, true, nullptr, NetStallAfter, NetStallShape, kNetStallBytes, 10},

    {"gpu-blocked",
     "the fault rank (default: last) queues a host function that never returns on its stream "
     "before the world all_reduce of the fault step (default: S/2); its host runs on. Run with "
     "NCCLWATCH_COMPLETIONS=events to see which GPU never started the all_reduce",
     "every rank issued the all_reduce; the fault rank's GPU never starts it, the others' wait in "
     "it; every watchdog fires (124)",
     2, -1, true, GpuBlockedBefore, nullptr},
};

}  // namespace

const Scenario* FindScenario(const std::string& name) {
  for (const Scenario& s : kScenarios)
    if (name == s.name) return &s;
  return nullptr;
}

int ResolveFaultRank(const Options& o, const Scenario& s) {
  if (o.fault_rank >= 0) return o.fault_rank;
  return s.default_fault_rank < 0 ? o.nranks - 1 : s.default_fault_rank;
}

int ResolveFaultStep(const Options& o) { return o.fault_step >= 0 ? o.fault_step : o.steps / 2; }

int ResolveDelayMs(const Options& o, const Scenario& s) {
  return o.delay_ms >= 0 ? o.delay_ms : s.default_delay_ms;
}

bool HasFaultRank(const Scenario& s) {
  return s.before_op != nullptr || s.after_enqueue != nullptr || s.shape_step != nullptr;
}

void ListScenarios() {
  for (const Scenario& s : kScenarios)
    printf("%-13s %s\n%-13s expected: %s\n", s.name, s.summary, "", s.expected);
}

}  // namespace ncclwatch::scenarios
