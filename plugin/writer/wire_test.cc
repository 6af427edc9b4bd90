// The hand-written wire encoder against libprotobuf: every shape we use
// parses back to the same values.
#include "plugin/writer/wire.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <google/protobuf/io/coded_stream.h>

#include "proto/trace.pb.h"

namespace ncclwatch::plugin {
namespace {

TEST(WireTest, NestedMessagesAndEveryScalarKindParse) {
  std::vector<uint8_t> buf(1 << 16);
  Wire w(buf.data(), buf.size());
  size_t m = w.BeginMessage(12);  // Record.stuck
  w.U64(1, 123456789012345ull);
  w.Double(2, 2.5);
  w.U64(3, 7);
  for (int i = 0; i < 40; ++i) {  // bodies longer than 127 bytes move
    size_t o = w.BeginMessage(4);
    w.U64(1, 1000 + i);
    w.S64(7, -i);
    w.Bool(10, i % 2);
    size_t q = w.BeginMessage(16);
    w.S64(2, -3);
    w.I32(5, -1);
    w.EndMessage(q);
    w.EndMessage(o);
  }
  w.EndMessage(m);
  ASSERT_TRUE(w.ok());
  trace::Record r;
  ASSERT_TRUE(r.ParseFromArray(w.data(), static_cast<int>(w.size())));
  ASSERT_TRUE(r.has_stuck());
  EXPECT_EQ(r.stuck().time_ns(), 123456789012345ull);
  EXPECT_EQ(r.stuck().threshold_sec(), 2.5);
  EXPECT_EQ(r.stuck().trigger_event_id(), 7u);
  ASSERT_EQ(r.stuck().ops_size(), 40);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(r.stuck().ops(i).event_id(), 1000u + i);
    EXPECT_EQ(r.stuck().ops(i).peer(), -i);
    EXPECT_EQ(r.stuck().ops(i).enqueued(), i % 2 == 1);
    ASSERT_EQ(r.stuck().ops(i).proxy_size(), 1);
    EXPECT_EQ(r.stuck().ops(i).proxy(0).peer(), -3);
    EXPECT_EQ(r.stuck().ops(i).proxy(0).last_step(), -1);
  }
}

TEST(WireTest, LengthDelimitedRecordsOfAllSizes) {
  std::vector<uint8_t> buf(1 << 20);
  Wire w(buf.data(), buf.size());
  std::vector<std::string> texts;
  for (size_t n : {0, 1, 126, 127, 128, 16383, 16384, 70000}) texts.push_back(std::string(n, 'x'));
  for (size_t i = 0; i < texts.size(); ++i) {
    size_t at = w.BeginRecord();
    size_t m = w.BeginMessage(2);
    w.U64(1, i + 1);
    w.Bytes(2, texts[i].data(), texts[i].size());
    w.EndMessage(m);
    w.EndRecord(at);
  }
  ASSERT_TRUE(w.ok());
  const uint8_t* p = w.data();
  const uint8_t* end = p + w.size();
  for (size_t i = 0; i < texts.size(); ++i) {
    uint64_t len = 0;
    int shift = 0;
    while (*p & 0x80) len |= uint64_t(*p++ & 0x7f) << shift, shift += 7;
    len |= uint64_t(*p++) << shift;
    trace::Record r;
    ASSERT_TRUE(r.ParseFromArray(p, static_cast<int>(len)));
    EXPECT_EQ(r.string_def().id(), i + 1);
    EXPECT_EQ(r.string_def().text(), texts[i]);
    p += len;
  }
  EXPECT_EQ(p, end);
}

TEST(WireTest, OverflowFailsCleanlyAndTruncateRecovers) {
  uint8_t buf[16];
  Wire w(buf, sizeof(buf));
  size_t mark = w.size();
  w.Bytes(1, "0123456789abcdefghij", 20);
  EXPECT_FALSE(w.ok());
  w.Truncate(mark);
  EXPECT_TRUE(w.ok());
  w.U64(1, 5);
  EXPECT_TRUE(w.ok());
  EXPECT_EQ(w.size(), 2u);
}

// Every length class of a varint, at its edges: as many bytes as
// VarintSize says, read back by libprotobuf as the same value.
TEST(WireTest, VarintsOfEveryLengthReadBack) {
  std::vector<uint64_t> values = {0, 1, ~uint64_t{0}};
  for (int bits = 7; bits < 64; bits += 7) {
    values.push_back((uint64_t{1} << bits) - 1);
    values.push_back(uint64_t{1} << bits);
  }
  for (uint64_t v : values) {
    uint8_t buf[16];
    const uint8_t* end = Wire::PutVarint(buf, v);
    ASSERT_EQ(static_cast<size_t>(end - buf), Wire::VarintSize(v)) << v;
    google::protobuf::io::CodedInputStream in(buf, static_cast<int>(end - buf));
    uint64_t back = 0;
    ASSERT_TRUE(in.ReadVarint64(&back)) << v;
    EXPECT_EQ(back, v);
    EXPECT_TRUE(in.ExpectAtEnd()) << v;
  }
}

TEST(WireTest, DefaultsAreSkipped) {
  uint8_t buf[64];
  Wire w(buf, sizeof(buf));
  w.U64(1, 0);
  w.Bool(2, false);
  w.Double(3, 0.0);
  w.Bytes(4, "", 0);
  w.String(5, nullptr);
  EXPECT_EQ(w.size(), 0u);
}

}  // namespace
}  // namespace ncclwatch::plugin
