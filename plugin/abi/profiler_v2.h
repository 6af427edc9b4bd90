// NCCL's profiler plugin ABI, version 2 (NCCL 2.24): v1 with names (strings
// from NCCL's static tables) where v1 had indices, and without the reduction
// op and the CollNet/NVLS flags. v1's state arguments.
//
// Declarations only, as profiler_common.h. The offsets the adapters depend
// on are asserted at the bottom for x86-64 and aarch64 (LP64).

#ifndef PLUGIN_ABI_PROFILER_V2_H_
#define PLUGIN_ABI_PROFILER_V2_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "plugin/abi/profiler_common.h"
#include "plugin/abi/profiler_v1.h"

namespace ncclwatch::nccl {

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

// v2 keeps v1's state arguments.
using StateArgsV2 = StateArgsV1;

struct ProfilerV2 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask);
  Result (*startEvent)(void* context, void** eHandle, DescrV2* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV2* eStateArgs);
  Result (*finalize)(void* context);
};

#if defined(__LP64__)
static_assert(offsetof(DescrV2, coll.func) == 48 && offsetof(DescrV2, coll.datatype) == 88);
static_assert(offsetof(DescrV2, coll.trafficBytes) == 96 && offsetof(DescrV2, coll.nMaxChannels) == 104);
static_assert(offsetof(DescrV2, coll.algo) == 112 && offsetof(DescrV2, coll.proto) == 120);
static_assert(offsetof(DescrV2, p2p.peer) == 72);
#endif

}  // namespace ncclwatch::nccl

#endif  // PLUGIN_ABI_PROFILER_V2_H_
