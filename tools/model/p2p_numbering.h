// Numbers for the point-to-point operations a file does not number.
//
// Profiler API v1 to v3 give the plugin no communicator size, so it
// numbers no point-to-point operation (Op.p2p_seq 0); nor does it on a
// communicator whose size NCCL gave as impossible (CommInit.nccl_impossible). Every reader of a
// file (the loader of a whole file, a FileWindow that may later let the
// first ones go) numbers them here, one way: in call order per (the file's
// communicator id, peer, direction), as the plugin does from v4.
//
// Thread safety: one per file, one thread.

#ifndef TOOLS_MODEL_P2P_NUMBERING_H_
#define TOOLS_MODEL_P2P_NUMBERING_H_

#include <stdint.h>

#include <unordered_map>
#include <unordered_set>

#include "proto/trace.pb.h"
#include "tools/model/semantics.h"

namespace ncclwatch::tools {

class P2pNumbering {
 public:
  // The file's profiler API version (its header's).
  void SetApiVersion(uint32_t version) { numbers_ = version >= 1 && version <= 3; }
  // A CommInit of the file's communicator `comm`: whether the plugin numbers
  // its point-to-point operations (not where NCCL gave an impossible size).
  void SetCommNumbered(uint32_t comm, bool numbered) {
    if (numbered) {
      unnumbered_.erase(comm);
    } else {
      unnumbered_.insert(comm);
    }
  }
  // The number of point-to-point operation `o` (function `fn`): its own,
  // or, where the file gives none, the next of its line.
  uint64_t Of(const trace::Op& o, Func fn) {
    if ((!numbers_ && unnumbered_.count(o.comm()) == 0) || o.p2p_seq() != 0) return o.p2p_seq();
    const uint64_t line = uint64_t{o.comm()} << 33 | uint64_t{static_cast<uint32_t>(o.peer())} << 1 |
                          (fn == Func::kRecv ? 1 : 0);
    return ++count_[line];
  }

 private:
  bool numbers_ = false;
  std::unordered_set<uint32_t> unnumbered_;  // file communicator ids
  std::unordered_map<uint64_t, uint64_t> count_;
};

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_P2P_NUMBERING_H_
