// The ABI versions of libnccl-net-faulty.so: one exported table per version
// of NCCL's net plugin ABI that NCCL 2.28 loads (it tries v11, then v10, v9
// and v8), each a thin adapter over the version-neutral core
// (gpu/faulty_net_core.h). v10 is what 2.28 takes from this library; v9 and
// v8 serve older NCCLs (v8 since 2.19) and are what the test drives too.
//
// The adapters copy arguments field by field (int sizes to 64-bit, the v9
// property layout to v8's) and drop what the core does not use (tags,
// profiler handles, v10's traffic class). No state lives here.
//
// Covered by gpu/faulty_net_test.c (//gpu:faulty_net_test), which drives v8
// and v9 over loopback and checks every table's entries.

#include <string.h>

#include "faulty_net.h"
#include "faulty_net_core.h"

#define EXPORT __attribute__((visibility("default")))

static ncclResult_t GetPropertiesV9(int dev, ncclNetProperties_v9_t* p) {
  if (dev != 0) return ncclInternalError;
  FaultyNetProperties(p);
  return ncclSuccess;
}

static ncclResult_t GetPropertiesV8(int dev, ncclNetProperties_v8_t* p) {
  if (dev != 0) return ncclInternalError;
  ncclNetProperties_v9_t q;
  FaultyNetProperties(&q);
  memset(p, 0, sizeof(*p));
  p->name = q.name;
  p->pciPath = q.pciPath;
  p->guid = q.guid;
  p->ptrSupport = q.ptrSupport;
  p->regIsGlobal = q.regIsGlobal;
  p->speed = q.speed;
  p->port = q.port;
  p->latency = q.latency;
  p->maxComms = q.maxComms;
  p->maxRecvs = q.maxRecvs;
  p->netDeviceType = q.netDeviceType;
  p->netDeviceVersion = q.netDeviceVersion;
  return ncclSuccess;
}

static ncclResult_t IsendV8(void* comm, void* data, int size, int tag,
                            void* mhandle, void** request) {
  if (size < 0) return ncclInternalError;
  return FaultyNetIsend(comm, data, (uint64_t)size, request);
}

static ncclResult_t IrecvV8(void* comm, int n, void** data, int* sizes,
                            int* tags, void** mhandles, void** request) {
  if (n == 1 && sizes[0] < 0) return ncclInternalError;
  return FaultyNetIrecv(comm, n, data, n == 1 ? (uint64_t)sizes[0] : 0,
                        request);
}

static ncclResult_t IsendV9(void* comm, void* data, size_t size, int tag,
                            void* mhandle, void** request) {
  return FaultyNetIsend(comm, data, size, request);
}

static ncclResult_t IrecvV9(void* comm, int n, void** data, size_t* sizes,
                            int* tags, void** mhandles, void** request) {
  return FaultyNetIrecv(comm, n, data, n == 1 ? sizes[0] : 0, request);
}

static ncclResult_t InitV10(ncclDebugLogger_t log, ncclProfilerCallback_t p) {
  return FaultyNetInit(log);
}

static ncclResult_t ConnectV10(int dev, ncclNetCommConfig_v10_t* config,
                               void* handle, void** send_comm,
                               ncclNetDeviceHandle_v10_t** dev_comm) {
  return FaultyNetConnect(dev, handle, send_comm, dev_comm);
}

static ncclResult_t IsendV10(void* comm, void* data, size_t size, int tag,
                             void* mhandle, void* phandle, void** request) {
  return FaultyNetIsend(comm, data, size, request);
}

static ncclResult_t IrecvV10(void* comm, int n, void** data, size_t* sizes,
                             int* tags, void** mhandles, void** phandles,
                             void** request) {
  return FaultyNetIrecv(comm, n, data, n == 1 ? sizes[0] : 0, request);
}

EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = "faulty",
    .init = FaultyNetInit,
    .devices = FaultyNetDevices,
    .getProperties = GetPropertiesV8,
    .listen = FaultyNetListen,
    .connect = FaultyNetConnect,
    .accept = FaultyNetAccept,
    .regMr = FaultyNetRegMr,
    .regMrDmaBuf = NULL,  // NCCL takes a table with one for DMA-BUF support
    .deregMr = FaultyNetDeregMr,
    .isend = IsendV8,
    .irecv = IrecvV8,
    .iflush = FaultyNetIflush,
    .test = FaultyNetTest,
    .closeSend = FaultyNetCloseComm,
    .closeRecv = FaultyNetCloseComm,
    .closeListen = FaultyNetCloseListen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
};

EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = "faulty",
    .init = FaultyNetInit,
    .devices = FaultyNetDevices,
    .getProperties = GetPropertiesV9,
    .listen = FaultyNetListen,
    .connect = FaultyNetConnect,
    .accept = FaultyNetAccept,
    .regMr = FaultyNetRegMr,
    .regMrDmaBuf = NULL,  // NCCL takes a table with one for DMA-BUF support
    .deregMr = FaultyNetDeregMr,
    .isend = IsendV9,
    .irecv = IrecvV9,
    .iflush = FaultyNetIflush,
    .test = FaultyNetTest,
    .closeSend = FaultyNetCloseComm,
    .closeRecv = FaultyNetCloseComm,
    .closeListen = FaultyNetCloseListen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,  // one device: nothing to merge
};

EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = "faulty",
    .init = InitV10,
    .devices = FaultyNetDevices,
    .getProperties = GetPropertiesV9,
    .listen = FaultyNetListen,
    .connect = ConnectV10,
    .accept = FaultyNetAccept,
    .regMr = FaultyNetRegMr,
    .regMrDmaBuf = NULL,  // NCCL takes a table with one for DMA-BUF support
    .deregMr = FaultyNetDeregMr,
    .isend = IsendV10,
    .irecv = IrecvV10,
    .iflush = FaultyNetIflush,
    .test = FaultyNetTest,
    .closeSend = FaultyNetCloseComm,
    .closeRecv = FaultyNetCloseComm,
    .closeListen = FaultyNetCloseListen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};
