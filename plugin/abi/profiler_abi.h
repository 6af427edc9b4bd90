// Our own declarations of NCCL's profiler plugin ABI, versions 1 to 7.
//
// NCCL looks up `ncclProfiler_vN` (newest first) and calls through the
// function table it finds there. The layouts below are facts of that ABI,
// written out here so that the plugin builds against any NCCL, or none. Each
// version has its own descriptor type: the leading `type` tag is 8 bits wide
// before v5 and 64 bits from v5 on, so a descriptor of one version must never
// be read through another version's type. The offsets the adapters depend on
// are asserted at the bottom of this file for x86-64 and aarch64 (LP64).
//
// Nothing here allocates or has behaviour; it is declarations only.

#ifndef PLUGIN_ABI_PROFILER_ABI_H_
#define PLUGIN_ABI_PROFILER_ABI_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

namespace ncclwatch::nccl {

// ncclResult_t: the plugin only ever returns kSuccess, or an error from init.
using Result = int;
inline constexpr Result kSuccess = 0;
inline constexpr Result kInternalError = 3;
inline constexpr Result kInvalidUsage = 5;

// NCCL's logger, passed to init from v4 on.
enum LogLevel : int { kLogNone = 0, kLogVersion = 1, kLogWarn = 2, kLogInfo = 3, kLogAbort = 4, kLogTrace = 5 };
inline constexpr unsigned long kLogSubsysInit = 1;
inline constexpr unsigned long kLogSubsysProfile = 16384;
using Logger = void (*)(LogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// Event type bits; also the activation mask bits.
enum EventType : uint64_t {
  kGroup = 1u << 0,
  kColl = 1u << 1,
  kP2p = 1u << 2,
  kProxyOp = 1u << 3,
  kProxyStep = 1u << 4,
  kProxyCtrl = 1u << 5,
  kKernelCh = 1u << 6,
  kNetPlugin = 1u << 7,
  kGroupApi = 1u << 8,      // v5+
  kCollApi = 1u << 9,       // v5+
  kP2pApi = 1u << 10,       // v5+
  kKernelLaunch = 1u << 11, // v5+
  kCeColl = 1u << 12,       // v6+
  kCeSync = 1u << 13,       // v6+
  kCeBatch = 1u << 14,      // v6+
  kKernelPhase = 1u << 15,  // v7+: NCCL sets kKernelCh too whenever this is set
};

// Event states (one enum shared by all versions; some values are version specific).
enum EventState : int {
  kProxyOpSendPosted = 0,  // 0..7: ProxyOp states, v1..v3 only
  kProxyOpSendRemFifoWait = 1,
  kProxyOpSendTransmitted = 2,
  kProxyOpSendDone = 3,
  kProxyOpRecvPosted = 4,
  kProxyOpRecvReceived = 5,
  kProxyOpRecvTransmitted = 6,
  kProxyOpRecvDone = 7,
  kProxyStepSendGPUWait = 8,
  kProxyStepSendWait = 9,
  kProxyStepRecvWait = 10,
  kProxyStepRecvFlushWait = 11,
  kProxyStepRecvGPUWait = 12,
  kProxyCtrlIdle = 13,
  kProxyCtrlActive = 14,
  kProxyCtrlSleep = 15,
  kProxyCtrlWakeup = 16,
  kProxyCtrlAppend = 17,
  kProxyCtrlAppendEnd = 18,
  kProxyOpInProgress = 19,    // v4+
  kProxyStepSendPeerWait = 20, // v4+
  kNetPluginUpdate = 21,      // v4+
  kKernelChStop = 22,         // v4+
  kGroupStartApiStop = 23,    // v5+
  kGroupEndApiStart = 24,     // v5+
  kCeCollStart = 25,          // v6+
  kCeCollComplete = 26,
  kCeSyncStart = 27,
  kCeSyncComplete = 28,
  kCeBatchStart = 29,
  kCeBatchComplete = 30,
  kKernelPhaseStop = 31,      // v7+: args in StateArgsV7::kernelCh
};
inline constexpr int kMaxEventState = 31;

// Network plugin event payloads (NetPlugin descriptor `data`), identified by
// the 64-bit `id`: low 16 bits version, next 16 bits the network type.
inline constexpr int64_t kNetTypeIb = int64_t{1} << 16;
inline constexpr int64_t kNetTypeSocket = int64_t{2} << 16;
inline constexpr int64_t kNetVersionMask = 0xffff;
inline constexpr int64_t kNetTypeMask = int64_t{0xffff} << 16;

struct NetIbDescrV1 {
  uint8_t type;  // 1: QP event
  struct {
    int device;
    uint64_t wr_id;
    int opcode;
    int qpNum;
    size_t length;
  } qp;
};

struct NetSocketDescrV1 {
  uint8_t type;  // 1: socket event
  struct {
    int fd;
    int op;
    size_t length;
  } sock;
};

// ---------------------------------------------------------------- v1 (2.23)
struct DescrV1 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      uint8_t func;  // ncclFunc_t index
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      uint8_t datatype;  // ncclDataType_t
      uint32_t op;
      size_t trafficBytes;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      uint8_t algo;   // NCCL_ALGO_* index
      uint8_t proto;  // NCCL_PROTO_* index
      int isCollnet;
      int isNvls;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      uint8_t func;
      void* buff;
      uint8_t datatype;
      size_t count;
      int peer;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
  };
};

// State arguments of v1..v3.
union StateArgsV1 {
  struct {
    size_t transSize;
    int steps;
  } proxyOp;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
};

// ---------------------------------------------------------------- v2 (2.24)
struct DescrV2 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      size_t trafficBytes;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
  };
};

// ---------------------------------------------------------------- v3 (2.26)
struct DescrV3 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

// ---------------------------------------------------------------- v4 (2.27)
struct DescrV4 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;  // GPU globaltimer at kernel start on this channel
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

// State arguments of v4..v6.
union StateArgsV4 {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;  // GPU globaltimer at kernel stop on this channel
  } kernelCh;
};

// ---------------------------------------------------------------- v5 (2.28)
// The API-level events (GroupApi, CollApi, P2pApi, KernelLaunch) appear, the
// type tag widens to 64 bits, and a Coll's parent becomes its CollApi event
// (the v4 group parent moves to parentGroup).
struct DescrV5 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

// ---------------------------------------------------------------- v6 (2.29)
// v5 plus the copy-engine (CE) collective events.
struct DescrV6 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void* stream;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
  };
};

// ---------------------------------------------------------------- v7 (2.31)
// Read from NCCL 2.31.2-1 (NVIDIA/nccl commit 8898068,
// src/include/plugin/profiler/profiler_v7.h and plugin/nccl_profiler.h).
// v6 plus: a per-call `userTag` (the `userProfilerTag` of the ncclCollConfig_t
// given to the nccl*Config() entry points; 0 untagged) at the end of collApi,
// p2pApi, coll, p2p and ceColl; `kernelVariant` and `isSymColl` on coll; and
// the KernelPhase sub-event of a kernel channel. The fields before each
// `userTag` are v6's, at v6's offsets.
struct DescrV7 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
      uint64_t userTag;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
      uint64_t userTag;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
      const char* kernelVariant;  // symmetric kernels only (then proto is "" and algo a suffix of it); else null
      bool isSymColl;
      uint64_t userTag;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
      uint64_t userTag;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void* stream;
      uint64_t userTag;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
    // One phase of one kernel channel's work, its parent the KernelCh event.
    struct {
      uint8_t channelId;
      uint8_t phaseId;        // kPhaseInitialSync, kPhaseCompute, kPhaseFinalSync
      const char* phaseName;  // "initial_sync", "compute", "final_sync"
      uint64_t pTimer;        // GPU globaltimer at the phase's start
    } kernelPhase;
  };
};

// KernelPhase phase ids.
inline constexpr uint8_t kPhaseInitialSync = 0;
inline constexpr uint8_t kPhaseCompute = 1;
inline constexpr uint8_t kPhaseFinalSync = 2;

// v7's state arguments have v4's shape: the KernelPhaseStop state's stop time
// is in kernelCh.pTimer, as KernelChStop's is.
using StateArgsV7 = StateArgsV4;

// ------------------------------------------------------------ function tables
struct ProfilerV1 {  // v1, v2 and v3 share this shape, with their own descriptor types
  const char* name;
  Result (*init)(void** context, int* eActivationMask);
  Result (*startEvent)(void* context, void** eHandle, DescrV1* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV1* eStateArgs);
  Result (*finalize)(void* context);
};
struct ProfilerV2 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask);
  Result (*startEvent)(void* context, void** eHandle, DescrV2* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV1* eStateArgs);
  Result (*finalize)(void* context);
};
struct ProfilerV3 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask);
  Result (*startEvent)(void* context, void** eHandle, DescrV3* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV1* eStateArgs);
  Result (*finalize)(void* context);
};
struct ProfilerV4 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                 int nranks, int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, DescrV4* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV4* eStateArgs);
  Result (*finalize)(void* context);
};
struct ProfilerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes, int nranks,
                 int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, DescrV5* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV4* eStateArgs);
  Result (*finalize)(void* context);
};
struct ProfilerV6 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes, int nranks,
                 int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, DescrV6* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV4* eStateArgs);
  Result (*finalize)(void* context);
};
struct ProfilerV7 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes, int nranks,
                 int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, DescrV7* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV7* eStateArgs);
  Result (*finalize)(void* context);
};

// ------------------------------------------------------------- layout checks
#if defined(__LP64__)
static_assert(offsetof(DescrV1, parentObj) == 8 && offsetof(DescrV1, rank) == 16 && offsetof(DescrV1, coll) == 24);
static_assert(offsetof(DescrV1, coll.seqNumber) == 40 && offsetof(DescrV1, coll.func) == 48);
static_assert(offsetof(DescrV1, coll.count) == 72 && offsetof(DescrV1, coll.root) == 80);
static_assert(offsetof(DescrV1, coll.datatype) == 84 && offsetof(DescrV1, coll.op) == 88);
static_assert(offsetof(DescrV1, coll.trafficBytes) == 96 && offsetof(DescrV1, coll.nMaxChannels) == 104);
static_assert(offsetof(DescrV1, coll.algo) == 106 && offsetof(DescrV1, coll.isCollnet) == 108);
static_assert(offsetof(DescrV1, p2p.func) == 40 && offsetof(DescrV1, p2p.count) == 64 && offsetof(DescrV1, p2p.peer) == 72);
static_assert(offsetof(DescrV1, proxyOp.channelId) == 28 && offsetof(DescrV1, proxyOp.peer) == 32);
static_assert(offsetof(DescrV1, proxyOp.isSend) == 44);
static_assert(sizeof(StateArgsV1) == 16);

static_assert(offsetof(DescrV2, coll.func) == 48 && offsetof(DescrV2, coll.datatype) == 88);
static_assert(offsetof(DescrV2, coll.trafficBytes) == 96 && offsetof(DescrV2, coll.nMaxChannels) == 104);
static_assert(offsetof(DescrV2, coll.algo) == 112 && offsetof(DescrV2, coll.proto) == 120);
static_assert(offsetof(DescrV2, p2p.peer) == 72);

static_assert(offsetof(DescrV3, coll.nMaxChannels) == 96 && offsetof(DescrV3, coll.algo) == 104);
static_assert(offsetof(DescrV3, coll.proto) == 112 && offsetof(DescrV3, kernelCh.channelId) == 24);
static_assert(offsetof(DescrV3, netPlugin.data) == 32);

static_assert(offsetof(DescrV4, coll.seqNumber) == 24 && offsetof(DescrV4, coll.func) == 32);
static_assert(offsetof(DescrV4, coll.count) == 56 && offsetof(DescrV4, coll.root) == 64);
static_assert(offsetof(DescrV4, coll.datatype) == 72 && offsetof(DescrV4, coll.nChannels) == 80);
static_assert(offsetof(DescrV4, coll.algo) == 88 && offsetof(DescrV4, coll.proto) == 96);
static_assert(offsetof(DescrV4, p2p.count) == 48 && offsetof(DescrV4, p2p.peer) == 56);
static_assert(offsetof(DescrV4, p2p.nChannels) == 60);
static_assert(offsetof(DescrV4, kernelCh.pTimer) == 32);
static_assert(sizeof(StateArgsV4) == 8);

static_assert(offsetof(DescrV5, parentObj) == 8 && offsetof(DescrV5, rank) == 16 && offsetof(DescrV5, coll) == 24);
static_assert(offsetof(DescrV5, groupApi.groupDepth) == 28);
static_assert(offsetof(DescrV5, collApi.count) == 32 && offsetof(DescrV5, collApi.root) == 48);
static_assert(offsetof(DescrV5, collApi.stream) == 56 && offsetof(DescrV5, collApi.graphCaptured) == 64);
static_assert(offsetof(DescrV5, p2pApi.stream) == 48 && offsetof(DescrV5, p2pApi.graphCaptured) == 56);
static_assert(offsetof(DescrV5, coll.parentGroup) == 104 && offsetof(DescrV5, p2p.parentGroup) == 64);
static_assert(offsetof(DescrV5, kernelCh.pTimer) == 32 && offsetof(DescrV5, netPlugin.data) == 32);

static_assert(offsetof(DescrV6, coll.parentGroup) == 104);
static_assert(offsetof(DescrV6, ceColl.syncStrategy) == 80 && offsetof(DescrV6, ceColl.intraBatchSync) == 88);
static_assert(offsetof(DescrV6, ceColl.batchSize) == 92 && offsetof(DescrV6, ceColl.ceSeqNum) == 100);
static_assert(offsetof(DescrV6, ceColl.stream) == 104);
static_assert(offsetof(DescrV6, ceCollSync.nRanks) == 28);
static_assert(offsetof(DescrV6, ceCollBatch.totalBytes) == 32 && offsetof(DescrV6, ceCollBatch.useIntraSync) == 40);

static_assert(offsetof(ProfilerV6, finalize) == 40 && sizeof(ProfilerV6) == 48);

static_assert(offsetof(DescrV7, parentObj) == 8 && offsetof(DescrV7, rank) == 16 && offsetof(DescrV7, coll) == 24);
static_assert(offsetof(DescrV7, groupApi.groupDepth) == 28);
static_assert(offsetof(DescrV7, collApi.root) == 48 && offsetof(DescrV7, collApi.graphCaptured) == 64);
static_assert(offsetof(DescrV7, collApi.userTag) == 72);
static_assert(offsetof(DescrV7, p2pApi.graphCaptured) == 56 && offsetof(DescrV7, p2pApi.userTag) == 64);
static_assert(offsetof(DescrV7, coll.count) == 56 && offsetof(DescrV7, coll.nChannels) == 80);
static_assert(offsetof(DescrV7, coll.algo) == 88 && offsetof(DescrV7, coll.parentGroup) == 104);
static_assert(offsetof(DescrV7, coll.kernelVariant) == 112 && offsetof(DescrV7, coll.isSymColl) == 120);
static_assert(offsetof(DescrV7, coll.userTag) == 128);
static_assert(offsetof(DescrV7, p2p.peer) == 56 && offsetof(DescrV7, p2p.nChannels) == 60);
static_assert(offsetof(DescrV7, p2p.parentGroup) == 64 && offsetof(DescrV7, p2p.userTag) == 72);
static_assert(offsetof(DescrV7, proxyOp.channelId) == 28 && offsetof(DescrV7, proxyOp.isSend) == 44);
static_assert(offsetof(DescrV7, kernelCh.pTimer) == 32 && offsetof(DescrV7, netPlugin.data) == 32);
static_assert(offsetof(DescrV7, ceColl.syncStrategy) == 80 && offsetof(DescrV7, ceColl.ceSeqNum) == 100);
static_assert(offsetof(DescrV7, ceColl.stream) == 104 && offsetof(DescrV7, ceColl.userTag) == 112);
static_assert(offsetof(DescrV7, ceCollBatch.totalBytes) == 32);
static_assert(offsetof(DescrV7, kernelPhase.channelId) == 24 && offsetof(DescrV7, kernelPhase.phaseId) == 25);
static_assert(offsetof(DescrV7, kernelPhase.phaseName) == 32 && offsetof(DescrV7, kernelPhase.pTimer) == 40);
static_assert(sizeof(DescrV7) == 136);
static_assert(offsetof(ProfilerV7, finalize) == 40 && sizeof(ProfilerV7) == 48);
#endif

}  // namespace ncclwatch::nccl

#endif  // PLUGIN_ABI_PROFILER_ABI_H_
