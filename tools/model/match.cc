// MatchOps (model.h): one operation across the ranks of its communicator.

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "tools/model/model.h"

namespace ncclwatch::tools {

namespace {

// A collective every other rank of its communicator completed normally,
// taken on one rank for a completion by an abort (LoadModel: it took over
// 1 s and ended shortly before the communicator's finalize or the file's
// end): it completed there. A hung collective completes on no rank but by
// the abort; one that completes elsewhere had this rank join and pass its
// part on. Seen on H100, NCCL 2.28.9, 8 ranks over sockets: a healthy
// job whose rank 6's last Broadcast took 1.01 s and ended 0.37 s before
// destroy_process_group. Its time is not restored (completion_lost).
// So does one of a killed process (LostAtItsEnd), whose file lost its last
// interval: seen on H100, a rank SIGKILLed right after its peers completed
// a Broadcast. Any other operation that never completed in the file stays
// as it is: a rank's kernel may hang after its peers finished.
// An operation in flight in the file of a process that never finalized
// (killed: its last flush interval is lost) and that no stuck report of its
// own names: its completion may be among the lost records. One a stuck
// report names stayed in flight while the process lived on: a real hang.
bool LostAtItsEnd(const Model& m, uint32_t oi) {
  const Op& o = m.ops[oi];
  const Proc& p = m.procs[o.proc];
  if (p.finalized) return false;
  for (const StuckReport& r : p.stucks)
    for (const StuckOp& s : r.ops)
      if (s.op == oi) return false;
  return true;
}

void ImplyFromPeers(Model* m) {
  for (const Match& mt : m->matches) {
    if (mt.kind != OpKind::kColl || mt.ops.size() < 2 || mt.comm >= m->comms.size()) continue;
    uint32_t open = kNone;
    size_t present = 0, completed = 0, opened = 0;
    for (uint32_t oi : mt.ops) {
      if (oi == kNone) continue;
      ++present;
      const Op& o = m->ops[oi];
      if (o.state == OpState::kCompleted && !o.completion_lost && o.done_ns != kNoTime) ++completed;
      else if (o.state == OpState::kInFlight && (o.ended_by_abort || LostAtItsEnd(*m, oi))) open = oi, ++opened;
    }
    if (opened != 1 || present != mt.ops.size() || !SlotsAreRanks(*m, mt) || completed + 1 != present ||
        static_cast<int32_t>(present) != m->comms[mt.comm].nranks)
      continue;
    Op& y = m->ops[open];
    y.state = OpState::kCompleted;
    y.completion_lost = true;
    y.ended_by_abort = false;
    y.done_ns = kNoTime;
    y.has_gpu = false;
  }
}

// A collective "completed" on some ranks that a member never issued, its
// file whole, and each such completion shortly before its process's
// finalize or the end of its file: no collective completes without every
// member, so these are an abort's (ncclCommAbort makes kernels exit; with
// CUDA-event completions their events then complete too). Seen on one
// H100, 4 ranks over sockets, CUDA-event completions: rank 1 was SIGKILLed
// and the others, on NCCL's remote error 0.5 s later, aborted, their
// in-flight collectives "completed", and every file read as healthy.
// Or after a peer's abort (AfterAPeerEnded). Seen on 4 H200s, NCCL 2.27.7,
// kernel channels: rank 3 skipped AllReduce #4; ranks 0 and 1 timed out and
// aborted, and rank 2's AllReduce #4 then "completed" after 8 s; its host
// went on to AllReduce #5, which read as the hang, with rank 2 the odd one.
void AbortedWithoutAMember(Model* m) {
  for (const Match& mt : m->matches) {
    if (mt.kind != OpKind::kColl || mt.comm >= m->comms.size()) continue;
    const Comm& c = m->comms[mt.comm];
    if (c.size_guessed || c.nranks < 2 || static_cast<int32_t>(c.proc_of_rank.size()) < c.nranks) continue;
    bool absent = false;  // a member with a whole file never issued it
    // ... and that member finalized: its last records are not lost, as a
    // killed process's last flush interval is, so it truly never issued it.
    bool absent_finalized = false;
    for (int32_t r = 0; r < c.nranks; ++r) {
      const uint32_t pr = c.proc_of_rank[static_cast<size_t>(r)];
      if (pr == kNone || m->procs[pr].damaged || m->procs[pr].cut_tail || OpOfRank(*m, mt, r) != kNone) continue;
      absent = true;
      absent_finalized = absent_finalized || m->procs[pr].finalized;
    }
    if (!absent) continue;
    for (uint32_t oi : mt.ops) {
      if (oi == kNone) continue;
      Op& o = m->ops[oi];
      if (o.state != OpState::kCompleted || o.completion_lost ||
          !(InAbortWindowOf(*m, o) || (absent_finalized && AfterAPeerEnded(*m, o))))
        continue;
      o.state = OpState::kInFlight;
      o.ended_by_abort = true;
      o.has_gpu = false;
      o.done_ns = kNoTime;
    }
  }
}

// Comm::slot_rank of every communicator: the ranks with a file (members)
// and of collective operations, unless they are 0 to n - 1.
void SetSlots(Model* m) {
  std::vector<std::vector<int32_t>> present(m->comms.size());
  for (uint32_t ci = 0; ci < m->comms.size(); ++ci)
    for (const CommMember& mem : m->comms[ci].members)
      if (mem.rank >= 0) present[ci].push_back(std::min(mem.rank, std::max(m->comms[ci].nranks - 1, 0)));
  // Only ranks not already there: a communicator's operations are nearly
  // all of its members'.
  std::vector<int32_t> last(m->comms.size(), -1);
  for (const Op& o : m->ops) {
    if (o.rank < 0 || o.kind != OpKind::kColl || o.comm >= m->comms.size() || o.rank == last[o.comm]) continue;
    last[o.comm] = o.rank;
    present[o.comm].push_back(o.rank);
  }
  for (uint32_t ci = 0; ci < m->comms.size(); ++ci) {
    std::vector<int32_t>& v = present[ci];
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    Comm& c = m->comms[ci];
    c.slot_rank.clear();
    if (!v.empty() && v.back() + 1 != static_cast<int32_t>(v.size())) c.slot_rank = std::move(v);
  }
}

// The slot of `rank`, present on `c` (SetSlots).
size_t RankSlot(const Comm& c, int32_t rank) {
  if (c.slot_rank.empty()) return static_cast<size_t>(rank);
  return static_cast<size_t>(std::lower_bound(c.slot_rank.begin(), c.slot_rank.end(), rank) - c.slot_rank.begin());
}

// `shared`: matches whose number some rank's graph-like operation repeated
// (MatchOps). Without kernel channels in its mask NCCL gives such a number
// to the next call it counts; the captured or replayed operations only
// share it. So on every rank a graph-like holder of such a number gives up
// its slot: a rank that captured or replayed but never issued the next call
// is then absent from that call, not taken to have joined it. A match left
// with no holder at all is removed.
void ReleaseGraphHolders(Model* m, std::vector<uint32_t>* shared) {
  if (shared->empty()) return;
  std::sort(shared->begin(), shared->end());
  shared->erase(std::unique(shared->begin(), shared->end()), shared->end());
  bool emptied = false;
  for (uint32_t mi : *shared) {
    Match& mt = m->matches[mi];
    bool any = false;
    for (uint32_t& oi : mt.ops) {
      if (oi == kNone) continue;
      if (GraphLike(*m, oi)) {
        Proc& p = m->procs[m->ops[oi].proc];
        ++p.graph_repeats;
        p.graph_repeat_op = std::min(p.graph_repeat_op, oi);
        m->ops[oi].match = kNone;
        oi = kNone;
      } else {
        any = true;
      }
    }
    emptied |= !any;
  }
  if (!emptied) return;
  std::vector<uint32_t> renumber(m->matches.size(), kNone);
  size_t kept = 0;
  for (size_t mi = 0; mi < m->matches.size(); ++mi) {
    const std::vector<uint32_t>& ops = m->matches[mi].ops;
    if (std::all_of(ops.begin(), ops.end(), [](uint32_t oi) { return oi == kNone; })) continue;
    renumber[mi] = static_cast<uint32_t>(kept);
    if (kept != mi) m->matches[kept] = std::move(m->matches[mi]);
    ++kept;
  }
  m->matches.resize(kept);
  for (Op& o : m->ops)
    if (o.match != kNone) o.match = renumber[o.match];
}

}  // namespace

uint32_t OpOfRankInSlots(const Model& m, const Match& mt, int32_t rank) {
  const std::vector<int32_t>& slot_rank = m.comms[mt.comm].slot_rank;
  auto it = std::lower_bound(slot_rank.begin(), slot_rank.end(), rank);
  if (it == slot_rank.end() || *it != rank) return kNone;
  const size_t slot = static_cast<size_t>(it - slot_rank.begin());
  return slot < mt.ops.size() ? mt.ops[slot] : kNone;
}

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
  // Collectives, nearly every operation, are found by seq in a dense table
  // per (communicator, function): NCCL counts seq from 0, so it is an index.
  // A table whose seqs are sparse (a corrupt file's) falls back to the hash
  // map, as p2p operations do. On 10 M operations the hash lookups were the
  // match's largest cost (BENCHMARKS.md).
  struct Dense {
    uint64_t ops = 0, max_seq = 0;
    std::vector<uint32_t> match;  // seq -> Model::matches index; empty: use the hash map
  };
  std::unordered_map<uint64_t, Dense> dense;
  auto dense_key = [](const Op& o) { return uint64_t{o.comm} << 16 | o.func; };
  size_t sparse_ops = 0;
  for (const Op& o : m->ops) {
    if (o.rank < 0) continue;
    if (o.kind != OpKind::kColl) {
      ++sparse_ops;
      continue;
    }
    Dense& d = dense[dense_key(o)];
    ++d.ops;
    d.max_seq = std::max(d.max_seq, o.seq);
  }
  for (auto& [key, d] : dense) {
    if (d.max_seq < 4 * d.ops + 1024) d.match.assign(d.max_seq + 1, kNone);
    else sparse_ops += d.ops;
  }
  std::unordered_map<Key, uint32_t, KeyHash> index;
  index.reserve(sparse_ops / 2 + 16);
  std::vector<int32_t> max_member_rank(m->comms.size(), -1);
  for (uint32_t ci = 0; ci < m->comms.size(); ++ci)
    for (const CommMember& mem : m->comms[ci].members)
      max_member_rank[ci] = std::max(max_member_rank[ci], std::min(mem.rank, m->comms[ci].nranks - 1));
  SetSlots(m);
  m->matches.clear();
  std::vector<uint32_t> graph_shared;  // matches whose number a rank's graph-like op repeated
  for (Proc& p : m->procs) {
    p.graph_repeats = 0;
    p.graph_repeat_op = kNone;
  }
  for (uint32_t oi = 0; oi < m->ops.size(); ++oi) {
    Op& o = m->ops[oi];
    o.match = kNone;
    if (o.rank < 0) continue;
    if (o.kind == OpKind::kP2p && m->comms[o.comm].ranks_by_order) continue;  // peers unknown (model.h)
    Key k{o.comm, o.kind == OpKind::kColl ? o.func : uint16_t{0}, static_cast<uint8_t>(o.kind), -1, -1, o.seq};
    size_t slot = 0;
    if (o.kind == OpKind::kP2p) {
      const bool recv = IsRecv(o.fn);
      k.src = recv ? o.peer_or_root : o.rank;
      k.dst = recv ? o.rank : o.peer_or_root;
      slot = recv ? 1 : 0;
    } else {
      slot = RankSlot(m->comms[o.comm], o.rank);
    }
    uint32_t* dense_slot = nullptr;
    if (o.kind == OpKind::kColl) {
      Dense& d = dense[dense_key(o)];
      if (!d.match.empty()) dense_slot = &d.match[o.seq];
    }
    auto it = dense_slot != nullptr ? index.end() : index.find(k);
    const bool found = dense_slot != nullptr ? *dense_slot != kNone : it != index.end();
    uint32_t mi;
    if (!found) {
      mi = static_cast<uint32_t>(m->matches.size());
      Match match;
      match.comm = o.comm;
      match.kind = o.kind;
      match.seq = o.seq;
      match.src = k.src;
      match.dst = k.dst;
      // Collectives: one slot per rank up to the highest rank that has a
      // file (consumers treat slots past the end as absent), so a
      // communicator claiming many more ranks than were traced costs nothing;
      // or one per rank present (Comm::slot_rank), so a node's ranks high in
      // a large communicator cost no slot for every rank below them.
      const std::vector<int32_t>& slot_rank = m->comms[o.comm].slot_rank;
      match.ops.assign(o.kind == OpKind::kP2p      ? 2
                       : !slot_rank.empty()        ? slot_rank.size()
                                                   : static_cast<size_t>(std::max(max_member_rank[o.comm] + 1, 1)),
                       kNone);
      m->matches.push_back(std::move(match));
      if (dense_slot != nullptr) *dense_slot = mi;
      else index.emplace(k, mi);
    } else {
      mi = dense_slot != nullptr ? *dense_slot : it->second;
    }
    Match& match = m->matches[mi];
    if (slot >= match.ops.size()) match.ops.resize(slot + 1, kNone);
    if (match.ops[slot] != kNone) {
      // A duplicate on the same rank stays unmatched. Where it or the slot's
      // holder is graph-like, NCCL numbered it so (Proc::graph_repeats),
      // which a verdict names. A rank's calls NCCL counts each take a number
      // of their own, so of a number's holders at most one is not
      // graph-like: the call after the captured ones. That one takes the
      // slot, so that a hang in it is matched across ranks like any other
      // (and ReleaseGraphHolders below).
      const uint32_t holder = match.ops[slot];
      const bool graph_new = GraphLike(*m, oi);
      const bool graph_holder = GraphLike(*m, holder);
      if (graph_new || graph_holder) {
        graph_shared.push_back(mi);
        uint32_t repeat = oi;
        if (graph_holder && !graph_new) {
          match.ops[slot] = oi;
          o.match = mi;
          m->ops[holder].match = kNone;
          repeat = holder;
        }
        Proc& p = m->procs[o.proc];
        ++p.graph_repeats;
        p.graph_repeat_op = std::min(p.graph_repeat_op, repeat);  // kNone is the largest
      }
      continue;
    }
    match.ops[slot] = oi;
    o.match = mi;
  }
  ReleaseGraphHolders(m, &graph_shared);
  ImplyFromPeers(m);
  AbortedWithoutAMember(m);
}

}  // namespace ncclwatch::tools
