#include "tools/fr/pickle.h"

#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <unordered_map>

namespace ncclwatch::tools {
namespace {

// Pickle's highest protocol (Python 3.8 and later).
constexpr unsigned kHighestProtocol = 5;

// The name of every opcode pickletools knows, for the errors; null for a
// byte that is no opcode at all.
const char* OpName(uint8_t op) {
  switch (op) {
    case '(': return "MARK";
    case '.': return "STOP";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'F': return "FLOAT";
    case 'I': return "INT";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'L': return "LONG";
    case 'M': return "BININT2";
    case 'N': return "NONE";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 'R': return "REDUCE";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'X': return "BINUNICODE";
    case 'a': return "APPEND";
    case 'b': return "BUILD";
    case 'c': return "GLOBAL";
    case 'd': return "DICT";
    case '}': return "EMPTY_DICT";
    case 'e': return "APPENDS";
    case 'g': return "GET";
    case 'h': return "BINGET";
    case 'i': return "INST";
    case 'j': return "LONG_BINGET";
    case 'l': return "LIST";
    case ']': return "EMPTY_LIST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";
    case 't': return "TUPLE";
    case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";
    case 'G': return "BINFLOAT";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

std::string Bytes(uint64_t n) { return std::to_string(n) + (n == 1 ? " byte" : " bytes"); }

const char* KindName(PyValue::Kind kind) {
  switch (kind) {
    case PyValue::Kind::kNone: return "None";
    case PyValue::Kind::kBool: return "a bool";
    case PyValue::Kind::kInt: return "an int";
    case PyValue::Kind::kFloat: return "a float";
    case PyValue::Kind::kStr: return "a str";
    case PyValue::Kind::kBytes: return "a bytes";
    case PyValue::Kind::kList: return "a list";
    case PyValue::Kind::kTuple: return "a tuple";
    case PyValue::Kind::kDict: return "a dict";
  }
  return "?";
}

// A value while the pickle is read, with what the parser must know to keep
// the result a finite tree of bounded depth and size in bytes. The returned PyRefs
// alias the PyValue inside (and keep the whole Node alive).
struct Node {
  PyValue value;
  // Containers: 1 + the deepest child (an empty one is 1); scalars 0.
  int depth = 0;
  // The bytes a copy of this value would take (kValueCost a value plus its
  // string's bytes), a shared value counted at each reference: memo
  // references let a tiny pickle hold a list of two references to a list
  // of two references to ..., which is 2^64 values to a copy.
  uint64_t copy_bytes = kValueCost;
  // Placed in a list, dict or tuple. Such a list or dict is never changed
  // again. Picklers fill each container before they place it anywhere (only
  // a reference cycle makes them place one still being filled), and with
  // that rule a container being filled has no parent: its depth and
  // copy_bytes are part of no other node's yet, and the only cycle left to
  // refuse is a container placed in itself.
  bool placed = false;
  // Usable as a dict key (as in Python: no list or dict, also not in a tuple).
  bool hashable = true;
};
using NodePtr = std::shared_ptr<Node>;

PyRef Public(const NodePtr& n) { return PyRef(n, &n->value); }

// One pass over the opcodes with Python's unpickler's stack machine: an
// object stack, the MARK positions in it, the memo. Every operation is O(1)
// but those that take the objects above a MARK, and each object is taken
// once, so the run is linear in the input. What it allocates (nodes, their
// strings, the references in containers, memo entries, the stack and the
// marks) is counted in bytes, an upper estimate, against kMaxValueBytes.
// Not thread-safe: one Parser per call.
class Parser {
 public:
  explicit Parser(std::string_view in) : in_(in) {}

  PickleResult Run() {
    PickleResult r;
    if (in_.size() > kMaxPickleBytes) {
      r.error = "offset 0: " + std::to_string(in_.size()) + " bytes is more than the limit of " +
                std::to_string(kMaxPickleBytes);
      return r;
    }
    while (pos_ < in_.size()) {
      op_ = pos_;
      const uint8_t op = static_cast<uint8_t>(in_[pos_++]);
      bool stop = false;
      if (!Step(op, &stop)) {
        r.error = std::move(error_);
        return r;
      }
      if (stop) {
        if (pos_ != in_.size()) {
          r.error = "offset " + std::to_string(pos_) + ": " + Bytes(in_.size() - pos_) + " after STOP";
          return r;
        }
        r.value = Public(stack_.back());
        return r;
      }
    }
    r.error = "offset " + std::to_string(in_.size()) + ": the input ends without STOP";
    return r;
  }

 private:
  bool Fail(const std::string& what) {
    error_ = "offset " + std::to_string(op_) + ": " + what;
    return false;
  }

  // The opcode's argument: an unsigned little-endian integer of `width` bytes.
  bool Arg(size_t width, uint64_t* v) {
    if (in_.size() - pos_ < width)
      return Fail(std::string(name_) + " needs " + Bytes(width) + " for its argument, only " +
                  std::to_string(in_.size() - pos_) + " left");
    uint64_t x = 0;
    for (size_t i = 0; i < width; ++i) x |= uint64_t{static_cast<uint8_t>(in_[pos_ + i])} << (8 * i);
    pos_ += width;
    *v = x;
    return true;
  }

  // `n` bytes of data after the argument, checked before anything is made of them.
  bool Data(uint64_t n, std::string_view* out) {
    if (n > in_.size() - pos_)
      return Fail(std::string(name_) + " of " + Bytes(n) + ", only " + std::to_string(in_.size() - pos_) + " left");
    *out = in_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return true;
  }

  // Counts `bytes` more held, with room for the stack and the marks to grow
  // by one each (twice their size: a vector doubles), against the limit.
  bool Hold(uint64_t bytes) {
    const uint64_t transient = 2 * ((stack_.size() + 1) * sizeof(NodePtr) + (marks_.size() + 1) * sizeof(size_t));
    if (bytes > kMaxValueBytes || held_ + bytes + transient > kMaxValueBytes)
      return Fail("the values read take more than " + std::to_string(kMaxValueBytes) + " bytes");
    held_ += bytes;
    return true;
  }

  bool Make(PyValue::Kind kind, NodePtr* out) {
    // The node and make_shared's control block.
    if (!Hold(sizeof(Node) + 2 * sizeof(void*))) return false;
    *out = std::make_shared<Node>();
    (*out)->value.kind = kind;
    if (kind == PyValue::Kind::kList || kind == PyValue::Kind::kDict) {
      (*out)->depth = 1;
      (*out)->hashable = false;
    }
    return true;
  }

  bool Push(NodePtr n) {
    if (!Hold(0)) return false;
    stack_.push_back(std::move(n));
    return true;
  }

  bool PushNew(PyValue::Kind kind, NodePtr* out = nullptr) {
    NodePtr n;
    if (!Make(kind, &n)) return false;
    if (out != nullptr) *out = n;
    return Push(std::move(n));
  }

  // Objects at the top of the stack that the opcode may use: those above the
  // innermost MARK, as in Python's unpickler.
  size_t Fence() const { return marks_.empty() ? 0 : marks_.back(); }

  bool Need(size_t n) {
    if (stack_.size() - Fence() < n)
      return Fail(std::string(name_) + " needs " + std::to_string(n) + (n == 1 ? " object" : " objects") +
                  " above the last MARK, the stack has " + std::to_string(stack_.size() - Fence()));
    return true;
  }

  // Ends the innermost MARK; the objects above it are stack_[*first..].
  bool PopMark(size_t* first) {
    if (marks_.empty()) return Fail(std::string(name_) + " without a MARK");
    *first = marks_.back();
    marks_.pop_back();
    return true;
  }

  // The container to be filled: the object below the top `above` objects,
  // themselves above the fence.
  bool Target(PyValue::Kind kind, size_t above, Node** out) {
    if (stack_.size() - Fence() <= above)
      return Fail(std::string(name_) + " needs " + KindName(kind) + " below its " +
                  (above == 1 ? "object" : "objects") + ", the stack has nothing above the last MARK");
    Node* n = stack_[stack_.size() - above - 1].get();
    if (n->value.kind != kind)
      return Fail(std::string(name_) + " into " + KindName(n->value.kind) + ", not " + KindName(kind));
    if (n->placed)
      return Fail(std::string(name_) + " into " + KindName(kind) +
                  " already inside another container (pickle.dumps writes that only for a reference cycle)");
    *out = n;
    return true;
  }

  // Accounts for `child` becoming part of `parent` (not yet placed anywhere),
  // through `refs` references (a dict entry holds two, for key and value).
  bool Place(Node* parent, Node* child, size_t refs = 1) {
    if (parent == child)
      return Fail(std::string(name_) + " puts " + KindName(parent->value.kind) + " into itself (a reference cycle)");
    const int depth = std::max(parent->depth, child->depth + 1);
    if (depth > kMaxDepth) return Fail("containers nested more than " + std::to_string(kMaxDepth) + " deep");
    // Both are at most kMaxValueBytes: no overflow.
    const uint64_t copy_bytes = parent->copy_bytes + child->copy_bytes;
    if (copy_bytes > kMaxValueBytes)
      return Fail(std::string(name_) + " makes a value that a copy would make more than " +
                  std::to_string(kMaxValueBytes) + " bytes of (a value the memo shares counts at each reference)");
    // The reference, twice: the vector holding it may double.
    if (!Hold(2 * refs * sizeof(PyRef))) return false;
    parent->depth = depth;
    parent->copy_bytes = copy_bytes;
    child->placed = true;
    return true;
  }

  bool Append(Node* list, const NodePtr& item) {
    if (!Place(list, item.get())) return false;
    list->value.items.push_back(Public(item));
    return true;
  }

  bool SetItem(Node* dict, const NodePtr& key, const NodePtr& value) {
    if (!key->hashable) return Fail(std::string(name_) + " with an unhashable key (" + KindName(key->value.kind) + ")");
    if (!Place(dict, key.get(), 2) || !Place(dict, value.get(), 0)) return false;
    dict->value.entries.emplace_back(Public(key), Public(value));
    return true;
  }

  // A tuple of stack_[first..], which it replaces.
  bool Tuple(size_t first) {
    NodePtr t;
    if (!Make(PyValue::Kind::kTuple, &t)) return false;
    t->depth = 1;
    for (size_t i = first; i < stack_.size(); ++i) {
      if (!Place(t.get(), stack_[i].get())) return false;
      t->hashable = t->hashable && stack_[i]->hashable;
      t->value.items.push_back(Public(stack_[i]));
    }
    stack_.resize(first);
    return Push(std::move(t));
  }

  bool Int(int64_t v) {
    NodePtr n;
    if (!PushNew(PyValue::Kind::kInt, &n)) return false;
    n->value.i = v;
    return true;
  }

  bool Str(PyValue::Kind kind, size_t length_width) {
    uint64_t n;
    std::string_view data;
    if (!Arg(length_width, &n) || !Data(n, &data)) return false;
    NodePtr node;
    if (!Hold(data.size()) || !PushNew(kind, &node)) return false;
    node->value.s.assign(data.data(), data.size());
    node->copy_bytes += data.size();
    return true;
  }

  // LONG1 and LONG4: a two's complement little-endian int of n bytes.
  bool Long(size_t length_width) {
    uint64_t n;
    if (!Arg(length_width, &n)) return false;
    if (n > 8)
      return Fail(std::string(name_) + " of " + std::to_string(n) + " bytes: ints beyond 64 bits are refused");
    std::string_view data;
    if (!Data(n, &data)) return false;
    uint64_t u = 0;
    for (size_t i = 0; i < data.size(); ++i) u |= uint64_t{static_cast<uint8_t>(data[i])} << (8 * i);
    if (n > 0 && n < 8 && (static_cast<uint8_t>(data.back()) & 0x80)) u |= ~uint64_t{0} << (8 * n);
    return Int(static_cast<int64_t>(u));
  }

  bool PutMemo(uint64_t index) {
    if (!Need(1)) return false;
    auto it = memo_.find(index);
    if (it != memo_.end()) {
      it->second = stack_.back();
      return true;
    }
    // A hash map's node and bucket.
    if (!Hold(sizeof(std::pair<const uint64_t, NodePtr>) + 4 * sizeof(void*))) return false;
    memo_.emplace(index, stack_.back());
    return true;
  }

  bool GetMemo(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end())
      return Fail(std::string(name_) + " of memo entry " + std::to_string(index) + ", which was never stored");
    return Push(it->second);
  }

  bool Step(uint8_t op, bool* stop) {
    name_ = OpName(op);
    uint64_t a;
    size_t first;
    Node* target;
    NodePtr n;
    switch (op) {
      case 0x80:  // PROTO
        if (!Arg(1, &a)) return false;
        if (a > kHighestProtocol) return Fail("protocol " + std::to_string(a) + " is newer than Python's highest, 5");
        return true;
      case 0x95:  // FRAME: only a hint for buffering readers
        if (!Arg(8, &a)) return false;
        if (a > in_.size() - pos_)
          return Fail("FRAME of " + Bytes(a) + ", only " + std::to_string(in_.size() - pos_) + " left");
        return true;
      case '.':  // STOP
        if (!marks_.empty()) return Fail("STOP inside an unclosed MARK");
        if (stack_.size() != 1)
          return Fail("STOP with " + std::to_string(stack_.size()) + " objects on the stack, not 1");
        *stop = true;
        return true;
      case '(':  // MARK
        if (!Hold(0)) return false;
        marks_.push_back(stack_.size());
        return true;
      case '0':  // POP: the top of the stack, which may be a MARK
        if (!marks_.empty() && marks_.back() == stack_.size()) {
          marks_.pop_back();
          return true;
        }
        if (!Need(1)) return false;
        stack_.pop_back();
        return true;
      case '1':  // POP_MARK
        if (!PopMark(&first)) return false;
        stack_.resize(first);
        return true;
      case '2':  // DUP
        if (!Need(1)) return false;
        return Push(NodePtr(stack_.back()));
      case '}': return PushNew(PyValue::Kind::kDict);
      case ']': return PushNew(PyValue::Kind::kList);
      case ')':
        if (!PushNew(PyValue::Kind::kTuple, &n)) return false;
        n->depth = 1;
        return true;
      case 'a':  // APPEND
        if (!Need(2) || !Target(PyValue::Kind::kList, 1, &target) || !Append(target, stack_.back())) return false;
        stack_.pop_back();
        return true;
      case 'e':  // APPENDS
        if (!PopMark(&first) || !Target(PyValue::Kind::kList, stack_.size() - first, &target)) return false;
        for (size_t i = first; i < stack_.size(); ++i)
          if (!Append(target, stack_[i])) return false;
        stack_.resize(first);
        return true;
      case 's':  // SETITEM
        if (!Need(3) || !Target(PyValue::Kind::kDict, 2, &target) ||
            !SetItem(target, stack_[stack_.size() - 2], stack_.back()))
          return false;
        stack_.resize(stack_.size() - 2);
        return true;
      case 'u':  // SETITEMS
        if (!PopMark(&first) || !Target(PyValue::Kind::kDict, stack_.size() - first, &target)) return false;
        if ((stack_.size() - first) % 2 != 0)
          return Fail("SETITEMS with an odd number of objects (" + std::to_string(stack_.size() - first) + ")");
        for (size_t i = first; i < stack_.size(); i += 2)
          if (!SetItem(target, stack_[i], stack_[i + 1])) return false;
        stack_.resize(first);
        return true;
      case 't':  // TUPLE
        return PopMark(&first) && Tuple(first);
      case 0x85:  // TUPLE1
      case 0x86:  // TUPLE2
      case 0x87: {  // TUPLE3
        const size_t k = op - 0x84u;
        return Need(k) && Tuple(stack_.size() - k);
      }
      case 'N': return PushNew(PyValue::Kind::kNone);
      case 0x88:  // NEWTRUE
      case 0x89:  // NEWFALSE
        if (!PushNew(PyValue::Kind::kBool, &n)) return false;
        n->value.b = op == 0x88;
        return true;
      case 'J':  // BININT: signed
        return Arg(4, &a) && Int(static_cast<int32_t>(static_cast<uint32_t>(a)));
      case 'K': return Arg(1, &a) && Int(static_cast<int64_t>(a));
      case 'M': return Arg(2, &a) && Int(static_cast<int64_t>(a));
      case 0x8a: return Long(1);
      case 0x8b: return Long(4);
      case 'G': {  // BINFLOAT: big-endian, unlike every other argument
        std::string_view data;
        if (!Data(8, &data)) return false;
        uint64_t bits = 0;
        for (char c : data) bits = (bits << 8) | static_cast<uint8_t>(c);
        if (!PushNew(PyValue::Kind::kFloat, &n)) return false;
        memcpy(&n->value.f, &bits, sizeof bits);
        return true;
      }
      case 'X': return Str(PyValue::Kind::kStr, 4);
      case 0x8c: return Str(PyValue::Kind::kStr, 1);
      case 0x8d: return Str(PyValue::Kind::kStr, 8);
      case 'C': return Str(PyValue::Kind::kBytes, 1);
      case 'B': return Str(PyValue::Kind::kBytes, 4);
      case 0x8e: return Str(PyValue::Kind::kBytes, 8);
      case 'q': return Arg(1, &a) && PutMemo(a);
      case 'r': return Arg(4, &a) && PutMemo(a);
      case 0x94: return PutMemo(memo_.size());  // MEMOIZE
      case 'h': return Arg(1, &a) && GetMemo(a);
      case 'j': return Arg(4, &a) && GetMemo(a);
      default: {
        char hex[8];
        snprintf(hex, sizeof hex, "0x%02x", op);
        if (name_ == nullptr) return Fail(std::string("byte ") + hex + " is not a pickle opcode");
        return Fail(std::string("opcode ") + hex + " (" + name_ + ") not supported: not a Flight Recorder dump");
      }
    }
  }

  std::string_view in_;
  size_t pos_ = 0;
  size_t op_ = 0;                 // offset of the opcode being run, for errors
  const char* name_ = nullptr;    // its name
  std::vector<NodePtr> stack_;
  std::vector<size_t> marks_;     // stack_.size() at each open MARK
  std::unordered_map<uint64_t, NodePtr> memo_;
  uint64_t held_ = 0;  // bytes held, but the stack and the marks (Hold)
  std::string error_;
};

}  // namespace

const PyValue* PyValue::Get(std::string_view key) const {
  if (kind != Kind::kDict) return nullptr;
  // The last one, as Python's dict keeps the last value of a repeated key.
  for (auto it = entries.rbegin(); it != entries.rend(); ++it)
    if (it->first->kind == Kind::kStr && it->first->s == key) return it->second.get();
  return nullptr;
}

PickleResult ParsePickle(std::string_view bytes) { return Parser(bytes).Run(); }

}  // namespace ncclwatch::tools
