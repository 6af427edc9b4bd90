// The version-neutral core of libnccl-net-faulty.so. The transport
// (gpu/faulty_net.c): one function per entry of NCCL's net plugin table, with
// sizes as 64-bit integers, which gpu/faulty_net_abi.c wraps into each
// exported ABI version's table. The faults and the log
// (gpu/faulty_net_fault.c), which the transport consults.
//
// Hidden in the .so (only the ncclNetPlugin_v* tables and
// ncclwatch_net_fault_arm are exported), whatever -fvisibility the build uses.
// Thread safety: as NCCL's table: a comm from one thread at a time.

#ifndef GPU_FAULTY_NET_CORE_H_
#define GPU_FAULTY_NET_CORE_H_

#include <stdint.h>

#include "faulty_net.h"

#define FAULTY_NET_HIDDEN __attribute__((visibility("hidden")))

// ---- Log and faults (gpu/faulty_net_fault.c) ----

// Where FaultyNetLog writes: NCCL's logger from init on, stderr before.
FAULTY_NET_HIDDEN void FaultyNetSetLogger(ncclDebugLogger_t log);
__attribute__((format(printf, 4, 5))) FAULTY_NET_HIDDEN void FaultyNetLog(
    ncclDebugLogLevel level, const char* file, int line, const char* fmt, ...);
#define FAULTY_NET_LOG(level, ...) \
  FaultyNetLog(level, __FILE__, __LINE__, __VA_ARGS__)
// CLOCK_MONOTONIC in nanoseconds.
FAULTY_NET_HIDDEN int64_t FaultyNetNowNs(void);
// Reads NET_FAULT_ARM_AFTER_SEC and NET_FAULT_MODE (at init).
FAULTY_NET_HIDDEN void FaultyNetFaultInit(void);
// isend was called on send comm `comm_id` (`desc` names its connection):
// under "link", the first such comm after arming is the one that stops.
FAULTY_NET_HIDDEN void FaultyNetFaultOnIsend(uint64_t comm_id,
                                             const char* desc);
// Whether the fault holds back, now, the message at the head of send comm
// `comm_id`: `started` when some of its bytes are out; `*not_before` is the
// message's "slow" deadline, 0 until this sets it.
FAULTY_NET_HIDDEN int FaultyNetFaultHolds(uint64_t comm_id, int started,
                                          int64_t* not_before);

// ---- Transport (gpu/faulty_net.c) ----

FAULTY_NET_HIDDEN ncclResult_t FaultyNetInit(ncclDebugLogger_t log);
FAULTY_NET_HIDDEN ncclResult_t FaultyNetDevices(int* ndev);
// The device's properties, in the newest layout the plugin speaks.
FAULTY_NET_HIDDEN void FaultyNetProperties(ncclNetProperties_v9_t* props);
FAULTY_NET_HIDDEN ncclResult_t FaultyNetListen(int dev, void* handle,
                                               void** listen_comm);
FAULTY_NET_HIDDEN ncclResult_t
FaultyNetConnect(int dev, void* handle, void** send_comm,
                 ncclNetDeviceHandle_v8_t** dev_comm);
FAULTY_NET_HIDDEN ncclResult_t FaultyNetAccept(
    void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v8_t** dev_comm);
FAULTY_NET_HIDDEN ncclResult_t FaultyNetRegMr(void* comm, void* data,
                                              size_t size, int type,
                                              void** mhandle);
FAULTY_NET_HIDDEN ncclResult_t FaultyNetDeregMr(void* comm, void* mhandle);
FAULTY_NET_HIDDEN ncclResult_t FaultyNetIsend(void* send_comm, void* data,
                                              uint64_t size, void** request);
// n must be 1 (the device's maxRecvs); `size` is data[0]'s posted size.
FAULTY_NET_HIDDEN ncclResult_t FaultyNetIrecv(void* recv_comm, int n,
                                              void** data, uint64_t size,
                                              void** request);
FAULTY_NET_HIDDEN ncclResult_t FaultyNetIflush(void* recv_comm, int n,
                                               void** data, int* sizes,
                                               void** mhandles, void** request);
FAULTY_NET_HIDDEN ncclResult_t FaultyNetTest(void* request, int* done,
                                             int* sizes);
FAULTY_NET_HIDDEN ncclResult_t FaultyNetCloseComm(void* comm);
FAULTY_NET_HIDDEN ncclResult_t FaultyNetCloseListen(void* listen_comm);

#endif  // GPU_FAULTY_NET_CORE_H_
