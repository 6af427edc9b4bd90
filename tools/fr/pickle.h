// A reader for the subset of Python's pickle format that PyTorch's Flight
// Recorder dumps use (protocol 2 to 5: dicts, lists, tuples, str, bytes,
// int, float, bool, None, with memo references), so that `ncclwatch` needs
// no Python to read them.
//
// Bounded in bytes: the input is at most kMaxPickleBytes, containers nest
// at most kMaxDepth deep, what the parser holds (its values, their
// strings, the references between them, the stack and the memo) is at most
// kMaxValueBytes, and so is any value as a copy would build it: each value
// kValueCost bytes plus its string's bytes, a value the memo shares counted
// in full at every reference (a container is frozen once put in another:
// no cycles). So 16 KB that place one memoized dict in a list a thousand
// times, and that list in another a thousand times, are refused at the
// offset of the opcode that passes the limit, instead of expanding to
// gigabytes in a consumer that copies what it reads.
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
inline constexpr uint64_t kMaxValueBytes = 256u << 20;
// What one value counts for in a copy, besides its string's bytes: its
// reference and its slot. A consumer that builds more from a value than
// that counts what it builds itself (flight_recorder.cc).
inline constexpr uint64_t kValueCost = 32;

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
