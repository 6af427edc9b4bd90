#include "tools/summary/job.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <google/protobuf/arena.h>
#include <google/protobuf/repeated_field.h>

#include "tools/model/inputs.h"
#include "tools/model/loader.h"
#include "tools/model/semantics.h"
#include "tools/reader/reader.h"

namespace ncclwatch::tools {
namespace {

using CollCut = std::pair<uint64_t, std::string>;            // hash, function
using P2pCut = std::tuple<uint64_t, int32_t, int32_t>;       // hash, sender, receiver

// One member's collectives on a communicator, for the chain comparison.
struct ChainMember {
  size_t proc = 0;  // index in the processes fed
  int32_t rank = -1;
  uint64_t let_go = 0;                  // CommPrefix.collectives
  // (position, chain) by position: a sorted array, not a map, since
  // 16,384 ranks hold 2.5 M checkpoints (BENCHMARKS.md).
  std::vector<std::pair<uint64_t, uint64_t>> stored;
  std::vector<uint64_t> window;         // the chain after each window collective
  uint64_t dropped = 0;                 // collectives of the window settled at the merge
  // No checkpoint at let_go to continue from: the window's chain values
  // are unknown, never compared.
  bool no_base = false;
  bool Stored(uint64_t pos, uint64_t* h) const {
    auto it = std::lower_bound(stored.begin(), stored.end(), std::make_pair(pos, uint64_t{0}));
    if (it == stored.end() || it->first != pos) return false;
    *h = it->second;
    return true;
  }
  bool At(uint64_t pos, uint64_t* h) const {
    if (pos == 0) return *h = 0, true;
    if (pos <= let_go) return Stored(pos, h);
    if (no_base || pos - let_go > window.size()) return false;  // no overflow: a summary's counts are anyone's
    *h = window[pos - let_go - 1];
    return true;
  }
};

// Positions as sorted, disjoint ranges (both ends included).
using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

Ranges Normalized(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& x : r) {
    // Touching or overlapping the last one: one range (no wrap at the top).
    if (!out.empty() && (out.back().second == UINT64_MAX || x.first <= out.back().second + 1))
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  }
  return out;
}

bool Within(const Ranges& r, uint64_t pos) {
  auto it = std::upper_bound(r.begin(), r.end(), std::make_pair(pos, UINT64_MAX));
  return it != r.begin() && std::prev(it)->second >= pos;
}

// Whether one range of `r` holds every position from `from` to `to`.
bool Covers(const Ranges& r, uint64_t from, uint64_t to) {
  for (const auto& x : r)
    if (x.first <= from && x.second >= to) return true;
  return false;
}

// One member's answer to `summarize --collectives` on a communicator.
struct AskedMember {
  uint64_t let_go = 0;  // CommPrefix.collectives
  bool holes = false;   // the cap cut its window: it chains nothing on
  Ranges asked;         // CommPrefix.asked
};

// The positions of a communicator every member can put back, normalized:
// each asked range whose collectives every member holds, as records it let
// go and was asked for, or in a window without holes. A range is put back
// whole or not at all: where one member could not answer (its node was not
// asked, or its window was cut), the others' half would look unmatched.
Ranges FedRanges(const std::vector<AskedMember>& members) {
  Ranges all;
  for (const AskedMember& a : members) all.insert(all.end(), a.asked.begin(), a.asked.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  Ranges fed;
  for (const auto& [from, to] : all) {
    bool every = true;
    for (const AskedMember& a : members) {
      const bool window_part = to > a.let_go;
      const bool let_go_part = from <= a.let_go;
      every = every && !(window_part && a.holes) && !(let_go_part && !Covers(a.asked, from, std::min(to, a.let_go)));
    }
    if (every) fed.emplace_back(from, to);
  }
  return Normalized(std::move(fed));
}

// Frees a repeated field's elements (Clear keeps them for reuse).
template <typename T>
void Release(google::protobuf::RepeatedPtrField<T>* f) {
  google::protobuf::RepeatedPtrField<T> gone;
  f->Swap(&gone);
}

// ReadDigests' fields of a Proc, from one read before the model was.
void MoveDigests(Proc* from, Proc* to) {
  to->digested = from->digested;
  to->row_digests = std::move(from->row_digests);
  to->rank_digests = std::move(from->rank_digests);
  to->whole_comms = std::move(from->whole_comms);
  to->arrivals = std::move(from->arrivals);
}

// One communicator's arrival samples lined up across its members, before
// the model is built: positions, functions and the members' file times.
struct LinedUp {
  uint64_t hash = 0;
  uint64_t stride = 0;
  uint64_t most = 0;             // the most collectives any member had
  std::vector<size_t> members;   // indices in the processes fed
  std::vector<uint64_t> positions;
  std::vector<std::string> funcs;
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

// Each communicator's samples at the positions every member sampled:
// those of the largest stride among them (SampledPosition: the sets nest,
// so each member sampled those unless its collective there was not: no
// completion, a file that began later or ended sooner), where each
// member's is the same collective (function and seq: after a collective
// one rank skipped, positions name different ones). A position some member
// lacks is left out, never guessed. One member is decoded at a time: at
// 16,384 ranks the decoded samples of all would be hundreds of MB beside
// the table kept.
// `damaged`: members whose samples do not decode (their communicator gets
// none).
std::vector<LinedUp> LineUpSamples(const std::vector<summary::SummaryProcess>& procs, const std::vector<bool>& keep,
                                   uint64_t* damaged) {
  std::map<uint64_t, std::vector<std::pair<size_t, int>>> of;  // hash -> (process, index in its samples)
  for (size_t i = 0; i < procs.size(); ++i) {
    if (!keep[i]) continue;
    std::set<uint64_t> here;  // a summary naming a communicator twice: its first
    for (int k = 0; k < procs[i].samples_size(); ++k) {
      const uint64_t h = procs[i].samples(k).comm_hash();
      if (h != 0 && here.insert(h).second) of[h].emplace_back(i, k);
    }
  }
  std::vector<LinedUp> out;
  std::vector<ArrivalSample> v;
  for (const auto& [hash, members] : of) {
    LinedUp l;
    l.hash = hash;
    uint32_t log2 = 0;
    for (const auto& [i, k] : members) {
      log2 = std::max(log2, std::min<uint32_t>(procs[i].samples(k).stride_log2(), 62));
      l.most = std::max<uint64_t>(l.most, procs[i].samples(k).collectives());
    }
    l.stride = uint64_t{1} << log2;
    const size_t n = members.size();
    std::vector<bool> present;
    bool ok = true;
    for (size_t j = 0; j < n && ok; ++j) {
      const summary::ArrivalSamples& a = procs[members[j].first].samples(members[j].second);
      l.members.push_back(members[j].first);
      if (!DecodeSamples(a, &v)) {
        ++*damaged;
        ok = false;
        break;
      }
      if (j == 0) {
        for (const ArrivalSample& x : v)
          if (SampledPosition(x.position, log2)) {
            l.positions.push_back(x.position);
            l.funcs.push_back(a.functions(static_cast<int>(x.func)));
            l.seqs.push_back(x.seq);
            l.buckets.push_back(x.bucket);
            l.warmup_seqs.push_back(UINT64_MAX);
          }
        present.assign(l.positions.size(), true);
        l.starts.assign(l.positions.size() * n, 0);
        l.durations.assign(l.positions.size() * n, 0);
      }
      if (!a.held().empty() && l.held.empty()) l.held.assign(l.positions.size() * n, kNoTime);
      size_t at = 0;
      for (size_t c = 0; c < l.positions.size(); ++c) {
        while (at < v.size() && v[at].position < l.positions[c]) ++at;
        if (at == v.size() || v[at].position != l.positions[c] || v[at].seq != l.seqs[c] ||
            a.functions(static_cast<int>(v[at].func)) != l.funcs[c]) {
          present[c] = false;
          continue;
        }
        l.starts[c * n + j] = v[at].start_ns;
        l.durations[c * n + j] = static_cast<int64_t>(std::min<uint64_t>(v[at].duration_ns, uint64_t{1} << 58));
        if (!l.held.empty()) l.held[c * n + j] = v[at].held_ns < 0 ? kNoTime : v[at].held_ns;
        if (v[at].bucket == kNoBucket || a.first_seqs_size() == 0) l.stats_ok = false;
        else l.warmup_seqs[c] = std::min<uint64_t>(l.warmup_seqs[c], a.first_seqs(static_cast<int>(v[at].func)));
      }
    }
    if (!ok) continue;
    // Only the positions every member has.
    size_t kept = 0;
    for (size_t c = 0; c < l.positions.size(); ++c) {
      if (!present[c]) continue;
      // Not onto itself: a string moved onto itself is left empty (a
      // short one, in libstdc++), and every sample's function was lost.
      if (kept != c) {
        l.positions[kept] = l.positions[c];
        l.funcs[kept] = std::move(l.funcs[c]);
        l.seqs[kept] = l.seqs[c];
        l.buckets[kept] = l.buckets[c];
        l.warmup_seqs[kept] = l.warmup_seqs[c];
        std::copy_n(l.starts.begin() + static_cast<std::ptrdiff_t>(c * n), n,
                    l.starts.begin() + static_cast<std::ptrdiff_t>(kept * n));
        std::copy_n(l.durations.begin() + static_cast<std::ptrdiff_t>(c * n), n,
                    l.durations.begin() + static_cast<std::ptrdiff_t>(kept * n));
        if (!l.held.empty())
          std::copy_n(l.held.begin() + static_cast<std::ptrdiff_t>(c * n), n,
                      l.held.begin() + static_cast<std::ptrdiff_t>(kept * n));
      }
      ++kept;
    }
    l.positions.resize(kept);
    l.funcs.resize(kept);
    l.seqs.resize(kept);
    l.buckets.resize(kept);
    l.warmup_seqs.resize(kept);
    if (!l.stats_ok) {
      l.buckets.clear();
      l.warmup_seqs.clear();
    }
    l.starts.resize(kept * n);
    l.durations.resize(kept * n);
    if (!l.held.empty()) l.held.resize(kept * n);
    l.starts.shrink_to_fit();
    l.durations.shrink_to_fit();
    l.held.shrink_to_fit();
    out.push_back(std::move(l));
  }
  return out;
}

TraceHeaderFacts FactsOf(const summary::SummaryProcess& sp) {
  trace::Record r;
  for (const summary::WindowRecord& w : sp.records())
    if (r.ParseFromString(w.record()) && r.has_header()) return HeaderFactsOf(r.header(), sp.size());
  return TraceHeaderFacts{};
}

}  // namespace

std::vector<CollectiveRange> RefineRanges(const Model& m) {
  std::vector<CollectiveRange> out;
  for (const ChainMismatch& cm : m.chain_mismatches) {
    if (cm.asked || cm.comm >= m.comms.size() || m.comms[cm.comm].hash == 0) continue;
    const std::vector<CollectiveRange> r = RangesToAsk(m.comms[cm.comm].hash, cm.from, cm.to);
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

bool IsSummaryFile(const std::string& path) {
  std::string head;
  RegularFile f;
  return ReadFileHead(path, 4096, &head, &f) && LooksLikeSummary(head);
}

bool BuildModelFromSummaries(std::vector<summary::SummaryProcess> procs, std::vector<std::string> errors,
                             std::vector<std::string> notes, const LoadOptions& opts, Model* m,
                             std::string* error, const std::vector<std::string>* sources) {
  // One process per file, one job: as LoadModel screens files.
  std::vector<TraceHeaderFacts> facts;
  std::vector<std::string> names;
  for (size_t i = 0; i < procs.size(); ++i) {
    facts.push_back(FactsOf(procs[i]));
    const bool in_summary = sources != nullptr && i < sources->size() && !(*sources)[i].empty();
    names.push_back(in_summary ? "the copy of " + procs[i].path() + " in " + (*sources)[i] : procs[i].path());
  }
  std::vector<bool> keep;
  if (!ScreenTraceHeaders(opts.job, facts, names, &keep, &notes, error)) {
    m->errors.insert(m->errors.end(), errors.begin(), errors.end());
    return false;
  }

  // What any member let go, per communicator and function (collectives) or
  // sender, receiver and function (p2p).
  std::map<CollCut, uint64_t> coll_cut;
  std::map<std::pair<P2pCut, bool>, uint64_t> p2p_cut;  // (.., is_recv)
  for (size_t i = 0; i < procs.size(); ++i) {
    if (!keep[i]) continue;
    for (const summary::CommPrefix& p : procs[i].prefixes()) {
      if (p.comm_hash() == 0) continue;
      for (const summary::LastSeq& l : p.colls()) {
        auto [it, fresh] = coll_cut.try_emplace({p.comm_hash(), l.func()}, l.seq());
        if (!fresh) it->second = std::max(it->second, l.seq());
      }
      for (const summary::LastSeq& l : p.p2p()) {
        const bool recv = IsRecv(FuncFromName(l.func()));
        const P2pCut k = recv ? P2pCut{p.comm_hash(), l.peer(), p.rank()} : P2pCut{p.comm_hash(), p.rank(), l.peer()};
        // A send and its receive settle together: the cut is the pair's.
        for (bool side : {false, true}) {
          auto [it, fresh] = p2p_cut.try_emplace({k, side}, l.seq());
          if (!fresh) it->second = std::max(it->second, l.seq());
        }
      }
    }
  }

  // What the second round (summarize --collectives) can put back, per
  // communicator.
  std::map<uint64_t, Ranges> fed;
  {
    std::map<uint64_t, std::vector<AskedMember>> members;
    bool any = false;
    for (size_t i = 0; i < procs.size(); ++i) {
      if (!keep[i]) continue;
      for (const summary::CommPrefix& p : procs[i].prefixes()) {
        if (p.comm_hash() == 0) continue;
        AskedMember a;
        a.let_go = p.collectives();
        a.holes = procs[i].cut_ops() > 0 || procs[i].cut_stuck_ops() > 0;
        // Within what summarize writes (collectives.h): a damaged summary
        // cannot make the merge feed or compare without bound.
        for (const summary::PositionRange& r : p.asked())
          if (r.from() >= 1 && r.from() <= r.to() && r.to() - r.from() < kMaxAskedPerRange &&
              a.asked.size() < kMaxAskedRangesPerComm)
            a.asked.emplace_back(r.from(), r.to());
        any |= !a.asked.empty();
        members[p.comm_hash()].push_back(std::move(a));
      }
    }
    if (any)
      for (const auto& [hash, v] : members) {
        Ranges f = FedRanges(v);
        if (!f.empty()) fed.emplace(hash, std::move(f));
      }
  }
  auto is_fed = [&](uint64_t hash, uint64_t pos) {
    auto it = fed.find(hash);
    return it != fed.end() && Within(it->second, pos);
  };
  // The operations put back, per process index: (hash, function, seq),
  // marked in the model once it is built (Model::asked_ops).
  std::vector<std::set<std::tuple<uint64_t, std::string, uint64_t>>> put_back(procs.size());

  LoadOptions lo = opts;
  lo.windows = false;
  ModelLoader loader(lo);
  for (std::string& e : errors) loader.AddError(std::move(e));
  for (std::string& n : notes) loader.AddNote(std::move(n));
  uint64_t nops = 0;
  for (const summary::SummaryProcess& sp : procs) nops += static_cast<uint64_t>(sp.records_size());
  loader.ReserveOps(nops);

  struct Settled {
    uint64_t ops = 0, completed = 0, conflicts = 0;
    uint64_t asked = 0;  // of the operations let go, put back (asked_collectives fed)
    std::string first_conflict;
  };
  std::vector<Settled> settled(procs.size());
  // Each process's digests, read as its window is fed: with 16,384
  // processes, holding their messages beside the model was most of the
  // merge's memory (BENCHMARKS.md).
  std::vector<Proc> digests(procs.size());
  std::vector<bool> digests_ok(procs.size(), true);
  std::map<uint64_t, std::vector<ChainMember>> chains;  // by communicator hash
  // The arrival samples lined up now, while every summary is parsed, and
  // freed at once: the model built below reuses their memory (at 16,384
  // ranks they were a quarter of the merge's peak, BENCHMARKS.md).
  uint64_t damaged_samples = 0;
  std::vector<LinedUp> lined_up = LineUpSamples(procs, keep, &damaged_samples);
  // Every communicator's samples carry GPU-held times, or the process's
  // are not judged whole for them (Proc::samples_held).
  std::vector<bool> samples_held(procs.size(), false);
  for (size_t i = 0; i < procs.size(); ++i)
    samples_held[i] = procs[i].samples_size() > 0 &&
                      std::all_of(procs[i].samples().begin(), procs[i].samples().end(),
                                  [](const summary::ArrivalSamples& a) { return !a.held().empty(); });
  for (summary::SummaryProcess& sp : procs) Release(sp.mutable_samples());
  trace::Record r;
  for (size_t i = 0; i < procs.size(); ++i) {
    if (!keep[i]) continue;
    summary::SummaryProcess& sp = procs[i];
    std::unordered_map<uint64_t, ChainMember*> mine;
    for (const summary::CommPrefix& p : sp.prefixes()) {
      if (p.comm_hash() == 0) continue;
      std::vector<ChainMember>& v = chains[p.comm_hash()];
      v.emplace_back();
      ChainMember& c = v.back();
      c.proc = i;
      c.rank = p.rank();
      c.let_go = p.collectives();
      c.stored.reserve(static_cast<size_t>(p.checkpoints_size()));
      for (const summary::Checkpoint& k : p.checkpoints()) c.stored.emplace_back(k.position(), k.hash());
      // Written in order; a damaged summary's are put in order, the first
      // of a repeated position kept.
      std::stable_sort(c.stored.begin(), c.stored.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      c.stored.erase(std::unique(c.stored.begin(), c.stored.end(),
                                 [](const auto& a, const auto& b) { return a.first == b.first; }),
                     c.stored.end());
    }
    // Pointers once every prefix is in (a summary may name a hash twice):
    // one lookup per prefix, not a scan of every communicator.
    for (const summary::CommPrefix& p : sp.prefixes())
      if (p.comm_hash() != 0) mine[p.comm_hash()] = &chains[p.comm_hash()].back();

    // The first operation still unfinished and the last one issued: what
    // the merge must not let go (see summary.cc: cross-communicator order,
    // and what a rank did last).
    uint64_t first_open = UINT64_MAX, last_start = 0;
    // Each record parsed once, onto an arena freed with the process: the
    // parses and frees of its messages were most of the merge's time at
    // 16,384 ranks (BENCHMARKS.md).
    google::protobuf::Arena arena;
    std::vector<const trace::Record*> parsed;
    parsed.reserve(static_cast<size_t>(sp.records_size()));
    for (const summary::WindowRecord& w : sp.records()) {
      trace::Record* one = google::protobuf::Arena::CreateMessage<trace::Record>(&arena);
      parsed.push_back(one->ParseFromString(w.record()) ? one : nullptr);
      if (parsed.back() != nullptr && one->has_op()) last_start = std::max<uint64_t>(last_start, one->op().start_ns());
    }
    const std::vector<bool> finished = FinishedOps(parsed, &first_open);
    size_t index = 0;
    std::unordered_map<uint32_t, std::string> strings;
    std::unordered_map<uint32_t, std::pair<uint64_t, int32_t>> comm;
    loader.BeginWindow(sp.path());
    // The asked collectives every member can put back, fed in file order
    // among the window's records (whose definitions they use). Let go as
    // completed on their rank: they are not settled, nor cut again.
    std::vector<const summary::PastCollective*> back;
    for (const summary::PastCollective& pc : sp.asked_collectives())
      if (is_fed(pc.comm_hash(), pc.position())) back.push_back(&pc);
    std::stable_sort(back.begin(), back.end(), [](const summary::PastCollective* a, const summary::PastCollective* b) {
      return a->offset() < b->offset();
    });
    size_t next_back = 0;
    auto feed_back = [&](uint64_t before) {
      for (; next_back < back.size() && back[next_back]->offset() < before; ++next_back) {
        const summary::PastCollective& pc = *back[next_back];
        if (!r.ParseFromString(pc.record()) || !r.has_op()) {
          loader.AddError(sp.path() + ": an asked collective at offset " + std::to_string(pc.offset()) +
                          " of its summary does not parse");
          continue;
        }
        auto f = strings.find(r.op().func());
        if (f != strings.end()) put_back[i].emplace(pc.comm_hash(), f->second, r.op().seq());
        ++settled[i].asked;
        loader.Add(r, pc.offset());
      }
    };
    for (const summary::WindowRecord& w : sp.records()) {
      feed_back(w.offset());
      const trace::Record* rec = parsed[index];
      const bool finished_here = finished[index++];
      if (rec == nullptr) {
        // Summarize wrote it from a parsed record: the summary is damaged.
        loader.AddError(sp.path() + ": a window record at offset " + std::to_string(w.offset()) +
                        " of its summary does not parse");
        continue;
      }
      if (rec->has_string_def()) strings[rec->string_def().id()] = rec->string_def().text();
      if (rec->has_comm_init()) comm[rec->comm_init().comm()] = {rec->comm_init().comm_hash(), rec->comm_init().rank()};
      if (rec->has_op()) {
        const trace::Op& o = rec->op();
        auto c = comm.find(o.comm());
        auto f = strings.find(o.func());
        if (c != comm.end() && f != strings.end() && c->second.first != 0) {
          const uint64_t hash = c->second.first;
          const bool p2p = o.kind() == trace::OP_KIND_P2P;
          bool cut = false;
          if (!p2p) {
            auto it = coll_cut.find({hash, f->second});
            cut = it != coll_cut.end() && o.seq() <= it->second;
            auto d = strings.find(o.datatype());
            auto cm = mine.find(hash);
            if (cm == mine.end()) {
              std::vector<ChainMember>& v = chains[hash];
              v.emplace_back();
              v.back().proc = i;
              v.back().rank = c->second.second;
              cm = mine.emplace(hash, &v.back()).first;
            }
            ChainMember* ch = cm->second;
            // A window the cap cut (cut_ops) has holes: no chain runs on
            // through it, so its let-go collectives stay uncompared.
            if (sp.cut_ops() == 0 && sp.cut_stuck_ops() == 0) {
              uint64_t prev = 0;
              if (!ch->window.empty())
                prev = ch->window.back();
              else if (ch->let_go > 0 && !ch->Stored(ch->let_go, &prev))
                ch->no_base = true;  // summarize always stores it: a damaged summary
              ch->window.push_back(ChainStep(prev, f->second, o.count(),
                                             d == strings.end() ? std::string() : d->second,
                                             IsRooted(FuncFromName(f->second)) ? o.root() : 0));
              // Asked for: fed beside the other members' asked records,
              // not settled against them (and then put back like them).
              if (is_fed(hash, ch->let_go + ch->window.size())) {
                if (cut) put_back[i].emplace(hash, f->second, o.seq());
                cut = false;
              }
              if (cut && o.has_completion()) ++ch->dropped;
            }
          } else {
            const bool recv = IsRecv(FuncFromName(f->second));
            const int32_t me = c->second.second;
            const P2pCut k = recv ? P2pCut{hash, o.peer(), me} : P2pCut{hash, me, o.peer()};
            auto it = p2p_cut.find({k, recv});
            cut = it != p2p_cut.end() && o.p2p_seq() <= it->second;
          }
          if (cut) {
            Settled& s = settled[i];
            // Kept as evidence: issued last, or after an operation not
            // finished beyond doubt (cross-communicator order), or itself
            // not finished beyond doubt (an abort's completion, a late
            // rank's wait), while another rank let it go.
            const bool keep_it = o.start_ns() >= first_open || o.start_ns() >= last_start || !finished_here;
            if (o.has_completion() && keep_it) {
              ++s.ops;
              ++s.completed;
              if (s.conflicts++ == 0)
                s.first_conflict = f->second + " #" + std::to_string(p2p ? o.p2p_seq() : o.seq());
            } else if (o.has_completion()) {
              ++s.ops;
              ++s.completed;
            } else if (s.conflicts++ == 0) {
              s.first_conflict = f->second + (p2p ? " #" + std::to_string(o.p2p_seq()) + (IsRecv(FuncFromName(f->second)) ? " from rank " : " to rank ") + std::to_string(o.peer())
                                                  : " #" + std::to_string(o.seq()));
            }
            continue;  // never fed: its peers' side is gone
          }
        }
      }
      loader.Add(*rec, w.offset());
    }
    feed_back(UINT64_MAX);
    loader.EndFile(false, {});
    // The loader holds the window now, `chains` the prefixes; below only
    // the process's facts are read, not these.
    digests_ok[i] = ReadDigests(sp, &digests[i]);
    Release(sp.mutable_records());
    Release(sp.mutable_prefixes());
    Release(sp.mutable_asked_collectives());
    Release(sp.mutable_rows());
    Release(sp.mutable_ranks());
    sp.clear_arrivals();
  }

  if (!loader.Finish(m, error)) return false;

  std::unordered_map<std::string, uint32_t> proc_of;
  for (uint32_t pi = 0; pi < m->procs.size(); ++pi) proc_of.emplace(m->procs[pi].path, pi);
  auto name = [&](size_t i) {
    auto it = proc_of.find(procs[i].path());
    return it == proc_of.end() ? procs[i].path() : ProcName(*m, it->second);
  };
  auto gap = [&](size_t i, const std::string& why) {
    auto it = proc_of.find(procs[i].path());
    if (it == proc_of.end()) return;
    std::string& g = m->procs[it->second].window_gap;
    g += (g.empty() ? "" : "; ") + why;
  };
  for (size_t i = 0; i < procs.size(); ++i) {
    if (!keep[i]) continue;
    const summary::SummaryProcess& sp = procs[i];
    auto it = proc_of.find(sp.path());
    if (it == proc_of.end()) continue;
    Proc& p = m->procs[it->second];
    // Operations the cap cut count in the totals like those let go; the
    // evidence they were is gone, which the gap below says.
    // Those put back are in the model's operations instead; their arrivals
    // are still not judged (Model::asked_ops), so they count as let go there.
    const uint64_t back = std::min<uint64_t>(settled[i].asked, sp.let_go_ops());
    p.settled_ops = sp.let_go_ops() - back + settled[i].ops + sp.cut_ops();
    m->summary_let_go += p.settled_ops + back;
    p.settled_completed = sp.let_go_completed() - std::min(back, sp.let_go_completed()) + settled[i].completed;
    const bool from_summary = sources != nullptr && i < sources->size() && !(*sources)[i].empty();
    MoveDigests(&digests[i], &p);
    p.samples_held = samples_held[i];
    if (!digests_ok[i] || (from_summary && !p.digested))
      m->undigested.push_back(sp.path() + (from_summary ? " (in " + (*sources)[i] + ")" : std::string()) + ": " +
                              (sp.digested() ? "its stats rows are damaged"
                                             : "the summary holds no stats rows (an older ncclwatch wrote it)"));
    if (sp.cut_ops() > 0 || sp.cut_stuck_ops() > 0)
      gap(i, "the summary of " + name(i) + " dropped " +
                 (sp.cut_ops() > 0 ? std::to_string(sp.cut_ops()) + " of the operations its window kept" : "") +
                 (sp.cut_ops() > 0 && sp.cut_stuck_ops() > 0 ? " and " : "") +
                 (sp.cut_stuck_ops() > 0 ? std::to_string(sp.cut_stuck_ops()) + " operations its stuck reports listed"
                                         : "") +
                 ", to stay within --max-kb-per-rank; summarize with a larger --max-kb-per-rank");
    // What reading the whole file found (FileWindow::Annotate's facts).
    if (sp.damaged()) {
      if (!p.damaged || sp.damaged_at() < p.damaged_at) p.damaged_at = sp.damaged_at();
      p.damaged = true;
      p.damaged_end |= sp.damaged_end();
    }
    p.cut_tail = sp.cut_tail();
    if (p.damaged && p.cut_tail) p.damaged_end = true;
    std::set<std::string> have(p.issues.begin(), p.issues.end());
    for (const std::string& is : sp.issues())
      if (have.insert(is).second) p.issues.push_back(is);
    if (settled[i].conflicts > 0)
      gap(i, "the summaries cannot settle " + settled[i].first_conflict + " of " + name(i) +
                 (settled[i].conflicts > 1 ? " (and " + std::to_string(settled[i].conflicts - 1) + " more)" : "") +
                 ": another rank's summary let it go as completed, while this window keeps it unfinished, or "
                 "as evidence (issued last, after an operation not surely finished, or after a long wait); "
                 "summarize with a larger --window");
  }

  if (damaged_samples > 0)
    m->notes.push_back("arrival samples of " + std::to_string(damaged_samples) +
                       " (process, communicator) in the summaries are damaged: those communicators' samples are "
                       "not judged");
  // The arrival samples, per communicator whose every rank sampled: on
  // each member's own clock (Proc::mono_base_ns), with the model's indices.
  for (LinedUp& l : lined_up) {
    auto ci = m->comm_of_hash.find(l.hash);
    if (ci == m->comm_of_hash.end()) continue;
    const size_t n = l.members.size();
    SampledComm sc;
    sc.comm = ci->second;
    sc.stride = l.stride;
    std::set<uint32_t> distinct;
    for (size_t i : l.members) {
      auto pi = proc_of.find(procs[i].path());
      if (pi == proc_of.end()) break;
      sc.procs.push_back(pi->second);
      distinct.insert(pi->second);
    }
    if (sc.procs.size() != n || distinct.size() != n || static_cast<int32_t>(n) != m->comms[sc.comm].nranks) continue;
    for (const std::string& f : l.funcs) sc.funcs.push_back(m->Intern(f));
    sc.positions = std::move(l.positions);
    sc.local_starts_ns = std::move(l.starts);
    for (size_t c = 0; c < sc.positions.size(); ++c)
      for (size_t j = 0; j < n; ++j) {
        int64_t& t = sc.local_starts_ns[c * n + j];
        t = SaturatingAdd(t, static_cast<int64_t>(m->procs[sc.procs[j]].mono_base_ns));
      }
    sc.durations_ns = std::move(l.durations);
    sc.held_ns = std::move(l.held);
    sc.buckets = std::move(l.buckets);
    for (size_t c = 0; c < l.warmup_seqs.size(); ++c) sc.warmup.push_back(l.seqs[c] == l.warmup_seqs[c]);
    // Enough, or every collective (the stride 1, and each member's every
    // collective sampled: none is missing).
    sc.covered = sc.positions.size() >= kMinSampledCollectives || (sc.stride == 1 && sc.positions.size() == l.most);
    if (!sc.positions.empty() || sc.covered) m->sampled.push_back(std::move(sc));
  }
  lined_up.clear();
  std::sort(m->sampled.begin(), m->sampled.end(),
            [](const SampledComm& a, const SampledComm& b) { return a.comm < b.comm; });  // in the model's order

  // The signature chains, per communicator.
  for (auto& [hash, members] : chains) {
    if (members.size() < 2) continue;
    // Where to compare: each member's checkpoints and prefix end, and in
    // each window every multiple of the checkpoint interval (a member that
    // let go less computes there what another stored).
    std::set<uint64_t> positions;
    uint64_t settled_max = 0;
    const uint64_t every = 64;
    for (const ChainMember& c : members) {
      settled_max = std::max(settled_max, c.let_go + c.dropped);
      if (c.let_go > 0) positions.insert(c.let_go);
      for (const auto& [pos, h] : c.stored) positions.insert(pos);
      for (uint64_t p = (c.let_go / every + 1) * every; p - c.let_go <= c.window.size() && p > c.let_go; p += every)
        positions.insert(p);
    }
    if (settled_max == 0) continue;  // every window holds every collective
    std::vector<uint64_t> verified(members.size(), 0);
    uint64_t last_ok = 0;
    bool diverged = false;
    for (uint64_t pos : positions) {
      std::map<uint64_t, std::vector<size_t>> by_hash;
      for (size_t k = 0; k < members.size(); ++k) {
        uint64_t h;
        if (members[k].At(pos, &h)) by_hash[h].push_back(k);
      }
      size_t n = 0;
      for (auto& [h, v] : by_hash) n += v.size();
      if (n < 2) continue;
      if (by_hash.size() == 1) {
        last_ok = pos;
        for (size_t k : by_hash.begin()->second) verified[k] = pos;
        continue;
      }
      diverged = true;
      if (last_ok >= settled_max) break;  // the windows hold it: diagnose's finders see it
      size_t best = 0, best_n = 0, ties = 0;
      for (auto& [h, v] : by_hash) {
        if (v.size() > best_n) best_n = v.size(), best = v.front(), ties = 0;
        else if (v.size() == best_n) ++ties;
      }
      uint64_t major = 0;
      members[best].At(pos, &major);
      ChainMismatch cm;
      auto ci = m->comm_of_hash.find(hash);
      if (ci == m->comm_of_hash.end()) break;
      cm.comm = ci->second;
      cm.from = last_ok + 1;
      cm.to = pos;
      for (auto& [h, v] : by_hash)
        for (size_t k : v) {
          auto pi = proc_of.find(procs[members[k].proc].path());
          if (pi != proc_of.end()) (ties == 0 && h == major ? cm.rest : cm.odd).push_back(pi->second);
        }
      std::sort(cm.odd.begin(), cm.odd.end());
      std::sort(cm.rest.begin(), cm.rest.end());
      auto f = fed.find(hash);
      cm.asked = f != fed.end() && Covers(f->second, cm.from, cm.to);
      m->chain_mismatches.push_back(std::move(cm));
      break;
    }
    if (diverged) continue;
    for (size_t k = 0; k < members.size(); ++k) {
      const uint64_t e = members[k].let_go + members[k].dropped;
      if (e > 0 && verified[k] < e) {
        gap(members[k].proc, "the summaries cannot compare the signatures of " + name(members[k].proc) +
                                 "'s first " + std::to_string(e) + " collectives on a communicator with another rank's; "
                                 "summarize with a larger --window");
        break;
      }
    }
  }
  for (Comm& c : m->comms) {
    auto it = chains.find(c.hash);
    if (it == chains.end() || c.hash == 0) continue;
    uint64_t n = 0;
    for (const ChainMember& cm : it->second) n = std::max(n, cm.let_go + cm.dropped);
    // Less those put back, which the model's matches count.
    uint64_t back = 0;
    auto f = fed.find(c.hash);
    if (f != fed.end())
      for (const auto& [from, to] : f->second)
        if (from <= n) back += std::min(to, n) - from + 1;
    c.settled_colls = n - std::min(back, n);
  }
  // Which of the model's operations were put back (Model::asked_ops).
  bool any_back = false;
  for (const auto& b : put_back) any_back |= !b.empty();
  if (any_back) {
    std::unordered_map<std::string, size_t> index_of;
    for (size_t i = 0; i < procs.size(); ++i)
      if (keep[i]) index_of.emplace(procs[i].path(), i);
    for (uint32_t oi = 0; oi < m->ops.size(); ++oi) {
      const Op& op = m->ops[oi];
      if (op.kind != OpKind::kColl || op.proc >= m->procs.size() || op.comm >= m->comms.size()) continue;
      auto pi = index_of.find(m->procs[op.proc].path);
      if (pi != index_of.end() && put_back[pi->second].count({m->comms[op.comm].hash, m->Str(op.func), op.seq}))
        m->asked_ops.push_back(oi);
    }
  }
  return true;
}

bool BuildJobModel(const std::vector<std::string>& paths, const LoadOptions& opts, Model* m, std::string* error) {
  TraceInputs in = ListTraceInputs(paths);
  std::vector<std::string> summaries, traces;
  for (const std::string& f : in.files) (IsSummaryFile(f) ? summaries : traces).push_back(f);
  if (summaries.empty()) {
    if (!LoadModel(paths, opts, m, error)) return false;
  } else {
    std::vector<summary::SummaryProcess> procs;
    std::vector<std::string> sources;  // per process: its summary file, "" for a trace read whole
    std::vector<std::string> errors = in.errors, notes = in.notes;
    // Trace files first: where a summary holds the same process (a summary
    // written into the traces' folder), the screening keeps the first of
    // two equal copies, and the whole file is the better evidence.
    if (!traces.empty()) {
      SummarizeOptions so;
      so.window = UINT64_MAX;
      so.max_bytes_per_rank = 0;  // read whole
      so.job = opts.job;
      SummaryResult s;
      std::string e;
      if (!Summarize(traces, so, &s, &e)) {
        errors.push_back(e);
      }
      errors.insert(errors.end(), s.errors.begin(), s.errors.end());
      notes.insert(notes.end(), s.notes.begin(), s.notes.end());
      for (summary::SummaryProcess& p : s.procs) procs.push_back(std::move(p));
      sources.resize(procs.size());
    }
    std::vector<SummaryResult> read;
    std::vector<std::string> read_errors;
    ReadSummaryFiles(summaries, &read, &read_errors);
    for (size_t i = 0; i < summaries.size(); ++i) {
      SummaryResult& s = read[i];
      if (!read_errors[i].empty())
        errors.push_back(read_errors[i] + (s.procs.empty() ? "" : " (the processes before it are read)"));
      for (summary::SummaryProcess& p : s.procs) {
        procs.push_back(std::move(p));
        sources.push_back(summaries[i]);
      }
    }
    if (procs.empty()) {
      *error = errors.empty() ? "no usable summary or trace file" : errors[0];
      m->errors = errors;
      return false;
    }
    if (!BuildModelFromSummaries(std::move(procs), std::move(errors), std::move(notes), opts, m, error, &sources))
      return false;
  }
  MatchOps(m);
  AlignClocks(m);
  return true;
}

}  // namespace ncclwatch::tools
