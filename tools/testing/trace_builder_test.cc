#include "tools/testing/trace_builder.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "tools/reader/reader.h"

namespace ncclwatch::tools::testing {
namespace {

// A file read back with TraceReader, with the plugin's encodings resolved.
struct Read {
  std::vector<trace::Record> records;  // Batch records included
  std::vector<ReadIssue> issues;
  bool cut_tail = false;
  std::map<uint32_t, std::string> strings;
  trace::ProcessHeader header;
  bool has_clock = false;
  trace::GpuClock clock;

  std::vector<trace::Record> Of(trace::Record::BodyCase c) const {
    std::vector<trace::Record> out;
    for (const auto& r : records)
      if (r.body_case() == c) out.push_back(r);
    return out;
  }
  // Absolute GPU time: reference + (gpu_base - cpu) + delta.
  uint64_t Gpu(uint64_t ref, int64_t delta) const {
    return ref + (clock.gpu_base_ns() - clock.cpu_ns()) + static_cast<uint64_t>(delta);
  }
};

Read ReadBytes(const std::string& bytes) {
  TraceReader reader;
  reader.OpenBytes("mem", bytes);
  Read out;
  trace::Record rec;
  uint64_t off;
  while (reader.Next(&rec, &off)) {
    if (rec.has_string_def()) out.strings[rec.string_def().id()] = rec.string_def().text();
    if (rec.has_header()) out.header = rec.header();
    if (rec.has_gpu_clock()) {
      EXPECT_FALSE(out.has_clock) << "a second GpuClock";
      out.has_clock = true;
      out.clock = rec.gpu_clock();
    }
    if (rec.has_op() || rec.has_op_done()) {
      bool gpu = rec.has_op() ? rec.op().has_completion() && rec.op().completion().gpu_duration_ns() > 0
                              : rec.op_done().gpu_duration_ns() > 0;
      if (gpu) {
        EXPECT_TRUE(out.has_clock) << "GPU time before the GpuClock";
      }
    }
    if (rec.has_op()) {
      for (uint32_t id : {rec.op().func(), rec.op().datatype(), rec.op().algo(), rec.op().proto()})
        if (id != 0) {
          EXPECT_TRUE(out.strings.count(id)) << "string " << id << " used before defined";
        }
    }
    out.records.push_back(rec);
  }
  out.issues = reader.issues();
  out.cut_tail = reader.cut_tail();
  return out;
}

TraceBuilder SmallProcess(ProcSpec spec = {}) {
  spec.host = "node3";
  spec.pid = 777;
  spec.launcher_rank = 3;
  spec.launcher_world_size = 8;
  TraceBuilder b(spec);
  int world = b.AddComm(0xabcdef, "world", 8, 3, 1 * kSec, 2);
  int pair = b.AddComm(0x1234, "pp", 2, 1, 1 * kSec + kMs);
  for (int k = 0; k < 5; ++k) {
    uint64_t t = 2 * kSec + k * 250 * kMs;
    b.Coll(world, k % 2 ? "AllGather" : "AllReduce", k, 4096, t, t + 2 * kMs);
  }
  b.Send(pair, 0, 100, 4 * kSec, 4 * kSec + 300 * kMs);
  b.Recv(pair, 0, 100, 4 * kSec + kMs, 4 * kSec + kMs + 7 * kMs);
  b.Heartbeats(kSec, 5 * kSec);
  b.FinalizeComm(world, 5 * kSec + 500 * kMs);
  b.FinalizeComm(pair, 5 * kSec + 500 * kMs);
  b.Finalize(5 * kSec + 501 * kMs, true);
  return b;
}

TEST(TraceBuilderTest, ReadsBackWithoutIssuesInThePluginsFraming) {
  TraceBuilder b = SmallProcess();
  Read r = ReadBytes(b.Bytes());
  EXPECT_TRUE(r.issues.empty());
  ASSERT_GE(r.records.size(), 3u);
  // Batch, header alone, then batches.
  EXPECT_TRUE(r.records[0].has_batch());
  EXPECT_EQ(r.records[0].batch().seq(), 1u);
  EXPECT_EQ(r.records[0].batch().records_before(), 0u);
  EXPECT_TRUE(r.records[1].has_header());
  EXPECT_TRUE(r.records[2].has_batch());
  EXPECT_EQ(r.header.hostname(), "node3");
  EXPECT_EQ(r.header.pid(), 777);
  EXPECT_EQ(r.header.launcher_rank(), 3);
  EXPECT_EQ(r.header.launcher_world_size(), 8);
  EXPECT_EQ(r.header.profiler_api_version(), 5u);
  EXPECT_EQ(r.header.schema_version(), 1u);
  EXPECT_EQ(b.FileName(), "node3-777-1700000000000.ncclwatch");
  // Batch sequence and running record counts.
  uint64_t seq = 0, count = 0;
  for (const auto& rec : r.records) {
    if (rec.has_batch()) {
      EXPECT_EQ(rec.batch().seq(), ++seq);
      EXPECT_EQ(rec.batch().records_before(), count);
    }
    ++count;
  }
  EXPECT_GT(seq, 5u);
  // Everything is there, finalize last.
  EXPECT_EQ(r.Of(trace::Record::kCommInit).size(), 2u);
  EXPECT_EQ(r.Of(trace::Record::kOp).size(), 7u);
  EXPECT_EQ(r.Of(trace::Record::kHeartbeat).size(), 5u);
  auto fin = r.Of(trace::Record::kCommFinalize);
  ASSERT_EQ(fin.size(), 2u);
  EXPECT_EQ(fin[0].comm_finalize().ops_enqueued(), 5u);
  EXPECT_EQ(fin[0].comm_finalize().ops_completed(), 5u);
  EXPECT_EQ(fin[1].comm_finalize().ops_enqueued(), 2u);
  EXPECT_EQ(fin[1].comm_finalize().ops_completed(), 2u);
  ASSERT_TRUE(r.records.back().has_finalize());
  EXPECT_TRUE(r.records.back().finalize().clean());
  EXPECT_TRUE(r.Of(trace::Record::kStuck).empty());
  // Strings by name.
  auto ops = r.Of(trace::Record::kOp);
  EXPECT_EQ(r.strings[ops[0].op().func()], "AllReduce");
  EXPECT_EQ(r.strings[ops[1].op().func()], "AllGather");
  EXPECT_EQ(r.strings[ops[0].op().datatype()], "ncclFloat32");
  EXPECT_EQ(r.strings[ops[0].op().algo()], "RING");
  EXPECT_EQ(r.strings[ops[5].op().func()], "Send");
  EXPECT_EQ(ops[5].op().kind(), trace::OP_KIND_P2P);
  EXPECT_EQ(ops[5].op().algo(), 0u);  // none for p2p
}

TEST(TraceBuilderTest, StartTimesResolveFromTheDeltaChainAcrossBatches) {
  for (bool delta : {true, false}) {
    ProcSpec spec;
    spec.delta_starts = delta;
    TraceBuilder b(spec);
    int c = b.AddComm(1, "world", 2, 0, kSec);
    std::vector<uint64_t> starts;
    for (int k = 0; k < 40; ++k) {
      // Several ops per 10 ms drain, several drains per batch, many batches;
      // completions late enough to be separate OpDones now and then.
      uint64_t t = 2 * kSec + k * 7 * kMs + (k % 3) * 111;
      starts.push_back(t);
      b.Coll(c, "AllReduce", k, 10, t, t + (k % 4 == 0 ? 30 * kMs : 50 * kUs));
    }
    Read r = ReadBytes(b.Bytes());
    EXPECT_TRUE(r.issues.empty());
    auto ops = r.Of(trace::Record::kOp);
    ASSERT_EQ(ops.size(), starts.size());
    bool negative = false;
    for (size_t k = 0; k < ops.size(); ++k) {
      EXPECT_EQ(ops[k].op().start_ns(), starts[k]) << k << " delta=" << delta;
      EXPECT_EQ(ops[k].op().seq(), k);
      if (delta) {
        EXPECT_NE(ops[k].op().start_delta_ns(), 0);
        negative |= ops[k].op().start_delta_ns() < 0;
      } else {
        EXPECT_EQ(ops[k].op().start_delta_ns(), 0);
      }
    }
    if (delta) {
      EXPECT_TRUE(negative) << "the first op of a batch starts before the batch's time";
    }
    EXPECT_GT(r.Of(trace::Record::kBatch).size(), 4u);
    EXPECT_FALSE(r.Of(trace::Record::kOpDone).empty());
  }
}

TEST(TraceBuilderTest, FoldedAndSeparateCompletionsDecodeToTheSameGpuTimes) {
  std::vector<std::pair<uint64_t, uint64_t>> gpu[2];
  TraceBuilder* first = nullptr;
  std::vector<TraceBuilder> bs;
  for (Completion how : {Completion::kFolded, Completion::kSeparate}) {
    TraceBuilder b;
    int c = b.AddComm(1, "world", 2, 0, kSec);
    for (int k = 0; k < 6; ++k) {
      OpOpts o;
      o.completion = how;
      o.nchannels = 4;
      if (k == 2) o.kernel_channels = 3;
      if (k == 3) {
        o.gpu_start_ns = 2 * kSec + k * kSec + 100 * kUs;
        o.gpu_stop_ns = 2 * kSec + k * kSec + 100 * kUs;  // zero duration: gpu_timing flag
      }
      uint64_t t = 2 * kSec + k * kSec;
      b.Coll(c, "AllReduce", k, 10, t, t + 5 * kMs + k * kUs, o);
    }
    bs.push_back(std::move(b));
  }
  first = &bs[0];
  for (int i = 0; i < 2; ++i) {
    Read r = ReadBytes(bs[i].Bytes());
    EXPECT_TRUE(r.issues.empty());
    ASSERT_TRUE(r.has_clock);
    auto ops = r.Of(trace::Record::kOp);
    ASSERT_EQ(ops.size(), 6u);
    if (i == 0) {
      for (const auto& op : ops) {
        ASSERT_TRUE(op.op().has_completion());
        EXPECT_EQ(op.op().event_id(), 0u);  // folded, no raw capture
        EXPECT_FALSE(op.op().completion_tracked());
        const auto& d = op.op().completion();
        uint64_t ref = op.op().start_ns() + d.done_after_start_ns();
        uint64_t g0 = r.Gpu(ref, d.gpu_start_delta_ns());
        gpu[i].push_back({g0, g0 + d.gpu_duration_ns()});
      }
      EXPECT_EQ(ops[2].op().completion().kernel_channels(), 3u);
      EXPECT_EQ(ops[1].op().completion().kernel_channels(), 0u);  // = nchannels: left out
      EXPECT_TRUE(ops[3].op().completion().gpu_timing());
      EXPECT_TRUE(r.Of(trace::Record::kOpDone).empty());
    } else {
      auto dones = r.Of(trace::Record::kOpDone);
      ASSERT_EQ(dones.size(), 6u);
      for (size_t k = 0; k < 6; ++k) {
        EXPECT_TRUE(ops[k].op().completion_tracked());
        EXPECT_EQ(dones[k].op_done().event_id(), ops[k].op().event_id());
        const auto& d = dones[k].op_done();
        EXPECT_EQ(d.done_ns(), 2 * kSec + k * kSec + 5 * kMs + k * kUs);
        uint64_t g0 = r.Gpu(d.done_ns(), d.gpu_start_delta_ns());
        gpu[i].push_back({g0, g0 + d.gpu_duration_ns()});
      }
      EXPECT_EQ(dones[1].op_done().kernel_channels(), 4u);
    }
  }
  ASSERT_EQ(gpu[0].size(), 6u);
  EXPECT_EQ(gpu[0], gpu[1]);
  // And they are the truth: kernel from enqueued + 5 us to done - 3 us.
  uint64_t t0 = 2 * kSec;
  EXPECT_EQ(gpu[0][0].first, first->GpuTime(t0 + 20 * kUs + 5 * kUs));
  EXPECT_EQ(gpu[0][0].second, first->GpuTime(t0 + 5 * kMs - 3 * kUs));
  EXPECT_EQ(gpu[0][3].first, first->GpuTime(t0 + 3 * kSec + 100 * kUs));
}

TEST(TraceBuilderTest, AutoCompletionFoldsOnlyWithinOneDrain) {
  TraceBuilder b;
  int c = b.AddComm(1, "world", 2, 0, kSec);
  b.Coll(c, "AllReduce", 0, 10, 2 * kSec + kMs, 2 * kSec + 2 * kMs);   // same 10 ms drain
  b.Coll(c, "AllReduce", 1, 10, 3 * kSec + kMs, 3 * kSec + 25 * kMs);  // later drain
  b.Coll(c, "AllReduce", 2, 10, 4 * kSec, 4 * kSec + kMs, {.completion_tracked = false});
  Read r = ReadBytes(b.Bytes());
  auto ops = r.Of(trace::Record::kOp);
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_TRUE(ops[0].op().has_completion());
  EXPECT_FALSE(ops[1].op().has_completion());
  EXPECT_TRUE(ops[1].op().completion_tracked());
  EXPECT_FALSE(ops[2].op().has_completion());
  EXPECT_FALSE(ops[2].op().completion_tracked());
  EXPECT_EQ(r.Of(trace::Record::kOpDone).size(), 1u);
}

TEST(TraceBuilderTest, P2pSeqCountsSendsAndRecvsPerPeerSeparately) {
  TraceBuilder b;
  int c = b.AddComm(1, "world", 4, 0, kSec);
  int d = b.AddComm(2, "other", 4, 0, kSec);
  uint64_t t = 2 * kSec;
  b.Send(c, 1, 1, t, t + kMs);
  b.Send(c, 1, 1, t + 1 * kMs, t + 2 * kMs);
  b.Recv(c, 1, 1, t + 2 * kMs, t + 3 * kMs);
  b.Send(c, 2, 1, t + 3 * kMs, t + 4 * kMs);
  b.Send(c, 1, 1, t + 4 * kMs, t + 5 * kMs);
  b.Recv(c, 1, 1, t + 5 * kMs, t + 6 * kMs);
  b.Send(d, 1, 1, t + 6 * kMs, t + 7 * kMs);
  Read r = ReadBytes(b.Bytes());
  std::vector<uint64_t> seqs;
  for (const auto& op : r.Of(trace::Record::kOp)) {
    seqs.push_back(op.op().p2p_seq());
    EXPECT_EQ(op.op().kind(), trace::OP_KIND_P2P);
  }
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2, 1, 1, 3, 2, 1}));
  auto ops = r.Of(trace::Record::kOp);
  EXPECT_EQ(ops[3].op().peer(), 2);
  EXPECT_EQ(r.strings[ops[2].op().func()], "Recv");
}

TEST(TraceBuilderTest, TruncatedBytesGiveACutTailOnly) {
  const std::string bytes = SmallProcess().Bytes();
  const size_t full = ReadBytes(bytes).records.size();
  size_t prev = 0;
  for (size_t cut = 1; cut < bytes.size(); cut += (cut < 200 ? 1 : 7)) {
    Read r = ReadBytes(bytes.substr(0, cut));
    for (const auto& i : r.issues) EXPECT_EQ(i.kind, ReadIssue::kCutTail) << cut << ": " << i.what;
    EXPECT_LE(r.records.size(), full);
    EXPECT_GE(r.records.size(), prev);
    prev = r.records.size();
  }
}

TEST(TraceBuilderTest, HungOperationGetsAStuckReportAndCountsInHeartbeats) {
  ProcSpec spec;
  spec.stuck_sec = 5;
  TraceBuilder b(spec);
  int c = b.AddComm(1, "world", 2, 0, kSec);
  b.Coll(c, "AllReduce", 0, 10, 2 * kSec, 2 * kSec + kMs);
  OpOpts o;
  o.progress.kernel_channels_started = 2;
  o.progress.kernel_channels_stopped = 1;
  o.progress.proxy.push_back({.channel = 1, .peer = 1, .is_send = true, .nsteps = 8, .last_step = 3});
  uint64_t hung = b.Coll(c, "AllReduce", 1, 10, 3 * kSec + 1234, kNever, o);
  uint64_t hung2 = b.Send(c, 1, 10, 3 * kSec + 2 * kMs, kNever);
  b.Heartbeats(kSec, 12 * kSec);
  Read r = ReadBytes(b.Bytes());
  EXPECT_TRUE(r.issues.empty());
  auto stuck = r.Of(trace::Record::kStuck);
  ASSERT_EQ(stuck.size(), 1u);  // both reported at once
  const auto& s = stuck[0].stuck();
  EXPECT_EQ(s.time_ns(), 8 * kSec + 10 * kMs);  // first 10 ms drain at least 5 s later
  EXPECT_EQ(s.threshold_sec(), 5);
  EXPECT_EQ(s.trigger_event_id(), hung);
  ASSERT_EQ(s.ops_size(), 2);
  EXPECT_EQ(s.ops(0).event_id(), hung);
  EXPECT_EQ(s.ops(0).start_ns(), 3 * kSec + 1234);
  EXPECT_EQ(s.ops(0).age_ns(), s.time_ns() - (3 * kSec + 1234));
  EXPECT_EQ(s.ops(0).kernel_channels_stopped(), 1u);
  ASSERT_EQ(s.ops(0).proxy_size(), 1);
  EXPECT_EQ(s.ops(0).proxy(0).last_step(), 3);
  EXPECT_EQ(s.ops(1).event_id(), hung2);
  EXPECT_EQ(s.ops(1).peer(), 1);
  EXPECT_EQ(r.strings[s.ops(1).func()], "Send");
  // The stuck report ends its batch.
  for (size_t i = 0; i + 1 < r.records.size(); ++i)
    if (r.records[i].has_stuck()) {
      EXPECT_TRUE(r.records[i + 1].has_batch());
    }
  std::vector<uint32_t> in_flight;
  for (const auto& h : r.Of(trace::Record::kHeartbeat)) in_flight.push_back(h.heartbeat().ops_in_flight());
  EXPECT_EQ(in_flight, (std::vector<uint32_t>{0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2}));
}

TEST(TraceBuilderTest, KillLosesTheUnwrittenTail) {
  TraceBuilder b;
  int c = b.AddComm(1, "world", 2, 0, kSec);
  b.Coll(c, "AllReduce", 0, 10, 2 * kSec, 2 * kSec + kMs);
  b.Coll(c, "AllReduce", 1, 10, 3 * kSec + 5 * kMs, 3 * kSec + 6 * kMs);  // written at 3.1 s
  b.Heartbeats(kSec, 10 * kSec);
  b.Kill(3 * kSec + 50 * kMs);
  Read r = ReadBytes(b.Bytes());
  EXPECT_TRUE(r.issues.empty());
  EXPECT_EQ(r.Of(trace::Record::kOp).size(), 1u);
  // 1 s, 2 s and 3 s (written at 3.0 s); the op enqueued at 3.005 s would be written at 3.1 s.
  EXPECT_EQ(r.Of(trace::Record::kHeartbeat).size(), 3u);
  EXPECT_TRUE(r.Of(trace::Record::kFinalize).empty());
}

TEST(TraceBuilderTest, DropsAndFinalize) {
  TraceBuilder b;
  b.AddComm(1, "world", 2, 0, kSec);
  b.Drops(2 * kSec, {.ring_full = 3, .write_failed = 2, .last_write_error = "No space left on device"});
  b.Heartbeat(3 * kSec);
  b.Finalize(4 * kSec, false);
  Read r = ReadBytes(b.Bytes());
  auto drops = r.Of(trace::Record::kDrops);
  ASSERT_EQ(drops.size(), 2u);  // and again at finalize
  EXPECT_EQ(drops[0].drops().ring_full(), 3u);
  EXPECT_EQ(drops[1].drops().last_write_error(), "No space left on device");
  EXPECT_EQ(r.Of(trace::Record::kHeartbeat)[0].heartbeat().events_dropped(), 5u);
  ASSERT_TRUE(r.records.back().has_finalize());
  EXPECT_FALSE(r.records.back().finalize().clean());
  EXPECT_EQ(r.records.back().finalize().time_ns(), 4 * kSec);
}

// ---------------------------------------------------------------- jobs

struct JobRead {
  std::vector<Read> files;
  // Per rank: ops by (comm hash, seq) for collectives.
  std::vector<std::map<uint64_t, trace::Op>> colls;
  std::vector<std::map<uint64_t, bool>> done;  // seq -> completed
};

JobRead ReadJob(const std::vector<TraceBuilder>& files) {
  JobRead j;
  for (const auto& f : files) {
    j.files.push_back(ReadBytes(f.Bytes()));
    EXPECT_TRUE(j.files.back().issues.empty());
    // Keyed by position in the file: NCCL's seq repeats across functions.
    std::map<uint64_t, trace::Op> colls;
    std::map<uint64_t, bool> done;
    std::map<uint64_t, uint64_t> by_id;
    uint64_t pos = 0;
    for (const auto& r : j.files.back().records) {
      if (r.has_op() && r.op().kind() == trace::OP_KIND_COLL && r.op().comm() == 1) {
        colls[pos] = r.op();
        done[pos] = r.op().has_completion();
        if (r.op().event_id() != 0) by_id[r.op().event_id()] = pos;
        ++pos;
      }
      if (r.has_op_done() && by_id.count(r.op_done().event_id())) done[by_id[r.op_done().event_id()]] = true;
    }
    j.colls.push_back(colls);
    j.done.push_back(done);
  }
  return j;
}

TEST(BuildJobTest, AllRanksCompleteEverything) {
  JobSpec spec;
  spec.nranks = 4;
  spec.ranks_per_host = 2;
  spec.ncolls = 6;
  spec.funcs = {"AllReduce", "AllGather"};
  spec.rank_hook = [](int rank, RankPlan& r) { r.realtime_error_ns = rank * 1'000'000; };
  JobPlan plan;
  auto files = BuildJob(spec, &plan);
  ASSERT_EQ(files.size(), 4u);
  JobRead j = ReadJob(files);
  for (int r = 0; r < 4; ++r) {
    const Read& f = j.files[r];
    EXPECT_EQ(f.header.launcher_rank(), r);
    EXPECT_EQ(f.header.hostname(), r < 2 ? "node0" : "node1");
    ASSERT_EQ(j.colls[r].size(), 6u);
    for (auto [seq, d] : j.done[r]) EXPECT_TRUE(d) << r << " " << seq;
    EXPECT_EQ(f.strings.at(j.colls[r][1].func()), "AllGather");
    auto inits = f.Of(trace::Record::kCommInit);
    ASSERT_EQ(inits.size(), 1u);
    EXPECT_EQ(inits[0].comm_init().rank(), r);
    EXPECT_EQ(inits[0].comm_init().nranks(), 4);
    EXPECT_EQ(inits[0].comm_init().nnodes(), 2);
    EXPECT_EQ(inits[0].comm_init().comm_hash(), j.files[0].Of(trace::Record::kCommInit)[0].comm_init().comm_hash());
    ASSERT_TRUE(f.records.back().has_finalize());
    EXPECT_TRUE(f.records.back().finalize().clean());
    EXPECT_TRUE(f.Of(trace::Record::kStuck).empty());
    // Op times are the truth in the rank's clock: start_ns = true - process start.
    EXPECT_EQ(j.colls[r][2].start_ns(), plan.Local(r, spec.first_op_ns + 2 * spec.step_ns));
    // The realtime-mono pair maps every rank's op to the same true time (+ its realtime error).
    uint64_t real = f.header.realtime_base_ns() + j.colls[r][2].start_ns();
    EXPECT_EQ(real, 1'700'000'000 * kSec + spec.first_op_ns + 2 * spec.step_ns + r * 1'000'000);
  }
  // Ranks on one host share the monotonic clock.
  EXPECT_EQ(j.files[0].header.mono_base_ns() + j.colls[0][2].start_ns(),
            j.files[1].header.mono_base_ns() + j.colls[1][2].start_ns());
  EXPECT_NE(j.files[0].header.mono_base_ns() + j.colls[0][2].start_ns(),
            j.files[2].header.mono_base_ns() + j.colls[2][2].start_ns());
  EXPECT_EQ(files[0].FileName(), "node0-4000-1700000000500.ncclwatch");
}

TEST(BuildJobTest, SkippedCollectiveHangsTheOthersAndShiftsSeq) {
  JobSpec spec;
  spec.nranks = 4;
  spec.ncolls = 5;
  spec.stuck_sec = 10;
  spec.op_hook = [](int rank, int k, OpPlan& p) {
    if (rank == 2 && k == 2) p.skip = true;
  };
  JobPlan plan;
  JobRead j = ReadJob(BuildJob(spec, &plan));
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(j.done[r][0]);
    EXPECT_TRUE(j.done[r][1]);
    if (r == 2) {
      ASSERT_EQ(j.colls[r].size(), 4u);  // seq 0..3: the op called 3rd by the others is its seq 2
      EXPECT_EQ(j.colls[r][2].start_ns(), plan.Local(2, spec.first_op_ns + 3 * spec.step_ns));
      EXPECT_FALSE(j.done[r][2]);
    } else {
      ASSERT_EQ(j.colls[r].size(), 5u);
      for (int s = 2; s < 5; ++s) EXPECT_FALSE(j.done[r][s]) << r << " " << s;
    }
    // Killed by the watchdog after the stuck report: no finalize.
    EXPECT_TRUE(j.files[r].Of(trace::Record::kFinalize).empty());
    auto stuck = j.files[r].Of(trace::Record::kStuck);
    ASSERT_EQ(stuck.size(), 1u) << r;
    EXPECT_EQ(stuck[0].stuck().ops_size(), r == 2 ? 2 : 3);
  }
}

TEST(BuildJobTest, StragglerDelaysEveryonesCompletion) {
  JobSpec spec;
  spec.nranks = 3;
  spec.ncolls = 3;
  spec.op_hook = [](int rank, int k, OpPlan& p) {
    if (rank == 1 && k == 1) p.start_ns += 4 * kMs;
  };
  JobPlan plan;
  JobRead j = ReadJob(BuildJob(spec, &plan));
  const uint64_t t1 = spec.first_op_ns + spec.step_ns;
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(plan.ops[r][1].done_ns, static_cast<int64_t>(t1 + 4 * kMs + spec.duration_ns));
    EXPECT_EQ(plan.ops[r][0].done_ns, static_cast<int64_t>(spec.first_op_ns + spec.duration_ns));
  }
  // The early ranks' kernels waited: their GPU duration covers the delay.
  const trace::Op& op = j.colls[0][1];
  ASSERT_TRUE(op.has_completion());
  EXPECT_GT(op.completion().gpu_duration_ns(), 4 * kMs);
  EXPECT_LT(j.colls[1][1].completion().gpu_duration_ns(), 2 * kMs);
}

TEST(BuildJobTest, DeadRankIdleRankAndMismatch) {
  JobSpec spec;
  spec.nranks = 4;
  spec.ncolls = 6;
  spec.stuck_sec = 5;
  spec.rank_hook = [](int rank, RankPlan& r) {
    if (rank == 3) r.dies_at_ns = 3 * kSec + 25 * kMs;  // during op 2's window: ops 3.. never issued
  };
  spec.op_hook = [](int rank, int k, OpPlan& p) {
    if (rank == 1 && k == 1) p.count = 7;  // mismatch, completes anyway
  };
  JobPlan plan;
  auto files = BuildJob(spec, &plan);
  JobRead j = ReadJob(files);
  EXPECT_EQ(j.colls[1][1].count(), 7u);
  EXPECT_EQ(j.colls[0][1].count(), spec.count);
  EXPECT_TRUE(j.done[0][1]);
  // Rank 3's file ends with its last flush before death: no heartbeat past it.
  for (const auto& h : j.files[3].Of(trace::Record::kHeartbeat))
    EXPECT_LE(h.heartbeat().time_ns(), plan.Local(3, 3 * kSec + 25 * kMs));
  EXPECT_LT(j.colls[3].size(), 4u);
  EXPECT_FALSE(j.done[0][3]);
  EXPECT_FALSE(j.files[0].Of(trace::Record::kStuck).empty());
  EXPECT_TRUE(j.files[3].Of(trace::Record::kStuck).empty());
  // Files on disk, named like the plugin's.
  char tmpl[] = "/tmp/trace_builder_testXXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  auto paths = WriteJob(files, tmpl);
  ASSERT_EQ(paths.size(), 4u);
  for (const auto& p : paths) {
    TraceReader reader;
    std::string err;
    ASSERT_TRUE(reader.Open(p, &err)) << err;
    trace::Record rec;
    uint64_t off;
    while (reader.Next(&rec, &off)) {
    }
    EXPECT_TRUE(reader.issues().empty());
    EXPECT_GT(reader.records_read(), 10u);
    unlink(p.c_str());
  }
  rmdir(tmpl);
}

}  // namespace
}  // namespace ncclwatch::tools::testing
