#include "tools/model/summary_sharing.h"

#include <stdio.h>

#include <algorithm>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

namespace ncclwatch::tools {
namespace {

using google::protobuf::internal::WireFormatLite;

std::string Hex(uint64_t v) {
  char b[24];
  snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

bool SameCheckpoint(const summary::Checkpoint& a, const summary::Checkpoint& b) {
  return a.position() == b.position() && a.hash() == b.hash() && a.seq() == b.seq() && a.func() == b.func();
}

// Whether `a` and `b` sampled the same collectives: all but their times.
bool SameCollectives(const summary::ArrivalSamples& a, const std::vector<ArrivalSample>& av,
                     const summary::ArrivalSamples& b, const std::vector<ArrivalSample>& bv) {
  if (a.stride_log2() != b.stride_log2() || a.collectives() != b.collectives() || a.count() != b.count() ||
      av.size() != bv.size() || a.buckets() != b.buckets() || a.functions_size() != b.functions_size() ||
      a.first_seqs_size() != b.first_seqs_size())
    return false;
  for (int i = 0; i < a.functions_size(); ++i)
    if (a.functions(i) != b.functions(i)) return false;
  for (int i = 0; i < a.first_seqs_size(); ++i)
    if (a.first_seqs(i) != b.first_seqs(i)) return false;
  for (size_t i = 0; i < av.size(); ++i)
    if (av[i].position != bv[i].position || av[i].func != bv[i].func || av[i].seq != bv[i].seq) return false;
  return true;
}

// Per sample of `v`: its start's gap to `whole`'s minus the sample
// before's gap, and its duration minus `whole`'s, zigzag (modulo 2^64, as
// ExpandSamples adds them back). Each process's file times count from its
// own clock base, so the gap is mostly that base's difference, the same
// at every sample: what is left is the ranks' skew, a byte or two.
std::string Times(const std::vector<ArrivalSample>& whole, const std::vector<ArrivalSample>& v) {
  std::string times;
  {
    google::protobuf::io::StringOutputStream raw(&times);
    google::protobuf::io::CodedOutputStream out(&raw);
    uint64_t gap = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const uint64_t start = static_cast<uint64_t>(v[i].start_ns) - static_cast<uint64_t>(whole[i].start_ns);
      const uint64_t duration = v[i].duration_ns - whole[i].duration_ns;
      out.WriteVarint64(WireFormatLite::ZigZagEncode64(static_cast<int64_t>(start - gap)));
      gap = start;
      out.WriteVarint64(WireFormatLite::ZigZagEncode64(static_cast<int64_t>(duration)));
    }
  }
  return times;
}

}  // namespace

bool ExpandSamples(const summary::ArrivalSamples& whole, const std::vector<ArrivalSample>& decoded,
                   summary::ArrivalSamples* a) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(a->times().data()),
                                            static_cast<int>(a->times().size()));
  std::vector<ArrivalSample> v = decoded;
  uint64_t gap = 0;  // the start's gap to the whole one's (Times)
  for (ArrivalSample& x : v) {
    uint64_t start = 0, duration = 0;
    if (!in.ReadVarint64(&start) || !in.ReadVarint64(&duration)) return false;
    gap += static_cast<uint64_t>(WireFormatLite::ZigZagDecode64(start));
    x.start_ns = static_cast<int64_t>(static_cast<uint64_t>(x.start_ns) + gap);
    x.duration_ns += static_cast<uint64_t>(WireFormatLite::ZigZagDecode64(duration));
  }
  if (in.CurrentPosition() != static_cast<int>(a->times().size())) return false;  // nothing after them
  std::string held = std::move(*a->mutable_held());
  const uint64_t comm = a->comm_hash();
  a->Clear();
  a->set_comm_hash(comm);
  a->set_stride_log2(whole.stride_log2());
  a->set_collectives(whole.collectives());
  *a->mutable_functions() = whole.functions();
  *a->mutable_first_seqs() = whole.first_seqs();
  EncodeSamples(v, a);  // count, packed, buckets (the whole one's, which the writer saw re-encode alike)
  a->set_held(std::move(held));
  return true;
}

bool SharingWriter::Share(uint64_t record, uint64_t written, const summary::SummaryProcess& sp,
                          summary::SummaryProcess* out) {
  if (record > UINT32_MAX) return false;  // no field holds it
  bool shared = false;
  auto copy = [&] {
    if (!shared) *out = sp;
    shared = true;
  };
  for (int k = 0; k < sp.prefixes_size(); ++k) {
    const summary::CommPrefix& p = sp.prefixes(k);
    if (p.checkpoints_size() == 0 || p.checkpoints_from() != 0) continue;
    auto& whole = prefixes_[p.comm_hash()];
    uint64_t from = 0;
    int best = 0;
    for (const auto& [r, w] : whole) {
      const int most = std::min(w->checkpoints_size(), p.checkpoints_size());
      int n = 0;
      while (n < most && SameCheckpoint(w->checkpoints(n), p.checkpoints(n))) ++n;
      if (n > best) best = n, from = r;
    }
    if (best == 0 || taken_ + static_cast<uint64_t>(best) > written / kBytesPerSharedCheckpoint) {
      if (whole.size() < kMaxReferenced) whole.emplace_back(record, &p);
      continue;
    }
    taken_ += static_cast<uint64_t>(best);
    copy();
    summary::CommPrefix* q = out->mutable_prefixes(k);
    q->set_checkpoints_from(static_cast<uint32_t>(from));
    q->set_checkpoints_shared(static_cast<uint32_t>(best));
    q->mutable_checkpoints()->DeleteSubrange(0, best);
  }
  for (int k = 0; k < sp.samples_size(); ++k) {
    const summary::ArrivalSamples& a = sp.samples(k);
    std::vector<ArrivalSample> v;
    if (a.times_from() != 0 || a.count() == 0 || !DecodeSamples(a, &v)) continue;
    auto& whole = samples_[a.comm_hash()];
    bool referred = false;
    for (const WholeSamples& w : whole) {
      if (!SameCollectives(*w.samples, w.decoded, a, v)) continue;
      summary::ArrivalSamples r;
      r.set_comm_hash(a.comm_hash());
      r.set_times_from(static_cast<uint32_t>(w.record));
      r.set_times(Times(w.decoded, v));
      r.set_held(a.held());
      // Only where the reader gives back its bytes exactly (a field an
      // older writer encoded otherwise, a field this one does not know).
      summary::ArrivalSamples back = r;
      if (!ExpandSamples(*w.samples, w.decoded, &back) || back.SerializeAsString() != a.SerializeAsString()) continue;
      if (r.ByteSizeLong() >= a.ByteSizeLong()) break;
      copy();
      *out->mutable_samples(k) = std::move(r);
      referred = true;
      break;
    }
    if (!referred && whole.size() < kMaxReferenced) whole.push_back({record, &a, std::move(v)});
  }
  return shared;
}

const std::set<uint64_t>& SharingReader::From(uint64_t record) const {
  static const std::set<uint64_t> kNone;
  auto it = from_.find(record);
  return it == from_.end() ? kNone : it->second;
}

bool SharingReader::Resolve(uint64_t record, uint64_t end, const std::vector<summary::SummaryProcess>& procs,
                            summary::SummaryProcess* sp, std::string* why) {
  auto fail = [&](const std::string& what) {
    *why = what;
    return false;
  };
  // The process of record `from`, to which `name` refers.
  auto source = [&](const std::string& name, uint64_t from, const summary::SummaryProcess** src) {
    const std::string to = name + " refers to record " + std::to_string(from);
    if (version_ < kFirstSharingVersion)
      return fail(to + ", in a file of format version " + std::to_string(version_) + ", which has no references");
    if (from >= record) return fail(to + ", not one before it");
    auto it = read_.find(from);
    if (it == read_.end()) return fail(to + ", which was not read");
    *src = &procs[it->second];
    return true;
  };
  for (int k = 0; k < sp->prefixes_size(); ++k) {
    summary::CommPrefix* p = sp->mutable_prefixes(k);
    const uint64_t from = p->checkpoints_from(), n = p->checkpoints_shared();
    const std::string name = "prefixes[" + std::to_string(k) + "] (comm " + Hex(p->comm_hash()) + ")";
    if (from == 0) {
      if (n != 0) return fail(name + " takes " + std::to_string(n) + " checkpoints from no record");
      continue;
    }
    const summary::SummaryProcess* src = nullptr;
    if (!source(name, from, &src)) return false;
    const std::string at = name + " refers to record " + std::to_string(from);
    const summary::CommPrefix* w = nullptr;
    for (const summary::CommPrefix& q : src->prefixes())
      if (q.comm_hash() == p->comm_hash()) w = &q;
    if (w == nullptr) return fail(at + ", which has no prefix of its communicator");
    if (shared_prefixes_.count({from, p->comm_hash()}))
      return fail(at + ", whose checkpoints of its communicator are not whole there");
    if (n == 0 || n > static_cast<uint64_t>(w->checkpoints_size()))
      return fail(name + " takes " + std::to_string(n) + " checkpoints from record " + std::to_string(from) +
                  ", which has " + std::to_string(w->checkpoints_size()));
    if (taken_ + n > end / kBytesPerSharedCheckpoint)
      return fail(name + " takes " + std::to_string(n) + " checkpoints from record " + std::to_string(from) + ", " +
                  std::to_string(taken_ + n) + " taken by reference in the file's first " + std::to_string(end) +
                  " bytes, more than one in " + std::to_string(kBytesPerSharedCheckpoint) +
                  ": made to take far more memory than its bytes");
    taken_ += n;
    google::protobuf::RepeatedPtrField<summary::Checkpoint> all;
    all.Reserve(static_cast<int>(n) + p->checkpoints_size());
    for (int i = 0; i < static_cast<int>(n); ++i) *all.Add() = w->checkpoints(i);
    for (summary::Checkpoint& c : *p->mutable_checkpoints()) *all.Add() = std::move(c);
    p->mutable_checkpoints()->Swap(&all);
    p->clear_checkpoints_from();
    p->clear_checkpoints_shared();
    shared_prefixes_.emplace(record, p->comm_hash());
    from_[record].insert(from);
  }
  for (int k = 0; k < sp->samples_size(); ++k) {
    summary::ArrivalSamples* a = sp->mutable_samples(k);
    const uint64_t from = a->times_from();
    const std::string name = "samples[" + std::to_string(k) + "] (comm " + Hex(a->comm_hash()) + ")";
    if (from == 0) {
      if (!a->times().empty()) return fail(name + " has times relative to no record");
      continue;
    }
    const summary::SummaryProcess* src = nullptr;
    if (!source(name, from, &src)) return false;
    if (a->stride_log2() != 0 || a->collectives() != 0 || a->functions_size() != 0 || a->count() != 0 ||
        !a->packed().empty() || !a->buckets().empty() || a->first_seqs_size() != 0)
      return fail(name + " refers to record " + std::to_string(from) + " and holds samples of its own");
    const std::string at = name + " refers to record " + std::to_string(from);
    const summary::ArrivalSamples* w = nullptr;
    for (const summary::ArrivalSamples& q : src->samples())
      if (q.comm_hash() == a->comm_hash()) w = &q;
    if (w == nullptr) return fail(at + ", which has no samples of its communicator");
    if (shared_samples_.count({from, a->comm_hash()}))
      return fail(at + ", whose samples of its communicator are not whole there");
    std::vector<ArrivalSample> decoded;
    if (!DecodeSamples(*w, &decoded)) return fail(at + ", whose samples of its communicator are damaged");
    if (!ExpandSamples(*w, decoded, a))
      return fail(name + " has not one start and duration for each of record " + std::to_string(from) + "'s " +
                  std::to_string(decoded.size()) + " samples");
    shared_samples_.emplace(record, a->comm_hash());
    from_[record].insert(from);
  }
  return true;
}

}  // namespace ncclwatch::tools
