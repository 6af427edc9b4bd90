// What a group summary's processes share is stored once and read back as
// written (tools/model/summary_sharing.h): a CI rerun's ranks, each
// summarized alone, gathered into a group, share checkpoints and arrival
// samples, and the group reads back as given, smaller. A reference that
// cannot be resolved (out of range, forward, to a communicator its record
// has not, for more than it holds, to a record that failed its checksum,
// in a file of a version without references) is a read error naming the
// file and the record, and diagnose says INCOMPLETE.

#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <zlib.h>

#include "tools/model/summary_format.h"
#include "tools/model/summary_sharing.h"
#include "tools/summary/summary.h"
#include "tools/summary/test_summaries.h"

namespace ncclwatch::tools {
namespace {

using testing::ReadBytes;
using testing::Tmp;
using testing::Verdict;
using testing::WriteBytes;

// The CI reruns' folders (longer than a node's window, so that ranks let
// operations go and keep checkpoints).
std::vector<std::string> CiFolders() {
  std::vector<std::string> out;
  DIR* d = opendir("testdata/ci");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name[0] == '.' || name.find('.') != std::string::npos) continue;
    DIR* sub = opendir(("testdata/ci/" + name).c_str());
    if (sub == nullptr) continue;
    while (dirent* f = readdir(sub)) {
      const std::string run = f->d_name;
      if (run[0] != '.') out.push_back("testdata/ci/" + name + "/" + run);
    }
    closedir(sub);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// The group of `folder`'s ranks, each summarized alone.
SummaryResult GroupOf(const std::string& folder, const std::string& tag) {
  const std::vector<std::string> nodes = testing::Summaries(folder, false, tag);
  SummaryResult g;
  std::string error;
  EXPECT_TRUE(Summarize(nodes, SummarizeOptions(), &g, &error)) << folder << ": " << error;
  return g;
}

// The records of `bytes` as written (references unresolved): the header,
// then the processes.
std::vector<summary::SummaryRecord> RawRecords(const std::string& bytes) {
  std::vector<summary::SummaryRecord> out;
  for (size_t at : SummaryFrameStarts(bytes)) {
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data() + at),
                                              static_cast<int>(std::min<size_t>(10, bytes.size() - at)));
    uint64_t len = 0;
    EXPECT_TRUE(in.ReadVarint64(&len));
    out.emplace_back();
    EXPECT_TRUE(out.back().ParseFromArray(bytes.data() + at + in.CurrentPosition(), static_cast<int>(len)));
    std::string buf, why;
    if (out.back().has_deflated()) {
      EXPECT_TRUE(InflateProcess(kFirstSharingVersion, &out.back(), &buf, &why)) << why;
    }
  }
  return out;
}

// How many of `bytes`' records are deflated.
int Deflated(const std::string& bytes) {
  int n = 0;
  for (size_t at : SummaryFrameStarts(bytes)) {
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data() + at),
                                              static_cast<int>(std::min<size_t>(10, bytes.size() - at)));
    uint64_t len = 0;
    EXPECT_TRUE(in.ReadVarint64(&len));
    summary::SummaryRecord r;
    EXPECT_TRUE(r.ParseFromArray(bytes.data() + at + in.CurrentPosition(), static_cast<int>(len)));
    n += r.has_deflated();
  }
  return n;
}

// `records` framed as they are (a deflated one stays so), each followed
// by the CRC-32 of its frame, as a summary file of format `version`.
std::string Frames(std::vector<summary::SummaryRecord> records, uint32_t version) {
  records[0].mutable_header()->set_version(version);
  std::string out;
  for (const summary::SummaryRecord& r : records) {
    const size_t start = out.size();
    {
      google::protobuf::io::StringOutputStream raw(&out);
      google::protobuf::io::CodedOutputStream coded(&raw);
      coded.WriteVarint64(r.ByteSizeLong());
      r.SerializeWithCachedSizes(&coded);
    }
    const uint32_t crc = static_cast<uint32_t>(
        crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(out.data() + start), static_cast<uInt>(out.size() - start)));
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  }
  return out;
}

// `records` written as they are, checksums made again (a node's header
// lets EncodeSummary write each process as given).
std::string Rewrite(const std::vector<summary::SummaryRecord>& records, uint32_t version) {
  SummaryResult s;
  s.header = records[0].header();
  s.header.clear_nodes();
  s.header.set_version(version);
  for (size_t k = 1; k < records.size(); ++k) s.procs.push_back(records[k].process());
  return EncodeSummary(s);
}

TEST(SharingTest, CiRerunGroupsShareAndReadBackAsGiven) {
  const std::vector<std::string> folders = CiFolders();
  ASSERT_GE(folders.size(), 20u);
  int shared_groups = 0, prefixes = 0, samples = 0, deflated = 0;
  for (size_t i = 0; i < folders.size(); ++i) {
    const SummaryResult g = GroupOf(folders[i], "ci-" + std::to_string(i));
    bool shared = false;
    const std::string bytes = testing::EncodeAndReadBack(g, folders[i], &shared);
    shared_groups += shared;
    deflated += Deflated(bytes);
    for (const summary::SummaryRecord& r : RawRecords(bytes)) {
      for (const summary::CommPrefix& p : r.process().prefixes()) prefixes += p.checkpoints_from() != 0;
      for (const summary::ArrivalSamples& a : r.process().samples()) samples += a.times_from() != 0;
    }
  }
  EXPECT_EQ(shared_groups, static_cast<int>(folders.size()));
  EXPECT_GT(prefixes, 0);
  EXPECT_GT(samples, 0);
  EXPECT_GT(deflated, 0);
}

// A group's records, the first referring process and what it refers to.
struct Shared {
  std::string bytes;
  std::vector<summary::SummaryRecord> records;
  size_t prefix_at = 0, samples_at = 0;  // records with a prefix, samples referring
  int prefix = -1, samples = -1;         // their index there
};

Shared MakeShared() {
  Shared s;
  const std::vector<std::string> folders = CiFolders();
  if (folders.empty()) return s;
  s.bytes = EncodeSummary(GroupOf(folders[0], "damage"));
  s.records = RawRecords(s.bytes);
  for (size_t k = 1; k < s.records.size(); ++k) {
    const summary::SummaryProcess& p = s.records[k].process();
    for (int i = 0; i < p.prefixes_size() && s.prefix < 0; ++i)
      if (p.prefixes(i).checkpoints_from() != 0) s.prefix_at = k, s.prefix = i;
    for (int i = 0; i < p.samples_size() && s.samples < 0; ++i)
      if (p.samples(i).times_from() != 0) s.samples_at = k, s.samples = i;
  }
  return s;
}

// `bytes` read: an error naming the file, record `record` and `phrase`;
// and diagnose of it INCOMPLETE (`some_read`: some process is read), else
// UNUSABLE, never a finding.
void ExpectRefused(const std::string& bytes, size_t record, const std::string& phrase, const std::string& tag,
                   bool some_read = true) {
  const std::string path = Tmp() + "/" + tag + kSummaryExtension;
  WriteBytes(path, bytes);
  SummaryResult back;
  std::string error;
  EXPECT_FALSE(ReadSummaryFile(path, &back, &error)) << tag;
  const std::string rec = "record " + std::to_string(record) + " (process " + std::to_string(record) + ")";
  EXPECT_EQ(error.rfind(path + ": ", 0), 0u) << tag << ": " << error;
  EXPECT_NE(error.find(rec), std::string::npos) << tag << ": " << error;
  EXPECT_NE(error.find(phrase), std::string::npos) << tag << ": " << error;
  const std::string v = Verdict({path});
  EXPECT_EQ(v.rfind(some_read ? "INCOMPLETE" : "UNUSABLE", 0), 0u) << tag << ": " << v;
}

TEST(SharingTest, AReferenceThatCannotBeResolvedIsAReadError) {
  const Shared s = MakeShared();
  ASSERT_GE(s.prefix, 0);
  ASSERT_GE(s.samples, 0);
  const size_t k = s.prefix_at;
  auto prefix = [&](std::vector<summary::SummaryRecord>* r) {
    return r->at(k).mutable_process()->mutable_prefixes(s.prefix);
  };
  const uint32_t from = s.records[k].process().prefixes(s.prefix).checkpoints_from();
  {
    std::vector<summary::SummaryRecord> r = s.records;
    prefix(&r)->set_checkpoints_from(100000);
    ExpectRefused(Rewrite(r, kFirstSharingVersion), k, "refers to record 100000, not one before it", "out-of-range");
  }
  {
    std::vector<summary::SummaryRecord> r = s.records;
    prefix(&r)->set_checkpoints_from(static_cast<uint32_t>(k));
    ExpectRefused(Rewrite(r, kFirstSharingVersion), k, "not one before it", "forward");
  }
  {
    std::vector<summary::SummaryRecord> r = s.records;
    prefix(&r)->set_comm_hash(0xdead);
    ExpectRefused(Rewrite(r, kFirstSharingVersion), k, "which has no prefix of its communicator", "no-comm");
  }
  {
    std::vector<summary::SummaryRecord> r = s.records;
    int has = 0;
    for (const summary::CommPrefix& p : r[from].process().prefixes())
      if (p.comm_hash() == prefix(&r)->comm_hash()) has = p.checkpoints_size();
    prefix(&r)->set_checkpoints_shared(static_cast<uint32_t>(has + 1));
    ExpectRefused(Rewrite(r, kFirstSharingVersion), k,
                  "takes " + std::to_string(has + 1) + " checkpoints from record " + std::to_string(from) +
                      ", which has " + std::to_string(has),
                  "over-long");
  }
  {
    // A version 3 file cannot refer.
    ExpectRefused(Rewrite(s.records, kPlainSummaryVersion), k, "in a file of format version 3, which has no references",
                  "version-3");
  }
  {
    std::vector<summary::SummaryRecord> r = s.records;
    summary::ArrivalSamples* a = r[s.samples_at].mutable_process()->mutable_samples(s.samples);
    a->mutable_times()->push_back('\x01');
    ExpectRefused(Rewrite(r, kFirstSharingVersion), s.samples_at, "has not one start and duration for each",
                  "times-long");
  }
  {
    std::vector<summary::SummaryRecord> r = s.records;
    summary::ArrivalSamples* a = r[s.samples_at].mutable_process()->mutable_samples(s.samples);
    a->set_comm_hash(0xdead);
    ExpectRefused(Rewrite(r, kFirstSharingVersion), s.samples_at, "which has no samples of its communicator",
                  "samples-no-comm");
  }
}

// The record a prefix refers to fails its checksum: it is not read, and
// neither is the one referring to it. Here every other rank's refers to
// it: no process is read.
TEST(SharingTest, AReferenceToARecordThatFailedItsChecksumIsAReadError) {
  const Shared s = MakeShared();
  ASSERT_GE(s.prefix, 0);
  const uint32_t from = s.records[s.prefix_at].process().prefixes(s.prefix).checkpoints_from();
  const std::vector<size_t> starts = SummaryFrameStarts(s.bytes);
  ASSERT_GT(starts.size(), from + 1);
  std::string bytes = s.bytes;
  bytes[(starts[from] + starts[from + 1]) / 2] ^= 0x01;
  ExpectRefused(bytes, s.prefix_at, "refers to record " + std::to_string(from) + ", which was not read",
                "crc-referenced", false);
}

// A deflated process record that is not what a group writes is a read
// error naming the file and the record: where the reader would inflate it
// past kMaxInflation, its bytes do not inflate to its size, it holds no
// process, or the file's version has no deflated records.
TEST(SharingTest, ADeflatedRecordThatCannotBeReadIsAReadError) {
  const Shared s = MakeShared();
  ASSERT_GT(s.records.size(), 2u);
  const size_t k = s.records.size() - 1;
  // The last record deflated again, as the writer would.
  auto deflate = [](const summary::SummaryRecord& inner, uint64_t size) {
    std::string plain = inner.SerializeAsString();
    uLongf n = compressBound(static_cast<uLong>(plain.size()));
    std::string data(n, '\0');
    EXPECT_EQ(compress2(reinterpret_cast<Bytef*>(&data[0]), &n, reinterpret_cast<const Bytef*>(plain.data()),
                        static_cast<uLong>(plain.size()), Z_DEFAULT_COMPRESSION),
              Z_OK);
    data.resize(n);
    summary::SummaryRecord r;
    r.mutable_deflated()->set_data(data);
    r.mutable_deflated()->set_size(size == 0 ? plain.size() : size);
    return r;
  };
  const uint64_t size = s.records[k].ByteSizeLong();
  // The processes as read, references resolved.
  SummaryResult whole;
  std::string error;
  ASSERT_TRUE(ParseSummary("whole", s.bytes, &whole, &error)) << error;
  ASSERT_EQ(whole.procs.size(), k);
  {
    // As written: read back.
    std::vector<summary::SummaryRecord> r = s.records;
    r[k] = deflate(s.records[k], 0);
    SummaryResult back;
    EXPECT_TRUE(ParseSummary("as-written", Frames(r, kFirstSharingVersion), &back, &error)) << error;
    ASSERT_EQ(back.procs.size(), k);
    EXPECT_EQ(back.procs.back().SerializeAsString(), whole.procs.back().SerializeAsString());
  }
  {
    std::vector<summary::SummaryRecord> r = s.records;
    r[k] = deflate(s.records[k], 0);
    const uint64_t n = r[k].deflated().data().size();
    r[k].mutable_deflated()->set_size(n * kMaxInflation + 1);
    ExpectRefused(Frames(r, kFirstSharingVersion), k, "more than " + std::to_string(kMaxInflation) + " times as many",
                  "inflate-too-far");
  }
  {
    std::vector<summary::SummaryRecord> r = s.records;
    r[k] = deflate(s.records[k], size - 1);
    ExpectRefused(Frames(r, kFirstSharingVersion), k, "do not inflate to the " + std::to_string(size - 1), "short-size");
  }
  {
    std::vector<summary::SummaryRecord> r = s.records;
    r[k] = deflate(s.records[k], 0);
    (*r[k].mutable_deflated()->mutable_data())[r[k].deflated().data().size() / 2] ^= 0x20;
    ExpectRefused(Frames(r, kFirstSharingVersion), k, "damaged", "flipped-data");
  }
  {
    std::vector<summary::SummaryRecord> r = s.records;
    r[k] = deflate(s.records[0], 0);  // a header, deflated
    ExpectRefused(Frames(r, kFirstSharingVersion), k, "is no process record", "deflated-header");
  }
  {
    // Every process whole (no reference a version 3 file would refuse),
    // the last deflated.
    std::vector<summary::SummaryRecord> r(1, s.records[0]);
    for (const summary::SummaryProcess& p : whole.procs) *r.emplace_back().mutable_process() = p;
    ASSERT_EQ(r.size(), s.records.size());
    r[k] = deflate(r[k], 0);
    ExpectRefused(Frames(r, kPlainSummaryVersion), k, "is deflated, in a file of format version 3", "deflated-v3");
  }
}

}  // namespace
}  // namespace ncclwatch::tools
