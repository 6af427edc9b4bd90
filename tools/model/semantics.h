// NCCL's operations as the analyses need them, in one place: which functions
// have a root and which way their data flows, which side of a point-to-point
// pair an operation is, how many bytes an element of a datatype has, and
// nccl-tests' byte count and bus-bandwidth factor. LoadModel resolves each
// operation's function once (Op::fn); the analyses ask these traits and never
// compare function names, so two of them cannot disagree about, say, whether
// Gather has a root.
//
// Pure functions over constant tables: no allocation, any thread.

#ifndef TOOLS_MODEL_SEMANTICS_H_
#define TOOLS_MODEL_SEMANTICS_H_

#include <stdint.h>

#include <string>
#include <string_view>

namespace ncclwatch::tools {

// The functions NCCL's profiler names (ncclProfileColl/P2p `func`).
enum class Func : uint8_t {
  kOther = 0,  // no name, or one this version of the tools does not know
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kAllToAll,
  kSend,
  kRecv,
  kSendRecv,  // NCCL 2.23's v1 function table has it
};

Func FuncFromName(std::string_view name);

// Where a rooted function's data goes: from the root to every rank
// (Broadcast, Scatter) or from every rank to the root (Reduce, Gather).
enum class RootFlow : uint8_t { kNone = 0, kFromRoot, kToRoot };
RootFlow FlowOf(Func f);
inline bool IsRooted(Func f) { return FlowOf(f) != RootFlow::kNone; }

// The receiving side of a point-to-point pair; every other p2p op sends.
inline bool IsRecv(Func f) { return f == Func::kRecv; }

// Bytes per element of an NCCL datatype name ("ncclFloat32"; NCCL's aliases
// "ncclFloat", "ncclHalf", ...; without "nccl"; any case); 0 when unknown.
int DatatypeSize(std::string_view datatype);

// Whether `name` is a datatype as NCCL's profiler names one, spelled exactly
// ("ncclFloat32", "ncclBfloat16", "ncclFloat8e4m3"; not "float" or
// "ncclfloat32"): LoadModel takes an operation naming anything else for a
// damaged record. NCCL's later 8-bit floats ("ncclFloat8" and more) count.
bool IsNcclDatatype(std::string_view name);

// nccl-tests' size S in bytes of one operation: count elements, times the
// number of ranks for AllGather and ReduceScatter, whose NCCL count is per
// rank (nccl-tests doc/PERFORMANCE.md). False when the datatype is unknown.
bool OpBytes(Func f, std::string_view datatype, uint64_t count, int32_t nranks, double* bytes);

// The size bucket of an operation (stats' StatRow.bucket_log2, a sample's
// bucket in a summary): log2 of its bytes as OpBytes counts them, -1 for
// 0 bytes, -2 when unknown. `bytes`: the bytes when known.
int32_t BucketLog2(Func f, std::string_view datatype, uint64_t count, int32_t nranks, double* bytes = nullptr);

// nccl-tests' bus-bandwidth factor; false for a function it does not define.
bool BusBwFactor(Func f, int32_t nranks, double* factor);

// NCCL's profiler event activation mask, the bits the analyses read
// (ncclProfileColl, ... in NCCL's profiler headers; semantics_test checks
// them against plugin/abi/profiler_common.h). One int for the whole process;
// NCCL 2.31's RAS may change it after init (trace.proto MaskChange).
inline constexpr uint64_t kMaskColl = 1u << 1;
inline constexpr uint64_t kMaskP2p = 1u << 2;
inline constexpr uint64_t kMaskProxyOp = 1u << 3;
inline constexpr uint64_t kMaskProxyStep = 1u << 4;
inline constexpr uint64_t kMaskKernelCh = 1u << 6;
// v5+: a send or receive as the program called it, before NCCL's group
// launch connects the pair (NCCLWATCH_EVENTS=...,p2papi).
inline constexpr uint64_t kMaskP2pApi = 1u << 10;
inline constexpr uint64_t kMaskKernelLaunch = 1u << 11;
// NCCL's mask is an int: a value past 32 bits is no mask NCCL has.
inline constexpr uint64_t kMaskMax = 0xffffffffu;
// NCCL's ncclProfilerKernelPhaseStop state (v7): a phase's GPU stop time
// (trace.proto EventState.gpu_delta_ns).
inline constexpr uint32_t kStateKernelPhaseStop = 31;
// "Coll|P2p|KernelCh" (NCCL's names for the bits, without "ncclProfile");
// "none" for 0; bits NCCL does not define as one hex number ("0x10000").
std::string EventMaskNames(uint64_t mask);

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_SEMANTICS_H_
