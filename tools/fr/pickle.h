// A reader for the subset of Python's pickle format that PyTorch's Flight
// Recorder dumps use (protocol 2 to 5: dicts, lists, tuples, str, bytes,
// int, float, bool, None, with memo references), so that `ncclwatch` needs
// no Python to read them.
//
// Bounded: the input is at most kMaxPickleBytes, containers nest at most
// kMaxDepth deep, the memo and the stack hold at most kMaxObjects objects,
// and a plain walk of the result visits at most kMaxObjects values, however
// the memo shares them (a container is frozen once put in another: no
// cycles, and 70 bytes cannot make a tree of 2^25 nodes).
// Anything else (GLOBAL, REDUCE, BUILD, persistent ids: a pickle that would
// make Python call code) is refused with the offset and the opcode, never
// executed. Damaged input gets an error naming the offset, never a crash.
//
// Thread safety: pure functions; a PyValue tree is immutable once returned
// and may be shared between threads.
#ifndef TOOLS_FR_PICKLE_H_
#define TOOLS_FR_PICKLE_H_

#include <stddef.h>
#include <stdint.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ncclwatch::tools {

inline constexpr size_t kMaxPickleBytes = 256u << 20;
inline constexpr int kMaxDepth = 64;
inline constexpr size_t kMaxObjects = 16u << 20;

struct PyValue;
using PyRef = std::shared_ptr<const PyValue>;

struct PyValue {
  enum class Kind : uint8_t { kNone, kBool, kInt, kFloat, kStr, kBytes, kList, kTuple, kDict };
  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;        // kInt: ints beyond 64 bits are refused
  double f = 0;
  std::string s;        // kStr (UTF-8 as pickled) and kBytes
  std::vector<PyRef> items;                        // kList, kTuple
  std::vector<std::pair<PyRef, PyRef>> entries;    // kDict, in pickled order

  // Dict lookup by a str key; null when absent or not a dict.
  const PyValue* Get(std::string_view key) const;
  bool IsStr() const { return kind == Kind::kStr; }
  bool IsInt() const { return kind == Kind::kInt; }
  bool IsNone() const { return kind == Kind::kNone; }
};

struct PickleResult {
  PyRef value;        // null on error
  std::string error;  // "offset N: ..." when value is null
};

// Parses one pickle (up to its STOP opcode; trailing bytes are an error).
PickleResult ParsePickle(std::string_view bytes);

}  // namespace ncclwatch::tools

#endif  // TOOLS_FR_PICKLE_H_
