#include "tools/model/semantics.h"

#include <ctype.h>
#include <stdio.h>

#include <algorithm>
#include <cmath>

namespace ncclwatch::tools {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (tolower(static_cast<unsigned char>(a[i])) != tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

}  // namespace

Func FuncFromName(std::string_view name) {
  struct Entry {
    std::string_view name;
    Func func;
  };
  static constexpr Entry kFuncs[] = {
      {"AllReduce", Func::kAllReduce}, {"AllGather", Func::kAllGather}, {"ReduceScatter", Func::kReduceScatter},
      {"Broadcast", Func::kBroadcast}, {"Reduce", Func::kReduce},       {"Gather", Func::kGather},
      {"Scatter", Func::kScatter},     {"AllToAll", Func::kAllToAll},   {"Send", Func::kSend},
      {"Recv", Func::kRecv},           {"SendRecv", Func::kSendRecv},
  };
  for (const Entry& e : kFuncs)
    if (e.name == name) return e.func;
  return Func::kOther;
}

RootFlow FlowOf(Func f) {
  switch (f) {
    case Func::kBroadcast:
    case Func::kScatter:
      return RootFlow::kFromRoot;
    case Func::kReduce:
    case Func::kGather:
      return RootFlow::kToRoot;
    default:
      return RootFlow::kNone;
  }
}

int DatatypeSize(std::string_view d) {
  if (d.size() >= 4 && EqualsIgnoreCase(d.substr(0, 4), "nccl")) d.remove_prefix(4);
  struct Entry {
    std::string_view name;
    int bytes;
  };
  static constexpr Entry kSizes[] = {
      {"int8", 1},    {"uint8", 1},   {"char", 1},   {"float16", 2}, {"half", 2},     {"bfloat16", 2},
      {"int32", 4},   {"uint32", 4},  {"int", 4},    {"float32", 4}, {"float", 4},    {"int64", 8},
      {"uint64", 8},  {"float64", 8}, {"double", 8},
  };
  for (const Entry& e : kSizes)
    if (EqualsIgnoreCase(d, e.name)) return e.bytes;
  // Every 8-bit float NCCL has or will have (Float8e4m3, Float8e5m2, ...).
  if (d.size() > 6 && EqualsIgnoreCase(d.substr(0, 6), "float8")) return 1;
  return 0;
}

bool IsNcclDatatype(std::string_view name) {
  // ncclDatatypeToString's names (NCCL src/include/nccl_common.h), and the
  // aliases nccl.h defines.
  static constexpr std::string_view kNames[] = {
      "ncclInt8",   "ncclChar",  "ncclUint8",   "ncclInt32",  "ncclInt",     "ncclUint32",
      "ncclInt64",  "ncclUint64", "ncclFloat16", "ncclHalf",  "ncclFloat32", "ncclFloat",
      "ncclFloat64", "ncclDouble", "ncclBfloat16",
  };
  for (std::string_view n : kNames)
    if (n == name) return true;
  constexpr std::string_view kFloat8 = "ncclFloat8";
  if (name.size() <= kFloat8.size() || name.substr(0, kFloat8.size()) != kFloat8) return false;
  for (char ch : name.substr(kFloat8.size()))
    if (!isdigit(static_cast<unsigned char>(ch)) && !islower(static_cast<unsigned char>(ch))) return false;
  return true;
}

bool OpBytes(Func f, std::string_view datatype, uint64_t count, int32_t nranks, double* bytes) {
  const int size = DatatypeSize(datatype);
  if (size == 0) return false;
  double b = static_cast<double>(count) * size;
  if (f == Func::kAllGather || f == Func::kReduceScatter) b *= std::max(nranks, 1);
  *bytes = b;
  return true;
}

bool BusBwFactor(Func f, int32_t nranks, double* factor) {
  const double n = std::max(nranks, 1);
  switch (f) {
    case Func::kAllReduce:
      *factor = 2.0 * (n - 1) / n;
      return true;
    case Func::kAllGather:
    case Func::kReduceScatter:
      *factor = (n - 1) / n;
      return true;
    case Func::kBroadcast:
    case Func::kReduce:
    case Func::kSend:
    case Func::kRecv:
    case Func::kSendRecv:
      *factor = 1.0;
      return true;
    default:
      return false;
  }
}

std::string EventMaskNames(uint64_t mask) {
  static const char* const kNames[] = {"Group",     "Coll",     "P2p",    "ProxyOp",      "ProxyStep", "ProxyCtrl",
                                       "KernelCh",  "NetPlugin", "GroupApi", "CollApi",     "P2pApi",    "KernelLaunch",
                                       "CeColl",    "CeSync",    "CeBatch",  "KernelPhase"};
  constexpr int kKnown = sizeof(kNames) / sizeof(kNames[0]);
  if (mask == 0) return "none";
  std::string out;
  for (int b = 0; b < kKnown; ++b)
    if ((mask >> b) & 1) out += (out.empty() ? "" : "|") + std::string(kNames[b]);
  const uint64_t other = mask & ~((uint64_t{1} << kKnown) - 1);
  if (other != 0) {
    char hex[24];
    snprintf(hex, sizeof(hex), "0x%llx", static_cast<unsigned long long>(other));
    out += (out.empty() ? "" : "|") + std::string(hex);
  }
  return out;
}

namespace {

int32_t Log2Floor(uint64_t v) {
  int32_t k = -1;
  while (v != 0) {
    v >>= 1;
    ++k;
  }
  return k;
}

}  // namespace

int32_t BucketLog2(Func f, std::string_view datatype, uint64_t count, int32_t nranks, double* bytes) {
  double b = 0;
  if (!OpBytes(f, datatype, count, nranks, &b)) return -2;
  if (bytes != nullptr) *bytes = b;
  return Log2Floor(static_cast<uint64_t>(std::llround(b)));  // -1 for 0 bytes
}

}  // namespace ncclwatch::tools
