#include "tools/model/arrival_samples.h"

#include <algorithm>
#include <string>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

namespace ncclwatch::tools {

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

}  // namespace ncclwatch::tools
