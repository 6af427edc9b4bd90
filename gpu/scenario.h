// What the parts of nccl_scenarios share: exit statuses, the options, the ops
// of a step and their helpers (scenario_ops.cc), the Scenario row and its
// lookups (scenario_table.cc), the failure path (Fatal, NCCL_CHECK) and the
// entry point of a forked rank (scenario_rank.cc).

#ifndef GPU_SCENARIO_H_
#define GPU_SCENARIO_H_

#include <nccl.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace ncclwatch::scenarios {

// ---------------------------------------------------------------- basics

enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,
  kExitUsage = 2,
  kExitTimeout = 124,
  kExitAsyncError = 125,
};

constexpr size_t kMinBytes = 4 << 10;  // 4 KiB
constexpr size_t kFullMaxBytes = 64 << 20;
constexpr size_t kSmallMaxBytes = 1 << 20;

[[noreturn]] inline void Park() {
  for (;;) pause();
}

// In a rank, fires the watchdog (communicators aborted, exit 1); in the
// parent, logs and exits 1. Defined in scenario_rank.cc.
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
constexpr const char* kCommNames[kNumComms] = {"world", "tp", "dp"};

enum class OpKind { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kSendRecvRing, kSend };

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

size_t DtypeBytes(ncclDataType_t t);
size_t ElemCount(const Op& op);
std::string Describe(const Op& op);  // for the logs

// The step's program. Sizes walk 4 KiB..max with a different phase per op.
// Scenarios' shape_step hooks may edit a rank's copy (see kScenarios).
std::vector<Op> BuildStep(int step, int nranks, size_t max_bytes);

// ---------------------------------------------------------------- scenarios

struct StepCtx {
  int rank;
  int nranks;
  int step;
  const Options* opt;
  int fault_rank;  // resolved
  int fault_step;  // resolved
  int delay_ms;    // resolved (--delay-ms, else the scenario's default)
  void* stream = nullptr;  // the rank's cudaStream_t, where its NCCL work goes
};

// kIdle: stop issuing NCCL work for good; the rank idles in host code (its
// watchdog is disarmed: nothing of it is outstanding in NCCL).
enum class Verdict { kRun, kSkip, kIdle };

bool IsWorldAllReduce(const Op& op);
bool IsWorldBroadcast(const Op& op);
bool AtFault(const StepCtx& c);
int IndexOf(const std::vector<Op>& ops, bool (*pred)(const Op&));

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

// Lookups in the table of scenarios (kScenarios in scenario_table.cc).
const Scenario* FindScenario(const std::string& name);
void ListScenarios();
int ResolveFaultRank(const Options& o, const Scenario& s);
int ResolveFaultStep(const Options& o);
int ResolveDelayMs(const Options& o, const Scenario& s);
bool HasFaultRank(const Scenario& s);

// ---------------------------------------------------------------- rank

// A forked rank's whole run (scenario_rank.cc): init, the steps, teardown.
// Returns its exit status; failures exit the process from inside.
int RunRank(const Options& o, const Scenario& s, int rank, const ncclUniqueId& id);

}  // namespace ncclwatch::scenarios

#endif  // GPU_SCENARIO_H_
