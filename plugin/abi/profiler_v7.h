// NCCL's profiler plugin ABI, version 7 (NCCL 2.31).
//
// Read from NCCL 2.31.2-1 (NVIDIA/nccl commit 8898068,
// src/include/plugin/profiler/profiler_v7.h and plugin/nccl_profiler.h).
// v6 plus: a per-call `userTag` (the `userProfilerTag` of the ncclCollConfig_t
// given to the nccl*Config() entry points; 0 untagged) at the end of collApi,
// p2pApi, coll, p2p and ceColl; `kernelVariant` and `isSymColl` on coll; and
// the KernelPhase sub-event of a kernel channel. The fields before each
// `userTag` are v6's, at v6's offsets.
//
// Declarations only, as profiler_common.h. The offsets the adapters depend
// on are asserted at the bottom for x86-64 and aarch64 (LP64).

#ifndef PLUGIN_ABI_PROFILER_V7_H_
#define PLUGIN_ABI_PROFILER_V7_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "plugin/abi/profiler_common.h"
#include "plugin/abi/profiler_v4.h"

namespace ncclwatch::nccl {

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

struct ProfilerV7 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes, int nranks,
                 int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, DescrV7* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV7* eStateArgs);
  Result (*finalize)(void* context);
};

#if defined(__LP64__)
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

#endif  // PLUGIN_ABI_PROFILER_V7_H_
