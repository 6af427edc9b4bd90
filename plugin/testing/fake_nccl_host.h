// A fake NCCL for tests: loads the built plugin .so the way NCCL does
// (dlopen + dlsym "ncclProfiler_vN") and drives it through the exported
// function tables with the call sequences NCCL makes for each profiler API
// version. Also reads the trace files back (tools/reader/reader.h) into an indexed
// form (strings resolved, GPU deltas turned back into absolute pTimers).
//
// Strings handed to the plugin (func, datatype, algo, proto, ...) are kept by
// pointer until the plugin's writer thread encodes them, as NCCL's static
// tables are: pass string literals.
//
// Thread safety: a FakeComm is used by one thread at a time; several
// FakeComms may run concurrently. The captured log is process-wide and
// guarded by a mutex.

#ifndef PLUGIN_TESTING_FAKE_NCCL_HOST_H_
#define PLUGIN_TESTING_FAKE_NCCL_HOST_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plugin/abi/profiler_common.h"
#include "proto/trace.pb.h"

namespace ncclwatch::testing {

namespace nccl = ::ncclwatch::nccl;

// ------------------------------------------------------------------- loading

// The plugin in the test's runfiles ("plugin/libnccl-profiler-ncclwatch.so").
std::string PluginPath();

class PluginLib {
 public:
  // The plugin as NCCL loads it: one dlopen per process (never closed).
  static PluginLib* Shared();
  // A private copy of the .so under $TEST_TMPDIR, dlopen'ed on its own: its
  // globals (e.g. the "warned once" flag) start fresh. Never closed either.
  static PluginLib* FreshCopy();
  // The .so at `path` (a name without '/' is searched as dlopen does), as
  // NCCL loads NCCL_PROFILER_PLUGIN. Never closed; handle() is null if it
  // did not load.
  static PluginLib* Load(const std::string& path);

  void* handle() const { return handle_; }
  const std::string& path() const { return path_; }
  // ncclProfiler_vN's table (N in 1..7); null if missing. Cast to ProfilerVN.
  void* Table(int version) const;
  // What NCCL 2.23 to 2.26 do after the last communicator's finalize:
  // dlclose the plugin, then dlopen it again for the next communicator.
  // Close() returns dlclose's result; Reopen() the new handle (null: failed).
  int Close();
  void* Reopen();

 private:
  explicit PluginLib(std::string path);
  std::string path_;
  void* handle_ = nullptr;
};

// ------------------------------------------------------------------- logging

struct LogLine {
  int level;
  unsigned long flags;
  std::string text;
};
// NCCL's logger (v4+ init argument): records every call.
void FakeLogger(nccl::LogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...);
std::vector<LogLine> Logs();
void ClearLogs();
// Lines of level kLogWarn.
std::vector<std::string> Warnings();
// Waits until a line captured since the last ClearLogs holds `text`
// (nothing but the plugin's logging says that it happened).
void WaitForLog(const std::string& text);

// Readable (an eventfd, non-blocking) whenever a line was logged since it
// was last read: for waits on the log and something else at once
// (waits.h, WaitUntil).
class LogWatch {
 public:
  LogWatch();
  ~LogWatch();
  LogWatch(const LogWatch&) = delete;
  LogWatch& operator=(const LogWatch&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// Captures what is written to fd 2 (v1..v3 warn on stderr) while alive.
class StderrCapture {
 public:
  StderrCapture();
  ~StderrCapture();
  std::string Take();  // restores stderr and returns what was written

 private:
  int saved_ = -1;
  std::string path_;
  bool done_ = false;
  std::string text_;
};

// ------------------------------------------------------------------- version

// What the process's ncclGetVersion (exported by the test binary, as NCCL's
// host process does) reports: NCCL's version code, 22809 for 2.28.9 unless
// set. 0: ncclGetVersion fails.
void SetFakeNcclVersion(int code);

// An address in no object of this process, as another process's context
// pointer is: any read of it faults.
void* ForeignContext();

// Stops the thread that plays NCCL 2.31's profiler thread (API v7 kernel
// channels come from it); the next v7 operation starts it again. A test
// that forks afterwards calls it: ThreadSanitizer refuses new threads after
// a fork of a multi-threaded process.
void StopFakeProfilerThread();

// ------------------------------------------------------------------- mask

// NCCL's event mask: one int per process, which every init receives.
int NcclEventMask();
void SetNcclEventMask(int mask);
// NCCL 2.31's RAS setting the mask for the whole job (src/ras/ras.cc,
// rasMsgHandleBCProfilerMask, calling src/plugin/profiler.cc's
// ncclProfilerSetRasOverride): any time, from any thread; KernelCh is ORed
// in when KernelPhase is set, and every later Init re-applies the mask after
// the plugin's init. While it is set, RunOp delivers only what the mask it
// read at its start asks for, as NCCL does with the mask it keeps per API
// call: no KernelLaunch without KernelLaunch, no op without Coll (P2p) or a
// bit that implies it, no kernel channels without KernelCh.
void SetRasEventMask(int mask);
// Tests: no RAS override any more (the mask stays as it is).
void ClearRasEventMask();

// ------------------------------------------------------------------- env/dirs

// A fresh directory under $TEST_TMPDIR.
std::string MakeTempDir(const std::string& tag);

// ------------------------------------------------------------------- clock

// The plugin's monotonic clock, stepped by a test instead of slept through:
// with NCCLWATCH_CLOCK=test the plugin reads it through
// ncclwatch_test_clock_gettime, which this binary exports (CLOCK_MONOTONIC
// plus the steps taken), and so does MonoNs. ResetPluginClock takes the
// steps back once no plugin reads it any more (every communicator
// finalized): a clock that ran backwards would fool a running writer.
void StepPluginClock(uint64_t ns);
void ResetPluginClock();
// Sets the NCCLWATCH_* variables: `vars` maps name to value; every other
// NCCLWATCH_* variable is unset.
void SetPluginEnv(const std::map<std::string, std::string>& vars);
// CLOCK_MONOTONIC as the plugin reads it: with the steps StepPluginClock
// took.
uint64_t MonoNs();

// ------------------------------------------------------------------- events

// Everything any version's descriptor can carry; Start() copies the members
// of its version and type into the versioned descriptor.
struct Ev {
  uint64_t type = 0;  // nccl::EventType bit
  void* context = nullptr;  // null: this communicator's
  void* parent = nullptr;
  int rank = 0;
  // Coll / P2p / API / CE.
  uint64_t seq = 0;
  const char* func = nullptr;
  const void* send_buff = nullptr;
  void* recv_buff = nullptr;
  size_t count = 0;
  int root = 0;
  const char* datatype = nullptr;
  uint8_t nchannels = 0;
  uint8_t nwarps = 0;
  const char* algo = nullptr;
  const char* proto = nullptr;
  void* parent_group = nullptr;  // v5+ Coll/P2p
  int peer = 0;
  // v1..v3.
  uint64_t comm_hash = 0;
  const char* comm_name = nullptr;
  uint32_t redop = 0;
  size_t traffic_bytes = 0;
  bool is_collnet = false;
  bool is_nvls = false;
  // ProxyOp / ProxyStep.
  pid_t pid = 0;
  uint8_t channel = 0;
  int nsteps = 0;
  int chunk_size = 0;
  bool is_send = false;
  int step = 0;
  // KernelCh (v4+).
  uint64_t ptimer = 0;
  // NetPlugin.
  int64_t net_id = 0;
  void* net_data = nullptr;
  // API (v5+).
  void* stream = nullptr;
  bool graph_captured = false;
  int group_depth = 0;
  // CE (v6).
  const char* sync_strategy = nullptr;
  bool intra_batch_sync = false;
  uint32_t batch_size = 0;
  uint32_t num_batches = 0;
  uint32_t ce_seq = 0;
  bool is_complete = false;
  int nranks = 0;
  int num_ops = 0;
  size_t total_bytes = 0;
  bool use_intra_sync = false;
  // v7: the caller's tag (Coll, P2p, CollApi, P2pApi, CeColl), the
  // symmetric kernel (Coll) and the kernel phase (KernelPhase, with
  // `channel` and `ptimer`).
  uint64_t user_tag = 0;
  const char* kernel_variant = nullptr;
  bool is_sym_coll = false;
  uint8_t phase = 0;
};

// A collective as the tests mostly start it: AllReduce #seq of 4,096
// float32s, ring/simple, on 2 channels of 8 warps.
Ev AllReduceEv(uint64_t seq);

// State arguments of any version.
struct StArgs {
  size_t trans_size = 0;       // v1..v3 ProxyOp, v4+ ProxyStep
  int steps = 0;               // v1..v3 ProxyOp
  int appended_proxy_ops = 0;  // ProxyCtrl
  void* net_data = nullptr;    // v4+ NetPluginUpdate
  uint64_t ptimer = 0;         // v4+ KernelChStop, v7 KernelPhaseStop
};

// One collective or p2p, driven the way NCCL does.
struct OpSpec {
  bool p2p = false;
  uint64_t seq = 1;
  const char* func = "AllReduce";  // p2p: "Send" or "Recv"
  const char* datatype = "ncclFloat32";
  const char* algo = "RING";
  const char* proto = "SIMPLE";
  size_t count = 1024;
  int root = 0;
  int peer = 1;  // p2p
  uint8_t nchannels = 2;
  uint8_t nwarps = 8;
  const void* send_buff = reinterpret_cast<const void*>(0x7f0000001000);
  void* recv_buff = reinterpret_cast<void*>(0x7f0000002000);
  uint32_t redop = 0;         // v1
  size_t traffic_bytes = 0;   // v1, v2
  bool is_collnet = false;    // v1
  bool is_nvls = false;       // v1
  // Kernel channels (v3+: started; v4+: with pTimers). Channel c starts at
  // ptimer0 + start_step * c and stops at ptimer0 + duration + stop_step * c.
  uint64_t ptimer0 = 5'000'000'000;
  uint64_t start_step = 100;
  uint64_t duration = 10'000;
  uint64_t stop_step = 7;
  int kernel_stop = -1;  // how many channels stop (-1: all)
  // Proxy operations: per channel, one ProxyOp per peer in `proxy_peers`
  // (collectives: a send and a recv to each; p2p: one of the op's kind).
  std::vector<int> proxy_peers = {1};
  int nsteps = 2;
  size_t step_bytes = 4096;
  int chunk_size = 131072;
  bool net_plugin = true;     // v4+: IB and socket NetPlugin events under steps
  bool stop_proxies = true;   // false: leave every ProxyOp mid-step (stuck)
  // v5+: GroupApi + CollApi/P2pApi and a KernelLaunch before the Group.
  bool api_events = true;
  // The proxy thread's events (kernel channels, proxies) all come between
  // the op's start and its stop, as they may when the kernel is fast.
  bool children_before_stop = false;
  // PXN: this process's proxy runs another process's ProxyOps. NCCL hands
  // them, their steps and net events, that process's context pointer
  // (NVIDIA/nccl#1586), its pid and its parentObj: here a pointer to a
  // PROT_NONE page (ForeignContext), another pid and 0x1234.
  bool pxn = false;
  void* stream = reinterpret_cast<void*>(0x5000);
  // v5+: what NCCL's cuLaunchKernelEx does between the KernelLaunch start
  // and stop (queue the kernel on the stream: fake_cuda_host.h, or a real
  // launch on a GPU); null: nothing.
  std::function<void(void* stream)> launch;
  // v5+: whether the stream is being captured into a CUDA graph, as NCCL
  // asks the runtime at the API call (its CollApi or P2pApi graphCaptured,
  // the GroupApi's from the group's first call); null: not captured.
  std::function<bool(void* stream)> captured;
  // A captured plan with proxy ops or kernel channels: NCCL starts no Group
  // and no op at capture (the API events and the KernelLaunch only); each
  // replay does, from CUDA's host-callback thread (hostStreamPlanTask).
  bool defer_to_replays = false;
  // One replay of such a plan: no API event and no KernelLaunch; the op's
  // parentObj is the capture's CollApi or P2pApi handle (OpResult::api),
  // which NCCL keeps with the task.
  bool replay = false;
  void* replay_api = nullptr;
  // v5+: false leaves the kernel's channels silent (the GPU never ran it),
  // as well as the ProxyOps' stops.
  bool kernel_runs = true;
  // v7: the call's tag, on the op and its API event (and a CE collective's).
  uint64_t user_tag = 0;
  // v7: a symmetric-memory kernel. NCCL 2.31 then passes the variant, an
  // algorithm cut from it after its '_', and "" for the protocol.
  const char* kernel_variant = nullptr;
  // v7 with KernelPhase in the mask: each channel that stops reports its
  // three phases first, the boundaries at these offsets from its start
  // pTimer (initial sync ends, compute ends); the last phase ends at its stop.
  uint64_t phase_ends[2] = {1'000, 9'000};
};

// What RunOp did, for the test to compare with the file.
struct OpResult {
  void* handle = nullptr;
  uint64_t gpu_start = 0;  // min kernel start pTimer
  uint64_t gpu_stop = 0;   // max kernel stop pTimer
  uint32_t kernel_channels = 0;
  uint32_t proxy_ops = 0;
  uint64_t proxy_bytes = 0;
  void* api = nullptr;  // v5+: the CollApi or P2pApi handle the plugin gave
  // Whether NCCL advanced the communicator's seqNumber for the call
  // (ncclProfilerStartTaskEvents): always for an eager one; for a captured
  // plan, at each start of its task events, only where the task's mask has
  // KernelCh and its Group handle (v4) or CollApi handle (v5+) is not null.
  // The next call of the function takes seq + 1 where it did.
  bool counted = true;
};

class FakeComm {
 public:
  FakeComm(PluginLib* lib, int version);
  ~FakeComm();  // finalizes if still initialized
  FakeComm(const FakeComm&) = default;

  int version() const { return version_; }
  // v1..v3 ignore hash/name/nnodes/nranks/rank (NCCL tells nothing at init);
  // the hash and name still go into every event's descriptor.
  int Init(uint64_t hash, const char* name, int nnodes, int nranks, int rank);
  int Finalize();
  // Another NCCL thread on the same communicator: the same context, never
  // finalized by its destructor.
  FakeComm Alias() const;
  // finalize on the context again, as a buggy host would after Finalize().
  int FinalizeAgain(void* context);
  bool initialized() const { return ctx_ != nullptr || inited_; }
  int mask() const { return mask_; }  // the process's mask after this Init
  void* context() const { return ctx_; }
  uint64_t hash() const { return hash_; }
  int rank() const { return rank_; }

  // Primitives.
  void* Start(const Ev& e);
  void Stop(void* h);
  void State(void* h, int state, const StArgs& a = StArgs());
  // Start with a caller-provided handle slot (to check it is written).
  int StartRaw(const Ev& e, void** handle);

  // Sequences.
  OpResult RunOp(const OpSpec& s);
  // ProxyCtrl: Idle, Active, Append(n), AppendEnd, Sleep, Wakeup.
  void RunProxyCtrl(int appended);
  // v6: CeColl with a CeSync and a CeBatch child, all states (v7: tagged).
  void RunCe(uint64_t seq, uint32_t ce_seq, uint64_t user_tag = 0);

 private:
  // Starts a channel's ProxyOps and runs their steps; returns them open.
  std::vector<void*> ProxyOps(const OpSpec& s, void* parent, int channel, OpResult* r);
  PluginLib* lib_;
  int version_;
  void* ctx_ = nullptr;
  bool inited_ = false;
  int mask_ = 0;
  uint64_t hash_ = 0;
  const char* name_ = nullptr;
  int rank_ = 0;
};

// ABI facts of v1 (NCCL 2.23): enum indices for names.
uint8_t V1FuncIndex(const char* name);
uint8_t V1DatatypeIndex(const char* name);
uint8_t V1AlgoIndex(const char* name);
uint8_t V1ProtoIndex(const char* name);

// ------------------------------------------------------------------- reading

std::vector<std::string> TraceFiles(const std::string& dir);

struct ReadResult {
  std::vector<trace::Record> records;
  std::vector<std::string> issues;  // IssueLines()
  bool cut_tail = false;
  bool only_cut_tail = true;  // every issue is a cut tail
  std::string path;
};
ReadResult ReadTraceFile(const std::string& path);

// One Op record with its completion, whichever shape the file used: folded
// into the Op (`op.completion`) or a separate OpDone with the same event_id.
struct OpView {
  const trace::Op* op = nullptr;
  int done_count = 0;      // completions seen (folded + separate)
  bool folded = false;
  trace::OpDone done;      // normalized: kernel_channels and gpu_timing filled in
  bool has_gpu = false;
  uint64_t gpu_start = 0;  // absolute pTimer of the earliest kernel channel start
  uint64_t gpu_stop = 0;   // gpu_start + gpu_duration_ns
  uint64_t done_ns = 0;    // CPU time of completion (relative to mono_base_ns)
};

// Indexes one file's records.
struct Trace {
  ReadResult raw;
  std::map<uint32_t, std::string> strings;
  const trace::ProcessHeader* header = nullptr;
  bool header_first = false;  // the first record that is not a Batch is the header
  std::vector<const trace::CommInit*> comm_inits;
  std::vector<const trace::CommFinalize*> comm_finalizes;
  std::vector<OpView> ops;                  // file order
  std::map<uint64_t, size_t> op_by_id;      // event_id (when written) -> index in ops
  std::vector<const trace::OpDone*> orphan_done;  // OpDone naming no Op in the file
  // Absolute GPU times (pTimer) of raw KernelCh events by event id.
  std::map<uint64_t, uint64_t> ev_gpu_start;   // EventStart
  std::map<uint64_t, uint64_t> ev_gpu_stop;    // EventStop
  std::map<uint64_t, uint64_t> state_gpu;      // last KernelChStop (or KernelPhaseStop) EventState
  std::vector<const trace::EventStart*> starts;
  std::map<uint64_t, const trace::EventStart*> start_by_id;
  std::map<uint64_t, const trace::EventStop*> stop_by_id;
  std::map<uint64_t, std::vector<const trace::EventState*>> states_by_id;
  std::vector<const trace::Heartbeat*> heartbeats;
  std::vector<const trace::StuckReport*> stucks;
  std::vector<const trace::Drops*> drops;
  std::vector<const trace::Finalize*> finalizes;
  std::vector<const trace::Batch*> batches;
  int gpu_clocks = 0;

  std::string Str(uint32_t id) const;
  std::vector<const trace::EventStart*> Children(uint64_t parent_id, trace::EventType type) const;
  const trace::Drops* LastDrops() const { return drops.empty() ? nullptr : drops.back(); }
};
// Builds the index; `t` must not be copied afterwards (pointers into raw).
void IndexTrace(Trace* t);
// Reads the single trace file in `dir` (fails the test if there is not exactly one).
std::unique_ptr<Trace> ReadSingleTrace(const std::string& dir);
std::unique_ptr<Trace> ReadTrace(const std::string& path);

// Waiting for the writer. A test waits for what it needs to see in the file,
// never a fixed time: the machine may be busy, under a sanitizer, or slow.
// Reads the single trace in `dir` until `done` holds for it, again each time
// the folder changes (and every 100 ms, for a `done` that also asks what no
// file says). No deadline: Bazel's test timeout ends a hang.
std::unique_ptr<Trace> WaitForTrace(const std::string& dir, const std::function<bool(const Trace&)>& done);
// Whether the writer's decisions up to CLOCK_MONOTONIC `mono_ns` are all in
// the file: it holds two heartbeats stamped at or after it (the writer
// stamps a cycle's heartbeat before its stuck check, so whatever that cycle
// wrote precedes the next heartbeat). Heartbeats must be on.
bool WriterPast(const Trace& t, uint64_t mono_ns);

}  // namespace ncclwatch::testing

#endif  // PLUGIN_TESTING_FAKE_NCCL_HOST_H_
