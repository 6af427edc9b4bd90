// NCCL's profiler plugin ABI, version 6 (NCCL 2.29, still current in 2.30):
// v5 plus the copy-engine (CE) collective events.
//
// Declarations only, as profiler_common.h. The offsets the adapters depend
// on are asserted at the bottom for x86-64 and aarch64 (LP64).

#ifndef PLUGIN_ABI_PROFILER_V6_H_
#define PLUGIN_ABI_PROFILER_V6_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "plugin/abi/profiler_common.h"
#include "plugin/abi/profiler_v4.h"

namespace ncclwatch::nccl {

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

// v6 keeps v4's state arguments.
using StateArgsV6 = StateArgsV4;

struct ProfilerV6 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes, int nranks,
                 int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, DescrV6* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV6* eStateArgs);
  Result (*finalize)(void* context);
};

#if defined(__LP64__)
static_assert(offsetof(DescrV6, coll.parentGroup) == 104);
static_assert(offsetof(DescrV6, ceColl.syncStrategy) == 80 && offsetof(DescrV6, ceColl.intraBatchSync) == 88);
static_assert(offsetof(DescrV6, ceColl.batchSize) == 92 && offsetof(DescrV6, ceColl.ceSeqNum) == 100);
static_assert(offsetof(DescrV6, ceColl.stream) == 104);
static_assert(offsetof(DescrV6, ceCollSync.nRanks) == 28);
static_assert(offsetof(DescrV6, ceCollBatch.totalBytes) == 32 && offsetof(DescrV6, ceCollBatch.useIntraSync) == 40);
static_assert(offsetof(ProfilerV6, finalize) == 40 && sizeof(ProfilerV6) == 48);
#endif

}  // namespace ncclwatch::nccl

#endif  // PLUGIN_ABI_PROFILER_V6_H_
