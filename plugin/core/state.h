// The memory NCCL's threads write and the writer thread reads: one Context
// per communicator, one Slot per event handle, one ThreadBuf per thread that
// calls the plugin (its ring of records and its region of slots).
//
// The Profiler (core.h) makes and owns all of it and writes it on the hot
// path; the writer reaches it only through CoreView (core_view.h). Both
// include this header, so neither includes the other's.
//
// No function here allocates or locks. Which threads write what is said with
// each structure.

#ifndef PLUGIN_CORE_STATE_H_
#define PLUGIN_CORE_STATE_H_

#include <stdint.h>

#include <atomic>
#include <memory>
#include <string>

#include "plugin/core/pending_bits.h"
#include "plugin/core/record.h"
#include "plugin/core/ring.h"

namespace ncclwatch::plugin {

class Profiler;

enum SlotState : uint32_t { kSlotFree = 0, kSlotLive = 1, kSlotDone = 2 };

// One communicator. What every event NCCL starts on it reads (Profiler::
// KnownContext's range check, the Profiler, the file-local index, whether
// it is finalized, the capture answer) is in its first cache line; its
// size is a power of two (two lines), so the range check is a mask.
struct alignas(64) Context {
  Profiler* prof = nullptr;
  uint16_t comm = 0;  // file-local index
  std::atomic<bool> finalized{false};
  std::atomic<bool> finalize_written{false};  // its CommFinalize is in the file (set by the writer)
  // v5+: whether NCCL captures this communicator's current group into a CUDA
  // graph, as its last CollApi or P2pApi event said (their graphCaptured):
  // the group's GroupApi token (IsGroupApiToken), bit 0 set when captured; 0
  // before any. NCCL requires every stream of a communicator's group to be
  // captured by the same graph or by none, and its own launch path acts on
  // that one answer. A launch under the same token need not ask the driver
  // (cuStreamIsCapturing, on NCCL's launching thread); under any other
  // parent it still asks.
  std::atomic<uint64_t> capture_hint{0};
  uint64_t comm_hash = 0;
  int32_t nranks = 0;
  int32_t nnodes = 0;
  int32_t rank = 0;
  // NCCL gave values no communicator can have (ImpossibleComm): they are
  // written as given, marked, and no per-rank state is kept.
  bool nccl_impossible = false;
  uint64_t init_ns = 0;
  // v1..v3: the communicator hash learnt from the first event naming it.
  std::atomic<uint64_t> event_comm_hash{0};
  // Point-to-point order per peer (indexed by peer rank, size nranks).
  std::unique_ptr<std::atomic<uint32_t>[]> send_seq;
  std::unique_ptr<std::atomic<uint32_t>[]> recv_seq;
  std::string name;
};
static_assert((sizeof(Context) & (sizeof(Context) - 1)) == 0, "OwnsContext's range check is a mask");

// The most ranks a communicator may have: the tools' reader calls a larger
// size impossible (tools/model/model.h, kMaxCommRanks; the test of
// impossible communicators asserts that the two agree).
inline constexpr int32_t kMaxCommRanks = 1 << 17;

// Whether NCCL's init arguments (profiler API v4 on, which give them) are
// values no communicator can have: no rank, more ranks than any job has, or
// a rank outside them. Not for API v1 to v3, whose inits give neither size
// nor rank (0 for both).
inline bool ImpossibleComm(int32_t nranks, int32_t rank) {
  return nranks <= 0 || nranks > kMaxCommRanks || rank < 0 || rank >= nranks;
}

// One event handle. Fields read by the writer thread are atomics; the rest
// belong to the threads NCCL calls us from, ordered by NCCL itself.
//
// Slots live in zero-filled anonymous memory and are never constructed: every
// member's zero is its initial value (state kSlotFree).
//
// Layout: an operation's slot is written by the thread that enqueues it and
// then updated by NCCL's proxy thread, once per kernel channel (start, state,
// stop) and at completion. Each cache line the proxy thread touches moves
// from one core to the other (measured on GPU: ~100 ns a line in a VM), so
// everything those updates need is in the first line; the proxy counters are
// read only once proxy events have been seen.
struct alignas(64) Slot {
  // Line 0: completion.
  std::atomic<uint32_t> state;
  std::atomic<uint32_t> kind;
  std::atomic<uint64_t> id;
  Context* ctx;
  std::atomic<uint64_t> gpu_min;
  std::atomic<uint64_t> gpu_max;
  std::atomic<uint32_t> expect_channels;  // 0 with tracked: no kernel expected
  std::atomic<uint32_t> tracked;          // completion is tracked for this op
  std::atomic<uint32_t> enqueued;
  std::atomic<uint32_t> done;
  std::atomic<uint32_t> kernel_started;
  std::atomic<uint32_t> kernel_stopped;
  // Line 1.
  std::atomic<uint32_t> proxy_started;
  std::atomic<uint32_t> proxy_stopped;
  std::atomic<uint64_t> proxy_bytes;
  std::atomic<uint64_t> op_id;  // ProxyOp/ProxyStep/KernelCh: the Op served
  Slot* parent;                 // validated parent handle
  Slot* op;                     // the Op slot this event serves (null: none)
  uint64_t start_ns;  // ticks (clock.h)
  uint64_t ptimer_start;
  uint64_t ptimer_stop;
  // Line 2.
  uint64_t step_bytes;  // ProxyStep: last transSize
  uint32_t raw;         // raw records are written for this event
  uint32_t has_ptimer;  // bit 0: start, bit 1: stop
  // ProxyOp progress: channel | is_send << 8 | (nsteps & 0xffffff) << 9 ... see PackPx*.
  std::atomic<uint64_t> px_desc;
  // last step started (low 32 bits) | last state << 32 | stopped << 63.
  std::atomic<uint64_t> px_progress;
  std::atomic<uint64_t> px_update_ns;  // ticks
  // Lines 3 and 4.
  // Op: the record being built, pushed at stopEvent; then, when the
  // completing thread has no room of its own, its completion record, for
  // the writer to collect (ThreadBuf::done_in_slot).
  alignas(64) Rec rec;
};
static_assert(sizeof(Slot) == 320, "Slot is five cache lines");

// ProxyOp descriptor packing (for the writer's stuck reports).
inline uint64_t PackPxDesc(uint32_t channel, bool is_send, int32_t nsteps, int32_t peer) {
  return uint64_t{channel & 0xff} | (uint64_t{is_send} << 8) | (uint64_t(uint32_t(nsteps) & 0x7fffff) << 9) |
         (uint64_t(uint32_t(peer)) << 32);
}
inline uint32_t PxChannel(uint64_t d) { return static_cast<uint32_t>(d & 0xff); }
inline bool PxIsSend(uint64_t d) { return (d >> 8) & 1; }
inline int32_t PxNsteps(uint64_t d) { return static_cast<int32_t>((d >> 9) & 0x7fffff); }
inline int32_t PxPeer(uint64_t d) { return static_cast<int32_t>(static_cast<uint32_t>(d >> 32)); }
inline uint64_t PackPxProgress(int32_t step, uint32_t state, bool stopped) {
  return uint64_t(uint32_t(step)) | (uint64_t{state & 0x7fffffff} << 32) | (uint64_t{stopped} << 63);
}
inline int32_t PxStep(uint64_t p) { return static_cast<int32_t>(static_cast<uint32_t>(p)); }
inline uint32_t PxState(uint64_t p) { return static_cast<uint32_t>((p >> 32) & 0x7fffffff); }
inline bool PxStopped(uint64_t p) { return (p >> 63) & 1; }

// Written by the owning thread only (OwnerIncrement: no locked
// instruction), read by the writer.
struct ThreadCounters {
  std::atomic<uint64_t> recorded{0};
  std::atomic<uint64_t> ops_completed{0};
  std::atomic<uint64_t> ring_full{0};
  std::atomic<uint64_t> pool_exhausted{0};
  // Operations recorded without completion tracking: no handle was free, so
  // the op took a spare one (Profiler::SpareSlot).
  std::atomic<uint64_t> untracked_ops{0};
  std::atomic<uint64_t> foreign_parent{0};
  std::atomic<uint64_t> bad_parent{0};
};

// Adds one to a counter that only the calling thread writes (others may
// read it): a plain load and store, no locked instruction. Never for a
// counter two threads write: their increments would be lost.
template <typename T>
inline T OwnerIncrement(std::atomic<T>& a) {
  const T n = a.load(std::memory_order_relaxed) + 1;
  a.store(n, std::memory_order_relaxed);
  return n;
}

// An operation's kernel-channel fields (kernel_started, kernel_stopped,
// gpu_min, gpu_max) have one writer: NCCL makes every kernel-channel call of
// an operation from its communicator's proxy progress thread (the profiler
// proxy connection's progress function). So they are updated with a plain
// load and store, no locked instruction: on H200 hosts each locked update
// there cost NCCL's proxy thread 40 to 85 ns in place, three per channel
// (BENCHMARKS.md, "Locked instructions on NCCL's proxy thread"). The proxy
// counters keep their atomic updates: under PXN, another rank's proxy
// thread in this process may report proxy operations for the same op.
inline void OwnerMin(std::atomic<uint64_t>& a, uint64_t v) {
  if (v < a.load(std::memory_order_relaxed)) a.store(v, std::memory_order_relaxed);
}
inline void OwnerMax(std::atomic<uint64_t>& a, uint64_t v) {
  if (v > a.load(std::memory_order_relaxed)) a.store(v, std::memory_order_relaxed);
}

// Per thread, a power of two: 1 MiB, room for a burst of 8,192 records
// between two drains (the writer drains every 10 ms, every 1 ms in a burst).
constexpr uint32_t kRingRecords = 8192;
constexpr uint32_t kSlotsPerThread = 4096;  // power of two: ops in flight per thread
// Spare slots per thread (see SpareSlot): operations started but not yet
// stopped at once, when every slot waits for a completion.
constexpr uint32_t kSpareSlots = 256;

enum ThreadBufState : uint32_t { kBufFree = 0, kBufOwned = 1, kBufOrphaned = 2 };

struct ThreadBuf {
  std::atomic<uint32_t> owner{kBufFree};
  std::atomic<uint32_t> tid{0};
  uint32_t index = 0;
  Ring ring;
  Slot* slots = nullptr;
  uint32_t nslots = 0;
  // After the nslots: spare slots for operations recorded without completion
  // tracking when every slot is live (a backlog of completions).
  uint32_t nspare = 0;
  uint32_t spare_cursor = 0;  // owner thread only
  // Completions from CUDA events: the slot every kernel launch of the
  // thread takes in turn, outside the regions of slots. NCCL starts and
  // stops a launch on one thread around cuLaunchKernelEx, one at a time,
  // and the launch's record leaves at its stop: one slot serves them all,
  // so a launch costs no search for a free slot and takes no op's. Its
  // fields that no launch changes are set when a thread claims the buffer
  // (Profiler::InitLaunchSlot). The slot: owner thread only.
  Slot* launch = nullptr;
  uint32_t cursor = 0;      // owner thread only
  uint64_t next_local = 0;  // owner thread only: event id counter
  ThreadCounters counters;
  // Completions of this buffer's operations that the completing thread could
  // not put in a ring (it has no buffer, or its ring is full): each waits,
  // built, in the operation's slot, which stays live until the writer has
  // taken it. Flag k is slots[k]. Any thread raises; the writer collects.
  PendingBits<kSlotsPerThread + kSpareSlots> done_in_slot;
};


// For tests and stuck reports: an event id's thread index (Profiler::NewId).
inline uint32_t ThreadOfId(uint64_t id) { return static_cast<uint32_t>(id >> 40); }

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CORE_STATE_H_
