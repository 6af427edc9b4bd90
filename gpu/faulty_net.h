// NCCL's external network plugin ABI, versions 8, 9 and 10: the declarations
// that gpu/faulty_net.c exports and gpu/faulty_net_test.c drives.
//
// Read from NCCL 2.28.9-1 (NVIDIA/nccl tag v2.28.9-1,
// src/include/plugin/nccl_net.h, src/include/plugin/net/net_v8.h, net_v9.h,
// net_v10.h, src/include/nccl_device/net_device.h and
// ext-net/example/nccl/common.h, err.h). NCCL is BSD-3-licensed; these are
// declarations only, retyped with NCCL's names so that the two read side by
// side. NCCL 2.28 looks up `ncclNetPlugin_v11` first, then v10, v9, v8 (and
// older), and wraps an older table in its own compatibility layer
// (src/plugin/net/net_v*.cc). The collective-network half of each version is
// left out: the plugin offers none, and NCCL carries on without one.
//
// The offsets of the property structs, which the plugin fills and NCCL
// reads, are asserted at the bottom for LP64 (x86-64 and aarch64).

#ifndef GPU_FAULTY_NET_H_
#define GPU_FAULTY_NET_H_

#include <stddef.h>
#include <stdint.h>

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6
} ncclResult_t;

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

// Subsystem bits of the logger's `flags` (the two the plugin logs under).
#define NCCL_INIT 1
#define NCCL_NET 16

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags,
                                  const char* file, int line, const char* fmt,
                                  ...);
// v10's init also hands over the profiler's callback; the plugin ignores it.
typedef ncclResult_t (*ncclProfilerCallback_t)(void** eHandle, int type,
                                               void* phandle, int64_t pluginId,
                                               void* extData);

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
// How many requests NCCL keeps in flight on one comm at most.
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_MAX_DEVS_PER_NIC 4
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0
// The largest message a v9/v10 plugin may declare (NCCL_MAX_NET_SIZE_BYTES).
#define NCCL_MAX_NET_SIZE_BYTES (1 * 1024 * 1024 * 1024 * 1024L)

typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
} ncclNetDeviceType;

// ncclNetDeviceHandle_v7_t, which v8, v9 and v10 reuse unchanged. The plugin
// offers no device offload, so it never fills one.
typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v10_t;

// ---- v8 (NCCL 2.19 on) ------------------------------------------------------

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;  // Mbps
  int port;
  float latency;  // microseconds
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v8_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v8_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type,
                        void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag,
                        void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes,
                        int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes,
                         void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v8_t;

// ---- v9 (NCCL 2.23 on): size_t sizes, virtual devices -----------------------

typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_v9_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v9_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} ncclNetProperties_v9_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v9_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v9_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type,
                        void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag,
                        void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes,
                        int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes,
                         void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v9_t* props);
} ncclNet_v9_t;

// ---- v10 (NCCL 2.24 on): a per-connect config, profiler handles -------------

typedef ncclNetVDeviceProps_v9_t ncclNetVDeviceProps_v10_t;
typedef ncclNetProperties_v9_t ncclNetProperties_v10_t;

typedef struct {
  int trafficClass;
} ncclNetCommConfig_v10_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction,
                       ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t* config,
                          void* handle, void** sendComm,
                          ncclNetDeviceHandle_v10_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v10_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type,
                        void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag,
                        void* mhandle, void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes,
                        int* tags, void** mhandles, void** phandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes,
                         void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v10_t* props);
} ncclNet_v10_t;

// What the job calls (through ctypes, on the same path NCCL loaded) to arm a
// fault: "stop", "link" or "slow" (gpu/faulty_net.c says what each does), or
// "off". Returns 0, or -1 for an unknown mode (and changes nothing).
typedef int (*ncclwatch_net_fault_arm_t)(const char* mode);

// ---- Layouts NCCL reads (LP64) ---------------------------------------------

#if defined(__LP64__)
_Static_assert(offsetof(ncclNetProperties_v8_t, ptrSupport) == 24, "v8");
_Static_assert(offsetof(ncclNetProperties_v8_t, speed) == 32, "v8");
_Static_assert(offsetof(ncclNetProperties_v8_t, latency) == 40, "v8");
_Static_assert(offsetof(ncclNetProperties_v8_t, maxRecvs) == 48, "v8");
_Static_assert(offsetof(ncclNetProperties_v8_t, netDeviceVersion) == 56, "v8");
_Static_assert(sizeof(ncclNetProperties_v8_t) == 64, "v8");
_Static_assert(offsetof(ncclNetProperties_v9_t, forceFlush) == 32, "v9");
_Static_assert(offsetof(ncclNetProperties_v9_t, maxRecvs) == 52, "v9");
_Static_assert(offsetof(ncclNetProperties_v9_t, vProps) == 64, "v9");
_Static_assert(offsetof(ncclNetProperties_v9_t, maxP2pBytes) == 88, "v9");
_Static_assert(sizeof(ncclNetProperties_v9_t) == 104, "v9");
_Static_assert(offsetof(ncclNet_v8_t, irecvConsumed) == 18 * sizeof(void*),
               "v8 table");
_Static_assert(offsetof(ncclNet_v9_t, makeVDevice) == 19 * sizeof(void*),
               "v9 table");
_Static_assert(offsetof(ncclNet_v10_t, makeVDevice) == 19 * sizeof(void*),
               "v10 table");
#endif

#endif  // GPU_FAULTY_NET_H_
