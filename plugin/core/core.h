// The plugin's process-wide state and its hot path.
//
// Profiler is created by the first init and reference-counted by init and
// finalize under a mutex. The last finalize closes it (its writer drains,
// writes the file's end and stops) but never frees it: other threads may
// still hold its contexts and handles (profiler.cc). It owns:
//   - one ThreadBuf per thread that calls the plugin (claimed on the thread's
//     first event, released when the thread exits): a Ring of records and a
//     region of event Slots, both preallocated at creation, so the hot path
//     never allocates, locks or makes a system call beyond the clock;
//   - one Context per communicator (never freed before the Profiler);
//   - the Writer thread, which drains the rings into the trace file.
// Those structures are state.h's. The Writer sees the Profiler only through
// a CoreView (core_view.h), which profiler.cc, the cold code, implements and
// hands it: this header never includes the writer's, nor the writer this one.
//
// An event handle given to NCCL is a Slot*. Slots are taken round-robin in
// the calling thread's region, so a finished slot is reused only after the
// region has wrapped; a late child event naming a finished parent still finds
// it. Operations (Coll, P2p) track completion: all of their kernel channels
// stopped and all of their proxy operations stopped.
//
// The event path is core.cc (NCCL's launching thread, laid out hot),
// child_events.cc (the events under an operation), raw_events.cc (raw
// captures) and thread_bufs.cc (a thread's buffer); profiler.cc is the
// cold rest.
//
// Thread safety: Start/Stop/State may be called from any thread at any time
// after the Context's creation, the Profiler's close included.

#ifndef PLUGIN_CORE_CORE_H_
#define PLUGIN_CORE_CORE_H_

#include <pthread.h>
#include <stdint.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/core/clock.h"
#include "plugin/core/config.h"
#include "plugin/core/event.h"
#include "plugin/core/launch_events.h"
#include "plugin/core/pending_bits.h"
#include "plugin/abi/profiler_common.h"
#include "plugin/core/record.h"
#include "plugin/core/ring.h"
#include "plugin/core/shared_lane.h"
#include "plugin/core/state.h"

namespace ncclwatch::plugin {

class Profiler;
class Writer;

// How long a finalized communicator's context is kept before it serves a new
// one (Profiler::NewContext).
constexpr uint64_t kContextGraceNs = 10'000'000'000;
// Records the shared lane holds between two drains (128 KiB): operations
// stopped on a thread past the buffers, and kernel launches (completions
// never go there: ThreadBuf::done_in_slot).
constexpr size_t kSharedLaneRecords = 1024;
// A thread's slots and spare ones (one region, page-aligned), its ring, and
// the slot its kernel launches take in turn (ThreadBuf::launch; all threads'
// together after the rings, outside the regions).
constexpr size_t kBytesPerThread = kRingRecords * sizeof(Rec) + (kSlotsPerThread + kSpareSlots + 1) * sizeof(Slot);

// Slots a new operation looks at, from the cursor on, before it takes a
// spare one: enough to step over operations that never complete (a hang, a
// completion NCCL lost) among ones that do. The number is not what the proxy
// thread's cost depends on (BENCHMARKS.md, "NCCL's proxy thread").
constexpr uint32_t kAllocTries = 64;

struct ProfilerOptions {
  Config config;
  int api_version = 6;
  nccl::Logger logger = nullptr;
  // Tests: a fixed file name instead of <host>-<pid>-<time>.ncclwatch.
  std::string file_name_override;
  // Tests: what the clock choice reads, instead of this machine.
  ClockProbe clock_probe;
  // How long a finalized communicator's context waits before it serves a new
  // one (tests shorten it).
  uint64_t context_grace_ns = kContextGraceNs;
};

class Profiler;
namespace profiler_internal {
// The current instance: Acquire sets it, Release and a forked child clear
// it (profiler.cc). Read through Profiler::Current.
extern std::atomic<Profiler*> g_current;
}  // namespace profiler_internal

class Profiler {
 public:
  // Creates the Profiler on the first call, else takes another reference.
  // Returns null with `error` set when the plugin cannot run (e.g. the
  // directory is not writable); NCCL then goes on without us.
  static Profiler* Acquire(const ProfilerOptions& opts, std::string* error);
  // Drops a reference; the last one flushes, stops the writer and closes the
  // file. The Profiler itself is never freed: threads may still hold its
  // contexts and handles (see profiler.cc).
  static void Release(Profiler* p);
  // The current instance (tests and the adapters' logging), or null.
  static Profiler* Current() { return profiler_internal::g_current.load(std::memory_order_acquire); }
  // The context `p` as one of this process's Profilers made it (the current
  // one, or one of the last few closed), or null: nothing at p is read
  // unless it is one (see OwnsContext). Inline: every event NCCL starts
  // asks it first, the API events NCCL 2.28+ sends around every call too.
  static Context* KnownContext(const void* p) {
    Profiler* cur = Current();
    if (__builtin_expect(cur != nullptr && cur->OwnsContext(p), 1)) return static_cast<Context*>(const_cast<void*>(p));
    return KnownRetiredContext(p);
  }

  Context* NewContext(uint64_t comm_hash, const char* name, int nnodes, int nranks, int rank);
  // False for a context finalized before (ignored, with one warning): the
  // caller must not release the Profiler again.
  bool FinalizeContext(Context* ctx);
  // An event on a finalized context: ignored, warned once.
  void RefuseFinalized();

  // Whether Start can do anything with an event of this kind: operations and
  // what feeds their completion, and kinds captured raw. The adapters ask
  // before they copy a descriptor.
  bool Wants(EventKind kind) const { return (wanted_kinds_ >> kind) & 1; }
  // A kernel channel of API v4+ without raw capture: what Start does for it,
  // without a descriptor (NCCL's proxy thread calls it for every channel of
  // every operation). The adapters call it when KernelChFast().
  bool KernelChFast() const { return kernelch_fast_; }
  void* StartKernelCh(void* parent, uint64_t ptimer);
  // A KernelLaunch with completions from CUDA events and no raw capture:
  // what Start does for it, from its stream alone (NCCL's launching thread
  // calls it before every kernel; the adapters skip the descriptor's copy
  // when LaunchFast()). Thread safety: as Start.
  bool LaunchFast() const { return launch_fast_; }
  // `group_api`: the launch's parent, a GroupApi token when NCCL's
  // CollApi or P2pApi events told whether its group is captured.
  void* StartKernelLaunch(Context* ctx, const void* stream, const void* group_api);
  // A Coll or P2p: what Start does for one, from its OpDesc (the v4+
  // adapters call it without building an EventDesc). Thread safety: as Start.
  void* StartOp(Context* ctx, const OpDesc& d);
  // StartOp for a caller that knows `ctx` is one of this Profiler's, not
  // finalized, and `d` an operation (the v5+ adapters' plan path).
  void* StartOpOf(Context* ctx, const OpDesc& d);
  // Hot path. Start returns a handle or null (event dropped or not tracked).
  void* Start(Context* ctx, const EventDesc& d);
  void Stop(void* handle);
  void State(void* handle, int state, const StateArgs& a);

  const Config& config() const { return config_; }
  uint64_t mask() const { return config_.nccl_mask; }
  // NCCL's event mask: one int for the whole process, whose address every
  // init hands us (the latest one given is kept). The writer reads it each
  // cycle (Writer::CheckMask); nothing else does.
  void NoteMaskAddress(int* mask) {
    if (mask != nullptr) nccl_mask_addr_.store(mask, std::memory_order_release);
  }
  int* nccl_mask_address() const { return nccl_mask_addr_.load(std::memory_order_acquire); }
  // Completions come from CUDA events at kernel launches (launch_events.h):
  // NCCLWATCH_COMPLETIONS=events, API v5+, and the driver API found.
  bool events() const { return events_; }
  // NCCLWATCH_EVENT_INTERVAL_US in ticks, set by the writer once it knows
  // the tick rate (0 until then: every launch records). Thread safety: any
  // thread.
  void SetEventIntervalTicks(uint64_t ticks) { interval_ticks_.store(ticks, std::memory_order_relaxed); }
  StreamTable* streams() { return streams_.get(); }
  const CudaDriver& cuda() const { return cuda_; }
  // What the header says of it: "channels", "events" or "channels (why)".
  const std::string& completions() const { return completions_; }
  int api_version() const { return api_version_; }
  pid_t pid() const { return pid_; }
  void Log(nccl::LogLevel level, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

  // Writer-side access (through profiler.cc's CoreView).
  uint32_t thread_count() const { return nthreads_; }
  ThreadBuf* thread_buf(uint32_t i) { return &threads_[i]; }
  std::vector<Context*> ContextsSnapshot();
  // Whether `p` is a context this Profiler made, without reading memory at
  // p: NCCL hands a PXN proxy's events the context pointer of the process
  // that posted them, an address in another process (NVIDIA/nccl#1586).
  bool OwnsContext(const void* p) const {
    const uintptr_t off = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(ctx_block_);
    return off < ctx_used_.load(std::memory_order_acquire) * sizeof(Context) && off % sizeof(Context) == 0;
  }
  // The writer has written a communicator's CommFinalize, after everything
  // it recorded: its context and file-local id may serve a new communicator.
  void RecycleContext(Context* ctx);
  bool SlotIsOurs(const void* p) const;
  // Events dropped for want of a buffer: no buffer free when they came, or
  // the shared lane full (never a completion: see ThreadBuf::done_in_slot).
  uint64_t no_thread_slot() const {
    return no_thread_slot_.load(std::memory_order_relaxed) + lane_.dropped();
  }
  // Records of threads without a buffer (the writer drains it).
  SharedLane& lane() { return lane_; }
  // The writer freed an exited thread's buffer: threads without one look again.
  void BufferFreed() { buffers_freed_.fetch_add(1, std::memory_order_release); }
  // Scans every slot (writer thread, for stuck reports).
  const Slot* slots_begin() const { return slots_begin_; }
  const Slot* slots_end() const { return slots_end_; }
  // In a forked child: the inherited Profiler goes quiet (profiler.cc, AtForkChild).
  void Abandon();
  bool abandoned() const { return abandoned_.load(std::memory_order_relaxed); }
  const std::string& writer_path() const;
  const std::string& clock_source() const;  // how events are stamped, and why
  const ClockFacts& clock_facts() const;     // what that choice rested on
  const ClockProbe& clock_probe() const { return clock_probe_; }
  void ForceFlush();
  // Tests only: the writer stops (true) or resumes (false) draining rings.
  void PauseDrainForTesting(bool paused);

  ~Profiler();

 private:
  static Context* KnownRetiredContext(const void* p);
  explicit Profiler(const ProfilerOptions& opts);
  bool Init(std::string* error);

  ThreadBuf* CurrentThread();
  // Cold, and declared so: the callers that inline CurrentThread move the
  // call out of their own hot code.
  __attribute__((cold)) ThreadBuf* ClaimThread();
  __attribute__((cold)) void NoBuffer();  // counts one event dropped for want of a buffer
  Slot* AllocSlot(ThreadBuf* tb);
  __attribute__((cold, noinline)) Slot* SpareSlot(ThreadBuf* tb);
  void Claim(ThreadBuf* tb, Slot* s);
  // An event id of the calling thread's, never given before.
  static uint64_t NewId(ThreadBuf* tb) {
    return (uint64_t{tb->index + 1} << 40) | (++tb->next_local & ((uint64_t{1} << 40) - 1));
  }
  void InitLaunchSlot(ThreadBuf* tb);
  // `p` as a parent handle: one of our slots, in use; else null (counted
  // as bad_parent unless `p` is null).
  Slot* ValidParent(void* p);
  // A kernel channel's handle: the op's slot, tagged; the channel counted.
  void* TagKernelCh(Slot* op, uint64_t ptimer, bool has_ptimer);
  // A kernel channel of `op` stopped: counted, and the op completed if that
  // was the last (`now` as for MaybeComplete).
  void KernelChStopped(Slot* op, uint64_t now);
  // A record to fill in the calling thread's ring (published by the ring's
  // Commit), or null with the drop counted: an operation's may take the
  // whole ring, a raw event's leaves the last quarter for operations.
  Rec* ReserveOpRecord(ThreadBuf* tb);
  Rec* ReserveRawRecord(ThreadBuf* tb);
  // Pushes the completion record (on the calling thread) if `op` is done;
  // `now` in ticks, 0 to read the clock only then.
  void MaybeComplete(Slot* op, uint64_t now);
  // The completion built in op->rec goes to the writer through its buffer's
  // done_in_slot; the writer frees the slot once it has read it.
  void CompleteInSlot(Slot* op);
  void* StartOpIn(ThreadBuf* tb, Context* ctx, const OpDesc& d);
  void FillOp(ThreadBuf* tb, Slot* s, const OpDesc& d, uint64_t now);
  // KernelLaunch with completions from CUDA events: an event recorded on
  // the launch stream at start (before the kernel) and at stop (after it);
  // sampled, only when the stream's interval has passed.
  // `raw`: the descriptor when the launch is captured raw, else null.
  void* StartLaunch(ThreadBuf* tb, Context* ctx, const void* stream, const void* group_api, const EventDesc* raw);
  void StopLaunch(ThreadBuf* tb, Slot* s);
  // Decides where completions come from (Init), adjusting the mask.
  void ChooseCompletions();
  // Cold (raw_events.cc), and declared so for its callers in other files.
  __attribute__((cold)) void StartRaw(ThreadBuf* tb, Slot* s, const EventDesc& d, uint64_t now);
  static void ThreadExit(void* buf);

  // What NCCL's launching thread reads on every event, first and together:
  // after the driver's launch call, each line the plugin touched before may
  // be gone from the core's first-level cache, and each costs a miss. Over
  // a stand-in launch that walks memory this saved 3 of 22 misses a launch;
  // an H200 host resolved no change (BENCHMARKS.md, "The launching thread's
  // own path"). Set at Init, but ctx_used_, which grows with communicators.
  alignas(64) uint32_t wanted_kinds_ = 0;  // bit (1 << EventKind): see Wants
  bool events_ = false;
  // NCCLWATCH_EVENT_INTERVAL_US > 0 with events: a launch records its events
  // only when its stream's interval has passed (StreamEvents::Due).
  bool sampled_ = false;
  bool launch_fast_ = false;    // LaunchFast
  bool kernelch_fast_ = false;  // KernelChFast
  bool start_events_ = true;    // config_.start_events
  bool any_raw_ = false;        // config_.raw_kinds != 0
  uint64_t generation_;
  // Contexts live in one block of kMaxContexts, reserved at construction
  // (pages are touched only as contexts are made), so that OwnsContext is a
  // range check. contexts_[i] is block[i], constructed; ctx_used_ counts them.
  static constexpr size_t kMaxContexts = 65535;  // file-local ids are 16 bits
  Context* ctx_block_ = nullptr;
  std::atomic<size_t> ctx_used_{0};
  const Slot* slots_begin_ = nullptr;
  const Slot* slots_end_ = nullptr;
  CudaDriver cuda_;  // the next line: event_record, stream_is_capturing

  Config config_;
  int api_version_;
  nccl::Logger logger_;
  std::string file_name_override_;
  ClockProbe clock_probe_;
  pid_t pid_;
  bool info_to_stderr_;  // no logger: print info lines (NCCL_DEBUG=INFO|TRACE)
  std::atomic<uint64_t> interval_ticks_{0};
  std::unique_ptr<StreamTable> streams_;
  std::string completions_ = "channels";
  // Set (once) by the first ProxyOp that feeds an operation: from then on,
  // completion also waits for proxy operations. Not set at the default
  // capture, where NCCL starts no ProxyOp events.
  std::atomic<bool> seen_proxy_{false};
  pthread_key_t key_{};
  bool key_ok_ = false;

  uint32_t nthreads_ = 0;
  std::unique_ptr<ThreadBuf[]> threads_;
  void* storage_ = nullptr;  // mmap'ed rings and slots
  size_t storage_bytes_ = 0;

  std::mutex ctx_mu_;
  std::vector<Context*> contexts_;  // guarded by ctx_mu_
  // Finalized contexts whose CommFinalize is written, with when: given again
  // to new communicators (NewContext).
  std::deque<std::pair<uint64_t, Context*>> recycled_;  // guarded by ctx_mu_
  uint32_t next_comm_id_ = 1;                           // guarded by ctx_mu_
  const uint64_t context_grace_ns_;
  std::unique_ptr<Writer> writer_;
  std::atomic<uint64_t> no_thread_slot_{0};
  std::atomic<uint64_t> buffers_freed_{0};
  SharedLane lane_{kSharedLaneRecords};
  std::atomic<bool> abandoned_{false};
  std::atomic<int*> nccl_mask_addr_{nullptr};
  std::atomic<bool> closed_{false};  // the last communicator was finalized: the writer ended
  std::atomic<bool> warned_refinalize_{false};
  std::atomic<bool> warned_after_finalize_{false};
  int refs_ = 0;  // guarded by the global mutex
  void WarnOnce(std::atomic<bool>* flag, const char* what);

};

// A kernel channel's handle when no raw record is kept for it: its op's slot
// with the low bit set (slots are 64-byte aligned). Stop and State see the tag
// and update the op directly.
inline void* KernelChHandle(Slot* op) { return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(op) | 1u); }
inline Slot* OpOfKernelCh(void* handle) {
  const uintptr_t h = reinterpret_cast<uintptr_t>(handle);
  return (h & 1u) ? reinterpret_cast<Slot*>(h & ~uintptr_t{1}) : nullptr;
}
// The Slot behind any handle we gave out.
inline Slot* SlotOfHandle(void* handle) {
  Slot* op = OpOfKernelCh(handle);
  return op != nullptr ? op : static_cast<Slot*>(handle);
}

// The handle a Group event gets when the plugin keeps nothing for it, on
// API v1 to v4: NCCL 2.23 to 2.27 start a plan's Coll and P2p events only
// when its Group handle is not null (src/misc/profiler.cc 2.23:272), so a
// null one would silence every operation. Stop and State ignore it; as a
// parent it is no parent. 64-byte aligned: never mistaken for a tagged
// kernel-channel handle.
namespace token_internal {
// Defined in core.cc; only their addresses mean anything. Inline, so that
// every Stop (which asks whether its handle is a token) reads an address
// instead of making two calls.
extern char g_group_token[64];
extern char g_captured_api_token[64];
}  // namespace token_internal
inline void* GroupToken() { return token_internal::g_group_token; }

// v5+: the handle a CollApi or P2pApi event gets when the plugin keeps
// nothing for it and NCCL says the call is captured into a CUDA graph
// (graphCaptured). NCCL keeps it with the call's task and passes it as the
// parent of every Coll or P2p it starts for that task, at capture and at
// each replay, so the op is known to come from a graph (kFlagGraph). NCCL
// 2.28 to 2.32 also count a captured collective in its seqNumber, at each
// replay, when the task's mask has KernelCh and this handle is not null
// (ncclProfilerStartTaskEvents): with kernel channels each replay then
// takes a number of its own, as an eager call does, instead of sharing the
// next call's. Stop and State ignore it; as a parent it is no parent.
inline void* CapturedApiToken() { return token_internal::g_captured_api_token; }

// v5+: the handle a GroupApi event gets when the plugin keeps nothing for it
// and its launches take their completions from CUDA events. Each group gets
// its own (a process-wide count, top bit set: never one of our slots, which
// are user-space addresses, nor a tagged kernel-channel handle, low bit
// clear). NCCL hands it back as the parent of the group's CollApi, P2pApi and
// KernelLaunch events, so a launch learns from it whether NCCL captured its
// group (Context::capture_hint) without asking the driver. Stop and State
// ignore it; as a parent it is no parent.
inline bool IsGroupApiToken(const void* h) { return (reinterpret_cast<uintptr_t>(h) >> 63) != 0; }
void* NewGroupApiToken();

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CORE_CORE_H_
