// NCCL's profiler plugin ABI, version 4 (NCCL 2.27): the communicator moves
// from each descriptor to init (with NCCL's logger), Coll and P2p carry their
// exact channel count, a kernel channel its GPU start time (pTimer), and the
// state arguments change: ProxyStep bytes, NetPlugin updates and the kernel
// channel's stop time.
//
// Declarations only, as profiler_common.h. The offsets the adapters depend
// on are asserted at the bottom for x86-64 and aarch64 (LP64).

#ifndef PLUGIN_ABI_PROFILER_V4_H_
#define PLUGIN_ABI_PROFILER_V4_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "plugin/abi/profiler_common.h"

namespace ncclwatch::nccl {

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

// State arguments of v4..v7.
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

struct ProfilerV4 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                 int nranks, int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, DescrV4* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgsV4* eStateArgs);
  Result (*finalize)(void* context);
};

#if defined(__LP64__)
static_assert(offsetof(DescrV4, coll.seqNumber) == 24 && offsetof(DescrV4, coll.func) == 32);
static_assert(offsetof(DescrV4, coll.count) == 56 && offsetof(DescrV4, coll.root) == 64);
static_assert(offsetof(DescrV4, coll.datatype) == 72 && offsetof(DescrV4, coll.nChannels) == 80);
static_assert(offsetof(DescrV4, coll.algo) == 88 && offsetof(DescrV4, coll.proto) == 96);
static_assert(offsetof(DescrV4, p2p.count) == 48 && offsetof(DescrV4, p2p.peer) == 56);
static_assert(offsetof(DescrV4, p2p.nChannels) == 60);
static_assert(offsetof(DescrV4, kernelCh.pTimer) == 32);
static_assert(sizeof(StateArgsV4) == 8);
#endif

}  // namespace ncclwatch::nccl

#endif  // PLUGIN_ABI_PROFILER_V4_H_
