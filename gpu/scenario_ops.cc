// The ops of a training-like step (BuildStep), how they are named and sized
// in the logs, and the predicates that the scenario hooks and the step loop
// use to find them.

#include <algorithm>
#include <string>
#include <vector>

#include "gpu_common.h"
#include "scenario.h"

namespace ncclwatch::scenarios {
namespace {

constexpr int kSizeLevels = 15;  // 4 KiB << 0..14 = 4 KiB..64 MiB

const char* OpKindName(OpKind k) {
  switch (k) {
    case OpKind::kAllReduce: return "all_reduce";
    case OpKind::kAllGather: return "all_gather";
    case OpKind::kReduceScatter: return "reduce_scatter";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kSendRecvRing: return "send_recv_ring";
    case OpKind::kSend: return "send";
  }
  return "?";
}

const char* DtypeName(ncclDataType_t t) {
  switch (t) {
    case ncclFloat: return "float32";
    case ncclHalf: return "float16";
    default: return "other";
  }
}

size_t SizeAt(int level, size_t max_bytes) {
  return std::min(max_bytes, kMinBytes << (level % kSizeLevels));
}

}  // namespace

size_t DtypeBytes(ncclDataType_t t) { return t == ncclHalf ? 2 : 4; }

size_t ElemCount(const Op& op) {
  return op.count != 0 ? op.count : std::max<size_t>(1, op.bytes / sizeof(float));
}

std::string Describe(const Op& op) {
  std::string s = std::string(OpKindName(op.kind)) + "(" + kCommNames[op.comm] + ") " +
                  HumanBytes(op.bytes);
  if (op.kind == OpKind::kBroadcast) s += " root " + std::to_string(op.root);
  if (op.kind == OpKind::kSend) s += " to " + std::to_string(op.root);
  if (op.count != 0 || op.dtype != ncclFloat)
    s += " (count " + std::to_string(ElemCount(op)) + " " + DtypeName(op.dtype) + ")";
  if (op.note != nullptr) s += std::string(" [") + op.note + "]";
  return s;
}

std::vector<Op> BuildStep(int step, int nranks, size_t max_bytes) {
  return {
      {OpKind::kAllReduce, kWorld, SizeAt(step, max_bytes), 0},
      {OpKind::kAllGather, kTp, SizeAt(step + 3, max_bytes), 0},
      {OpKind::kReduceScatter, kDp, SizeAt(step + 6, max_bytes), 0},
      {OpKind::kBroadcast, kWorld, SizeAt(step + 9, max_bytes), step % nranks},
      {OpKind::kSendRecvRing, kWorld, SizeAt(step + 12, max_bytes), 0},
  };
}

bool IsWorldAllReduce(const Op& op) { return op.kind == OpKind::kAllReduce && op.comm == kWorld; }
bool IsWorldBroadcast(const Op& op) { return op.kind == OpKind::kBroadcast && op.comm == kWorld; }
bool AtFault(const StepCtx& c) { return c.rank == c.fault_rank && c.step == c.fault_step; }

int IndexOf(const std::vector<Op>& ops, bool (*pred)(const Op&)) {
  for (size_t i = 0; i < ops.size(); ++i)
    if (pred(ops[i])) return int(i);
  return -1;
}

}  // namespace ncclwatch::scenarios
