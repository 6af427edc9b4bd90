// What every version of NCCL's profiler plugin ABI shares: result codes, the
// logger, the event type bits and the event states.
//
// NCCL looks up `ncclProfiler_vN` (newest first) and calls through the
// function table it finds there. Each version's descriptors and table are
// declared in profiler_vN.h, next to this file; these are the facts they
// have in common, written out here so that the plugin builds against any
// NCCL, or none. One enum of states serves every version (NCCL keeps one
// too); the comments say which versions send which.
//
// Each version has its own descriptor type: the leading `type` tag is 8 bits
// wide before v5 and 64 bits from v5 on, so a descriptor of one version must
// never be read through another version's type. Include the one header of
// each version you handle.
//
// Nothing here allocates or has behaviour; it is declarations only.

#ifndef PLUGIN_ABI_PROFILER_COMMON_H_
#define PLUGIN_ABI_PROFILER_COMMON_H_

#include <stdint.h>

namespace ncclwatch::nccl {

// ncclResult_t: the plugin only ever returns kSuccess, or an error from init.
using Result = int;
inline constexpr Result kSuccess = 0;
inline constexpr Result kInternalError = 3;
inline constexpr Result kInvalidUsage = 5;

// NCCL's logger, passed to init from v4 on.
enum LogLevel : int { kLogNone = 0, kLogVersion = 1, kLogWarn = 2, kLogInfo = 3, kLogAbort = 4, kLogTrace = 5 };
inline constexpr unsigned long kLogSubsysInit = 1;
inline constexpr unsigned long kLogSubsysProfile = 16384;
using Logger = void (*)(LogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// Event type bits; also the activation mask bits.
enum EventType : uint64_t {
  kGroup = 1u << 0,
  kColl = 1u << 1,
  kP2p = 1u << 2,
  kProxyOp = 1u << 3,
  kProxyStep = 1u << 4,
  kProxyCtrl = 1u << 5,
  kKernelCh = 1u << 6,
  kNetPlugin = 1u << 7,
  kGroupApi = 1u << 8,      // v5+
  kCollApi = 1u << 9,       // v5+
  kP2pApi = 1u << 10,       // v5+
  kKernelLaunch = 1u << 11, // v5+
  kCeColl = 1u << 12,       // v6+
  kCeSync = 1u << 13,       // v6+
  kCeBatch = 1u << 14,      // v6+
  kKernelPhase = 1u << 15,  // v7+: NCCL sets kKernelCh too whenever this is set
};

// Event states (one enum shared by all versions; some values are version specific).
enum EventState : int {
  kProxyOpSendPosted = 0,  // 0..7: ProxyOp states, v1..v3 only
  kProxyOpSendRemFifoWait = 1,
  kProxyOpSendTransmitted = 2,
  kProxyOpSendDone = 3,
  kProxyOpRecvPosted = 4,
  kProxyOpRecvReceived = 5,
  kProxyOpRecvTransmitted = 6,
  kProxyOpRecvDone = 7,
  kProxyStepSendGPUWait = 8,
  kProxyStepSendWait = 9,
  kProxyStepRecvWait = 10,
  kProxyStepRecvFlushWait = 11,
  kProxyStepRecvGPUWait = 12,
  kProxyCtrlIdle = 13,
  kProxyCtrlActive = 14,
  kProxyCtrlSleep = 15,
  kProxyCtrlWakeup = 16,
  kProxyCtrlAppend = 17,
  kProxyCtrlAppendEnd = 18,
  kProxyOpInProgress = 19,    // v4+
  kProxyStepSendPeerWait = 20, // v4+
  kNetPluginUpdate = 21,      // v4+
  kKernelChStop = 22,         // v4+
  kGroupStartApiStop = 23,    // v5+
  kGroupEndApiStart = 24,     // v5+
  kCeCollStart = 25,          // v6+
  kCeCollComplete = 26,
  kCeSyncStart = 27,
  kCeSyncComplete = 28,
  kCeBatchStart = 29,
  kCeBatchComplete = 30,
  kKernelPhaseStop = 31,      // v7+: args in StateArgsV7::kernelCh
};
inline constexpr int kMaxEventState = 31;

}  // namespace ncclwatch::nccl

#endif  // PLUGIN_ABI_PROFILER_COMMON_H_
