// libnccl-profiler-noop.so: an NCCL profiler plugin that asks NCCL for events
// and does nothing with them. It is the floor of gpu/nccl_overhead: with
// it loaded, NCCL does all of its own instrumentation for the requested event
// types (descriptors built, plugin calls made, kernel-channel timestamps
// written by the kernels, proxy bookkeeping) and only the plugin's own work is
// missing. ncclwatch minus this floor is ncclwatch's own cost.
//
//   NOOP_PROFILER_MASK   the activation mask handed to NCCL, hex (0x..) or
//                        decimal; default 0x46 (Coll | P2p | KernelCh: what
//                        ncclwatch asks for at its default capture). 0x7fff is
//                        every event type (ncclwatch's NCCLWATCH_EVENTS=all).
//   NOOP_PROFILER_NULL_HANDLE=1
//                        hand NULL event handles back. By default startEvent
//                        returns a non-null dummy handle, because NCCL only
//                        calls stopEvent/recordEventState on non-null handles:
//                        with NULL the floor would leave those calls out,
//                        while ncclwatch (which returns real handles) pays them.
//
// Exports ncclProfiler_v4 (NCCL 2.27), _v5 (2.28) and _v6 (2.29+) and nothing
// else (built with -fvisibility=hidden; see gpu/overhead.sh). The
// descriptor types come from plugin/abi/profiler_v4.h .. profiler_v6.h; no
// descriptor is ever read. On init it logs one INFO line through NCCL's logger (NCCL_DEBUG=INFO).
//
// Build (what overhead.sh does):
//   g++ -std=c++17 -O2 -shared -fPIC -fvisibility=hidden -I. gpu/noop_plugin.cc
//       -o out/libnccl-profiler-noop.so

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/abi/profiler_common.h"
#include "plugin/abi/profiler_v4.h"
#include "plugin/abi/profiler_v5.h"
#include "plugin/abi/profiler_v6.h"

namespace abi = ncclwatch::nccl;

namespace {

char g_context;       // the (shared) context handed to NCCL: non-null, never read
char g_dummy_handle;  // the event handle, unless NOOP_PROFILER_NULL_HANDLE=1

int MaskFromEnv() {
  const int kDefault = static_cast<int>(abi::kColl | abi::kP2p | abi::kKernelCh);  // 0x46
  const char* v = getenv("NOOP_PROFILER_MASK");
  if (v == nullptr || v[0] == '\0') return kDefault;
  char* end = nullptr;
  unsigned long m = strtoul(v, &end, 0);  // base 0: 0x.. hex, else decimal (or 0.. octal)
  if (end == v || *end != '\0' || m > 0x7fffffffUL) return kDefault;
  return static_cast<int>(m);
}

bool NullHandles() {
  const char* v = getenv("NOOP_PROFILER_NULL_HANDLE");
  return v != nullptr && strcmp(v, "1") == 0;
}

bool g_null_handles = false;

abi::Result InitCommon(void** context, int* mask, int version, abi::Logger log) {
  if (context == nullptr) return abi::kInvalidUsage;
  const int m = MaskFromEnv();
  g_null_handles = NullHandles();
  if (mask != nullptr) *mask = m;
  *context = &g_context;
  if (log != nullptr)
    log(abi::kLogInfo, abi::kLogSubsysInit | abi::kLogSubsysProfile, "noop_plugin", 0,
        "noop profiler: API v%d, events 0x%x, %s handles", version, m,
        g_null_handles ? "null" : "dummy");
  return abi::kSuccess;
}

abi::Result InitV4(void** context, int* mask, const char*, uint64_t, int, int, int, abi::Logger log) {
  return InitCommon(context, mask, 4, log);
}
abi::Result InitV5(void** context, uint64_t, int* mask, const char*, int, int, int, abi::Logger log) {
  return InitCommon(context, mask, 5, log);
}
abi::Result InitV6(void** context, uint64_t, int* mask, const char*, int, int, int, abi::Logger log) {
  return InitCommon(context, mask, 6, log);
}

template <typename Descr>
abi::Result Start(void*, void** handle, Descr*) {
  if (handle != nullptr) *handle = g_null_handles ? nullptr : &g_dummy_handle;
  return abi::kSuccess;
}
abi::Result Stop(void*) { return abi::kSuccess; }
abi::Result State(void*, int, abi::StateArgsV4*) { return abi::kSuccess; }
abi::Result Finalize(void*) { return abi::kSuccess; }

}  // namespace

extern "C" {
__attribute__((visibility("default"))) abi::ProfilerV4 ncclProfiler_v4 = {
    "noop", InitV4, Start<abi::DescrV4>, Stop, State, Finalize};
__attribute__((visibility("default"))) abi::ProfilerV5 ncclProfiler_v5 = {
    "noop", InitV5, Start<abi::DescrV5>, Stop, State, Finalize};
__attribute__((visibility("default"))) abi::ProfilerV6 ncclProfiler_v6 = {
    "noop", InitV6, Start<abi::DescrV6>, Stop, State, Finalize};
}
