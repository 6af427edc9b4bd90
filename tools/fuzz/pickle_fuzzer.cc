// libFuzzer target: the Flight Recorder pickle reader on arbitrary bytes.
//
// ParsePickle, then a walk of the whole tree as a consumer would make it,
// one that does not notice shared values. Nothing may crash, hang or
// allocate unbounded memory; an error names an offset inside the input; a
// value is a tree no deeper than kMaxDepth that a copy (kValueCost a value
// plus its string's bytes) makes at most kMaxValueBytes of, and Get finds
// each of a dict's str keys.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <string>
#include <string_view>

#include "tools/fr/pickle.h"

namespace {

using ncclwatch::tools::PyValue;

// The bytes a copy of `v` takes, as the reader counts them; `depth` counts
// containers.
uint64_t Walk(const PyValue& v, int depth) {
  if (depth > ncclwatch::tools::kMaxDepth + 1) __builtin_trap();  // +1: a scalar below the deepest container
  uint64_t n = ncclwatch::tools::kValueCost + v.s.size();
  for (const auto& item : v.items) n += Walk(*item, depth + 1);
  for (const auto& [key, value] : v.entries) {
    n += Walk(*key, depth + 1) + Walk(*value, depth + 1);
    if (key->IsStr() && v.Get(key->s) == nullptr) __builtin_trap();
  }
  if (v.kind != PyValue::Kind::kList && v.kind != PyValue::Kind::kTuple && !v.items.empty()) __builtin_trap();
  if (v.kind != PyValue::Kind::kDict && !v.entries.empty()) __builtin_trap();
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ncclwatch::tools::PickleResult r =
      ncclwatch::tools::ParsePickle(std::string_view(reinterpret_cast<const char*>(data), size));
  if (r.value == nullptr) {
    if (r.error.compare(0, 7, "offset ") != 0) __builtin_trap();
    if (strtoull(r.error.c_str() + 7, nullptr, 10) > size) __builtin_trap();
    return 0;
  }
  if (!r.error.empty()) __builtin_trap();
  if (Walk(*r.value, 1) > ncclwatch::tools::kMaxValueBytes) __builtin_trap();
  return 0;
}
