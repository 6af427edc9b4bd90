// NCCL's profiler plugin ABI, version 3 (NCCL 2.26): v2 without trafficBytes,
// plus the KernelCh and NetPlugin events. v1's state arguments.
//
// Declarations only, as profiler_common.h. The offsets the adapters depend
// on are asserted at the bottom for x86-64 and aarch64 (LP64).

#ifndef PLUGIN_ABI_PROFILER_V3_H_
#define PLUGIN_ABI_PROFILER_V3_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "plugin/abi/profiler_common.h"
#include "plugin/abi/profiler_v1.h"

namespace ncclwatch::nccl {

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

// v3 keeps v1's state arguments.
using StateArgsV3 = StateArgsV1;

struct ProfilerV3 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask);
  Result (*startEvent)(void* context, void** eHandle, DescrV3* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV3* eStateArgs);
  Result (*finalize)(void* context);
};

#if defined(__LP64__)
static_assert(offsetof(DescrV3, coll.nMaxChannels) == 96 && offsetof(DescrV3, coll.algo) == 104);
static_assert(offsetof(DescrV3, coll.proto) == 112 && offsetof(DescrV3, kernelCh.channelId) == 24);
static_assert(offsetof(DescrV3, netPlugin.data) == 32);
#endif

}  // namespace ncclwatch::nccl

#endif  // PLUGIN_ABI_PROFILER_V3_H_
