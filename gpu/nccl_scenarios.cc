// nccl_scenarios: a multi-GPU NCCL workload with injectable faults, used to
// produce real ncclwatch traces on a GPU machine (no Bazel needed there; see
// gpu/build.sh and gpu/README.md).
//
//   nccl_scenarios --nranks N --scenario NAME [--steps S] [--timeout-sec T]
//                  [--out-dir DIR] [--sizes small|full] [--nonblocking]
//                  [--fault-rank R] [--fault-step K] [--delay-ms D]
//                  [--init-timeout-sec I] [--log-every E] [--list-scenarios]
//
// Process layout. The parent creates the ncclUniqueId (this needs no CUDA: it
// only starts NCCL's bootstrap root, a thread that stays in the parent and
// serves the rendezvous), then forks N children. The parent never touches
// CUDA. Child r uses device r, joins the "world" communicator and splits it
// into "tp" (color r/2: ranks in pairs) and "dp" (color r%2). Each step mixes
// an all_reduce on world, an all_gather on tp, a reduce_scatter on dp, a
// broadcast on world (root = step % N) and a send/recv ring on world in one
// NCCL group, then waits for the stream.
//
// Watchdog (per child, modelled on a framework's NCCL watchdog):
//  * The main thread never blocks in cudaStreamSynchronize: it polls
//    cudaStreamQuery, so it can notice that the watchdog has fired and park.
//  * A watchdog thread holds a deadline that the main thread arms at the start
//    of each step (and around init and teardown) and disarms when the step's
//    work has completed. Every 20 ms it also polls ncclCommGetAsyncError on
//    every communicator (what PyTorch's watchdog does from its own thread).
//  * On a passed deadline it prints
//      [rank r] watchdog: collective timed out after T s, aborting
//    calls ncclCommAbort on every communicator, all at once from one thread
//    each (sequential aborts can deadlock: see Watchdog::Fire), and then
//    _exit(124). An asynchronous NCCL error does
//    the same with status 125. A host-side hang (a blocking NCCL call waiting
//    on a peer, e.g. lazy connection setup) is covered too, since the deadline
//    lives in the other thread.
//  * Aborting while the main thread is still inside an NCCL call is what NCCL
//    abort is for, but it is the risky part, so two backstops keep the exit
//    status meaningful: a reaper thread _exit()s with the same status if the
//    aborts have not returned within 10 s, and a SIGSEGV/SIGBUS/SIGABRT
//    handler _exit()s with that status if the process crashes after firing.
//  * _exit skips static destructors on purpose: other threads may still be
//    inside NCCL. The ncclwatch plugin sees the aborts (NCCL finalizes the
//    profiler while freeing an aborted communicator) and its periodic flushes
//    are in the page cache already.
//  * --nonblocking makes the communicators non-blocking (config.blocking=0);
//    every NCCL call is then followed by polling ncclCommGetAsyncError until
//    the communicator is ready, so even host-side waits happen in our loops.
//
// Exit status. Child: 0 ok, 1 CUDA/NCCL/setup error (comms aborted first),
// 124 watchdog timeout, 125 asynchronous NCCL error. Parent: 0 when every
// child exited 0, else 1 (2 for a usage error); it prints each child's exit
// status or signal. Once a child has exited, the parent gives the others
// T+5 s to finish (their watchdogs fire first), then SIGKILLs them; a child
// stopped by a signal (net-stall) is killed as soon as every other child has
// exited. Children die with the parent (PR_SET_PDEATHSIG).
//
// Scenarios are a table of name -> hooks (kScenarios below); a new fault is a
// new row with shape_step (edit a rank's ops of a step), before_op (skip an op,
// sleep, idle) and/or after_enqueue (crash, stop) hooks.

#include <cuda_runtime.h>
#include <nccl.h>

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu_common.h"

namespace {

// ---------------------------------------------------------------- basics

enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,
  kExitUsage = 2,
  kExitTimeout = 124,
  kExitAsyncError = 125,
};

constexpr int kAbortGraceSec = 10;       // reaper: max time for the aborts
constexpr int kParentGraceSec = 5;       // parent: kill the rest T + this after a failure
constexpr int kWatchdogPollMs = 20;      // watchdog thread period
constexpr size_t kMinBytes = 4 << 10;    // 4 KiB
constexpr size_t kFullMaxBytes = 64 << 20;
constexpr size_t kSmallMaxBytes = 1 << 20;
constexpr int kSizeLevels = 15;          // 4 KiB << 0..14 = 4 KiB..64 MiB

[[noreturn]] void Park() {
  for (;;) pause();
}

[[noreturn]] void Fatal(const char* file, int line, const char* call, const std::string& what);

// ncclInProgress is only ever returned by non-blocking communicators, where it
// means "issued, poll the communicator" (see WaitComm).
#define NCCL_CHECK(call)                                                              \
  do {                                                                                \
    ncclResult_t r_ = (call);                                                         \
    if (r_ != ncclSuccess && r_ != ncclInProgress)                                    \
      Fatal(__FILE__, __LINE__, #call,                                                \
            std::string(ncclGetErrorString(r_)) + " (" + ncclGetLastError(nullptr) + ")"); \
  } while (0)

// ---------------------------------------------------------------- options

struct Options {
  int nranks = 0;
  std::string scenario;
  int steps = 20;
  double timeout_sec = 30;
  double init_timeout_sec = -1;  // default: max(timeout, 60)
  std::string out_dir;
  size_t max_bytes = kFullMaxBytes;
  bool nonblocking = false;
  int fault_rank = -1;  // -1: the scenario's default
  int fault_step = -1;  // -1: steps / 2
  int delay_ms = -1;    // -1: the scenario's default
  int log_every = 1;
};

// ---------------------------------------------------------------- ops

enum CommId : int { kWorld = 0, kTp = 1, kDp = 2, kNumComms = 3 };
const char* const kCommNames[kNumComms] = {"world", "tp", "dp"};

enum class OpKind { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kSendRecvRing, kSend };

const char* OpKindName(OpKind k) {
  switch (k) {
    case OpKind::kAllReduce: return "all_reduce";
    case OpKind::kAllGather: return "all_gather";
    case OpKind::kReduceScatter: return "reduce_scatter";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kSendRecvRing: return "send_recv_ring";
    case OpKind::kSend: return "send";
  }
  return "?";
}

const char* DtypeName(ncclDataType_t t) {
  switch (t) {
    case ncclFloat: return "float32";
    case ncclHalf: return "float16";
    default: return "other";
  }
}

size_t DtypeBytes(ncclDataType_t t) { return t == ncclHalf ? 2 : 4; }

struct Op {
  OpKind kind;
  CommId comm;
  size_t bytes;  // total bytes of the operation's (largest) float32 buffer
  int root;      // broadcast: the root; send: the peer
  // Set by scenarios only (the defaults are the healthy program):
  size_t count = 0;                  // elements; 0: bytes / sizeof(float)
  ncclDataType_t dtype = ncclFloat;  // all_reduce and broadcast honour it
  bool scratch = false;              // use the scenario's scratch buffers (Child::scratch_*)
  const char* note = nullptr;        // what the scenario changed, for the logs
};

size_t ElemCount(const Op& op) {
  return op.count != 0 ? op.count : std::max<size_t>(1, op.bytes / sizeof(float));
}

std::string Describe(const Op& op) {
  std::string s = std::string(OpKindName(op.kind)) + "(" + kCommNames[op.comm] + ") " +
                  HumanBytes(op.bytes);
  if (op.kind == OpKind::kBroadcast) s += " root " + std::to_string(op.root);
  if (op.kind == OpKind::kSend) s += " to " + std::to_string(op.root);
  if (op.count != 0 || op.dtype != ncclFloat)
    s += " (count " + std::to_string(ElemCount(op)) + " " + DtypeName(op.dtype) + ")";
  if (op.note != nullptr) s += std::string(" [") + op.note + "]";
  return s;
}

size_t SizeAt(int level, size_t max_bytes) {
  return std::min(max_bytes, kMinBytes << (level % kSizeLevels));
}

// The step's program. Sizes walk 4 KiB..max with a different phase per op.
// Scenarios' shape_step hooks may edit a rank's copy (see kScenarios).
std::vector<Op> BuildStep(int step, int nranks, size_t max_bytes) {
  return {
      {OpKind::kAllReduce, kWorld, SizeAt(step, max_bytes), 0},
      {OpKind::kAllGather, kTp, SizeAt(step + 3, max_bytes), 0},
      {OpKind::kReduceScatter, kDp, SizeAt(step + 6, max_bytes), 0},
      {OpKind::kBroadcast, kWorld, SizeAt(step + 9, max_bytes), step % nranks},
      {OpKind::kSendRecvRing, kWorld, SizeAt(step + 12, max_bytes), 0},
  };
}

// ---------------------------------------------------------------- scenarios

struct StepCtx {
  int rank;
  int nranks;
  int step;
  const Options* opt;
  int fault_rank;  // resolved
  int fault_step;  // resolved
  int delay_ms;    // resolved (--delay-ms, else the scenario's default)
};

// kIdle: stop issuing NCCL work for good; the rank idles in host code (its
// watchdog is disarmed: nothing of it is outstanding in NCCL).
enum class Verdict { kRun, kSkip, kIdle };

bool IsWorldAllReduce(const Op& op) { return op.kind == OpKind::kAllReduce && op.comm == kWorld; }
bool IsWorldBroadcast(const Op& op) { return op.kind == OpKind::kBroadcast && op.comm == kWorld; }
bool AtFault(const StepCtx& c) { return c.rank == c.fault_rank && c.step == c.fault_step; }

int IndexOf(const std::vector<Op>& ops, bool (*pred)(const Op&)) {
  for (size_t i = 0; i < ops.size(); ++i)
    if (pred(ops[i])) return int(i);
  return -1;
}

constexpr size_t kSendNoRecvBytes = size_t(256) << 20;  // far more than NCCL buffers in flight
constexpr size_t kNetStallBytes = size_t(512) << 20;    // long enough to be caught mid-transfer

struct Scenario {
  const char* name;
  const char* summary;
  const char* expected;  // what a correct run looks like (printed by the parent)
  int min_ranks;
  int default_fault_rank;  // -1: last rank; ignored when the scenario has no faulty rank
  bool uses_fault_step;    // whether --fault-step means anything
  // Hooks (nullptr: nothing). shape_step may edit this rank's ops of a step
  // (reorder, insert, change counts, types, roots); before_op runs before an
  // op is enqueued and may skip it or idle the rank; after_enqueue runs right
  // after it was enqueued (before the wait).
  Verdict (*before_op)(const StepCtx&, const Op&);
  void (*after_enqueue)(const StepCtx&, const Op&);
  void (*shape_step)(const StepCtx&, std::vector<Op>*) = nullptr;
  size_t scratch_bytes = 0;  // extra device send+recv buffers of this size (ops with scratch)
  int default_delay_ms = 0;  // --delay-ms when not given
  // Extra argument checks: an error message, or nullptr when fine.
  const char* (*check)(const Options&, int fault_rank) = nullptr;
};

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
};

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

// ---------------------------------------------------------------- watchdog

volatile sig_atomic_t g_fire_code = 0;  // status to _exit with once firing
char g_crash_msg[160];                   // prepared before use: no formatting in the handler
size_t g_crash_len = 0;

void CrashHandler(int sig) {
  if (g_fire_code != 0) {
    ssize_t unused = write(2, g_crash_msg, g_crash_len);
    (void)unused;
    _exit(g_fire_code);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

class Watchdog {
 public:
  void Start() { thread_ = std::thread([this] { Loop(); }); }

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  void Register(CommId id, ncclComm_t comm) {
    std::lock_guard<std::mutex> l(mu_);
    comms_.push_back({kCommNames[id], comm});
  }

  // From here on the main thread destroys the comms; the watchdog no longer
  // touches them (a late deadline then exits without aborting).
  void ReleaseComms() {
    std::lock_guard<std::mutex> l(mu_);
    comms_.clear();
  }

  void Arm(const char* phase, double sec) {
    std::lock_guard<std::mutex> l(mu_);
    phase_ = phase;
    armed_sec_ = sec;
    deadline_ns_ = NowNs() + int64_t(sec * 1e9);
  }

  void Disarm() { deadline_ns_ = 0; }

  void SetWhere(std::string where) {
    std::lock_guard<std::mutex> l(mu_);
    where_ = std::move(where);
  }

  bool firing() const { return firing_.load() != 0; }

  // Callable from any thread; a second caller parks while the first exits.
  [[noreturn]] void Fire(int code, const std::string& why) {
    int expected = 0;
    if (!firing_.compare_exchange_strong(expected, code)) Park();
    g_fire_code = code;
    Log("%s", why.c_str());
    std::vector<Entry> comms;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!where_.empty()) Log("watchdog: was waiting in: %s", where_.c_str());
      comms = comms_;
    }
    std::thread([code] {
      sleep(kAbortGraceSec);
      Log("watchdog: aborts did not return within %d s; exiting %d without them", kAbortGraceSec,
          code);
      _exit(code);
    }).detach();
    // All communicators at once, one thread each. Sequential aborts deadlock:
    // ncclCommAbort frees device memory, which waits for the device to go
    // idle, while a kernel of a communicator not yet aborted still spins
    // (seen on H200 with NCCL 2.28.3: aborting dp first hung while world's
    // all_reduce was stuck). NCCL raises a communicator's abort flag before
    // it frees anything, so with every abort under way every kernel exits.
    std::string names;
    for (const Entry& e : comms) names += std::string(names.empty() ? "" : ", ") + e.name;
    Log("watchdog: aborting %zu communicator(s): %s", comms.size(), names.c_str());
    std::vector<std::thread> aborts;
    for (const Entry& e : comms) {
      aborts.emplace_back([e] {
        int64_t t0 = NowNs();
        ncclResult_t r = ncclCommAbort(e.comm);
        Log("watchdog: ncclCommAbort(%s) -> %s in %.1f ms", e.name, ncclGetErrorString(r),
            SecSince(t0) * 1e3);
      });
    }
    for (std::thread& t : aborts) t.join();
    Log("watchdog: exiting with status %d", code);
    _exit(code);
  }

 private:
  struct Entry {
    const char* name;
    ncclComm_t comm;
  };

  void Loop() {
    while (!stop_ && !firing()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kWatchdogPollMs));
      if (stop_ || firing()) return;
      std::string why;
      int code = 0;
      {
        std::lock_guard<std::mutex> l(mu_);
        for (const Entry& e : comms_) {
          ncclResult_t st = ncclSuccess;
          ncclResult_t r = ncclCommGetAsyncError(e.comm, &st);
          if (r != ncclSuccess) st = r;
          if (st != ncclSuccess && st != ncclInProgress) {
            code = kExitAsyncError;
            why = std::string("watchdog: async NCCL error on comm ") + e.name + ": " +
                  ncclGetErrorString(st) + " (" + ncclGetLastError(e.comm) + "), aborting";
            break;
          }
        }
        int64_t dl = deadline_ns_.load();
        if (code == 0 && dl != 0 && NowNs() > dl) {
          char buf[256];
          snprintf(buf, sizeof(buf), "watchdog: %s timed out after %g s, aborting", phase_,
                   armed_sec_);
          code = kExitTimeout;
          why = buf;
        }
      }
      if (code != 0) Fire(code, why);
    }
  }

  std::mutex mu_;
  std::vector<Entry> comms_;     // guarded by mu_
  std::string where_;            // guarded by mu_
  const char* phase_ = "";       // guarded by mu_
  double armed_sec_ = 0;         // guarded by mu_
  std::atomic<int64_t> deadline_ns_{0};
  std::atomic<int> firing_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

Watchdog* g_watchdog = nullptr;  // set in the child

void Fatal(const char* file, int line, const char* call, const std::string& what) {
  std::string msg = std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + what;
  if (g_watchdog != nullptr) {
    if (g_watchdog->firing()) Park();  // the watchdog is aborting; it exits for us
    g_watchdog->Fire(kExitError, msg + "; aborting communicators");
  }
  Log("%s", msg.c_str());
  exit(kExitError);
}

// ---------------------------------------------------------------- child

struct Child {
  const Options& opt;
  const Scenario& scen;
  int rank;
  int nranks;
  Watchdog wd;
  ncclComm_t comms[kNumComms] = {nullptr, nullptr, nullptr};
  int comm_size[kNumComms] = {0, 0, 0};
  int comm_rank[kNumComms] = {0, 0, 0};
  cudaStream_t stream = nullptr;
  float* sendbuf = nullptr;
  float* recvbuf = nullptr;
  void* scratch_send = nullptr;  // Scenario::scratch_bytes each, for ops with .scratch
  void* scratch_recv = nullptr;

  Child(const Options& o, const Scenario& s, int r) : opt(o), scen(s), rank(r), nranks(o.nranks) {}

  // Non-blocking communicators: wait until the communicator is ready for the
  // next call. Blocking ones are always ready when a call returns.
  void WaitComm(CommId id) {
    if (!opt.nonblocking) return;
    if (comms[id] == nullptr) Fatal(__FILE__, __LINE__, "WaitComm", "no communicator handle");
    for (;;) {
      ncclResult_t st = ncclSuccess;
      NCCL_CHECK(ncclCommGetAsyncError(comms[id], &st));
      if (st == ncclSuccess) return;
      if (st != ncclInProgress)
        Fatal(__FILE__, __LINE__, "ncclCommGetAsyncError", std::string(kCommNames[id]) + ": " +
                                                                ncclGetErrorString(st) + " (" +
                                                                ncclGetLastError(comms[id]) + ")");
      if (wd.firing()) Park();
      usleep(100);
    }
  }

  ncclConfig_t Config(CommId id) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.commName = kCommNames[id];
    if (opt.nonblocking) cfg.blocking = 0;
    return cfg;
  }

  void Split(CommId id, int color) {
    ncclConfig_t cfg = Config(id);
    NCCL_CHECK(ncclCommSplit(comms[kWorld], color, rank, &comms[id], &cfg));
    // A non-blocking split may fill in the handle only once the parent is
    // ready (seen with NCCL 2.28.3), so register after the waits.
    WaitComm(kWorld);
    WaitComm(id);
    wd.Register(id, comms[id]);
    NCCL_CHECK(ncclCommCount(comms[id], &comm_size[id]));
    NCCL_CHECK(ncclCommUserRank(comms[id], &comm_rank[id]));
  }

  void Init(const ncclUniqueId& id) {
    int ndev = 0;
    CUDA_CHECK(cudaGetDeviceCount(&ndev));
    if (ndev < nranks) {
      Log("need %d visible GPUs, found %d", nranks, ndev);
      exit(kExitError);
    }
    CUDA_CHECK(cudaSetDevice(rank));
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, rank));

    int64_t t0 = NowNs();
    wd.SetWhere("ncclCommInitRankConfig(world)");
    ncclConfig_t cfg = Config(kWorld);
    NCCL_CHECK(ncclCommInitRankConfig(&comms[kWorld], nranks, id, rank, &cfg));
    if (comms[kWorld] != nullptr) wd.Register(kWorld, comms[kWorld]);
    WaitComm(kWorld);
    NCCL_CHECK(ncclCommCount(comms[kWorld], &comm_size[kWorld]));
    NCCL_CHECK(ncclCommUserRank(comms[kWorld], &comm_rank[kWorld]));
    wd.SetWhere("ncclCommSplit(tp)");
    Split(kTp, rank / 2);
    wd.SetWhere("ncclCommSplit(dp)");
    Split(kDp, rank % 2);

    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc(&sendbuf, opt.max_bytes));
    CUDA_CHECK(cudaMalloc(&recvbuf, opt.max_bytes));
    CUDA_CHECK(cudaMemset(sendbuf, 0, opt.max_bytes));
    CUDA_CHECK(cudaMemset(recvbuf, 0, opt.max_bytes));
    if (scen.scratch_bytes > 0) {
      CUDA_CHECK(cudaMalloc(&scratch_send, scen.scratch_bytes));
      CUDA_CHECK(cudaMalloc(&scratch_recv, scen.scratch_bytes));
      CUDA_CHECK(cudaMemset(scratch_send, 0, scen.scratch_bytes));
      CUDA_CHECK(cudaMemset(scratch_recv, 0, scen.scratch_bytes));
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    Log("ready on GPU %d (%s, bus %02x:%02x): world %d/%d, tp %d/%d (color %d), dp %d/%d "
        "(color %d), %s comms, init %.0f ms",
        rank, prop.name, prop.pciBusID, prop.pciDeviceID, comm_rank[kWorld], comm_size[kWorld],
        comm_rank[kTp], comm_size[kTp], rank / 2, comm_rank[kDp], comm_size[kDp], rank % 2,
        opt.nonblocking ? "non-blocking" : "blocking", SecSince(t0) * 1e3);
  }

  void Issue(const Op& op) {
    ncclComm_t c = comms[op.comm];
    size_t count = ElemCount(op);
    void* sb = sendbuf;
    void* rb = recvbuf;
    size_t cap = opt.max_bytes;
    if (op.scratch) {
      sb = scratch_send;
      rb = scratch_recv;
      cap = scen.scratch_bytes;
    }
    // Never let a scenario overrun a buffer (a crash is not the fault we want).
    if (sb == nullptr || count * DtypeBytes(op.dtype) > cap)
      Fatal(__FILE__, __LINE__, "Issue", "op does not fit its buffers: " + Describe(op));
    switch (op.kind) {
      case OpKind::kAllReduce:
        NCCL_CHECK(ncclAllReduce(sb, rb, count, op.dtype, ncclSum, c, stream));
        break;
      case OpKind::kAllGather: {  // recv total = bytes
        size_t per = std::max<size_t>(1, count / comm_size[op.comm]);
        NCCL_CHECK(ncclAllGather(sendbuf, recvbuf, per, ncclFloat, c, stream));
        break;
      }
      case OpKind::kReduceScatter: {  // send total = bytes
        size_t per = std::max<size_t>(1, count / comm_size[op.comm]);
        NCCL_CHECK(ncclReduceScatter(sendbuf, recvbuf, per, ncclFloat, ncclSum, c, stream));
        break;
      }
      case OpKind::kBroadcast:
        NCCL_CHECK(ncclBroadcast(sb, rb, count, op.dtype, op.root, c, stream));
        break;
      case OpKind::kSend:  // alone in its own group
        NCCL_CHECK(ncclGroupStart());
        NCCL_CHECK(ncclSend(sb, count, op.dtype, op.root, c, stream));
        NCCL_CHECK(ncclGroupEnd());
        break;
      case OpKind::kSendRecvRing: {
        int n = comm_size[op.comm], r = comm_rank[op.comm];
        NCCL_CHECK(ncclGroupStart());
        NCCL_CHECK(ncclSend(sendbuf, count, ncclFloat, (r + 1) % n, c, stream));
        NCCL_CHECK(ncclRecv(recvbuf, count, ncclFloat, (r + n - 1) % n, c, stream));
        NCCL_CHECK(ncclGroupEnd());
        break;
      }
    }
    WaitComm(op.comm);
  }

  // cudaStreamQuery polling instead of cudaStreamSynchronize: the main thread
  // stays responsive (parks once the watchdog fires) and keeps the watchdog
  // told which op the GPU is on.
  void WaitStep(int step, const std::vector<Op>& ops, const std::vector<cudaEvent_t>& done,
                const std::vector<bool>& issued) {
    size_t shown = size_t(-1);
    int sleep_us = 0;
    for (;;) {
      cudaError_t e = cudaStreamQuery(stream);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) CUDA_CHECK(e);
      if (wd.firing()) Park();
      size_t cur = ops.size();
      for (size_t i = 0; i < ops.size(); ++i) {
        if (!issued[i]) continue;
        cudaError_t q = cudaEventQuery(done[i]);
        if (q == cudaErrorNotReady) { cur = i; break; }
        if (q != cudaSuccess) CUDA_CHECK(q);
      }
      if (cur != shown && cur < ops.size()) {
        shown = cur;
        wd.SetWhere("step " + std::to_string(step) + ", GPU running " + Describe(ops[cur]));
      }
      if (sleep_us > 0) usleep(sleep_us);
      sleep_us = std::min(sleep_us * 2 + 10, 200);
    }
  }

  // host-stuck: no NCCL call of this rank is outstanding (the previous step
  // completed), so its watchdog, like a framework's, has nothing to time out.
  // The process stays alive (the plugin's heartbeat thread keeps going) until
  // the parent kills it, or an async error on a communicator fires the watchdog.
  [[noreturn]] void IdleForever(int step, const Op& next) {
    wd.Disarm();
    wd.SetWhere("host code (idle, no NCCL call outstanding)");
    Log("scenario %s: idling in host code from step %d on, before %s; no more NCCL calls",
        scen.name, step, Describe(next).c_str());
    for (;;) sleep(1);
  }

  void RunSteps() {
    const StepCtx base{rank,   nranks, 0, &opt, ResolveFaultRank(opt, scen), ResolveFaultStep(opt),
                       ResolveDelayMs(opt, scen)};
    std::vector<cudaEvent_t> done(5);
    for (cudaEvent_t& ev : done) CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    int64_t t_all = NowNs();
    for (int step = 0; step < opt.steps; ++step) {
      StepCtx ctx = base;
      ctx.step = step;
      std::vector<Op> ops = BuildStep(step, nranks, opt.max_bytes);
      if (scen.shape_step) scen.shape_step(ctx, &ops);
      std::vector<bool> issued(ops.size(), false);
      if (done.size() < ops.size()) {
        size_t old = done.size();
        done.resize(ops.size());
        for (size_t i = old; i < done.size(); ++i)
          CUDA_CHECK(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
      }
      int64_t t0 = NowNs();
      wd.Arm("collective", opt.timeout_sec);
      for (size_t i = 0; i < ops.size(); ++i) {
        const Op& op = ops[i];
        Verdict v = scen.before_op ? scen.before_op(ctx, op) : Verdict::kRun;
        if (v == Verdict::kSkip) continue;
        if (v == Verdict::kIdle) IdleForever(step, op);
        wd.SetWhere("step " + std::to_string(step) + ", enqueuing " + Describe(op));
        Issue(op);
        CUDA_CHECK(cudaEventRecord(done[i], stream));
        issued[i] = true;
        if (scen.after_enqueue) scen.after_enqueue(ctx, op);
      }
      WaitStep(step, ops, done, issued);
      wd.Disarm();
      if (opt.log_every > 0 && (step % opt.log_every == 0 || step + 1 == opt.steps))
        Log("step %d/%d done in %.2f ms (%zu ops, world all_reduce %s)", step + 1, opt.steps,
            SecSince(t0) * 1e3, ops.size(),
            HumanBytes(ops[std::max(0, IndexOf(ops, IsWorldAllReduce))].bytes).c_str());
    }
    Log("%d steps in %.2f s", opt.steps, SecSince(t_all));
    for (cudaEvent_t ev : done) CUDA_CHECK(cudaEventDestroy(ev));
  }

  void Teardown() {
    wd.Arm("teardown", opt.timeout_sec);
    const CommId order[] = {kDp, kTp, kWorld};
    for (CommId id : order) {
      wd.SetWhere(std::string("ncclCommFinalize(") + kCommNames[id] + ")");
      NCCL_CHECK(ncclCommFinalize(comms[id]));
      WaitComm(id);
    }
    wd.ReleaseComms();
    for (CommId id : order) {
      wd.SetWhere(std::string("ncclCommDestroy(") + kCommNames[id] + ")");
      NCCL_CHECK(ncclCommDestroy(comms[id]));
      comms[id] = nullptr;
    }
    wd.Disarm();
    wd.Stop();
    CUDA_CHECK(cudaFree(sendbuf));
    CUDA_CHECK(cudaFree(recvbuf));
    if (scratch_send) CUDA_CHECK(cudaFree(scratch_send));
    if (scratch_recv) CUDA_CHECK(cudaFree(scratch_recv));
    CUDA_CHECK(cudaStreamDestroy(stream));
    Log("communicators finalized and destroyed");
  }

  int Main(const ncclUniqueId& id) {
    g_watchdog = &wd;
    wd.Start();
    wd.Arm("init", opt.init_timeout_sec);
    Init(id);
    wd.Disarm();
    RunSteps();
    Teardown();
    g_watchdog = nullptr;
    return kExitOk;
  }
};

// ---------------------------------------------------------------- parent

void Usage(FILE* f) {
  fprintf(f,
          "usage: nccl_scenarios --nranks N --scenario NAME [--steps S] [--timeout-sec T]\n"
          "                      [--out-dir DIR] [--sizes small|full] [--nonblocking]\n"
          "                      [--fault-rank R] [--fault-step K] [--delay-ms D]\n"
          "                      [--init-timeout-sec I] [--log-every E] [--list-scenarios]\n"
          "  --nranks N           processes/GPUs (rank r uses device r)\n"
          "  --scenario NAME      see --list-scenarios\n"
          "  --steps S            training-like steps (default 20)\n"
          "  --timeout-sec T      per-step watchdog timeout (default 30)\n"
          "  --init-timeout-sec I watchdog timeout for init (default max(T, 60))\n"
          "  --out-dir DIR        create DIR, write DIR/scenario.json, and default\n"
          "                       NCCLWATCH_DIR to DIR when it is unset\n"
          "  --sizes small|full   cap buffers at 1 MiB (small) or 64 MiB (full, default)\n"
          "  --nonblocking        non-blocking communicators (config.blocking=0)\n"
          "  --fault-rank R       the faulty rank (default: the scenario's)\n"
          "  --fault-step K       the faulty step (default: S/2)\n"
          "  --delay-ms D         straggler delay (default 50), net-stall SIGSTOP delay\n"
          "                       (default 10)\n"
          "  --log-every E        progress line every E steps (default 1, 0: none)\n"
          "exit status: 0 if every rank exited 0, 1 otherwise, 2 on a usage error.\n"
          "ranks exit 0 ok, 1 error, 124 watchdog timeout, 125 async NCCL error.\n");
}

void ListScenarios() {
  for (const Scenario& s : kScenarios)
    printf("%-13s %s\n%-13s expected: %s\n", s.name, s.summary, "", s.expected);
}

bool ParseInt(const char* s, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < INT32_MIN || v > INT32_MAX) return false;
  *out = int(v);
  return true;
}

bool ParseDouble(const char* s, double* out) {
  char* end = nullptr;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0') return false;
  *out = v;
  return true;
}

// Returns kExitOk, or kExitUsage after printing why; -1 for "done, exit 0".
int ParseArgs(int argc, char** argv, Options* o) {
  auto bad = [](const char* flag, const char* val) {
    fprintf(stderr, "nccl_scenarios: bad value for %s: '%s'\n", flag, val ? val : "(missing)");
    return int(kExitUsage);
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto need = [&]() { return v != nullptr && (++i, true); };
    if (a == "-h" || a == "--help") { Usage(stdout); return -1; }
    if (a == "--list-scenarios") { ListScenarios(); return -1; }
    if (a == "--nonblocking") { o->nonblocking = true; continue; }
    if (a == "--nranks") { if (!need() || !ParseInt(v, &o->nranks) || o->nranks < 1) return bad("--nranks", v); continue; }
    if (a == "--scenario") { if (!need()) return bad("--scenario", v); o->scenario = v; continue; }
    if (a == "--steps") { if (!need() || !ParseInt(v, &o->steps) || o->steps < 1) return bad("--steps", v); continue; }
    if (a == "--timeout-sec") { if (!need() || !ParseDouble(v, &o->timeout_sec) || !(o->timeout_sec > 0)) return bad("--timeout-sec", v); continue; }
    if (a == "--init-timeout-sec") { if (!need() || !ParseDouble(v, &o->init_timeout_sec) || !(o->init_timeout_sec > 0)) return bad("--init-timeout-sec", v); continue; }
    if (a == "--out-dir") { if (!need() || !*v) return bad("--out-dir", v); o->out_dir = v; continue; }
    if (a == "--sizes") {
      if (!need()) return bad("--sizes", v);
      if (std::string(v) == "small") o->max_bytes = kSmallMaxBytes;
      else if (std::string(v) == "full") o->max_bytes = kFullMaxBytes;
      else return bad("--sizes", v);
      continue;
    }
    if (a == "--fault-rank") { if (!need() || !ParseInt(v, &o->fault_rank) || o->fault_rank < 0) return bad("--fault-rank", v); continue; }
    if (a == "--fault-step") { if (!need() || !ParseInt(v, &o->fault_step) || o->fault_step < 0) return bad("--fault-step", v); continue; }
    if (a == "--delay-ms") { if (!need() || !ParseInt(v, &o->delay_ms) || o->delay_ms < 0) return bad("--delay-ms", v); continue; }
    if (a == "--log-every") { if (!need() || !ParseInt(v, &o->log_every) || o->log_every < 0) return bad("--log-every", v); continue; }
    fprintf(stderr, "nccl_scenarios: unknown argument '%s'\n", a.c_str());
    Usage(stderr);
    return kExitUsage;
  }
  if (o->nranks < 1 || o->scenario.empty()) {
    fprintf(stderr, "nccl_scenarios: --nranks and --scenario are required\n");
    Usage(stderr);
    return kExitUsage;
  }
  if (o->init_timeout_sec <= 0) o->init_timeout_sec = std::max(o->timeout_sec, 60.0);
  return kExitOk;
}

bool MakeDirs(const std::string& path) {
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

struct ChildState {
  pid_t pid = -1;
  bool running = true;
  bool stopped = false;      // by a signal (SIGSTOP), seen through WUNTRACED
  bool was_stopped = false;  // stopped at some point
  int status = 0;
  bool killed_by_parent = false;
};

std::string DescribeStatus(const ChildState& c) {
  char buf[160];
  if (WIFEXITED(c.status)) {
    int code = WEXITSTATUS(c.status);
    const char* what = code == kExitOk ? "ok"
                       : code == kExitTimeout ? "watchdog timeout"
                       : code == kExitAsyncError ? "async NCCL error"
                       : "error";
    snprintf(buf, sizeof(buf), "exited with status %d (%s)", code, what);
  } else if (WIFSIGNALED(c.status)) {
    int sig = WTERMSIG(c.status);
    snprintf(buf, sizeof(buf), "killed by signal %d (%s)%s%s", sig, strsignal(sig),
             c.killed_by_parent ? " sent by the parent" : "",
             c.was_stopped ? " while stopped" : "");
  } else {
    snprintf(buf, sizeof(buf), "raw wait status 0x%x", c.status);
  }
  return buf;
}

std::string JsonString(const char* v) {
  std::string out = "\"";
  for (const char* p = v; *p; ++p) {
    unsigned char ch = static_cast<unsigned char>(*p);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += char(ch);
    } else if (ch < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", ch);
      out += buf;
    } else {
      out += char(ch);
    }
  }
  return out + "\"";
}

void WriteSummary(const Options& o, const Scenario& scen, int nccl_version,
                  const std::vector<ChildState>& kids, int parent_status, double wall_sec) {
  std::string path = o.out_dir + "/scenario.json";
  FILE* f = fopen(path.c_str(), "w");
  if (!f) {
    Log("cannot write %s: %s", path.c_str(), strerror(errno));
    return;
  }
  const bool faulty = HasFaultRank(scen);
  fprintf(f, "{\n  \"scenario\": %s,\n  \"nranks\": %d,\n  \"steps\": %d,\n",
          JsonString(o.scenario.c_str()).c_str(), o.nranks, o.steps);
  fprintf(f, "  \"fault_rank\": %d,\n  \"fault_step\": %d,\n  \"delay_ms\": %d,\n",
          faulty ? ResolveFaultRank(o, scen) : -1,
          faulty && scen.uses_fault_step ? ResolveFaultStep(o) : -1, ResolveDelayMs(o, scen));
  fprintf(f, "  \"timeout_sec\": %g,\n  \"max_bytes\": %zu,\n  \"nonblocking\": %s,\n",
          o.timeout_sec, o.max_bytes, o.nonblocking ? "true" : "false");
  fprintf(f, "  \"summary\": %s,\n  \"expected\": %s,\n", JsonString(scen.summary).c_str(),
          JsonString(scen.expected).c_str());
  // The environment that shapes the run and its traces.
  static const char* const kEnv[] = {"NCCL_NVLS_ENABLE",     "NCCL_P2P_DISABLE",
                                     "NCCL_SHM_DISABLE",     "NCCL_PROFILER_PLUGIN",
                                     "NCCLWATCH_DIR",        "NCCLWATCH_EVENTS",
                                     "NCCLWATCH_STUCK_SEC",  "NCCLWATCH_HEARTBEAT_MS",
                                     "NCCLWATCH_FLUSH_MS"};
  fprintf(f, "  \"env\": {");
  bool first = true;
  for (const char* name : kEnv) {
    const char* v = getenv(name);
    if (v == nullptr) continue;
    fprintf(f, "%s\n    %s: %s", first ? "" : ",", JsonString(name).c_str(), JsonString(v).c_str());
    first = false;
  }
  fprintf(f, "%s},\n", first ? "" : "\n  ");
  fprintf(f, "  \"nccl_version\": %d,\n  \"wall_sec\": %.3f,\n  \"status\": %d,\n  \"ranks\": [\n",
          nccl_version, wall_sec, parent_status);
  for (size_t r = 0; r < kids.size(); ++r) {
    const ChildState& c = kids[r];
    int code = !c.running && WIFEXITED(c.status) ? WEXITSTATUS(c.status) : -1;
    int sig = !c.running && WIFSIGNALED(c.status) ? WTERMSIG(c.status) : 0;
    fprintf(f, "    {\"rank\": %zu, \"pid\": %d, \"exit_code\": %d, \"signal\": %d, "
               "\"killed_by_parent\": %s, \"was_stopped\": %s}%s\n",
            r, int(c.pid), code, sig, c.killed_by_parent ? "true" : "false",
            c.was_stopped ? "true" : "false", r + 1 < kids.size() ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  fclose(f);
  Log("wrote %s", path.c_str());
}

int ParentMain(int argc, char** argv) {
  Options o;
  int pr = ParseArgs(argc, argv, &o);
  if (pr == -1) return kExitOk;
  if (pr != kExitOk) return pr;
  const Scenario* scen = FindScenario(o.scenario);
  if (scen == nullptr) {
    fprintf(stderr, "nccl_scenarios: unknown scenario '%s'; known:\n", o.scenario.c_str());
    ListScenarios();
    return kExitUsage;
  }
  if (o.nranks < scen->min_ranks) {
    fprintf(stderr, "nccl_scenarios: scenario '%s' needs --nranks >= %d\n", scen->name,
            scen->min_ranks);
    return kExitUsage;
  }
  int fault_rank = ResolveFaultRank(o, *scen);
  if (HasFaultRank(*scen)) {
    if (fault_rank >= o.nranks) {
      fprintf(stderr, "nccl_scenarios: --fault-rank %d is not below --nranks %d\n", fault_rank,
              o.nranks);
      return kExitUsage;
    }
    if (scen->uses_fault_step && ResolveFaultStep(o) >= o.steps) {
      fprintf(stderr, "nccl_scenarios: --fault-step %d is not below --steps %d\n",
              ResolveFaultStep(o), o.steps);
      return kExitUsage;
    }
    if (scen->check != nullptr) {
      if (const char* err = scen->check(o, fault_rank)) {
        fprintf(stderr, "nccl_scenarios: %s\n", err);
        return kExitUsage;
      }
    }
  }

  ForceNvlsOff();

  if (!o.out_dir.empty()) {
    if (!MakeDirs(o.out_dir)) {
      fprintf(stderr, "nccl_scenarios: cannot create --out-dir %s: %s\n", o.out_dir.c_str(),
              strerror(errno));
      return kExitUsage;
    }
    if (getenv("NCCLWATCH_DIR") == nullptr) setenv("NCCLWATCH_DIR", o.out_dir.c_str(), 1);
  }

  int version = 0;
  NCCL_CHECK(ncclGetVersion(&version));
  const char* plugin = getenv("NCCL_PROFILER_PLUGIN");
  const char* wdir = getenv("NCCLWATCH_DIR");
  Log("scenario %s: %s", scen->name, scen->summary);
  Log("expected: %s", scen->expected);
  Log("nranks %d, steps %d, timeout %g s, sizes %s..%s, NCCL %d (headers %d.%d.%d), "
      "NCCL_PROFILER_PLUGIN=%s, NCCLWATCH_DIR=%s",
      o.nranks, o.steps, o.timeout_sec, HumanBytes(kMinBytes).c_str(),
      HumanBytes(o.max_bytes).c_str(), version, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
      plugin ? plugin : "(unset)", wdir ? wdir : "(unset)");
  if (scen->uses_fault_step)
    Log("fault rank %d, fault step %d, delay %d ms", fault_rank, ResolveFaultStep(o),
        ResolveDelayMs(o, *scen));
  else if (HasFaultRank(*scen))
    Log("fault rank %d, delay %d ms", fault_rank, ResolveDelayMs(o, *scen));
  if (std::string(scen->name) == "net-stall" &&
      (getenv("NCCL_P2P_DISABLE") == nullptr || getenv("NCCL_SHM_DISABLE") == nullptr))
    Log("note: net-stall without NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 stalls only the host: "
        "NVLink/shared-memory transfers go on without the stopped process");

  // No CUDA in the parent: the id is a plain struct copied into each child by fork.
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));

  int64_t t0 = NowNs();
  std::vector<ChildState> kids(o.nranks);
  const pid_t parent_pid = getpid();
  fflush(nullptr);
  for (int r = 0; r < o.nranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      Log("fork: %s", strerror(errno));
      KillForked(kids, r);
      return kExitError;
    }
    if (pid == 0) {
      // A host-stuck or stopped net-stall rank dies with the parent too.
      if (!EnterRank(r, parent_pid)) _exit(kExitError);
      int n = snprintf(g_crash_msg, sizeof(g_crash_msg),
                       "[rank %d] watchdog: crashed while aborting; exiting with its status\n", r);
      g_crash_len = size_t(std::max(0, std::min(n, int(sizeof(g_crash_msg)) - 1)));
      struct sigaction sa;
      memset(&sa, 0, sizeof(sa));
      sa.sa_handler = CrashHandler;
      sigaction(SIGSEGV, &sa, nullptr);
      sigaction(SIGBUS, &sa, nullptr);
      sigaction(SIGABRT, &sa, nullptr);
      Child* child = new Child(o, *scen, r);  // never freed: the process ends here
      int code = child->Main(id);
      fflush(nullptr);
      exit(code);  // normal exit: static destructors (and the plugin's) run
    }
    kids[r].pid = pid;
  }

  // Reap. Once one child has exited (failed, or done while others are not),
  // the rest get T + kParentGraceSec seconds (their own watchdogs fire within
  // T of their step's start, then abort and exit; healthy ranks only have
  // their teardown left), then the parent SIGKILLs them, so it never hangs: a
  // rank idling in host code (host-stuck) has no deadline of its own. A rank
  // stopped by a signal (SIGSTOP: net-stall) cannot move on by itself; once
  // every rank still running is stopped, the stopped ones are killed at once.
  const double grace = o.timeout_sec + kParentGraceSec;
  int64_t kill_at = 0;
  int running = o.nranks;
  auto kill_rest = [&](const char* why) {
    for (ChildState& c : kids) {
      if (!c.running || c.killed_by_parent) continue;
      Log("killing pid %d (%s)", int(c.pid), why);
      c.killed_by_parent = true;
      kill(c.pid, SIGKILL);  // SIGKILL also ends a stopped process
    }
  };
  while (running > 0) {
    int st = 0;
    pid_t pid = waitpid(-1, &st, WNOHANG | WUNTRACED | WCONTINUED);
    if (pid < 0 && errno != EINTR) {
      Log("waitpid: %s", strerror(errno));
      break;
    }
    if (pid > 0) {
      for (int r = 0; r < o.nranks; ++r) {
        ChildState& c = kids[r];
        if (c.pid != pid || !c.running) continue;
        if (WIFSTOPPED(st)) {
          c.stopped = c.was_stopped = true;
          Log("rank %d (pid %d) stopped by signal %d (%s) after %.1f s", r, int(pid),
              WSTOPSIG(st), strsignal(WSTOPSIG(st)), SecSince(t0));
          break;
        }
        if (WIFCONTINUED(st)) {
          c.stopped = false;
          Log("rank %d (pid %d) continued after %.1f s", r, int(pid), SecSince(t0));
          break;
        }
        c.running = false;
        c.stopped = false;
        c.status = st;
        --running;
        Log("rank %d (pid %d) %s after %.1f s", r, int(pid), DescribeStatus(c).c_str(),
            SecSince(t0));
        bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (kill_at == 0 && running > 0) {
          kill_at = NowNs() + int64_t(grace * 1e9);
          if (!ok)
            Log("a rank failed; the others get %.0f s (T + %d s) to exit before the parent "
                "kills them",
                grace, kParentGraceSec);
        }
        break;
      }
      continue;
    }
    if (running > 0 && running < o.nranks) {
      bool all_stopped = true;
      for (const ChildState& c : kids)
        if (c.running && !c.stopped) all_stopped = false;
      if (all_stopped) kill_rest("stopped by a signal, and every other rank has exited");
      else if (kill_at != 0 && NowNs() > kill_at) kill_rest("still running after the grace period");
    }
    usleep(50 * 1000);
  }

  bool all_ok = true;
  Log("summary for scenario %s (%.1f s):", scen->name, SecSince(t0));
  for (int r = 0; r < o.nranks; ++r) {
    Log("  rank %d (pid %d): %s", r, int(kids[r].pid), DescribeStatus(kids[r]).c_str());
    if (kids[r].running || !WIFEXITED(kids[r].status) || WEXITSTATUS(kids[r].status) != 0)
      all_ok = false;
  }
  int status = all_ok ? kExitOk : kExitError;
  Log("expected: %s", scen->expected);
  Log("exit status %d", status);
  if (!o.out_dir.empty()) WriteSummary(o, *scen, version, kids, status, SecSince(t0));
  return status;
}

}  // namespace

int main(int argc, char** argv) { return ParentMain(argc, argv); }
