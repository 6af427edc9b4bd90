// The version-neutral description of one NCCL event, and of one state update.
//
// Each exported ncclProfiler_vN adapter copies its own descriptor, field by
// field, into an EventDesc and calls the core. Only the fields of the event's
// kind are meaningful; the rest stay zero. Strings are NCCL's: function,
// datatype, algorithm and protocol names point to NCCL's static tables and
// stay valid while NCCL is loaded, so the core keeps the pointers and the
// writer thread reads the text later.

#ifndef PLUGIN_CORE_EVENT_H_
#define PLUGIN_CORE_EVENT_H_

#include <stdint.h>
#include <sys/types.h>

#include "plugin/abi/event_kind.h"

namespace ncclwatch::plugin {

struct EventDesc {
  EventKind kind = kEvNone;
  void* parent = nullptr;  // NCCL's parentObj: one of our handles, or null
  int32_t rank = 0;
  // Coll, P2p, CollApi, P2pApi, CeColl.
  uint64_t seq = 0;
  const char* func = nullptr;
  const void* send_buff = nullptr;
  const void* recv_buff = nullptr;
  uint64_t count = 0;
  int32_t root = 0;
  int32_t peer = 0;
  const char* datatype = nullptr;
  uint8_t nchannels = 0;
  uint8_t nwarps = 0;
  const char* algo = nullptr;
  const char* proto = nullptr;
  // v7: the caller's tag (ncclCollConfig_t.userProfilerTag; 0 untagged) on
  // Coll, P2p, CollApi, P2pApi and CeColl; and on Coll, whether the kernel
  // is a symmetric-memory one, and which (null for the others).
  uint64_t user_tag = 0;
  const char* kernel_variant = nullptr;
  bool is_sym_coll = false;
  // v1..v3 only: the communicator comes with each event.
  uint64_t comm_hash = 0;
  // v1, v2.
  uint64_t traffic_bytes = 0;
  uint32_t op = 0;
  bool is_collnet = false;
  bool is_nvls = false;
  // ProxyOp, ProxyStep.
  pid_t pid = 0;
  uint8_t channel = 0;
  int32_t nsteps = 0;
  int32_t chunk_size = 0;
  bool is_send = false;
  int32_t step = 0;
  // KernelCh; KernelPhase (v7) with `channel` and `ptimer`.
  uint64_t ptimer = 0;
  bool has_ptimer = false;
  uint8_t phase = 0;  // nccl::kPhase*
  // NetPlugin.
  int64_t net_id = 0;
  const void* net_data = nullptr;
  // API events.
  const void* stream = nullptr;
  bool graph_captured = false;
  int32_t group_depth = 0;
  // CE events (v6).
  const char* sync_strategy = nullptr;
  bool intra_batch_sync = false;
  uint32_t batch_size = 0;
  uint32_t num_batches = 0;
  uint32_t ce_seq = 0;
  bool is_complete = false;
  int32_t nranks = 0;
  int32_t num_ops = 0;
  uint64_t total_bytes = 0;
  bool use_intra_sync = false;
};

// An operation (Coll, P2p): only what the core reads of one (Profiler::StartOp).
// The v4+ adapters fill it straight from NCCL's descriptor, so NCCL's
// launching thread neither zeroes nor copies a whole EventDesc per operation
// (BENCHMARKS.md, "The launching thread's cost"); v1..v3 go through
// EventDesc (OpOf). Fields mean what EventDesc's of the same name do.
struct OpDesc {
  EventKind kind = kEvNone;  // kEvColl or kEvP2p
  void* parent = nullptr;
  uint64_t seq = 0;
  const char* func = nullptr;
  const void* send_buff = nullptr;
  const void* recv_buff = nullptr;
  uint64_t count = 0;
  int32_t root = 0;
  int32_t peer = 0;
  const char* datatype = nullptr;
  const char* algo = nullptr;
  const char* proto = nullptr;
  uint64_t user_tag = 0;
  const char* kernel_variant = nullptr;
  uint64_t comm_hash = 0;
  uint64_t traffic_bytes = 0;
  uint32_t op = 0;
  uint8_t nchannels = 0;
  uint8_t nwarps = 0;
  bool is_sym_coll = false;
  bool is_collnet = false;
  bool is_nvls = false;
};

// Whether an event kind is an operation's (Coll, P2p): the events whose
// completion is tracked and whose children feed it.
inline bool IsOp(uint32_t kind) { return kind == kEvColl || kind == kEvP2p; }

inline OpDesc OpOf(const EventDesc& d) {
  OpDesc o;
  o.kind = d.kind;
  o.parent = d.parent;
  o.seq = d.seq;
  o.func = d.func;
  o.send_buff = d.send_buff;
  o.recv_buff = d.recv_buff;
  o.count = d.count;
  o.root = d.root;
  o.peer = d.peer;
  o.datatype = d.datatype;
  o.algo = d.algo;
  o.proto = d.proto;
  o.user_tag = d.user_tag;
  o.kernel_variant = d.kernel_variant;
  o.comm_hash = d.comm_hash;
  o.traffic_bytes = d.traffic_bytes;
  o.op = d.op;
  o.nchannels = d.nchannels;
  o.nwarps = d.nwarps;
  o.is_sym_coll = d.is_sym_coll;
  o.is_collnet = d.is_collnet;
  o.is_nvls = d.is_nvls;
  return o;
}

struct StateArgs {
  uint64_t trans_size = 0;
  int32_t steps = 0;
  int32_t appended_proxy_ops = 0;
  uint64_t ptimer = 0;
  bool has_ptimer = false;
  const void* net_data = nullptr;
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CORE_EVENT_H_
