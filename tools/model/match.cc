// MatchOps (model.h): one operation across the ranks of its communicator.

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "tools/model/model.h"

namespace ncclwatch::tools {

void MatchOps(Model* m) {
  // NCCL counts seqNumber per communicator and collective function, so a
  // collective is (comm, func, seq).
  struct Key {
    uint32_t comm;
    uint16_t func;
    uint8_t kind;
    int32_t src, dst;
    uint64_t seq;
    bool operator==(const Key& o) const {
      return comm == o.comm && func == o.func && kind == o.kind && src == o.src && dst == o.dst && seq == o.seq;
    }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      uint64_t h = k.seq * 0x9e3779b97f4a7c15ull;
      h ^= (uint64_t{k.comm} << 32 | uint32_t(k.src)) + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
      h ^= (uint64_t(uint32_t(k.dst)) << 24 | uint64_t{k.func} << 8 | k.kind) + (h << 6) + (h >> 2);
      return static_cast<size_t>(h);
    }
  };
  std::unordered_map<Key, uint32_t, KeyHash> index;
  index.reserve(m->ops.size() / 2 + 16);
  std::vector<int32_t> max_member_rank(m->comms.size(), -1);
  for (uint32_t ci = 0; ci < m->comms.size(); ++ci)
    for (const CommMember& mem : m->comms[ci].members)
      max_member_rank[ci] = std::max(max_member_rank[ci], std::min(mem.rank, m->comms[ci].nranks - 1));
  m->matches.clear();
  for (uint32_t oi = 0; oi < m->ops.size(); ++oi) {
    Op& o = m->ops[oi];
    o.match = kNone;
    if (o.rank < 0) continue;
    Key k{o.comm, o.kind == OpKind::kColl ? o.func : uint16_t{0}, static_cast<uint8_t>(o.kind), -1, -1, o.seq};
    size_t slot = 0;
    if (o.kind == OpKind::kP2p) {
      const bool recv = IsRecv(o.fn);
      k.src = recv ? o.peer_or_root : o.rank;
      k.dst = recv ? o.rank : o.peer_or_root;
      slot = recv ? 1 : 0;
    } else {
      slot = static_cast<size_t>(o.rank);
    }
    auto it = index.find(k);
    uint32_t mi;
    if (it == index.end()) {
      mi = static_cast<uint32_t>(m->matches.size());
      Match match;
      match.comm = o.comm;
      match.kind = o.kind;
      match.seq = o.seq;
      match.src = k.src;
      match.dst = k.dst;
      // Collectives: one slot per rank up to the highest rank that has a
      // file (consumers treat slots past the end as absent), so a
      // communicator claiming many more ranks than were traced costs nothing.
      match.ops.assign(o.kind == OpKind::kP2p ? 2 : static_cast<size_t>(std::max(max_member_rank[o.comm] + 1, 1)), kNone);
      m->matches.push_back(std::move(match));
      index.emplace(k, mi);
    } else {
      mi = it->second;
    }
    Match& match = m->matches[mi];
    if (slot >= match.ops.size()) match.ops.resize(slot + 1, kNone);
    if (match.ops[slot] != kNone) continue;  // a duplicate on the same rank stays unmatched
    match.ops[slot] = oi;
    o.match = mi;
  }
}

}  // namespace ncclwatch::tools
