// NCCL's profiler plugin ABI, version 5 (NCCL 2.28).
//
// The API-level events (GroupApi, CollApi, P2pApi, KernelLaunch) appear, the
// type tag widens to 64 bits, and a Coll's parent becomes its CollApi event
// (the v4 group parent moves to parentGroup).
//
// Declarations only, as profiler_common.h. The offsets the adapters depend
// on are asserted at the bottom for x86-64 and aarch64 (LP64).

#ifndef PLUGIN_ABI_PROFILER_V5_H_
#define PLUGIN_ABI_PROFILER_V5_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "plugin/abi/profiler_common.h"
#include "plugin/abi/profiler_v4.h"

namespace ncclwatch::nccl {

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

// v5 keeps v4's state arguments.
using StateArgsV5 = StateArgsV4;

struct ProfilerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes, int nranks,
                 int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, DescrV5* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV5* eStateArgs);
  Result (*finalize)(void* context);
};

#if defined(__LP64__)
static_assert(offsetof(DescrV5, parentObj) == 8 && offsetof(DescrV5, rank) == 16 && offsetof(DescrV5, coll) == 24);
static_assert(offsetof(DescrV5, groupApi.groupDepth) == 28);
static_assert(offsetof(DescrV5, collApi.count) == 32 && offsetof(DescrV5, collApi.root) == 48);
static_assert(offsetof(DescrV5, collApi.stream) == 56 && offsetof(DescrV5, collApi.graphCaptured) == 64);
static_assert(offsetof(DescrV5, p2pApi.stream) == 48 && offsetof(DescrV5, p2pApi.graphCaptured) == 56);
static_assert(offsetof(DescrV5, coll.parentGroup) == 104 && offsetof(DescrV5, p2p.parentGroup) == 64);
static_assert(offsetof(DescrV5, kernelCh.pTimer) == 32 && offsetof(DescrV5, netPlugin.data) == 32);
#endif

}  // namespace ncclwatch::nccl

#endif  // PLUGIN_ABI_PROFILER_V5_H_
