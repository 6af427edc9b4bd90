#include "tools/model/window_summary.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>

#include "tools/model/arrival_samples.h"
#include "tools/model/semantics.h"

namespace ncclwatch::tools {
namespace {

uint64_t Fnv(uint64_t h, const void* p, size_t n) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

// One operation of a window, as the let-go rule reads it.
struct WinOp {
  size_t record = 0;  // index in the window's records
  uint64_t hash = 0;
  int32_t rank = -1;
  std::string func, datatype;
  bool p2p = false;
  uint64_t seq = 0;  // collectives: seq; p2p: p2p_seq
  int32_t peer_or_root = 0;
  uint64_t count = 0;
  bool completed = false;
  uint64_t start = 0, done = 0;  // file times
};

struct CommFacts {
  int32_t rank = -1;
  int32_t nranks = 0;
  uint64_t finalize = UINT64_MAX;
  std::vector<size_t> ops;  // WinOp indices in file order
};

}  // namespace

std::vector<bool> FinishedOps(const std::vector<const trace::Record*>& records, uint64_t* first_open) {
  std::vector<bool> finished(records.size(), false);
  std::unordered_map<uint32_t, uint64_t> comm;  // file comm -> hash
  std::unordered_map<uint64_t, uint64_t> finalize;  // hash -> time
  uint64_t last = 0;
  double stuck_sec = 0;  // the header's
  std::unordered_map<uint64_t, uint64_t> last_prompt;  // hash -> latest start of a prompt completion
  const uint64_t prompt = static_cast<uint64_t>(kAbortMinWaitSec * 1e9);
  std::vector<std::pair<size_t, uint64_t>> ops;  // record, hash
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i] == nullptr) continue;
    const trace::Record& r = *records[i];
    switch (r.body_case()) {
      case trace::Record::kHeader: stuck_sec = r.header().stuck_sec(); break;
      case trace::Record::kCommInit: comm[r.comm_init().comm()] = r.comm_init().comm_hash(); break;
      case trace::Record::kCommFinalize: {
        auto it = comm.find(r.comm_finalize().comm());
        if (it != comm.end()) {
          auto [f, fresh] = finalize.try_emplace(it->second, r.comm_finalize().time_ns());
          if (!fresh) f->second = std::min<uint64_t>(f->second, r.comm_finalize().time_ns());
        }
        last = std::max<uint64_t>(last, r.comm_finalize().time_ns());
        break;
      }
      case trace::Record::kBatch: last = std::max<uint64_t>(last, r.batch().time_ns()); break;
      case trace::Record::kHeartbeat: last = std::max<uint64_t>(last, r.heartbeat().time_ns()); break;
      case trace::Record::kFinalize: last = std::max<uint64_t>(last, r.finalize().time_ns()); break;
      case trace::Record::kOp: {
        const trace::Op& o = r.op();
        auto it = comm.find(o.comm());
        ops.emplace_back(i, it == comm.end() ? 0 : it->second);
        if (o.has_completion() && o.completion().done_after_start_ns() < prompt) {
          uint64_t& p = last_prompt[ops.back().second];
          p = std::max<uint64_t>(p, o.start_ns());
        }
        last = std::max<uint64_t>(last, o.start_ns() + (o.has_completion() ? o.completion().done_after_start_ns() : 0));
        break;
      }
      default: break;
    }
  }
  *first_open = UINT64_MAX;
  const uint64_t abort_window = static_cast<uint64_t>(kAbortWindowSec * 1e9);
  const uint64_t abort_min = static_cast<uint64_t>(AbortMinWaitSec(stuck_sec) * 1e9);
  for (const auto& [i, hash] : ops) {
    const trace::Op& o = records[i]->op();
    bool ok = false;
    if (o.has_completion()) {
      const uint64_t wait = o.completion().done_after_start_ns();
      auto f = finalize.find(hash);
      const uint64_t end = f == finalize.end() ? last : std::min(last, f->second);
      const uint64_t done = o.start_ns() + wait;
      auto later = last_prompt.find(hash);
      ok = wait < static_cast<uint64_t>(kLateWaitNs) &&
           (wait < abort_min || done + abort_window < end || (later != last_prompt.end() && later->second > done));
    }
    finished[i] = ok;
    if (!ok) *first_open = std::min<uint64_t>(*first_open, o.start_ns());
  }
  return finished;
}

uint64_t ChainStep(uint64_t chain, const std::string& func, uint64_t count, const std::string& datatype, int64_t root) {
  uint64_t h = Fnv(0xcbf29ce484222325ull ^ chain, func.data(), func.size());
  h = Fnv(h, "\0", 1);
  h = Fnv(h, &count, sizeof(count));
  h = Fnv(h, datatype.data(), datatype.size());
  h = Fnv(h, "\0", 1);
  return Fnv(h, &root, sizeof(root));
}

namespace {

// The arrivals of one communicator's collectives (`cf`, in file order)
// sampled at one position in 2^l (SampledPosition) over the whole file,
// window included: the positions then depend only on the rank's own count,
// never on where its window begins, and the merge lines members up by
// position alone.
void SampleArrivals(uint64_t hash, const CommFacts& cf, const std::vector<WinOp>& ops, summary::SummaryProcess* out) {
  uint64_t n = 0;
  for (size_t x : cf.ops) n += !ops[x].p2p;
  summary::ArrivalSamples* a = out->add_samples();
  a->set_comm_hash(hash);
  a->set_collectives(n);
  // The hash picks S's share only on average: wider while more than the
  // bound would be kept.
  uint32_t l = SampleStrideLog2(n);
  auto count = [&](uint32_t log2) {
    uint64_t k = 0;
    for (uint64_t p = 1; p <= n; ++p) k += SampledPosition(p, log2);
    return k;
  };
  while (l < 62 && count(l) > kMaxArrivalSamples) ++l;
  a->set_stride_log2(l);
  std::map<std::string, uint32_t> func_index;
  std::map<std::string, uint64_t> first_seq;  // each function's warm-up
  for (size_t x : cf.ops)
    if (!ops[x].p2p) {
      auto [it, fresh] = first_seq.try_emplace(ops[x].func, ops[x].seq);
      if (!fresh) it->second = std::min(it->second, ops[x].seq);
    }
  std::vector<ArrivalSample> v;
  uint64_t position = 0;
  for (size_t x : cf.ops) {
    const WinOp& op = ops[x];
    if (op.p2p) continue;
    ++position;
    if (!SampledPosition(position, l) || !op.completed) continue;
    auto [f, fresh] = func_index.try_emplace(op.func, static_cast<uint32_t>(a->functions_size()));
    if (fresh) {
      a->add_functions(op.func);
      a->add_first_seqs(first_seq[op.func]);
    }
    const int32_t bucket = BucketLog2(FuncFromName(op.func), op.datatype, op.count, cf.nranks);
    v.push_back({position, static_cast<int64_t>(op.start), op.done - op.start, f->second, op.seq, -1,
                 std::clamp(bucket, -2, 63)});
  }
  EncodeSamples(v, a);
}

// The window's operations and the communicators they run on, in the
// file's terms at each operation's time.
void IndexOps(const std::vector<std::pair<uint64_t, const trace::Record*>>& records,
              std::map<uint64_t, CommFacts>* comms, std::vector<WinOp>* ops) {
  std::unordered_map<uint32_t, std::string> strings;
  std::unordered_map<uint32_t, std::pair<uint64_t, int32_t>> comm;  // file comm -> hash, rank
  for (size_t i = 0; i < records.size(); ++i) {
    const trace::Record& r = *records[i].second;
    switch (r.body_case()) {
      case trace::Record::kStringDef: strings[r.string_def().id()] = r.string_def().text(); break;
      case trace::Record::kCommInit:
        comm[r.comm_init().comm()] = {r.comm_init().comm_hash(), r.comm_init().rank()};
        (*comms)[r.comm_init().comm_hash()].rank = r.comm_init().rank();
        (*comms)[r.comm_init().comm_hash()].nranks = r.comm_init().nranks();
        break;
      case trace::Record::kCommFinalize: {
        auto it = comm.find(r.comm_finalize().comm());
        if (it != comm.end()) {
          uint64_t& f = (*comms)[it->second.first].finalize;
          f = std::min(f, r.comm_finalize().time_ns());
        }
        break;
      }
      case trace::Record::kOp: {
        const trace::Op& o = r.op();
        auto c = comm.find(o.comm());
        if (c == comm.end()) break;  // the loader says what is wrong with it; kept
        WinOp op;
        op.record = i;
        op.hash = c->second.first;
        op.rank = c->second.second;
        auto f = strings.find(o.func());
        op.func = f == strings.end() ? std::string() : f->second;
        auto d = strings.find(o.datatype());
        op.datatype = d == strings.end() ? std::string() : d->second;
        op.p2p = o.kind() == trace::OP_KIND_P2P;
        op.seq = op.p2p ? o.p2p_seq() : o.seq();
        op.peer_or_root = op.p2p ? o.peer() : o.root();
        op.count = o.count();
        op.completed = o.has_completion();
        op.start = o.start_ns();
        op.done = op.completed ? o.start_ns() + o.completion().done_after_start_ns() : 0;
        (*comms)[op.hash].ops.push_back(ops->size());
        ops->push_back(std::move(op));
        break;
      }
      default: break;
    }
  }
}

// Communicator `cf`'s first `k` operations of the window let go into its
// prefix `p`, continued from what `p` already let go (nothing, for a
// node's own): their last sequence numbers; the chain of their
// collectives' identities from `chain` (the chain at p's last collective)
// at checkpoints every `every` collectives and at the new end (an end
// checkpoint off that grid gives way to the new one); and those of them
// that p's asked ranges name, as their records (out's asked_collectives).
void ExtendPrefix(const CommFacts& cf, uint64_t k, const std::vector<WinOp>& ops,
                  const std::vector<std::pair<uint64_t, const trace::Record*>>& records, uint64_t every,
                  uint64_t chain, std::vector<bool>* gone, summary::CommPrefix* p, summary::SummaryProcess* out) {
  const uint64_t hash = p->comm_hash();
  // The ranges asked of this communicator: the merge puts them back only
  // where every member answered for them (merge_cuts.cc).
  std::vector<std::pair<uint64_t, uint64_t>> asked;
  for (const summary::PositionRange& a : p->asked()) asked.emplace_back(a.from(), a.to());
  std::map<std::string, uint64_t> colls;
  for (const summary::LastSeq& l : p->colls()) colls[l.func()] = l.seq() + 1;
  std::map<std::pair<std::string, int32_t>, uint64_t> p2p;
  for (const summary::LastSeq& l : p->p2p()) p2p[{l.func(), l.peer()}] = l.seq();
  uint64_t position = p->collectives();
  bool extended = false;
  for (uint64_t j = 0; j < k; ++j) {
    const WinOp& op = ops[cf.ops[j]];
    (*gone)[op.record] = true;
    if (op.p2p) {
      uint64_t& s = p2p[{op.func, op.peer_or_root}];
      s = std::max(s, op.seq);
      continue;
    }
    if (!extended && p->checkpoints_size() > 0 &&
        p->checkpoints(p->checkpoints_size() - 1).position() % every != 0)
      p->mutable_checkpoints()->RemoveLast();  // no longer the end
    extended = true;
    uint64_t& s = colls[op.func];
    s = std::max(s, op.seq + 1);  // stored as seq + 1: 0 means none
    chain = ChainStep(chain, op.func, op.count, op.datatype,
                      IsRooted(FuncFromName(op.func)) ? op.peer_or_root : 0);
    ++position;
    if (std::any_of(asked.begin(), asked.end(),
                    [&](const auto& a) { return position >= a.first && position <= a.second; })) {
      summary::PastCollective* pc = out->add_asked_collectives();
      pc->set_comm_hash(hash);
      pc->set_position(position);
      pc->set_offset(records[op.record].first);
      pc->set_record(records[op.record].second->SerializeAsString());
    }
    const bool at_end = j + 1 == k || std::all_of(cf.ops.begin() + static_cast<ptrdiff_t>(j) + 1,
                                                   cf.ops.begin() + static_cast<ptrdiff_t>(k),
                                                   [&](size_t x) { return ops[x].p2p; });
    if (position % every == 0 || at_end) {
      summary::Checkpoint* c = p->add_checkpoints();
      c->set_position(position);
      c->set_hash(chain);
      c->set_seq(op.seq);
      c->set_func(op.func);
    }
  }
  p->set_ops(p->ops() + k);
  p->set_collectives(position);
  p->clear_colls();
  for (const auto& [f, s] : colls) {
    summary::LastSeq* l = p->add_colls();
    l->set_func(f);
    l->set_seq(s - 1);
  }
  p->clear_p2p();
  for (const auto& [fp, s] : p2p) {
    summary::LastSeq* l = p->add_p2p();
    l->set_func(fp.first);
    l->set_peer(fp.second);
    l->set_seq(s);
  }
}

// How many of communicator `hash`'s first operations (`cf`) a window of
// `window` lets go, `before` of them let go already: the longest run of
// operations finished beyond doubt and issued before `first_open`, short
// of the last `window`.
uint64_t LetGoCount(uint64_t hash, const CommFacts& cf, uint64_t before, const std::vector<WinOp>& ops,
                    const std::vector<bool>& finished, uint64_t first_open, uint64_t window) {
  const uint64_t n = before + cf.ops.size();
  const uint64_t limit = window == UINT64_MAX || hash == 0 || n <= window ? 0 : n - window;
  uint64_t k = 0;
  for (; before + k < limit; ++k) {
    const WinOp& op = ops[cf.ops[k]];
    const bool safe = finished[op.record] && op.start < first_open;
    if (!safe) break;
  }
  return k;
}

}  // namespace

bool SummarizeWindow(const FileWindow& w, const std::vector<std::string>& notes, const WindowSummaryOptions& opts,
                     bool keep_records, summary::SummaryProcess* out, std::string* error) {
  const std::string& path = w.path();
  if (!w.has_records()) {
    *error = path + ": no record" + (notes.empty() ? std::string() : " (" + notes[0] + ")");
    return false;
  }
  const std::vector<std::pair<uint64_t, const trace::Record*>> records = w.Records();

  std::map<uint64_t, CommFacts> comms;  // by hash
  std::vector<WinOp> ops;
  IndexOps(records, &comms, &ops);

  // Per communicator: let go the longest prefix of completed operations
  // before the last `window`, none whose completion may be an abort's.
  // Nothing issued at or after the first operation still unfinished goes,
  // on any communicator: the order of issue across communicators is what
  // an order cycle (a deadlock) is found by.
  uint64_t first_open = UINT64_MAX;
  std::vector<const trace::Record*> parsed;
  for (const auto& rec : records) parsed.push_back(rec.second);
  const std::vector<bool> finished = FinishedOps(parsed, &first_open);
  std::vector<bool> gone(records.size(), false);
  uint64_t let_go = 0;
  for (auto& [hash, cf] : comms) {
    if (cf.ops.empty()) continue;
    const uint64_t k = LetGoCount(hash, cf, 0, ops, finished, first_open, opts.window);
    summary::CommPrefix* p = out->add_prefixes();
    p->set_comm_hash(hash);
    p->set_rank(cf.rank);
    for (const CollectiveRange& a : opts.collectives)
      if (a.comm_hash == hash && hash != 0) {
        summary::PositionRange* pr = p->add_asked();
        pr->set_from(a.from);
        pr->set_to(a.to);
      }
    ExtendPrefix(cf, k, ops, records, opts.checkpoint_every, 0, &gone, p, out);
    let_go += k;
    // Kept for every communicator here; Summarize drops those a node's
    // arrival digests judge whole.
    if (hash != 0) SampleArrivals(hash, cf, ops, out);
  }

  out->set_path(path);
  out->set_size(w.header().size);
  for (size_t i = 0; i < records.size() && keep_records; ++i) {
    if (gone[i]) continue;
    summary::WindowRecord* wr = out->add_records();
    wr->set_offset(records[i].first);
    wr->set_record(records[i].second->SerializeAsString());
  }
  out->set_let_go_ops(let_go);
  out->set_let_go_completed(let_go);
  return true;
}

bool RewindowProcess(uint64_t window, uint32_t checkpoint_every, summary::SummaryProcess* sp, std::string* why) {
  const uint64_t every = sp->checkpoint_every() != 0 ? sp->checkpoint_every() : checkpoint_every;
  if (sp->damaged() || sp->damaged_end() || sp->cut_ops() > 0 || sp->cut_stuck_ops() > 0) {
    *why = "its window is not whole";
    return false;
  }
  if (every == 0) {
    *why = "it has no checkpoint interval";
    return false;
  }
  // The window's records parsed, as the node's were when it summarized.
  std::vector<trace::Record> parsed(static_cast<size_t>(sp->records_size()));
  std::vector<std::pair<uint64_t, const trace::Record*>> records;
  std::vector<const trace::Record*> of;
  for (int i = 0; i < sp->records_size(); ++i) {
    trace::Record& r = parsed[static_cast<size_t>(i)];
    if (!r.ParseFromString(sp->records(i).record())) {
      *why = "window record " + std::to_string(i) + " does not parse";
      return false;
    }
    records.emplace_back(sp->records(i).offset(), &r);
    of.push_back(&r);
  }
  std::map<uint64_t, CommFacts> comms;
  std::vector<WinOp> ops;
  IndexOps(records, &comms, &ops);
  uint64_t first_open = UINT64_MAX;
  const std::vector<bool> finished = FinishedOps(of, &first_open);
  std::unordered_map<uint64_t, int> prefix_of;
  for (int k = 0; k < sp->prefixes_size(); ++k) prefix_of.emplace(sp->prefixes(k).comm_hash(), k);
  std::vector<bool> gone(records.size(), false);
  uint64_t let_go = 0;
  for (const auto& [hash, cf] : comms) {
    auto it = prefix_of.find(hash);
    if (cf.ops.empty() || it == prefix_of.end()) continue;
    summary::CommPrefix* p = sp->mutable_prefixes(it->second);
    const uint64_t k = LetGoCount(hash, cf, p->ops(), ops, finished, first_open, window);
    if (k == 0) continue;
    // The chain goes on from its value at the prefix's last collective:
    // where no checkpoint stands there, this communicator stays as it is.
    uint64_t chain = 0;
    if (p->collectives() > 0) {
      if (p->checkpoints_size() == 0 || p->checkpoints(p->checkpoints_size() - 1).position() != p->collectives())
        continue;
      chain = p->checkpoints(p->checkpoints_size() - 1).hash();
    }
    ExtendPrefix(cf, k, ops, records, every, chain, &gone, p, sp);
    let_go += k;
  }
  if (let_go == 0) return true;
  // The asked collectives in the order a node writes them: by prefix,
  // then position.
  auto* asked = sp->mutable_asked_collectives();
  auto order = [&](const summary::PastCollective& a) {
    auto it = prefix_of.find(a.comm_hash());
    return std::make_pair(it == prefix_of.end() ? -1 : it->second, a.position());
  };
  std::stable_sort(asked->begin(), asked->end(),
                   [&](const summary::PastCollective& a, const summary::PastCollective& b) { return order(a) < order(b); });
  auto* recs = sp->mutable_records();
  int kept = 0;
  for (int i = 0; i < recs->size(); ++i) {
    if (gone[static_cast<size_t>(i)]) continue;
    if (kept != i) recs->SwapElements(kept, i);
    ++kept;
  }
  while (recs->size() > kept) recs->RemoveLast();
  sp->set_let_go_ops(sp->let_go_ops() + let_go);
  sp->set_let_go_completed(sp->let_go_completed() + let_go);
  return true;
}

void SetFacts(const Proc& p, summary::SummaryProcess* out) {
  out->set_cut_tail(p.cut_tail);
  out->set_damaged(p.damaged);
  out->set_damaged_end(p.damaged_end);
  out->set_damaged_at(p.damaged_at);
  for (const std::string& i : p.issues) out->add_issues(i);
}

}  // namespace ncclwatch::tools
