// NCCL's profiler plugin ABI, version 1 (NCCL 2.23): numeric function,
// datatype, algorithm and protocol indices, the communicator's hash on each
// Coll and P2p, and ProxyOp progress reported as ProxyOp states.
//
// Declarations only, as profiler_common.h. The offsets the adapters depend
// on are asserted at the bottom for x86-64 and aarch64 (LP64).

#ifndef PLUGIN_ABI_PROFILER_V1_H_
#define PLUGIN_ABI_PROFILER_V1_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "plugin/abi/profiler_common.h"

namespace ncclwatch::nccl {

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

struct ProfilerV1 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask);
  Result (*startEvent)(void* context, void** eHandle, DescrV1* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV1* eStateArgs);
  Result (*finalize)(void* context);
};

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
#endif

}  // namespace ncclwatch::nccl

#endif  // PLUGIN_ABI_PROFILER_V1_H_
