#include <stdio.h>

#include <algorithm>
#include <map>
#include <memory>

#include <google/protobuf/arena.h>

#include "tools/model/semantics.h"
#include "tools/model/summary_merge_internal.h"
#include "tools/model/window_summary.h"

namespace ncclwatch::tools::merge_internal {
namespace {

// The chain members piece `i`'s prefixes declare, one per communicator it
// names (a summary may name a hash twice: its last), by hash.
std::unordered_map<uint64_t, ChainMember*> AddPrefixMembers(size_t i, const summary::SummaryProcess& sp,
                                                            Chains* chains) {
  std::unordered_map<uint64_t, ChainMember*> mine;
  for (const summary::CommPrefix& p : sp.prefixes()) {
    if (p.comm_hash() == 0) continue;
    std::vector<ChainMember>& v = (*chains)[p.comm_hash()];
    v.emplace_back();
    ChainMember& c = v.back();
    c.proc = i;
    c.rank = p.rank();
    c.let_go = p.collectives();
    c.stored.reserve(static_cast<size_t>(p.checkpoints_size()));
    for (const summary::Checkpoint& k : p.checkpoints()) c.stored.emplace_back(k.position(), k.hash());
    // Written in order; a damaged summary's are put in order, the first
    // of a repeated position kept.
    std::stable_sort(c.stored.begin(), c.stored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    c.stored.erase(std::unique(c.stored.begin(), c.stored.end(),
                               [](const auto& a, const auto& b) { return a.first == b.first; }),
                   c.stored.end());
  }
  // Pointers once every prefix is in: one lookup per prefix, not a scan of
  // every communicator.
  for (const summary::CommPrefix& p : sp.prefixes())
    if (p.comm_hash() != 0) mine[p.comm_hash()] = &(*chains)[p.comm_hash()].back();
  return mine;
}

// A piece's records in file order with their offsets: a summary's parsed
// once onto `arena` (null where one does not parse), a trace file's as its
// window holds them. The parses and frees of a summary's messages were
// most of the merge's time at 16,384 ranks (BENCHMARKS.md), hence the arena.
std::vector<std::pair<uint64_t, const trace::Record*>> RecordsOf(const SummaryPiece& piece,
                                                                 google::protobuf::Arena* arena) {
  if (piece.window != nullptr) return piece.window->Records();
  std::vector<std::pair<uint64_t, const trace::Record*>> out;
  out.reserve(static_cast<size_t>(piece.sp.records_size()));
  for (const summary::WindowRecord& w : piece.sp.records()) {
    trace::Record* one = google::protobuf::Arena::CreateMessage<trace::Record>(arena);
    out.emplace_back(w.offset(), one->ParseFromString(w.record()) ? one : nullptr);
  }
  return out;
}

// What the window's definitions so far say of its operations.
struct Defs {
  std::unordered_map<uint32_t, std::string> strings;
  std::unordered_map<uint32_t, std::pair<uint64_t, int32_t>> comm;  // file comm -> hash, rank
  void Read(const trace::Record& r) {
    if (r.has_string_def()) strings[r.string_def().id()] = r.string_def().text();
    if (r.has_comm_init()) comm[r.comm_init().comm()] = {r.comm_init().comm_hash(), r.comm_init().rank()};
  }
};

// One process's feed: its window's place in the chains, and what it settles.
struct Piece {
  size_t i;
  const summary::SummaryProcess& sp;
  Feeding* f;
  std::unordered_map<uint64_t, ChainMember*> mine;
  Defs defs;
  // The first operation still unfinished and the last one issued: what the
  // merge must not let go (window_summary.h: cross-communicator order, and
  // what a rank did last).
  uint64_t first_open = UINT64_MAX, last_start = 0;
  // Its own prefixes' last seq per communicator and collective function
  // (FuncIds).
  std::map<std::pair<uint64_t, uint16_t>, uint64_t> own;
};

// A collective of the window numbered below what the process's own prefix
// let go of its function: the window holds what came after the prefix,
// and NCCL's numbers never go back on a communicator (they repeat, for
// CUDA graphs: docs/nccl_call_order.md), so the summary was edited. Not
// judged where reading the trace found damage (its numbers may be out of
// line: the loader says so).
void CheckNumbering(Piece* pc, const trace::Op& o, uint64_t hash, const std::string& func) {
  Settled& s = pc->f->settled[pc->i];
  if (!s.inconsistent.empty() || pc->sp.damaged()) return;
  auto it = pc->own.find({hash, pc->f->names->Id(func)});
  if (it == pc->own.end() || o.seq() >= it->second) return;
  char comm[24];
  snprintf(comm, sizeof(comm), "0x%llx", static_cast<unsigned long long>(hash));
  s.inconsistent = "its window holds " + func + " #" + std::to_string(o.seq()) + " on comm " + comm +
                   ", which its prefix let go up to #" + std::to_string(it->second) + " (numbers never go back)";
}

// Collective `o` (function `func`) of communicator `hash` on its member's
// chain; whether the others' cut lets it go. Asked for (summarize
// --collectives): fed beside the other members' asked records, not settled
// against them (and then put back like them).
bool ChainCollective(Piece* pc, const trace::Op& o, uint64_t hash, int32_t rank, const std::string& func) {
  auto it = pc->f->cuts->coll.find({hash, pc->f->names->Id(func)});
  bool cut = it != pc->f->cuts->coll.end() && o.seq() <= it->second;
  auto cm = pc->mine.find(hash);
  if (cm == pc->mine.end()) {
    std::vector<ChainMember>& v = pc->f->chains[hash];
    v.emplace_back();
    v.back().proc = pc->i;
    v.back().rank = rank;
    cm = pc->mine.emplace(hash, &v.back()).first;
  }
  ChainMember* ch = cm->second;
  // A window the cap cut (cut_ops) has holes: no chain runs on through it,
  // so its let-go collectives stay uncompared.
  if (pc->sp.cut_ops() != 0 || pc->sp.cut_stuck_ops() != 0) return cut;
  uint64_t prev = 0;
  if (!ch->window.empty())
    prev = ch->window.back();
  else if (ch->let_go > 0 && !ch->Stored(ch->let_go, &prev))
    ch->no_base = true;  // summarize always stores it: a damaged summary
  auto d = pc->defs.strings.find(o.datatype());
  ch->window.push_back(ChainStep(prev, func, o.count(), d == pc->defs.strings.end() ? std::string() : d->second,
                                 IsRooted(FuncFromName(func)) ? o.root() : 0));
  if (pc->f->cuts->Fed(hash, ch->let_go + ch->window.size())) {
    if (cut) pc->f->put_back[pc->i].emplace(hash, pc->f->names->Id(func), o.seq());
    cut = false;
  }
  if (cut && o.has_completion()) ++ch->dropped;
  return cut;
}

// Whether operation `o` is let go here because another member let it go
// (settled, counted, never fed: its peers' side is gone).
bool Settles(Piece* pc, const trace::Op& o, bool finished_here) {
  auto c = pc->defs.comm.find(o.comm());
  auto fn = pc->defs.strings.find(o.func());
  if (c == pc->defs.comm.end() || fn == pc->defs.strings.end() || c->second.first == 0) return false;
  const uint64_t hash = c->second.first;
  const std::string& func = fn->second;
  const bool p2p = o.kind() == trace::OP_KIND_P2P;
  bool cut = false;
  if (!p2p) {
    CheckNumbering(pc, o, hash, func);
    cut = ChainCollective(pc, o, hash, c->second.second, func);
  } else {
    const bool recv = IsRecv(FuncFromName(func));
    const int32_t me = c->second.second;
    const P2pCut k = recv ? P2pCut{hash, o.peer(), me} : P2pCut{hash, me, o.peer()};
    auto it = pc->f->cuts->p2p.find({k, recv});
    cut = it != pc->f->cuts->p2p.end() && o.p2p_seq() <= it->second;
  }
  if (!cut) return false;
  Settled& s = pc->f->settled[pc->i];
  // Kept as evidence: issued last, or after an operation not finished
  // beyond doubt (cross-communicator order), or itself not finished beyond
  // doubt (an abort's completion, a late rank's wait), while another rank
  // let it go.
  const bool keep_it = o.start_ns() >= pc->first_open || o.start_ns() >= pc->last_start || !finished_here;
  if (o.has_completion() && keep_it) {
    ++s.ops;
    ++s.completed;
    if (s.conflicts++ == 0) s.first_conflict = func + " #" + std::to_string(p2p ? o.p2p_seq() : o.seq());
  } else if (o.has_completion()) {
    ++s.ops;
    ++s.completed;
  } else if (s.conflicts++ == 0) {
    s.first_conflict = func + (p2p ? " #" + std::to_string(o.p2p_seq()) +
                                         (IsRecv(FuncFromName(func)) ? " from rank " : " to rank ") +
                                         std::to_string(o.peer())
                                   : " #" + std::to_string(o.seq()));
  }
  return true;
}

}  // namespace

void FeedPiece(size_t i, const SummaryPiece& piece, Feeding* f) {
  const summary::SummaryProcess& sp = piece.sp;
  Piece pc{i, sp, f, AddPrefixMembers(i, sp, &f->chains), {}};
  for (const summary::CommPrefix& p : sp.prefixes())
    for (const summary::LastSeq& l : p.colls()) pc.own[{p.comm_hash(), f->names->Id(l.func())}] = l.seq();
  google::protobuf::Arena arena;  // freed with the process
  const std::vector<std::pair<uint64_t, const trace::Record*>> records = RecordsOf(piece, &arena);
  std::vector<const trace::Record*> parsed;
  parsed.reserve(records.size());
  for (const auto& [offset, r] : records) {
    parsed.push_back(r);
    if (r != nullptr && r->has_op()) pc.last_start = std::max<uint64_t>(pc.last_start, r->op().start_ns());
  }
  const std::vector<bool> finished = FinishedOps(parsed, &pc.first_open);
  f->loader->BeginWindow(sp.path());
  // The asked collectives every member can put back, fed in file order
  // among the window's records (whose definitions they use). Let go as
  // completed on their rank: they are not settled, nor cut again.
  std::vector<const summary::PastCollective*> back;
  for (const summary::PastCollective& a : sp.asked_collectives())
    if (f->cuts->Fed(a.comm_hash(), a.position())) back.push_back(&a);
  std::stable_sort(back.begin(), back.end(), [](const summary::PastCollective* a, const summary::PastCollective* b) {
    return a->offset() < b->offset();
  });
  size_t next_back = 0;
  trace::Record r;
  auto feed_back = [&](uint64_t before) {
    for (; next_back < back.size() && back[next_back]->offset() < before; ++next_back) {
      const summary::PastCollective& a = *back[next_back];
      if (!r.ParseFromString(a.record()) || !r.has_op()) {
        f->loader->AddError(sp.path() + ": an asked collective at offset " + std::to_string(a.offset()) +
                            " of its summary does not parse");
        continue;
      }
      auto fn = pc.defs.strings.find(r.op().func());
      if (fn != pc.defs.strings.end()) f->put_back[i].emplace(a.comm_hash(), f->names->Id(fn->second), r.op().seq());
      ++f->settled[i].asked;
      f->loader->Add(r, a.offset());
    }
  };
  for (size_t k = 0; k < records.size(); ++k) {
    const auto& [offset, rec] = records[k];
    feed_back(offset);
    if (rec == nullptr) {
      // Summarize wrote it from a parsed record: the summary is damaged.
      f->loader->AddError(sp.path() + ": a window record at offset " + std::to_string(offset) +
                          " of its summary does not parse");
      continue;
    }
    pc.defs.Read(*rec);
    if (rec->has_op() && Settles(&pc, rec->op(), finished[k])) continue;
    f->loader->Add(*rec, offset);
  }
  feed_back(UINT64_MAX);
  f->loader->EndFile(false, {});
}

}  // namespace ncclwatch::tools::merge_internal
