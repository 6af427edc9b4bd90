#include "tools/summary/summary.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include "tools/diagnose/diagnose.h"
#include "tools/model/gpu_held.h"
#include "tools/model/inputs.h"
#include "tools/model/loader.h"
#include "tools/model/op_key.h"
#include "tools/reader/reader.h"
#include "tools/stats/stats.h"
#include "tools/model/file_window.h"

namespace ncclwatch::tools {
namespace {

// The longest record of a summary: a process's window (kept bounded by
// FileWindow; a GiB is no summary we write).
constexpr uint64_t kMaxSummaryRecord = 1ull << 30;

uint64_t Fnv(uint64_t h, const void* p, size_t n) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// False when the bytes at `*pos` are no whole varint.
bool GetVarint(const std::string& b, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *pos < b.size(); shift += 7) {
    const uint8_t c = static_cast<uint8_t>(b[(*pos)++]);
    *v |= uint64_t{c & 0x7fu} << shift;
    if (!(c & 0x80)) return true;
  }
  return false;
}

void Frame(const summary::SummaryRecord& r, std::string* out) {
  const std::string b = r.SerializeAsString();
  PutVarint(b.size(), out);
  out->append(b);
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

std::vector<bool> FinishedOps(const std::vector<const std::string*>& records, uint64_t* first_open) {
  google::protobuf::Arena arena;
  std::vector<const trace::Record*> parsed;
  parsed.reserve(records.size());
  for (const std::string* s : records) {
    trace::Record* r = google::protobuf::Arena::CreateMessage<trace::Record>(&arena);
    parsed.push_back(r->ParseFromString(*s) ? r : nullptr);
  }
  return FinishedOps(parsed, first_open);
}

std::vector<bool> FinishedOps(const std::vector<const trace::Record*>& records, uint64_t* first_open) {
  std::vector<bool> finished(records.size(), false);
  std::unordered_map<uint32_t, uint64_t> comm;  // file comm -> hash
  std::unordered_map<uint64_t, uint64_t> finalize;  // hash -> time
  uint64_t last = 0;
  std::vector<std::pair<size_t, uint64_t>> ops;  // record, hash
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i] == nullptr) continue;
    const trace::Record& r = *records[i];
    switch (r.body_case()) {
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
        last = std::max<uint64_t>(last, o.start_ns() + (o.has_completion() ? o.completion().done_after_start_ns() : 0));
        break;
      }
      default: break;
    }
  }
  *first_open = UINT64_MAX;
  const uint64_t abort_window = static_cast<uint64_t>(kAbortWindowSec * 1e9);
  for (const auto& [i, hash] : ops) {
    const trace::Op& o = records[i]->op();
    bool ok = false;
    if (o.has_completion()) {
      const uint64_t wait = o.completion().done_after_start_ns();
      auto f = finalize.find(hash);
      const uint64_t end = f == finalize.end() ? last : std::min(last, f->second);
      const uint64_t done = o.start_ns() + wait;
      ok = wait < static_cast<uint64_t>(kSafeWaitNs) ||
           (wait < static_cast<uint64_t>(kLateWaitNs) && done + abort_window < end);
    }
    finished[i] = ok;
    if (!ok) *first_open = std::min<uint64_t>(*first_open, o.start_ns());
  }
  return finished;
}

uint32_t SampleStrideLog2(uint64_t collectives) {
  uint32_t l = 0;
  while (l < 63 && (collectives >> l) > kMaxArrivalSamples) ++l;
  return l;
}

bool SampledPosition(uint64_t position, uint32_t log2) {
  // SplitMix64's finalizer: every bit of the position moves the low ones.
  uint64_t z = position + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return log2 >= 64 || (z & ((uint64_t{1} << log2) - 1)) == 0;
}

bool DecodeSamples(const summary::ArrivalSamples& a, std::vector<ArrivalSample>* out) {
  out->clear();
  const uint64_t n = a.count();
  if (n > kMaxArrivalSamples || a.stride_log2() > 62 || a.packed().size() > n * 5 * 10) return false;
  const uint64_t most = a.collectives();
  uint64_t at = 0;
  int64_t start = 0;
  constexpr int64_t kMaxStartNs = int64_t{1} << 58;  // the loader's bound on a file time
  // NCCL has a dozen collective functions: thousands is damage, not a list.
  if (a.functions_size() > 4096) return false;
  std::vector<uint64_t> seq(static_cast<size_t>(a.functions_size()), 0);  // per function
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(a.packed().data()),
                                            static_cast<int>(a.packed().size()));
  out->reserve(static_cast<size_t>(n));
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t step = 0, zigzag = 0, duration = 0, seq_delta = 0;
    uint32_t func = 0;
    if (!in.ReadVarint64(&step) || !in.ReadVarint64(&zigzag) || !in.ReadVarint64(&duration) ||
        !in.ReadVarint32(&func) || !in.ReadVarint64(&seq_delta))
      return false;
    const int64_t d = google::protobuf::internal::WireFormatLite::ZigZagDecode64(zigzag);
    if (step == 0 || step > most - at || d < -kMaxStartNs || d > kMaxStartNs || func >= seq.size()) return false;
    at += step;
    start += d;
    if (start < 0 || start > kMaxStartNs || !SampledPosition(at, a.stride_log2())) return false;
    uint64_t& s = seq[func];
    s += seq_delta;  // modulo 2^64, as encoded
    out->push_back({at, start, duration, func, s, -1});
  }
  if (in.CurrentPosition() != static_cast<int>(a.packed().size())) return false;  // nothing after them
  if (a.first_seqs_size() != 0 && a.first_seqs_size() != a.functions_size()) return false;
  if (!a.buckets().empty()) {
    if (a.buckets().size() > n * 10) return false;
    google::protobuf::io::CodedInputStream b(reinterpret_cast<const uint8_t*>(a.buckets().data()),
                                             static_cast<int>(a.buckets().size()));
    for (ArrivalSample& x : *out) {
      uint32_t v = 0;
      if (!b.ReadVarint32(&v) || v > 65) return false;  // -2 .. 63, plus 2
      x.bucket = static_cast<int32_t>(v) - 2;
    }
    if (b.CurrentPosition() != static_cast<int>(a.buckets().size())) return false;
  }
  if (a.held().empty()) return true;
  if (a.held().size() > n * 10) return false;
  google::protobuf::io::CodedInputStream held(reinterpret_cast<const uint8_t*>(a.held().data()),
                                              static_cast<int>(a.held().size()));
  for (ArrivalSample& x : *out) {
    uint64_t us = 0;
    if (!held.ReadVarint64(&us) || us > static_cast<uint64_t>(kMaxStartNs / 1000)) return false;
    x.held_ns = us == 0 ? -1 : static_cast<int64_t>(us - 1) * 1000;
  }
  return held.CurrentPosition() == static_cast<int>(a.held().size());
}

void EncodeSamples(const std::vector<ArrivalSample>& v, summary::ArrivalSamples* a, bool held) {
  std::string packed;
  {
    google::protobuf::io::StringOutputStream raw(&packed);
    google::protobuf::io::CodedOutputStream out(&raw);
    uint64_t at = 0;
    int64_t start = 0;
    std::vector<uint64_t> seq;  // per function: the last one's
    for (const ArrivalSample& x : v) {
      if (x.func >= seq.size()) seq.resize(x.func + 1, 0);
      out.WriteVarint64(x.position - at);
      out.WriteVarint64(google::protobuf::internal::WireFormatLite::ZigZagEncode64(x.start_ns - start));
      out.WriteVarint64(x.duration_ns);
      out.WriteVarint32(x.func);
      out.WriteVarint64(x.seq - seq[x.func]);
      seq[x.func] = x.seq;
      at = x.position;
      start = x.start_ns;
    }
  }
  a->set_count(static_cast<uint32_t>(v.size()));
  a->set_packed(std::move(packed));
  std::string buckets;
  if (!v.empty() && std::none_of(v.begin(), v.end(), [](const ArrivalSample& x) { return x.bucket == kNoBucket; })) {
    google::protobuf::io::StringOutputStream raw(&buckets);
    google::protobuf::io::CodedOutputStream out(&raw);
    for (const ArrivalSample& x : v) out.WriteVarint32(static_cast<uint32_t>(x.bucket + 2));
  }
  a->set_buckets(std::move(buckets));
  std::string times;
  if (held) {
    // To the us: a held time is known to a polling interval (~10 ms), and
    // most are 0, a byte each.
    google::protobuf::io::StringOutputStream raw(&times);
    google::protobuf::io::CodedOutputStream out(&raw);
    for (const ArrivalSample& x : v) out.WriteVarint64(x.held_ns < 0 ? 0 : static_cast<uint64_t>(x.held_ns / 1000) + 1);
  }
  a->set_held(std::move(times));
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

// Each sample's GPU-held time (`held`, GpuHeldNs of the node's model),
// found by its communicator, function and seq among process `pi`'s
// operations: only where its completions came from CUDA events, which
// alone show it. A sample whose operation the model lacks gets none.
void AddHeldTimes(const Model& node, uint32_t pi, const std::vector<int64_t>& held,
                  google::protobuf::RepeatedPtrField<summary::ArrivalSamples>* samples) {
  const Proc& p = node.procs[pi];
  if (!ShowsGpuHeld(node, p)) return;
  struct Key {
    uint64_t hash, seq;
    std::string func;
    bool operator<(const Key& o) const { return std::tie(hash, seq, func) < std::tie(o.hash, o.seq, o.func); }
  };
  std::map<Key, int64_t> of;
  for (uint32_t oi : p.ops) {
    const Op& o = node.ops[oi];
    if (o.kind != OpKind::kColl || o.comm >= node.comms.size() || oi >= held.size()) continue;
    of.emplace(Key{node.comms[o.comm].hash, o.seq, node.Str(o.func)}, held[oi] == kNoTime ? -1 : held[oi]);
  }
  std::vector<ArrivalSample> v;
  for (summary::ArrivalSamples& a : *samples) {
    if (!DecodeSamples(a, &v)) continue;
    for (ArrivalSample& x : v) {
      auto it = of.find(Key{a.comm_hash(), x.seq, a.functions(static_cast<int>(x.func))});
      x.held_ns = it == of.end() ? -1 : it->second;
    }
    EncodeSamples(v, &a, true);
  }
}

// A file's window (read whole) summarized into `out`: path, size, the
// records kept and the prefixes let go; not yet the whole file's facts nor
// the cap (FinishProcess). False with `error` when it holds no record.
bool SummarizeWindow(const FileWindow& w, const std::vector<std::string>& notes, const SummarizeOptions& opts,
                     summary::SummaryProcess* out, std::string* error) {
  const std::string& path = w.path();
  if (!w.has_records()) {
    *error = path + ": no record" + (notes.empty() ? std::string() : " (" + notes[0] + ")");
    return false;
  }
  std::vector<std::pair<uint64_t, std::string>> records;
  w.Records(&records);

  // What each operation is, in the file's terms at its time.
  std::unordered_map<uint32_t, std::string> strings;
  std::unordered_map<uint32_t, std::pair<uint64_t, int32_t>> comm;  // file comm -> hash, rank
  std::map<uint64_t, CommFacts> comms;                              // by hash
  std::vector<WinOp> ops;
  uint64_t last = 0;
  trace::Record r;
  for (size_t i = 0; i < records.size(); ++i) {
    if (!r.ParseFromString(records[i].second)) continue;
    switch (r.body_case()) {
      case trace::Record::kStringDef: strings[r.string_def().id()] = r.string_def().text(); break;
      case trace::Record::kCommInit:
        comm[r.comm_init().comm()] = {r.comm_init().comm_hash(), r.comm_init().rank()};
        comms[r.comm_init().comm_hash()].rank = r.comm_init().rank();
        comms[r.comm_init().comm_hash()].nranks = r.comm_init().nranks();
        break;
      case trace::Record::kCommFinalize: {
        auto it = comm.find(r.comm_finalize().comm());
        if (it != comm.end()) {
          uint64_t& f = comms[it->second.first].finalize;
          f = std::min(f, r.comm_finalize().time_ns());
        }
        last = std::max<uint64_t>(last, r.comm_finalize().time_ns());
        break;
      }
      case trace::Record::kBatch: last = std::max<uint64_t>(last, r.batch().time_ns()); break;
      case trace::Record::kHeartbeat: last = std::max<uint64_t>(last, r.heartbeat().time_ns()); break;
      case trace::Record::kFinalize: last = std::max<uint64_t>(last, r.finalize().time_ns()); break;
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
        last = std::max(last, std::max(op.start, op.done));
        comms[op.hash].ops.push_back(ops.size());
        ops.push_back(std::move(op));
        break;
      }
      default: break;
    }
  }

  // Per communicator: let go the longest prefix of completed operations
  // before the last `window`, none whose completion may be an abort's.
  // Nothing issued at or after the first operation still unfinished goes,
  // on any communicator: the order of issue across communicators is what
  // an order cycle (a deadlock) is found by.
  uint64_t first_open = UINT64_MAX;
  std::vector<const std::string*> serialized;
  for (const auto& rec : records) serialized.push_back(&rec.second);
  const std::vector<bool> finished = FinishedOps(serialized, &first_open);
  std::vector<bool> gone(records.size(), false);
  uint64_t let_go = 0;
  for (auto& [hash, cf] : comms) {
    if (cf.ops.empty()) continue;
    const uint64_t n = cf.ops.size();
    const uint64_t limit = opts.window == UINT64_MAX || hash == 0 || n <= opts.window ? 0 : n - opts.window;
    uint64_t k = 0;
    for (; k < limit; ++k) {
      const WinOp& op = ops[cf.ops[k]];
      const bool safe = finished[op.record] && op.start < first_open;
      if (!safe) break;
    }
    summary::CommPrefix* p = out->add_prefixes();
    p->set_comm_hash(hash);
    p->set_rank(cf.rank);
    p->set_ops(k);
    // The ranges asked of this communicator: the merge puts them back only
    // where every member answered for them (job.cc).
    std::vector<std::pair<uint64_t, uint64_t>> asked;
    for (const CollectiveRange& a : opts.collectives)
      if (a.comm_hash == hash && hash != 0) {
        summary::PositionRange* pr = p->add_asked();
        pr->set_from(a.from);
        pr->set_to(a.to);
        asked.emplace_back(a.from, a.to);
      }
    std::map<std::string, uint64_t> colls;
    std::map<std::pair<std::string, int32_t>, uint64_t> p2p;
    uint64_t chain = 0, position = 0;
    for (uint64_t j = 0; j < k; ++j) {
      const WinOp& op = ops[cf.ops[j]];
      gone[op.record] = true;
      if (op.p2p) {
        uint64_t& s = p2p[{op.func, op.peer_or_root}];
        s = std::max(s, op.seq);
        continue;
      }
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
        pc->set_record(records[op.record].second);  // copied: the window's records move below
      }
      const bool at_end = j + 1 == k || std::all_of(cf.ops.begin() + static_cast<ptrdiff_t>(j) + 1,
                                                     cf.ops.begin() + static_cast<ptrdiff_t>(k),
                                                     [&](size_t x) { return ops[x].p2p; });
      if (position % opts.checkpoint_every == 0 || at_end) {
        summary::Checkpoint* c = p->add_checkpoints();
        c->set_position(position);
        c->set_hash(chain);
        c->set_seq(op.seq);
        c->set_func(op.func);
      }
    }
    p->set_collectives(position);
    for (const auto& [f, s] : colls) {
      summary::LastSeq* l = p->add_colls();
      l->set_func(f);
      l->set_seq(s - 1);
    }
    for (const auto& [fp, s] : p2p) {
      summary::LastSeq* l = p->add_p2p();
      l->set_func(fp.first);
      l->set_peer(fp.second);
      l->set_seq(s);
    }
    let_go += k;
    // Kept for every communicator here; Summarize drops those a node's
    // arrival digests judge whole.
    if (hash != 0) SampleArrivals(hash, cf, ops, out);
  }

  out->set_path(path);
  out->set_size(w.header().size);
  for (size_t i = 0; i < records.size(); ++i) {
    if (gone[i]) continue;
    summary::WindowRecord* wr = out->add_records();
    wr->set_offset(records[i].first);
    wr->set_record(std::move(records[i].second));
  }
  out->set_let_go_ops(let_go);
  out->set_let_go_completed(let_go);
  return true;
}

// What reading the whole file found (`p`: the node's model of it, else
// what the window's reading saw), then the cap.
void FinishProcess(const Proc& p, const SummarizeOptions& opts, summary::SummaryProcess* out) {
  out->set_cut_tail(p.cut_tail);
  out->set_damaged(p.damaged);
  out->set_damaged_end(p.damaged_end);
  out->set_damaged_at(p.damaged_at);
  for (const std::string& i : p.issues) out->add_issues(i);
  if (opts.window != UINT64_MAX) CapSummaryProcess(opts.max_bytes_per_rank, opts.checkpoint_every, out);
}

}  // namespace

bool SummarizeFile(const std::string& path, const SummarizeOptions& opts, const Proc* facts,
                   summary::SummaryProcess* out, std::string* error) {
  TraceReader reader;
  if (!reader.Open(path, error)) return false;
  FuncIds names;
  FileWindow w(path, &names);
  std::vector<std::string> notes;
  w.ReadWhole(&reader, nullptr, &notes);
  if (!SummarizeWindow(w, notes, opts, out, error)) return false;
  Proc seen;
  w.Annotate(&seen, true);
  FinishProcess(facts != nullptr ? *facts : seen, opts, out);
  return true;
}

namespace {

void CapWindow(uint64_t max_bytes, uint32_t checkpoint_every, summary::SummaryProcess* sp);

}  // namespace

void CapSummaryProcess(uint64_t max_bytes, uint32_t checkpoint_every, summary::SummaryProcess* sp) {
  // The asked collectives aside while the rest is measured and cut.
  google::protobuf::RepeatedPtrField<summary::PastCollective> asked;
  asked.Swap(sp->mutable_asked_collectives());
  CapWindow(max_bytes, checkpoint_every, sp);
  sp->mutable_asked_collectives()->Swap(&asked);
}

namespace {

void CapWindow(uint64_t max_bytes, uint32_t checkpoint_every, summary::SummaryProcess* sp) {
  if (max_bytes == 0 || sp->ByteSizeLong() <= max_bytes) return;
  // Checkpoints grow with the job: thin them first, which costs only how
  // closely a chain mismatch is placed, never a verdict.
  uint64_t every = std::max<uint32_t>(checkpoint_every, 1);
  while (sp->ByteSizeLong() > max_bytes && every < (1ull << 62)) {
    bool thinned = false;
    every *= 2;
    for (summary::CommPrefix& p : *sp->mutable_prefixes()) {
      auto* cs = p.mutable_checkpoints();
      int kept = 0;
      for (int i = 0; i < cs->size(); ++i) {
        if (i + 1 < cs->size() && cs->Get(i).position() % every != 0) continue;  // the last always stays
        if (kept != i) cs->SwapElements(kept, i);
        ++kept;
      }
      thinned |= kept < cs->size();
      while (cs->size() > kept) cs->RemoveLast();
    }
    if (!thinned && std::all_of(sp->prefixes().begin(), sp->prefixes().end(),
                                [](const summary::CommPrefix& p) { return p.checkpoints_size() <= 1; }))
      break;
    sp->set_checkpoint_every(static_cast<uint32_t>(std::min<uint64_t>(every, UINT32_MAX)));
  }
  if (sp->ByteSizeLong() <= max_bytes) return;
  // Then the arrival samples, each communicator's stride doubling while it
  // keeps twice the fewest that judge: that costs how closely a rank's
  // share of late arrivals is counted, not the verdict's ground (the merge
  // takes the largest stride among the members anyway).
  std::vector<ArrivalSample> samples;
  while (sp->ByteSizeLong() > max_bytes) {
    bool thinned = false;
    for (summary::ArrivalSamples& a : *sp->mutable_samples()) {
      if (a.count() < 2 * kMinSampledCollectives || a.stride_log2() >= 62 ||
          !DecodeSamples(a, &samples))
        continue;
      const uint32_t wider = a.stride_log2() + 1;
      samples.erase(std::remove_if(samples.begin(), samples.end(),
                                   [&](const ArrivalSample& x) { return !SampledPosition(x.position, wider); }),
                    samples.end());
      // The hash halves them only on average: never below what judges.
      if (samples.size() < kMinSampledCollectives) continue;
      a.set_stride_log2(a.stride_log2() + 1);
      EncodeSamples(samples, &a, !a.held().empty());
      thinned = true;
    }
    if (!thinned) break;
  }
  if (sp->ByteSizeLong() <= max_bytes) return;
  // Then the window's oldest finished operations; then what stuck reports
  // list beyond each one's oldest operations; then the oldest unfinished
  // operations: what a rank waits in is the evidence most verdicts rest on.
  std::vector<const std::string*> serialized;
  std::vector<bool> is_op;
  trace::Record r;
  for (const summary::WindowRecord& w : sp->records()) {
    serialized.push_back(&w.record());
    is_op.push_back(r.ParseFromString(w.record()) && r.has_op());
  }
  uint64_t first_open = UINT64_MAX;
  std::vector<bool> finished = FinishedOps(serialized, &first_open);
  serialized.clear();  // the records move below
  std::vector<bool> drop(is_op.size(), false);
  auto framed = [](uint64_t n) {
    std::string len;
    PutVarint(n, &len);
    return 1 + len.size() + n;
  };
  uint64_t cut = 0;
  auto drop_ops = [&](bool finished_only) {
    const uint64_t size = sp->ByteSizeLong();
    if (size <= max_bytes) return;
    const uint64_t excess = size - max_bytes + 32;  // the counts grow by a few bytes
    uint64_t freed = 0;
    for (size_t i = 0; i < is_op.size() && freed < excess; ++i) {
      if (!is_op[i] || drop[i] || (finished_only && !finished[i])) continue;
      drop[i] = true;
      freed += framed(sp->records(static_cast<int>(i)).ByteSizeLong());
      ++cut;
    }
    auto* recs = sp->mutable_records();
    int kept = 0;
    for (int i = 0; i < recs->size(); ++i) {
      const size_t k = static_cast<size_t>(i);
      if (drop[k]) continue;
      if (kept != i) recs->SwapElements(kept, i);
      is_op[static_cast<size_t>(kept)] = is_op[k];
      finished[static_cast<size_t>(kept)] = finished[k];
      ++kept;
    }
    while (recs->size() > kept) recs->RemoveLast();
    is_op.resize(static_cast<size_t>(kept));
    finished.resize(static_cast<size_t>(kept));
    drop.assign(is_op.size(), false);
  };
  drop_ops(true);
  if (sp->ByteSizeLong() > max_bytes) {
    const uint64_t excess = sp->ByteSizeLong() - max_bytes + 32;
    uint64_t freed = 0, trimmed = 0;
    for (summary::WindowRecord& w : *sp->mutable_records()) {
      if (freed >= excess) break;
      if (!r.ParseFromString(w.record()) || !r.has_stuck() || r.stuck().ops_size() <= 1) continue;
      auto* ops = r.mutable_stuck()->mutable_ops();
      std::sort(ops->begin(), ops->end(),
                [](const trace::InFlightOp& a, const trace::InFlightOp& b) { return a.start_ns() < b.start_ns(); });
      while (ops->size() > 1 && freed < excess) {
        freed += framed(ops->Get(ops->size() - 1).ByteSizeLong());
        ops->RemoveLast();
        ++trimmed;
      }
      w.set_record(r.SerializeAsString());
    }
    sp->set_cut_stuck_ops(trimmed);
  }
  drop_ops(false);
  sp->set_cut_ops(sp->cut_ops() + cut);
}

}  // namespace

bool Summarize(const std::vector<std::string>& paths, const SummarizeOptions& opts, SummaryResult* out,
               std::string* error) {
  TraceInputs in = ListFiles(paths, &IsTraceFileName);
  out->errors = in.errors;
  if (!ScreenTraceInputs(opts.job, &in, error)) return false;
  out->notes = in.notes;
  if (in.files.empty()) {
    *error = "no trace file (*.ncclwatch) among " + ListFew(paths);
    return false;
  }
  // Each file is read once: its records make its window and, as they are
  // read, the node's model, whose whole-file checks (each write's records
  // and times, sequence numbers without a gap, across files the members
  // and host clocks) are the facts each summary keeps.
  LoadOptions lo;
  lo.job = opts.job;
  ModelLoader loader(lo);
  loader.ReserveForBytes(in.data_bytes);
  bool feeding = true;  // until the loader stops (LoadModel's rule)
  std::vector<std::pair<summary::SummaryProcess, Proc>> read;  // with what the window saw
  for (const std::string& f : in.files) {
    TraceReader reader;
    std::string e;
    if (!reader.Open(f, &e)) {
      if (feeding) feeding = loader.FileError(e);
      out->errors.push_back(e);
      continue;
    }
    FuncIds names;
    FileWindow w(f, &names);
    std::vector<std::string> notes;
    feeding = w.ReadWhole(&reader, feeding ? &loader : nullptr, &notes) && feeding;
    summary::SummaryProcess sp;
    if (!SummarizeWindow(w, notes, opts, &sp, &e)) {
      out->errors.push_back(e);
      continue;
    }
    Proc seen;
    w.Annotate(&seen, true);
    read.emplace_back(std::move(sp), std::move(seen));
  }
  Model node;
  std::string load_error;
  loader.Finish(&node, &load_error);
  std::unordered_map<std::string, const Proc*> by_path;
  std::unordered_map<std::string, uint32_t> index_of;
  for (uint32_t pi = 0; pi < node.procs.size(); ++pi) {
    by_path[node.procs[pi].path] = &node.procs[pi];
    index_of[node.procs[pi].path] = pi;
  }
  // Every operation as stats rows; not for a file read whole beside
  // summaries (window UINT64_MAX), whose operations are all in the model.
  std::vector<ProcDigest> digests;
  std::vector<ArrivalDigest> arrivals;
  if (opts.window != UINT64_MAX) {
    MatchOps(&node);
    AlignClocks(&node);
    digests = DigestProcesses(node);
    arrivals = DigestArrivals(node);
  }
  // The communicators whose arrivals are sampled: every one of a process
  // without a whole arrival digest, on each of its members here too (so
  // that all of them have the positions the merge lines up).
  std::set<uint64_t> sampled;
  for (uint32_t pi = 0; pi < arrivals.size(); ++pi) {
    if (arrivals[pi].valid) continue;
    for (const Comm& c : node.comms)
      for (const CommMember& mem : c.members)
        if (mem.proc == pi) sampled.insert(c.hash);
  }
  // How long each kernel waited on its GPU behind other work, judged over
  // the whole file as the traces are (FindGpuHeld): the samples carry it.
  std::vector<int64_t> held;
  if (!sampled.empty()) held = GpuHeldNs(node);
  out->header.set_format(kSummaryFormat);
  out->header.set_version(kSummaryVersion);
  out->header.set_window(opts.window == UINT64_MAX ? 0 : static_cast<uint32_t>(std::min<uint64_t>(opts.window, UINT32_MAX)));
  out->header.set_checkpoint_every(opts.checkpoint_every);
  out->header.set_max_kb_per_rank(static_cast<uint32_t>(std::min<uint64_t>(opts.max_bytes_per_rank >> 10, UINT32_MAX)));
  for (auto& [sp, seen] : read) {
    auto it = by_path.find(sp.path());
    // The stats rows and arrivals before FinishProcess, so that the cap
    // measures the whole record.
    auto di = index_of.find(sp.path());
    if (di != index_of.end() && di->second < digests.size()) {
      const ProcDigest& d = digests[di->second];
      SetDigests(d.rows, d.ranks, d.whole_comms, &sp);
      if (di->second < arrivals.size() && arrivals[di->second].valid) {
        const ArrivalDigest& a = arrivals[di->second];
        summary::ArrivalDigest* pa = sp.mutable_arrivals();
        pa->set_threshold_s(a.threshold_s);
        pa->set_fraction(a.fraction);
        pa->set_total(a.total);
        pa->set_late(a.late);
        pa->set_median_lag_s(a.median_lag_s);
        pa->set_max_lag_s(a.max_lag_s);
        pa->set_gpu_held(a.gpu_held);
        for (const ArrivalRow& r : a.rows) {
          summary::ArrivalRow* pr = pa->add_rows();
          pr->set_comm_hash(r.comm_hash);
          pr->set_func(r.func);
          pr->set_total(r.total);
          pr->set_late(r.late);
          pr->set_median_lag_s(r.median_lag_s);
          pr->set_max_lag_s(r.max_lag_s);
          pr->set_held_total(r.held_total);
          pr->set_held_late(r.held_late);
          pr->set_held_median_lag_s(r.held_median_lag_s);
          pr->set_held_max_lag_s(r.held_max_lag_s);
          pr->set_held_host_lag_s(r.held_host_lag_s);
        }
      }
    }
    if (di != index_of.end() && di->second < arrivals.size()) {
      auto* v = sp.mutable_samples();
      v->erase(std::remove_if(v->begin(), v->end(),
                              [&](const summary::ArrivalSamples& a) { return !sampled.count(a.comm_hash()); }),
               v->end());
      if (!v->empty()) AddHeldTimes(node, di->second, held, v);
    }
    FinishProcess(it == by_path.end() ? seen : *it->second, opts, &sp);
    out->procs.push_back(std::move(sp));
  }
  // An asked communicator none of these ranks is a member of may be
  // another node's: said, not an error.
  std::set<uint64_t> said;
  for (const CollectiveRange& a : opts.collectives) {
    if (!said.insert(a.comm_hash).second) continue;
    bool member = false;
    for (const summary::SummaryProcess& sp : out->procs)
      for (const summary::CommPrefix& p : sp.prefixes()) member |= p.comm_hash() == a.comm_hash;
    if (!member)
      out->notes.push_back("--collectives: no rank here is a member of communicator " + CommHashText(a.comm_hash) +
                           ": nothing added for it");
  }
  if (out->procs.empty()) {
    *error = "no usable trace file: " + (out->errors.empty() ? std::string("none") : out->errors[0]);
    return false;
  }
  return true;
}

void SketchToProto(const Sketch& s, summary::Sketch* out) {
  out->set_zeros(s.zeros());
  out->set_sum(s.sum());
  out->set_min(s.min());
  out->set_max(s.max());
  auto dense = [](const Sketch::Buckets& b, int32_t* offset,
                  google::protobuf::RepeatedField<google::protobuf::uint64>* v) {
    if (b.empty()) return;
    *offset = b.begin()->first;
    for (auto it = b.begin(); it != b.end(); ++it) {
      while (v->size() < it->first - *offset) v->Add(0);
      v->Add(it->second);
    }
  };
  int32_t off = 0;
  dense(s.positive(), &off, out->mutable_pos());
  out->set_pos_offset(off);
  off = 0;
  dense(s.negative(), &off, out->mutable_neg());
  out->set_neg_offset(off);
}

bool SketchFromProto(const summary::Sketch& p, Sketch* out) {
  auto sparse = [](int32_t offset, const google::protobuf::RepeatedField<google::protobuf::uint64>& v,
                   Sketch::Buckets* b) {
    // Far past any bound, or an offset no value has: damaged (and no
    // overflow in offset + i below).
    if (v.size() > static_cast<int>(Sketch::kMaxBuckets) * 4 || offset < 0 || offset > (1 << 16)) return false;
    b->reserve(static_cast<size_t>(v.size() - std::count(v.begin(), v.end(), 0)));
    for (int i = 0; i < v.size(); ++i)
      if (v[i] != 0) b->push_back({offset + i, v[i]});
    return true;
  };
  Sketch::Buckets pos, neg;
  if (!sparse(p.pos_offset(), p.pos(), &pos) || !sparse(p.neg_offset(), p.neg(), &neg)) return false;
  return Sketch::FromParts(std::move(pos), std::move(neg), p.zeros(), p.sum(), p.min(), p.max(), out);
}

void SetDigests(const std::vector<RowDigest>& rows, const std::vector<RankDigest>& ranks,
                const std::vector<std::string>& whole_comms, summary::SummaryProcess* out) {
  out->set_digested(true);
  for (const RowDigest& d : rows) {
    summary::RowDigest* r = out->add_rows();
    r->set_comm(d.comm);
    r->set_nranks(d.nranks);
    r->set_func(d.func);
    r->set_bucket(d.bucket);
    r->set_bytes_sum(d.bytes_sum);
    r->set_bytes_n(d.bytes_n);
    r->set_ops(d.ops);
    r->set_incomplete(d.incomplete);
    r->set_warmup(d.warmup);
    r->set_calls(d.calls);
    // Empty sketches are left out: most rows have GPU or CPU timing, not both.
    if (!d.gpu.empty()) SketchToProto(d.gpu, r->mutable_gpu());
    if (!d.cpu.empty()) SketchToProto(d.cpu, r->mutable_cpu());
    if (!d.polled.empty()) SketchToProto(d.polled, r->mutable_polled());
    if (!d.delay.empty()) SketchToProto(d.delay, r->mutable_delay());
    if (!d.skew.empty()) SketchToProto(d.skew, r->mutable_skew());
  }
  for (const RankDigest& d : ranks) {
    summary::RankDigest* r = out->add_ranks();
    r->set_comm(d.comm);
    r->set_nranks(d.nranks);
    r->set_rank(d.rank);
    if (!d.lateness.empty()) SketchToProto(d.lateness, r->mutable_lateness());
  }
  for (const std::string& c : whole_comms) out->add_whole_comms(c);
}

bool ReadDigests(const summary::SummaryProcess& sp, Proc* out) {
  if (!sp.digested()) return true;
  std::vector<RowDigest> rows;
  std::vector<RankDigest> ranks;
  for (const summary::RowDigest& r : sp.rows()) {
    // -2 unknown, -1 zero bytes, else log2 of a 64-bit size (stats.h BucketLabel).
    if (r.bucket() < -2 || r.bucket() > 63) return false;
    RowDigest d;
    d.comm = r.comm();
    d.nranks = r.nranks();
    d.func = r.func();
    d.bucket = r.bucket();
    d.bytes_sum = r.bytes_sum();
    d.bytes_n = r.bytes_n();
    d.ops = r.ops();
    d.incomplete = r.incomplete();
    d.warmup = r.warmup();
    d.calls = r.calls();
    if (!SketchFromProto(r.gpu(), &d.gpu) || !SketchFromProto(r.cpu(), &d.cpu) ||
        !SketchFromProto(r.polled(), &d.polled) || !SketchFromProto(r.delay(), &d.delay) ||
        !SketchFromProto(r.skew(), &d.skew))
      return false;
    rows.push_back(std::move(d));
  }
  for (const summary::RankDigest& r : sp.ranks()) {
    RankDigest d;
    d.comm = r.comm();
    d.nranks = r.nranks();
    d.rank = r.rank();
    if (!SketchFromProto(r.lateness(), &d.lateness)) return false;
    ranks.push_back(std::move(d));
  }
  out->digested = true;
  out->row_digests = std::move(rows);
  out->rank_digests = std::move(ranks);
  out->whole_comms.assign(sp.whole_comms().begin(), sp.whole_comms().end());
  if (sp.has_arrivals()) {
    const summary::ArrivalDigest& pa = sp.arrivals();
    ArrivalDigest& a = out->arrivals;
    a.valid = true;
    a.threshold_s = pa.threshold_s();
    a.fraction = pa.fraction();
    a.total = pa.total();
    a.late = pa.late();
    a.median_lag_s = pa.median_lag_s();
    a.max_lag_s = pa.max_lag_s();
    a.gpu_held = pa.gpu_held();
    for (const summary::ArrivalRow& pr : pa.rows())
      a.rows.push_back(ArrivalRow{pr.comm_hash(), pr.func(), pr.total(), pr.late(), pr.median_lag_s(), pr.max_lag_s(),
                                  pr.held_total(), pr.held_late(), pr.held_median_lag_s(), pr.held_max_lag_s(),
                                  pr.held_host_lag_s()});
  }
  return true;
}

std::string EncodeSummary(const SummaryResult& s) {
  std::string out;
  summary::SummaryRecord r;
  *r.mutable_header() = s.header;
  Frame(r, &out);
  for (const summary::SummaryProcess& p : s.procs) {
    r.Clear();
    *r.mutable_process() = p;
    Frame(r, &out);
  }
  return out;
}

bool LooksLikeSummary(const std::string& head) {
  size_t pos = 0;
  uint64_t len = 0;
  if (!GetVarint(head, &pos, &len) || len > head.size() - pos || len > 4096) return false;
  summary::SummaryRecord r;
  return r.ParseFromArray(head.data() + pos, static_cast<int>(len)) && r.has_header() &&
         r.header().format() == kSummaryFormat;
}

bool ParseSummary(const std::string& name, const std::string& bytes, SummaryResult* out, std::string* error) {
  size_t pos = 0;
  bool first = true;
  summary::SummaryRecord r;
  while (pos < bytes.size()) {
    const size_t at = pos;
    uint64_t len = 0;
    const std::string where = name + ": offset " + std::to_string(at) + ": ";
    if (!GetVarint(bytes, &pos, &len)) {
      *error = where + "the file ends inside a record's length (cut short?)";
      return false;
    }
    if (len > bytes.size() - pos || len > kMaxSummaryRecord) {
      *error = where + "a record of " + std::to_string(len) + " bytes, past the end of the file (" +
               std::to_string(bytes.size() - pos) + " left): cut short or damaged";
      return false;
    }
    if (!r.ParseFromArray(bytes.data() + pos, static_cast<int>(len))) {
      *error = where + (first ? "not an ncclwatch summary (its first record is no summary header)"
                              : "a record that does not parse: damaged");
      return false;
    }
    pos += len;
    if (first) {
      if (!r.has_header() || r.header().format() != kSummaryFormat) {
        *error = where + "not an ncclwatch summary (its first record is no summary header)";
        return false;
      }
      if (r.header().version() > kSummaryVersion) {
        *error = where + "summary format version " + std::to_string(r.header().version()) +
                 ", newer than this ncclwatch reads (" + std::to_string(kSummaryVersion) +
                 "): read it with a newer ncclwatch";
        return false;
      }
      out->header = r.header();
      first = false;
      continue;
    }
    if (!r.has_process()) {
      *error = where + "a record that is no process summary: damaged";
      return false;
    }
    out->procs.push_back(std::move(*r.mutable_process()));
  }
  if (first) {
    *error = name + ": empty: not an ncclwatch summary";
    return false;
  }
  return true;
}

bool ReadSummaryFile(const std::string& path, SummaryResult* out, std::string* error) {
  std::string bytes;
  RegularFile f;
  if (!ReadFileHead(path, kMaxSummaryBytes + 1, &bytes, &f)) {
    *error = "cannot read " + path + ": " + f.why;
    return false;
  }
  if (bytes.size() > kMaxSummaryBytes) {
    *error = path + ": more than " + std::to_string(kMaxSummaryBytes >> 30) + " GiB, more than a summary holds";
    return false;
  }
  return ParseSummary(path, bytes, out, error);
}

void ReadSummaryFiles(const std::vector<std::string>& files, std::vector<SummaryResult>* out,
                      std::vector<std::string>* errors) {
  out->assign(files.size(), SummaryResult());
  errors->assign(files.size(), std::string());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < files.size(); i = next.fetch_add(1)) {
      std::string e;
      if (!ReadSummaryFile(files[i], &(*out)[i], &e)) (*errors)[i] = e.empty() ? files[i] + ": unreadable" : e;
    }
  };
  // Two threads at most: glibc gives each thread its own heap, and what a
  // second thread parsed is freed into its heap as the model is built, out
  // of the model's reach. At 16,384 ranks the merge's peak was 1.66 GB with
  // one thread, 1.87 with two, 2.06 with four and 2.22 with eight
  // (BENCHMARKS.md): a second halves the parsing, more only cost memory.
  const size_t n = std::min<size_t>({std::max(1u, std::thread::hardware_concurrency()), 2, files.size()});
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n; ++t) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no thread to be had (a limit on the host): this one reads the rest
    }
  }
  work();
  for (std::thread& t : threads) t.join();
}

}  // namespace ncclwatch::tools
