// Rec: the fixed-size record a hot-path call copies into its thread's ring,
// and the writer thread turns into trace.proto. 128 bytes, trivially
// copyable, no pointers the writer must free. String fields are NCCL's static
// strings (see event.h).

#ifndef PLUGIN_CORE_RECORD_H_
#define PLUGIN_CORE_RECORD_H_

#include <stdint.h>

#include <type_traits>

namespace ncclwatch::plugin {

enum RecKind : uint8_t {
  kRecEmpty = 0,
  kRecOp = 1,       // Coll/P2p enqueued (op payload)
  kRecOpDone = 2,   // its completion (done payload)
  kRecEvStart = 3,  // raw event start (ev payload)
  kRecEvStop = 4,   // raw event stop (stop payload)
  kRecEvState = 5,  // raw recordEventState (st payload)
  kRecLaunch = 6,   // a kernel launch with its CUDA events (launch payload; NCCLWATCH_COMPLETIONS=events)
};

enum RecFlags : uint16_t {
  kFlagCollnet = 1 << 0,
  kFlagNvls = 1 << 1,
  kFlagGraph = 1 << 2,
  kFlagHasGpu = 1 << 3,
  kFlagIsSend = 1 << 4,
  kFlagIntraBatchSync = 1 << 5,
  kFlagIsComplete = 1 << 6,
  kFlagUseIntraSync = 1 << 7,
  kFlagHasGpuStop = 1 << 8,
  kFlagNetIb = 1 << 9,
  kFlagNetSocket = 1 << 10,
  kFlagTracked = 1 << 11,  // Op: completion will be reported (OpDone)
  // Completions from CUDA events: the launch (and so its ops) has none.
  // kFlagGraph on a launch or op: the stream was capturing a graph.
  kFlagNoEvent = 1 << 12,   // no event was free, or recording one failed
  kFlagNoLaunch = 1 << 13,  // Op: no launch before it on its thread and communicator
  kFlagNoStartEvent = 1 << 14,  // launch: no event before its kernel (NCCLWATCH_START_EVENTS=0)
  // Op (v7): a symmetric-memory collective; op.kernel_variant holds what
  // op.proto holds for the others.
  kFlagSymColl = 1 << 15,
};

struct Rec {
  uint8_t kind;    // RecKind
  uint8_t etype;   // EventKind
  uint16_t comm;   // file-local communicator index
  uint16_t flags;  // RecFlags
  uint8_t nchannels;
  uint8_t nwarps;
  uint64_t id;         // event id
  // Times in the tick source of the hot path (Ticks(): TSC ticks or
  // CLOCK_MONOTONIC ns, clock.h); the writer converts them when it stages
  // the record (StagedRec::t0_ns), the one place units change.
  uint64_t t0_ticks;   // start / stop / state time
  uint64_t t1;         // Op: enqueue end (ticks); EvStart: OS thread id
  uint64_t parent_id;  // parent event id (0: none); ProxyOp/KernelCh: the Op
  union {
    struct {
      uint64_t seq;
      const char* func;
      uint64_t count;
      const char* datatype;
      const char* algo;
      // A symmetric kernel (kFlagSymColl) has a variant and no protocol
      // (NCCL 2.31 passes "" for it); the others a protocol and no variant.
      union {
        const char* proto;
        const char* kernel_variant;  // kFlagSymColl
      };
      uint64_t send_buff;
      uint64_t recv_buff;
      // A collective names a root, a point-to-point operation a peer.
      union {
        int32_t root;  // Coll
        int32_t peer;  // P2p
      };
      uint32_t p2p_seq;
      union {
        uint32_t op;        // API v1: the reduction op
        uint64_t user_tag;  // API v2+ (set from v7)
      };
      union {
        uint64_t traffic_bytes;  // v1, v2
        uint64_t launch_id;      // v5+ with completions from CUDA events: the launch's event id (0: none)
      };
    } op;
    struct {
      uint64_t gpu_start;
      uint64_t gpu_stop;
      uint32_t kernel_channels;
      uint32_t proxy_ops;
      uint64_t proxy_bytes;
    } done;
    struct {
      // GroupApi/CollApi/P2pApi/KernelLaunch/CeColl
      uint64_t seq;
      const char* func;
      uint64_t count;
      const char* datatype;
      uint64_t stream;
      uint64_t send_buff;
      uint64_t recv_buff;
      const char* sync_strategy;
      int32_t root;
      uint32_t batch_size;
      uint32_t num_batches;
      uint32_t ce_seq;
      union {
        int32_t group_depth;  // GroupApi
        int32_t nranks;       // CeSync
        uint64_t user_tag;    // CollApi, P2pApi, CeColl (v7)
      };
    } api;
    struct {
      // ProxyOp / ProxyStep / KernelCh / KernelPhase (its phase id in `step`)
      int64_t pid;
      int32_t channel;
      int32_t peer;
      int32_t nsteps;
      int32_t chunk_size;
      int32_t step;
      int32_t rank;  // descriptor's originating rank (differs under PXN)
      uint64_t ptimer;
    } px;
    struct {
      // NetPlugin: id and a copy of the IB or socket payload.
      int64_t id;
      uint32_t type;
      int32_t device;  // IB device / socket fd
      uint64_t wr_id;
      int32_t opcode;  // IB opcode / socket op
      int32_t qp_num;
      uint64_t length;
    } net;
    struct {
      // KernelLaunch with completions from CUDA events.
      uint64_t stream;
      void* events;  // StreamEvents* (null: none recorded)
      uint64_t n;    // the launch's number on its stream: its events are pair n % kRing
      uint32_t tid;
      // Sampled (NCCLWATCH_EVENT_INTERVAL_US): no events of its own; `n` is
      // the number the stream's next recording launch takes, read at its
      // stop (its place in stream order: before that launch). A later event
      // proves it.
      uint32_t unsampled;
    } launch;
    struct {
      int32_t num_ops;
      int32_t pad;
      uint64_t total_bytes;
    } batch;
    struct {
      uint64_t ptimer;  // EvStop (KernelCh) / EvState (KernelChStop)
      uint64_t trans_size;
      uint64_t net_data;
      uint32_t state;
      int32_t steps;
      int32_t appended_proxy_ops;
    } st;
  };
};

static_assert(sizeof(Rec) == 128, "Rec must stay 128 bytes");
static_assert(std::is_trivially_copyable<Rec>::value, "Rec is copied with memcpy");

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CORE_RECORD_H_
