// What the files of the summaries' merge share (//tools/model:summary_merge,
// not for other users): the cuts and ranges every member's prefixes set
// (merge_cuts.cc), the arrival samples lined up (merge_samples.cc), each
// process's window fed (merge_feed.cc) and the signature chains compared
// (merge_chains.cc). summary_merge.cc runs them in that order.
//
// Thread safety: one thread.

#ifndef TOOLS_MODEL_SUMMARY_MERGE_INTERNAL_H_
#define TOOLS_MODEL_SUMMARY_MERGE_INTERNAL_H_

#include <stdint.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <google/protobuf/repeated_field.h>

#include "proto/summary.pb.h"
#include "tools/model/loader.h"
#include "tools/model/model.h"
#include "tools/model/op_key.h"
#include "tools/model/summary_merge.h"

namespace ncclwatch::tools::merge_internal {

// Frees a repeated field's elements (Clear keeps them for reuse).
template <typename T>
void Release(google::protobuf::RepeatedPtrField<T>* f) {
  google::protobuf::RepeatedPtrField<T> gone;
  f->Swap(&gone);
}

// Positions as sorted, disjoint ranges (both ends included).
using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;
// Whether a range of `r` holds `pos`.
bool Within(const Ranges& r, uint64_t pos);
// Whether one range of `r` holds every position from `from` to `to`.
bool Covers(const Ranges& r, uint64_t from, uint64_t to);

using P2pCut = std::tuple<uint64_t, int32_t, int32_t>;  // hash, sender, receiver

// What any member let go, and what the second round can put back.
struct Cuts {
  // Per communicator and collective function (FuncIds): the highest seq
  // any member let go.
  std::map<std::pair<uint64_t, uint16_t>, uint64_t> coll;
  // Per sender, receiver and side (is_recv): the highest p2p_seq of the
  // pair any member let go (a send and its receive settle together).
  std::map<std::pair<P2pCut, bool>, uint64_t> p2p;
  // Per communicator: the positions every member can put back (summarize
  // --collectives), normalized.
  std::map<uint64_t, Ranges> fed;
  bool Fed(uint64_t hash, uint64_t pos) const {
    auto it = fed.find(hash);
    return it != fed.end() && Within(it->second, pos);
  }
};
// The cuts of the kept processes' prefixes. `names` gives functions ids.
Cuts CollectCuts(const std::vector<SummaryPiece>& pieces, const std::vector<bool>& keep, FuncIds* names);

// One member's collectives on a communicator, for the chain comparison.
struct ChainMember {
  size_t proc = 0;  // index in the pieces
  int32_t rank = -1;
  uint64_t let_go = 0;  // CommPrefix.collectives
  // (position, chain) by position: a sorted array, not a map, since
  // 16,384 ranks hold 2.5 M checkpoints (BENCHMARKS.md).
  std::vector<std::pair<uint64_t, uint64_t>> stored;
  std::vector<uint64_t> window;  // the chain after each window collective
  uint64_t dropped = 0;          // collectives of the window settled at the merge
  // No checkpoint at let_go to continue from: the window's chain values
  // are unknown, never compared.
  bool no_base = false;
  bool Stored(uint64_t pos, uint64_t* h) const;
  bool At(uint64_t pos, uint64_t* h) const;
};
using Chains = std::map<uint64_t, std::vector<ChainMember>>;  // by communicator hash

// One communicator's arrival samples lined up across its members, before
// the model is built: positions, functions and the members' file times.
struct LinedUp {
  uint64_t hash = 0;
  uint64_t stride = 0;
  uint64_t most = 0;            // the most collectives any member had
  std::vector<size_t> members;  // indices in the pieces
  std::vector<uint64_t> positions;
  // Per position, its function: an index in `names` (a communicator's
  // few), not a string a position: at 16,384 ranks those strings were
  // 7% of the merge's peak (BENCHMARKS.md, "Streaming the summaries").
  std::vector<uint8_t> funcs;
  std::vector<std::string> names;
  std::vector<uint64_t> seqs;
  std::vector<int64_t> starts, durations;  // [position index * members + member]: file times
  std::vector<int64_t> held;  // the same, GPU-held ns (kNoTime: not known); empty: no member's samples carry them
  // Per position: the first member's size bucket, and the lowest of the
  // members' first seqs of its function (the warm-up); both cleared when a
  // member's samples carry none.
  std::vector<int32_t> buckets;
  std::vector<uint64_t> warmup_seqs;
  bool stats_ok = true;
};
// Each communicator's samples at the positions every member sampled
// (merge_samples.cc). `damaged`: members whose samples do not decode
// (their communicator gets none), as (piece, communicator hash). Each
// member's encoded samples are emptied once read into the table (the
// table and every process's samples are never held at once); their other
// fields stay.
std::vector<LinedUp> LineUpSamples(std::vector<SummaryPiece>* pieces, const std::vector<bool>& keep,
                                   std::vector<std::pair<size_t, uint64_t>>* damaged);
// The lined-up samples into the model (Model::sampled), on each member's
// own clock, with the model's indices (`proc_of`: a piece's path to its
// Model::procs index).
void AddSampled(std::vector<LinedUp>* lined_up, const std::vector<SummaryPiece>& pieces,
                const std::unordered_map<std::string, uint32_t>& proc_of, Model* m);

// What feeding one process settled against the others' cuts.
struct Settled {
  uint64_t ops = 0, completed = 0, conflicts = 0;
  uint64_t asked = 0;  // of the operations let go, put back (asked_collectives fed)
  std::string first_conflict;
  // Why the summary is not what summarize writes (its window holds a
  // collective numbered below what its own prefix let go); "" if it is.
  std::string inconsistent;
};

// The merge's state while the windows are fed, one process after another.
struct Feeding {
  const Cuts* cuts = nullptr;
  ModelLoader* loader = nullptr;
  FuncIds* names = nullptr;
  Chains chains;
  std::vector<Settled> settled;  // per piece
  // The operations put back, per piece: marked in the model once it is
  // built (Model::asked_ops). Collectives' keys (OpKey, `names`).
  std::vector<std::set<std::tuple<uint64_t, uint16_t, uint64_t>>> put_back;
};
// Piece `i`'s window (with the asked collectives every member can put
// back) fed to the loader as one window, what the others let go settled
// (merge_feed.cc).
void FeedPiece(size_t i, const SummaryPiece& piece, Feeding* f);

// The signature chains compared (merge_chains.cc): Model::chain_mismatches,
// and the gaps where they cannot be compared. `gap(i, why)` adds to piece
// i's Proc::window_gap; `name(i)` names its process.
void CompareChains(const Chains& chains, const Cuts& cuts, const std::vector<SummaryPiece>& pieces,
                   const std::unordered_map<std::string, uint32_t>& proc_of,
                   const std::function<void(size_t, const std::string&)>& gap,
                   const std::function<std::string(size_t)>& name, Model* m);
// Each communicator's collectives settled at the merge (Comm::settled_colls).
void SetSettledColls(const Chains& chains, const Cuts& cuts, Model* m);

}  // namespace ncclwatch::tools::merge_internal

#endif  // TOOLS_MODEL_SUMMARY_MERGE_INTERNAL_H_
