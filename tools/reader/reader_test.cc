#include "tools/reader/reader.h"

#include <gtest/gtest.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <string>

namespace ncclwatch::tools {
namespace {

std::string Frame(const trace::Record& r) {
  std::string out;
  google::protobuf::io::StringOutputStream s(&out);
  google::protobuf::io::CodedOutputStream c(&s);
  c.WriteVarint32(static_cast<uint32_t>(r.ByteSizeLong()));
  r.SerializeToCodedStream(&c);
  return out;
}

std::string ThreeRecords() {
  trace::Record h;
  h.mutable_header()->set_schema_version(1);
  h.mutable_header()->set_hostname("node1");
  trace::Record s;
  s.mutable_string_def()->set_id(1);
  s.mutable_string_def()->set_text("AllReduce");
  trace::Record o;
  o.mutable_op()->set_event_id(42);
  o.mutable_op()->set_seq(7);
  return Frame(h) + Frame(s) + Frame(o);
}

TEST(ReaderTest, ReadsEveryRecordWithOffsets) {
  TraceReader r;
  std::string bytes = ThreeRecords();
  r.OpenBytes("mem", bytes);
  trace::Record rec;
  uint64_t off = 99;
  ASSERT_TRUE(r.Next(&rec, &off));
  EXPECT_EQ(off, 0u);
  EXPECT_EQ(rec.header().hostname(), "node1");
  ASSERT_TRUE(r.Next(&rec, &off));
  EXPECT_EQ(rec.string_def().text(), "AllReduce");
  ASSERT_TRUE(r.Next(&rec, &off));
  EXPECT_EQ(rec.op().event_id(), 42u);
  EXPECT_FALSE(r.Next(&rec, &off));
  EXPECT_TRUE(r.issues().empty());
  EXPECT_FALSE(r.cut_tail());
}

TEST(ReaderTest, ATailOfZerosIsDamageNotMillionsOfEmptyRecords) {
  TraceReader r;
  const std::string good = ThreeRecords();
  r.OpenBytes("mem", good + std::string(16 << 20, '\0'));
  trace::Record rec;
  uint64_t off = 0;
  int n = 0;
  while (r.Next(&rec, &off)) ++n;
  EXPECT_EQ(n, 3);
  ASSERT_EQ(r.issues().size(), 1u);
  EXPECT_EQ(r.issues()[0].kind, ReadIssue::kCorrupt);
  EXPECT_EQ(r.issues()[0].offset, good.size());
  EXPECT_NE(r.issues()[0].what.find("zero bytes"), std::string::npos);
}

TEST(ReaderTest, EveryCutPointIsACleanCutTail) {
  std::string bytes = ThreeRecords();
  for (size_t cut = 1; cut < bytes.size(); ++cut) {
    TraceReader r;
    r.OpenBytes("mem", bytes.substr(0, cut));
    trace::Record rec;
    uint64_t off;
    int n = 0;
    while (r.Next(&rec, &off)) ++n;
    EXPECT_LE(n, 3);
    // Either the cut fell on a record boundary or a cut tail is reported.
    if (!r.issues().empty()) {
      EXPECT_TRUE(r.cut_tail()) << cut;
      EXPECT_EQ(r.issues().back().kind, ReadIssue::kCutTail);
    }
  }
}

TEST(ReaderTest, HugeLengthIsRefusedWithoutAllocating) {
  TraceReader r;
  // Header, then a length of 2^62.
  std::string bytes = ThreeRecords() + std::string("\x80\x80\x80\x80\x80\x80\x80\x80\x40", 9);
  r.OpenBytes("mem", bytes);
  trace::Record rec;
  uint64_t off;
  int n = 0;
  while (r.Next(&rec, &off)) ++n;
  EXPECT_EQ(n, 3);
  ASSERT_EQ(r.issues().size(), 1u);
  EXPECT_EQ(r.issues()[0].kind, ReadIssue::kCorrupt);
  EXPECT_EQ(r.issues()[0].offset, ThreeRecords().size());
  EXPECT_NE(r.IssueLines()[0].find("mem: offset"), std::string::npos);
}

TEST(ReaderTest, UnparsableRecordIsSkipped) {
  std::string junk = "\x03\xff\xff\xff";  // length 3, invalid tag bytes
  std::string bytes = ThreeRecords() + junk + ThreeRecords().substr(0, 0);
  TraceReader r;
  r.OpenBytes("mem", bytes);
  trace::Record rec;
  uint64_t off;
  int n = 0;
  while (r.Next(&rec, &off)) ++n;
  EXPECT_EQ(n, 3);
  ASSERT_EQ(r.issues().size(), 1u);
  EXPECT_EQ(r.issues()[0].kind, ReadIssue::kUnparsable);
}

TEST(ReaderTest, UnknownFieldsAndNewerSchemaAreReportedNotFatal) {
  trace::Record h;
  h.mutable_header()->set_schema_version(9);
  std::string framed = Frame(h);
  // Append an unknown field (number 99, varint 1) inside a second record.
  trace::Record o;
  o.mutable_op()->set_event_id(1);
  std::string body = o.SerializeAsString() + std::string("\x98\x06\x01", 3);
  framed += std::string(1, static_cast<char>(body.size())) + body;
  TraceReader r;
  r.OpenBytes("mem", framed);
  trace::Record rec;
  uint64_t off;
  int n = 0;
  while (r.Next(&rec, &off)) ++n;
  EXPECT_EQ(n, 2);
  ASSERT_EQ(r.issues().size(), 2u);
  EXPECT_EQ(r.issues()[0].kind, ReadIssue::kNewerSchema);
  EXPECT_EQ(r.issues()[1].kind, ReadIssue::kUnknownFields);
}

// A file read as it grows, in two pieces cut anywhere (mid-record too), gives
// the records, offsets and Op start times of one read of the whole file.
TEST(ReaderTest, PiecesCutAnywhereReadAsTheWholeFile) {
  trace::Record b;
  b.mutable_batch()->set_time_ns(1000);
  trace::Record h;
  h.mutable_header()->set_schema_version(1);
  trace::Record o1, o2, o3;
  o1.mutable_op()->set_start_delta_ns(5);   // 1005
  o2.mutable_op()->set_start_delta_ns(7);   // 1012
  o3.mutable_op()->set_start_ns(0);         // a delta of zero: 1012
  const std::string file = Frame(b) + Frame(h) + Frame(o1) + Frame(o2) + Frame(o3);
  auto read_all = [](TraceReader& r) {
    std::vector<std::pair<uint64_t, std::string>> out;
    trace::Record rec;
    uint64_t off = 0;
    while (r.Next(&rec, &off)) out.push_back({off, rec.ShortDebugString()});
    return out;
  };
  TraceReader whole;
  whole.OpenBytes("mem", file);
  const auto want = read_all(whole);
  ASSERT_EQ(want.size(), 5u);
  EXPECT_NE(want[3].second.find("start_ns: 1012"), std::string::npos) << want[3].second;
  for (size_t cut = 0; cut <= file.size(); ++cut) {
    SCOPED_TRACE(cut);
    TraceReader first;
    first.OpenPiece("mem", file.substr(0, cut), {});
    auto got = read_all(first);
    const TraceReader::Resume at = first.resume();
    EXPECT_LE(at.offset, cut);
    // Only a cut record is left over: never damage.
    for (const ReadIssue& i : first.issues()) EXPECT_EQ(i.kind, ReadIssue::kCutTail) << i.what;
    TraceReader second;
    second.OpenPiece("mem", file.substr(at.offset), at);
    for (auto& r : read_all(second)) got.push_back(r);
    EXPECT_TRUE(second.issues().empty());
    EXPECT_EQ(got, want);
  }
}

TEST(ReaderTest, MissingFileIsAClearError) {
  TraceReader r;
  std::string err;
  EXPECT_FALSE(r.Open("/nonexistent/x.ncclwatch", &err));
  EXPECT_NE(err.find("/nonexistent/x.ncclwatch"), std::string::npos);
}

}  // namespace
}  // namespace ncclwatch::tools
