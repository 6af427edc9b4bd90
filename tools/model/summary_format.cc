#include "tools/model/summary_format.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <zlib.h>

#include "tools/model/summary_checks.h"
#include "tools/model/summary_shape.h"
#include "tools/model/summary_sharing.h"
#include "tools/reader/reader.h"

namespace ncclwatch::tools {
namespace {

// The longest record of a summary: a process's window (kept bounded by
// FileWindow; a GiB is no summary we write).
constexpr uint64_t kMaxSummaryRecord = 1ull << 30;

// zlib's CRC-32 of `n` bytes at `p`, fed in pieces that fit its uInt.
uint32_t Crc32(const char* p, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    const uInt piece = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(p), piece);
    p += piece;
    n -= piece;
  }
  return static_cast<uint32_t>(crc);
}

// The four bytes after a record: the CRC-32 of its length and body, little
// endian, so that a flipped byte anywhere in the frame is seen.
void PutCrc(uint32_t crc, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
}

uint32_t GetCrc(const std::string& b, size_t pos) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(b[pos + i])} << (8 * i);
  return v;
}

// `r` deflated into `d` (`plain` a buffer): true where that is smaller
// and within what a reader inflates (kMaxInflation).
bool Deflate(const summary::SummaryRecord& r, std::string* plain, summary::DeflatedProcess* d) {
  plain->clear();
  if (!r.SerializeToString(plain)) return false;
  uLongf n = compressBound(static_cast<uLong>(plain->size()));
  std::string* data = d->mutable_data();
  data->resize(n);
  if (compress2(reinterpret_cast<Bytef*>(&(*data)[0]), &n, reinterpret_cast<const Bytef*>(plain->data()),
                static_cast<uLong>(plain->size()), Z_DEFAULT_COMPRESSION) != Z_OK)
    return false;
  data->resize(n);
  d->set_size(plain->size());
  return plain->size() <= kMaxInflation * n && d->ByteSizeLong() + 4 < plain->size();
}

void Frame(const summary::SummaryRecord& r, std::string* out) {
  const size_t start = out->size();
  {
    google::protobuf::io::StringOutputStream raw(out);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.WriteVarint64(r.ByteSizeLong());
    r.SerializeWithCachedSizes(&coded);
  }
  PutCrc(Crc32(out->data() + start, out->size() - start), out);
}

// The length at `*pos`, which moves past it; false when the bytes there are
// no whole varint.
bool ReadLength(const std::string& b, size_t* pos, uint64_t* len) {
  const size_t left = b.size() - *pos;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(b.data() + *pos),
                                            static_cast<int>(std::min<size_t>(left, 10)));
  if (!in.ReadVarint64(len)) return false;
  *pos += static_cast<size_t>(in.CurrentPosition());
  return true;
}

}  // namespace

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

bool ReadDigests(const summary::SummaryProcess& sp, Proc* out, bool keep_rows) {
  if (!sp.digested()) return true;
  std::vector<RowDigest> rows;
  std::vector<RankDigest> ranks;
  // Each row is about 560 bytes with its five sketches: grown by doubling,
  // a summary's rows would briefly take three times that.
  if (keep_rows) {
    rows.reserve(static_cast<size_t>(sp.rows_size()));
    ranks.reserve(static_cast<size_t>(sp.ranks_size()));
  }
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
    if (keep_rows) rows.push_back(std::move(d));
  }
  for (const summary::RankDigest& r : sp.ranks()) {
    RankDigest d;
    d.comm = r.comm();
    d.nranks = r.nranks();
    d.rank = r.rank();
    if (!SketchFromProto(r.lateness(), &d.lateness)) return false;
    if (keep_rows) ranks.push_back(std::move(d));
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
  std::string body;
  summary::SummaryRecord r;
  SharingWriter sharing;
  bool newer = false;  // a process refers or is deflated: the header says version 4
  std::string plain;
  summary::SummaryRecord z;
  for (size_t i = 0; i < s.procs.size(); ++i) {
    r.Clear();
    // Record i + 1: the header is 0.
    if (s.header.nodes() == 0 || !sharing.Share(i + 1, body.size(), s.procs[i], r.mutable_process()))
      *r.mutable_process() = s.procs[i];
    else
      newer = true;
    if (s.header.nodes() != 0 && Deflate(r, &plain, z.mutable_deflated())) {
      newer = true;
      Frame(z, &body);
    } else {
      Frame(r, &body);
    }
  }
  std::string out;
  r.Clear();
  *r.mutable_header() = s.header;
  if (newer) r.mutable_header()->set_version(std::max(s.header.version(), kFirstSharingVersion));
  Frame(r, &out);
  out += body;
  return out;
}

std::vector<size_t> SummaryFrameStarts(const std::string& bytes) {
  std::vector<size_t> starts;
  size_t pos = 0;
  uint64_t len = 0;
  while (pos < bytes.size()) {
    const size_t at = pos;
    if (!ReadLength(bytes, &pos, &len) || len > bytes.size() - pos) break;
    starts.push_back(at);
    pos += len + 4;
  }
  return starts;
}

bool LooksLikeSummary(const std::string& head) {
  size_t pos = 0;
  uint64_t len = 0;
  if (!ReadLength(head, &pos, &len) || len > head.size() - pos || len > 4096) return false;
  summary::SummaryRecord r;
  return r.ParseFromArray(head.data() + pos, static_cast<int>(len)) && r.has_header() &&
         r.header().format() == kSummaryFormat;
}

namespace {

// The records a reading skips, said in its error: the first few each with
// what was wrong, then how many more, so that a file of a million damaged
// records makes no error of a million sentences.
class Skipped {
 public:
  void Add(const std::string& what, std::string* error) {
    if (named_ == kNamed) {
      ++more_;
      return;
    }
    *error = error->empty() ? what : *error + "; " + what;
    ++named_;
  }
  // The count of the others, once the reading ends.
  void Close(std::string* error) const {
    if (more_ > 0) *error += "; and " + std::to_string(more_) + " more records like these are not read";
  }

 private:
  static constexpr int kNamed = 4;
  int named_ = 0;
  uint64_t more_ = 0;
};

// Whether a whole frame starts at `pos` and its checksum holds.
bool FrameHolds(const std::string& b, size_t pos) {
  const size_t at = pos;
  uint64_t len = 0;
  if (!ReadLength(b, &pos, &len) || len > kMaxSummaryRecord || len > b.size() - pos || b.size() - pos - len < 4)
    return false;
  return GetCrc(b, pos + len) == Crc32(b.data() + at, pos + len - at);
}

}  // namespace

bool InflateProcess(uint32_t version, summary::SummaryRecord* r, std::string* buf, std::string* why) {
  const summary::DeflatedProcess& d = r->deflated();
  const uint64_t n = d.data().size();
  if (version < kFirstSharingVersion) {
    *why = "is deflated, in a file of format version " + std::to_string(version) + ", which has none: damaged";
    return false;
  }
  if (d.size() > kMaxInflation * n || d.size() > kMaxSummaryRecord) {
    *why = "says its " + std::to_string(n) + " deflated bytes inflate to " + std::to_string(d.size()) +
           ", more than " + std::to_string(kMaxInflation) +
           " times as many: damaged, or made to take far more memory than its bytes";
    return false;
  }
  buf->resize(d.size());
  uLongf got = static_cast<uLongf>(d.size());
  if (uncompress(reinterpret_cast<Bytef*>(&(*buf)[0]), &got, reinterpret_cast<const Bytef*>(d.data().data()),
                 static_cast<uLong>(n)) != Z_OK ||
      got != d.size()) {
    *why = "is deflated, and its bytes do not inflate to the " + std::to_string(d.size()) + " it says: damaged";
    return false;
  }
  std::string shape;
  if (!PlausibleSummaryRecord(buf->data(), buf->size(), &shape)) {
    *why = "inflated, is not what summarize writes: " + shape + ": damaged, or made to take far more memory than its bytes";
    return false;
  }
  if (!r->ParseFromString(*buf) || !r->has_process()) {
    *why = "inflated, is no process record that parses: damaged";
    return false;
  }
  return true;
}

bool ParseSummary(const std::string& name, const std::string& bytes, SummaryResult* out, std::string* error) {
  error->clear();
  size_t pos = 0;
  bool first = true;
  // Whether each record is followed by its CRC-32 (version 3 on). Told by
  // the header's own checksum as well as its version, so that a flipped
  // version byte cannot turn the checks off.
  bool checked = false;
  uint64_t index = 0;
  Skipped skipped;
  // Each process's path, with its record: summarize writes each once.
  std::unordered_map<std::string, uint64_t> paths;
  // The reading ends at `what`, after the records it skipped.
  auto stop = [&](const std::string& what) {
    skipped.Close(error);
    *error = error->empty() ? what : *error + "; " + what;
    return false;
  };
  // Each chain value's position across the file's processes, and the
  // records found edited by it once read (ChainValues).
  ChainValues chains;
  std::set<uint64_t> edited;
  // What the processes refer to in the records before them, once the
  // header says the file's version.
  SharingReader sharing(0);
  const size_t first_proc = out->procs.size();
  out->records.resize(first_proc);
  summary::SummaryRecord r;
  std::string inflated;
  while (pos < bytes.size()) {
    const size_t at = pos;
    uint64_t len = 0;
    const std::string where = name + ": offset " + std::to_string(at) + ": ";
    if (!ReadLength(bytes, &pos, &len)) {
      *error = where + "the file ends inside a record's length (cut short?)";
      return false;
    }
    const size_t tail = checked ? 4 : 0;
    if (len > bytes.size() - pos || len > kMaxSummaryRecord || (checked && bytes.size() - pos - len < tail)) {
      *error = where + "a record of " + std::to_string(len) + " bytes, past the end of the file (" +
               std::to_string(bytes.size() - pos) + " left): cut short or damaged";
      return false;
    }
    if (checked && GetCrc(bytes, pos + len) != Crc32(bytes.data() + at, pos + len - at)) {
      // Its length may be the changed byte: the records after it are read
      // only where the next frame proves the boundary (its own checksum
      // holds, or the file ends there).
      const size_t next = pos + len + 4;
      const bool resync = next == bytes.size() || FrameHolds(bytes, next);
      const std::string what = where + "record " + std::to_string(index) + " (process " + std::to_string(index) +
                               ") does not match its checksum: its bytes changed after it was written; " +
                               (resync ? "it is not read" : "it and what follows are not read");
      if (!resync) return stop(what);
      skipped.Add(what, error);
      pos = next;
      ++index;
      continue;
    }
    // Before it is parsed: an element far smaller than any summarize
    // writes costs a hundred times its bytes once parsed (summary_shape.h).
    std::string why;
    if (!PlausibleSummaryRecord(bytes.data() + pos, len, &why)) {
      if (first) {
        *error = where + "not an ncclwatch summary (its first record is no summary header)";
        return false;
      }
      const std::string what = where + "record " + std::to_string(index) + " (process " + std::to_string(index) +
                               ") is not what summarize writes: " + why +
                               ": damaged, or made to take far more memory than its bytes; " +
                               (checked ? "it is not read" : "it and what follows are not read");
      if (!checked) return stop(what);
      skipped.Add(what, error);
      pos += len + tail;
      ++index;
      continue;
    }
    if (!r.ParseFromArray(bytes.data() + pos, static_cast<int>(len))) {
      *error = where + (first ? "not an ncclwatch summary (its first record is no summary header)"
                              : "a record that does not parse: damaged");
      return false;
    }
    pos += len + tail;
    ++index;
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
      const bool crc_follows =
          bytes.size() - pos >= 4 && GetCrc(bytes, pos) == Crc32(bytes.data() + at, pos - at);
      if (r.header().version() >= kFirstCheckedVersion && !crc_follows) {
        *error = where + "record 0 (the header) does not match its checksum: its bytes changed after it was "
                         "written; the file is not read";
        return false;
      }
      if (r.header().version() < kFirstCheckedVersion && crc_follows) {
        *error = where + "the header says format version " + std::to_string(r.header().version()) +
                 " but carries a version " + std::to_string(kFirstCheckedVersion) +
                 " checksum: damaged; the file is not read";
        return false;
      }
      checked = crc_follows;
      sharing = SharingReader(r.header().version());
      if (checked) pos += 4;
      out->header = r.header();
      first = false;
      continue;
    }
    // A deflated one is read as the record it holds, once inflated.
    if (r.has_deflated() && !InflateProcess(out->header.version(), &r, &inflated, &why)) {
      skipped.Add(where + "record " + std::to_string(index - 1) + " (process " + std::to_string(index - 1) + ") " +
                      why + "; it is not read",
                  error);
      continue;
    }
    if (!r.has_process()) {
      *error = where + "a record that is no process summary: damaged";
      return false;
    }
    auto [seen, fresh] = paths.try_emplace(r.process().path(), index - 1);
    if (!fresh) {
      skipped.Add(where + "record " + std::to_string(index - 1) + " (process " + std::to_string(index - 1) +
                      ") is the same process as record " + std::to_string(seen->second) +
                      ": summarize writes each once: damaged, or made to take far more memory than its bytes; "
                      "it is not read",
                  error);
      continue;
    }
    // What it shares with the records before it, put back before anything
    // looks at it.
    if (!sharing.Resolve(index - 1, pos, out->procs, r.mutable_process(), &why)) {
      skipped.Add(where + "record " + std::to_string(index - 1) + " (process " + std::to_string(index - 1) + ") " +
                      why + ": damaged; it is not read",
                  error);
      continue;
    }
    // Its checksum holds, so an edit would pass for evidence: its counts,
    // numbering and hashes must agree (summary_checks.h).
    if (!CheckSummaryProcess(out->header, r.process(), &why)) {
      skipped.Add(where + "record " + std::to_string(index - 1) + " (process " + std::to_string(index - 1) +
                      ") is not what summarize writes: " + why + ": edited or damaged; it is not read",
                  error);
      continue;
    }
    uint64_t other = 0;
    if (!chains.Add(index - 1, r.process(), &other, &why)) {
      skipped.Add(where + "record " + std::to_string(index - 1) + " (process " + std::to_string(index - 1) +
                      ") is not what summarize writes: " + why + ": edited or damaged; " +
                      (other == index - 1 ? "it is not read" : "neither is read"),
                  error);
      edited.insert(other);
      continue;
    }
    out->records.push_back(index - 1);
    out->procs.push_back(std::move(*r.mutable_process()));
    sharing.Read(index - 1, out->procs.size() - 1);
  }
  // A record that took what it shares from one found edited is not read
  // either (references go back only, so one pass in file order).
  if (!edited.empty())
    for (size_t k = first_proc; k < out->procs.size(); ++k)
      for (uint64_t from : sharing.From(out->records[k]))
        if (edited.count(from) && edited.insert(out->records[k]).second)
          skipped.Add(name + ": record " + std::to_string(out->records[k]) + " (process " +
                          std::to_string(out->records[k]) + ") refers to record " + std::to_string(from) +
                          ", which is not read: it is not read either",
                      error);
  // A record whose chain value another one had at another position, found
  // after it was read.
  if (!edited.empty()) {
    size_t kept = first_proc;
    for (size_t k = first_proc; k < out->procs.size(); ++k)
      if (!edited.count(out->records[k])) {
        if (kept != k) {
          out->procs[kept] = std::move(out->procs[k]);
          out->records[kept] = out->records[k];
        }
        ++kept;
      }
    out->procs.resize(kept);
    out->records.resize(kept);
  }
  skipped.Close(error);
  if (first) {
    *error = name + ": empty: not an ncclwatch summary";
    return false;
  }
  return error->empty();
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
  out->bytes_crc = Crc32(bytes.data(), bytes.size());
  return ParseSummary(path, bytes, out, error);
}

void ReadSummaryFiles(const std::vector<std::string>& files, std::vector<SummaryResult>* out,
                      std::vector<std::string>* errors, const std::function<void(size_t, SummaryResult*)>& then) {
  out->assign(files.size(), SummaryResult());
  errors->assign(files.size(), std::string());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < files.size(); i = next.fetch_add(1)) {
      std::string e;
      if (!ReadSummaryFile(files[i], &(*out)[i], &e)) (*errors)[i] = e.empty() ? files[i] + ": unreadable" : e;
      if (then) then(i, &(*out)[i]);
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
