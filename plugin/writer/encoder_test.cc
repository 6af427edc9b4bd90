// TraceEncoder's rules, read back with libprotobuf: strings defined once,
// the GPU clock defined before use and re-anchored only on a tighter pair,
// the Op start chain restarting at each batch, a folded completion.
#include "plugin/writer/encoder.h"

#include <gtest/gtest.h>

#include <vector>

#include "proto/trace.pb.h"

namespace ncclwatch::plugin {
namespace {

// Every record into one buffer; Records() parses them back.
class BufferSink final : public RecordSink {
 public:
  BufferSink() : buf_(1 << 20), wire_(buf_.data(), buf_.size()) {}
  Wire* NextRecord() override { return &wire_; }

  std::vector<trace::Record> Records() const {
    std::vector<trace::Record> out;
    size_t pos = 0;
    while (pos < wire_.size()) {
      uint64_t len = 0;
      int shift = 0;
      while (buf_[pos] & 0x80) len |= uint64_t{buf_[pos++] & 0x7fu} << (7 * shift++);
      len |= uint64_t{buf_[pos++]} << (7 * shift);
      trace::Record r;
      EXPECT_TRUE(r.ParseFromArray(buf_.data() + pos, static_cast<int>(len)));
      out.push_back(r);
      pos += len;
    }
    return out;
  }

 private:
  std::vector<uint8_t> buf_;
  Wire wire_;
};

TEST(EncoderTest, StringsAreDefinedOnceAndAgainOnlyAfterALoss) {
  BufferSink sink;
  TraceEncoder enc(&sink);
  EXPECT_EQ(enc.Intern(""), 0u);
  const uint32_t a = enc.Intern("AllReduce");
  EXPECT_EQ(enc.Intern("AllReduce"), a);
  const uint32_t b = enc.Intern("ncclFloat32");
  EXPECT_NE(a, b);
  enc.ForgetDefinitions();
  const uint32_t a2 = enc.Intern("AllReduce");
  EXPECT_NE(a2, a);  // ids are never reused: a reader may hold the old one
  EXPECT_NE(a2, b);
  std::vector<trace::Record> r = sink.Records();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].string_def().text(), "AllReduce");
  EXPECT_EQ(r[0].string_def().id(), a);
  EXPECT_EQ(r[2].string_def().text(), "AllReduce");
  EXPECT_EQ(r[2].string_def().id(), a2);
}

TEST(EncoderTest, GpuClockReanchorsOnlyOnATighterPairAndDeltasDecode) {
  BufferSink sink;
  TraceEncoder enc(&sink);
  const uint64_t offset = 5'000'000'000'000;  // GPU time minus file time
  auto done = [&](uint64_t id, uint64_t done_ns, uint64_t seen_late_ns) {
    DoneFields d;
    d.event_id = id;
    d.done_ns = done_ns;
    d.has_gpu = true;
    d.gpu_stop = done_ns - seen_late_ns + offset;
    d.gpu_start = d.gpu_stop - 1000;
    d.kernel_channels = 2;
    enc.OpDone(d);
    return d;
  };
  std::vector<DoneFields> sent = {done(1, 1'000'000, 50'000),   // defines
                                  done(2, 2'000'000, 49'000),   // 1 us tighter: kept
                                  done(3, 3'000'000, 10'000),   // 40 us tighter: re-anchors
                                  done(4, 4'000'000, 90'000)};  // looser: kept
  // Decode as a reader does: gpu = reference + (gpu_base - cpu) + delta.
  int clocks = 0;
  int64_t base_minus_cpu = 0;
  size_t k = 0;
  for (const trace::Record& r : sink.Records()) {
    if (r.has_gpu_clock()) {
      ++clocks;
      base_minus_cpu = static_cast<int64_t>(r.gpu_clock().gpu_base_ns() - r.gpu_clock().cpu_ns());
      continue;
    }
    ASSERT_TRUE(r.has_op_done());
    const DoneFields& d = sent[k++];
    EXPECT_EQ(r.op_done().event_id(), d.event_id);
    EXPECT_EQ(r.op_done().done_ns(), d.done_ns);
    EXPECT_EQ(static_cast<uint64_t>(r.op_done().done_ns() + base_minus_cpu + r.op_done().gpu_start_delta_ns()),
              d.gpu_start);
    EXPECT_EQ(r.op_done().gpu_duration_ns(), 1000u);
  }
  EXPECT_EQ(k, sent.size());
  EXPECT_EQ(clocks, 2);
}

TEST(EncoderTest, OpStartsChainFromTheBatchTimeAndFoldTheirCompletion) {
  BufferSink sink;
  TraceEncoder enc(&sink);
  OpFields op;
  op.event_id = 7;
  op.comm = 1;
  op.func = enc.Intern("AllReduce");
  op.nchannels = 4;
  enc.StartBatch(100);
  op.start_ns = 150;
  enc.Op(op, nullptr);
  op.start_ns = 170;
  DoneFields d;
  d.done_ns = 900;
  d.kernel_channels = 4;  // as the Op says: not repeated
  enc.Op(op, &d);
  enc.StartBatch(1000);
  op.start_ns = 990;  // before the batch's time: a negative delta
  d.kernel_channels = 3;
  d.done_ns = 2000;
  enc.Op(op, &d);
  TraceEncoder plain(&sink, /*start_chain=*/false);
  op.start_ns = 5000;
  plain.Op(op, nullptr);

  std::vector<trace::Record> r = sink.Records();
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[1].op().start_delta_ns(), 50);
  EXPECT_FALSE(r[1].op().has_completion());
  EXPECT_EQ(r[2].op().start_delta_ns(), 20);
  EXPECT_EQ(r[2].op().completion().done_after_start_ns(), 730u);
  EXPECT_EQ(r[2].op().completion().kernel_channels(), 0u);
  EXPECT_EQ(r[3].op().start_delta_ns(), -10);
  EXPECT_EQ(r[3].op().completion().done_after_start_ns(), 1010u);
  EXPECT_EQ(r[3].op().completion().kernel_channels(), 3u);
  EXPECT_EQ(r[4].op().start_ns(), 5000u);
  EXPECT_EQ(r[4].op().start_delta_ns(), 0);
}

TEST(EncoderTest, MaskChangeCarriesBothMasksAndTheWindowOfTheChange) {
  BufferSink sink;
  TraceEncoder enc(&sink);
  MaskChangeFields m;
  m.time_ns = 2'000'000;
  m.since_ns = 1'990'000;
  m.old_mask = 0x1086;
  m.new_mask = 0x6;
  m.completion_source = 0x1000;
  enc.MaskChange(m);
  std::vector<trace::Record> r = sink.Records();
  ASSERT_EQ(r.size(), 1u);
  ASSERT_TRUE(r[0].has_mask_change());
  const trace::MaskChange& c = r[0].mask_change();
  EXPECT_EQ(c.time_ns(), 2'000'000u);
  EXPECT_EQ(c.since_ns(), 1'990'000u);
  EXPECT_EQ(c.old_mask(), 0x1086u);
  EXPECT_EQ(c.new_mask(), 0x6u);
  EXPECT_EQ(c.completion_source(), 0x1000u);
}

// Sampled events (NCCLWATCH_EVENT_INTERVAL_US): what says an operation's
// state was inferred from a later event or a window reads back as written.
TEST(EncoderTest, SampledEventFieldsReadBack) {
  BufferSink sink;
  TraceEncoder enc(&sink);
  HeaderFields h;
  h.event_interval_us = 250;
  enc.Header(h);
  OpFields op;
  op.event_id = 7;
  op.func = enc.Intern("AllReduce");
  op.completion_tracked = true;
  op.launch_without_event = true;
  enc.Op(op, nullptr);
  DoneFields d;
  d.event_id = 7;
  d.done_ns = 900;
  d.from_event = true;
  d.from_later_event = true;
  enc.OpDone(d);
  op.event_id = 8;
  enc.Op(op, &d);  // folded
  StuckFields st;
  InFlightFields f;
  f.event_id = 9;
  f.gpu = 3;  // GPU_IN_WINDOW
  f.window_first_event_id = 8;
  f.window_last_event_id = 11;
  st.ops.push_back(f);
  enc.Stuck(st);

  std::vector<trace::Record> r = sink.Records();
  bool header = false, op_seen = false, done = false, folded = false, stuck = false;
  for (const trace::Record& x : r) {
    if (x.has_header()) {
      header = true;
      EXPECT_EQ(x.header().event_interval_us(), 250u);
    }
    if (x.has_op() && x.op().event_id() == 7) {
      op_seen = true;
      EXPECT_TRUE(x.op().launch_without_event());
      EXPECT_TRUE(x.op().completion_tracked());
    }
    if (x.has_op_done()) {
      done = true;
      EXPECT_TRUE(x.op_done().from_event());
      EXPECT_TRUE(x.op_done().from_later_event());
    }
    if (x.has_op() && x.op().event_id() == 8) {
      folded = true;
      EXPECT_TRUE(x.op().launch_without_event());
      EXPECT_TRUE(x.op().completion().from_later_event());
    }
    if (x.has_stuck()) {
      stuck = true;
      ASSERT_EQ(x.stuck().ops_size(), 1);
      EXPECT_EQ(x.stuck().ops(0).gpu(), trace::GPU_IN_WINDOW);
      EXPECT_EQ(x.stuck().ops(0).window_first_event_id(), 8u);
      EXPECT_EQ(x.stuck().ops(0).window_last_event_id(), 11u);
    }
  }
  EXPECT_TRUE(header && op_seen && done && folded && stuck);
}

}  // namespace
}  // namespace ncclwatch::plugin
