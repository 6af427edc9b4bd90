// One operation's name, the same in every rank's file, in every poll's
// model of them and in a summary of a node: its communicator (by NCCL's
// hash), its function, and NCCL's sequence number (collectives: counted
// per communicator and function) or, for a point-to-point operation, the
// peer and the order among the rank's operations of that kind with it.
//
// Files and models number strings each their own way, so a key's
// function is an id of FuncIds, shared by everything that compares keys.
// A key is built in one place, OpKeyOf, from a file's Op record or a
// model's Op, so that the two cannot disagree.
//
// Not a match across ranks: a point-to-point key names the peer from its
// own rank's side (MatchOps pairs a send with its receive). A
// communicator without a hash (profiler API v1 to v3 events) keys as 0:
// not for telling such communicators apart.
//
// Thread safety: FuncIds, one thread; the rest are values.

#ifndef TOOLS_MODEL_OP_KEY_H_
#define TOOLS_MODEL_OP_KEY_H_

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <unordered_map>

#include "proto/trace.pb.h"
#include "tools/model/model.h"

namespace ncclwatch::tools {

// Function names as small ids, shared by every file and model compared,
// so that an OpKey compares across them.
class FuncIds {
 public:
  uint16_t Id(const std::string& name);  // adds it
  bool Find(const std::string& name, uint16_t* id) const;

 private:
  std::unordered_map<std::string, uint16_t> ids_;
};

struct OpKey {
  uint64_t comm_hash = 0;
  uint64_t seq = 0;  // collectives: NCCL's seqNumber; p2p: the order with the peer, from 1
  int32_t peer = 0;  // p2p; 0 for collectives
  uint16_t func = 0;  // FuncIds
  bool p2p = false;
  bool operator==(const OpKey& o) const {
    return comm_hash == o.comm_hash && seq == o.seq && peer == o.peer && func == o.func && p2p == o.p2p;
  }
};
struct OpKeyHash {
  size_t operator()(const OpKey& k) const {
    uint64_t h = k.comm_hash * 0x9e3779b97f4a7c15ull ^ (k.seq + 0x632be59bd9b4e019ull);
    h ^= (uint64_t{static_cast<uint32_t>(k.peer)} << 20 | uint64_t{k.func} << 1 | k.p2p) * 0xbf58476d1ce4e5b9ull;
    return static_cast<size_t>(h ^ (h >> 31));
  }
};

// A file's Op record on the communicator of hash `comm_hash`, its
// function `func` (FuncIds).
OpKey OpKeyOf(const trace::Op& o, uint64_t comm_hash, uint16_t func);
// `op` of `m`; false when `names` has not seen its function.
bool OpKeyOf(const Model& m, const Op& op, const FuncIds& names, OpKey* key);

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_OP_KEY_H_
