// The model on synthetic trace files: ranks linked through communicators,
// collectives matched by (comm, function, seq), clocks of several hosts
// aligned, and what a watchdog's abort does to a hung job's files.

#include "tools/model/model.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "tools/diagnose/diagnose.h"
#include "tools/model/liveness.h"
#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools {
namespace {

using testing::kMs;
using testing::kNever;
using testing::kSec;
using testing::kUs;

std::string TempDir(const std::string& tag) {
  std::string base = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  std::string t = base + "/" + tag + "-XXXXXX";
  return mkdtemp(&t[0]);
}

// Four ranks; rank 3 skips AllReduce #2 and goes on to Broadcast #2, which
// hangs; at 10 s the watchdog aborts every communicator: the abort makes the
// hung kernels exit, so ranks 0 and 1 report AllReduce #2 "completed" at
// 10.4 s, just before their communicator's finalize (the abort) at 10.9 s.
std::string WriteAbortedSkip() {
  std::string dir = TempDir("abort");
  for (int r = 0; r < 4; ++r) {
    testing::ProcSpec spec;
    spec.host = "node0";
    spec.pid = 500 + r;
    spec.launcher_rank = r;
    spec.stuck_sec = 0;
    testing::TraceBuilder b(spec);
    int world = b.AddComm(0xabc, "world", 4, r, 1 * kMs);
    for (uint64_t k = 0; k < 2; ++k) {
      b.Coll(world, "AllReduce", k, 1024, (10 + k * 10) * kMs, static_cast<int64_t>((12 + k * 10) * kMs));
      b.Coll(world, "Broadcast", k, 1024, (15 + k * 10) * kMs, static_cast<int64_t>((17 + k * 10) * kMs));
    }
    if (r != 3) {
      int64_t fake_done = r < 2 ? static_cast<int64_t>(10400 * kMs) : kNever;
      b.Coll(world, "AllReduce", 2, 1024, 30 * kMs, fake_done);
    }
    b.Coll(world, "Broadcast", 2, 1024, 35 * kMs, kNever);
    b.Heartbeats(0, 10 * kSec);
    b.FinalizeComm(world, 10900 * kMs);
    b.Finalize(11 * kSec, true);
    EXPECT_TRUE(b.WriteTo(dir + "/" + b.FileName()));
  }
  return dir;
}

TEST(ModelTest, AbortedCompletionsAreNotCompletions) {
  std::string dir = WriteAbortedSkip();
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
  ASSERT_EQ(m.procs.size(), 4u);
  ASSERT_EQ(m.comms.size(), 1u);
  int aborted = 0, completed_ar2 = 0;
  for (const Op& o : m.ops) {
    if (m.Str(o.func) == "AllReduce" && o.seq == 2) {
      EXPECT_EQ(o.state, OpState::kInFlight) << "rank " << o.rank;
      completed_ar2 += o.state == OpState::kCompleted;
      aborted += o.ended_by_abort;
    }
    if (o.seq < 2) {
      EXPECT_EQ(o.state, OpState::kCompleted);
    }
  }
  EXPECT_EQ(aborted, 2);  // ranks 0 and 1
  EXPECT_EQ(completed_ar2, 0);
  // AllReduce #0 and Broadcast #0 are two matches, not one (seq is per function).
  int ar0 = 0, bc0 = 0;
  for (const Match& mt : m.matches) {
    uint16_t f = 0;
    for (uint32_t oi : mt.ops)
      if (oi != kNone) f = m.ops[oi].func;
    if (mt.seq == 0 && m.Str(f) == "AllReduce") ++ar0;
    if (mt.seq == 0 && m.Str(f) == "Broadcast") ++bc0;
  }
  EXPECT_EQ(ar0, 1);
  EXPECT_EQ(bc0, 1);
}

TEST(ModelTest, TheAbortedSkipIsDiagnosedAsTheSkip) {
  std::string dir = WriteAbortedSkip();
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
  auto d = Diagnose(m);
  EXPECT_EQ(d.verdict().rfind("HANG: rank 3 never joined AllReduce #2 on comm 'world' (4 ranks); ranks 0,1,2 waited", 0),
            0u)
      << d.verdict();
  EXPECT_NE(d.verdict().find("rank 3 is still in Broadcast #2"), std::string::npos) << d.verdict();
  EXPECT_EQ(ExitStatus(d), 1);
}

// Two ranks, AllReduce #0..#299 every 10 ms, each done 1 ms after its start;
// `never` lists (rank, seq) whose completion the file lacks. `abort_at_sec` >
// 0: from seq 6 on, nothing completes until the abort at that time (the
// kernels exit, so the plugin sees them "complete" just before it).
std::string WriteLostCompletions(const std::vector<std::pair<int, uint64_t>>& never, double abort_at_sec = 0) {
  std::string dir = TempDir("lost");
  for (int r = 0; r < 2; ++r) {
    testing::ProcSpec spec;
    spec.pid = 700 + r;
    spec.launcher_rank = r;
    spec.stuck_sec = 0;
    testing::TraceBuilder b(spec);
    int world = b.AddComm(0xfeed, "world", 2, r, 1 * kMs);
    uint64_t end = 3200 * kMs;
    for (uint64_t k = 0; k < 300; ++k) {
      const uint64_t start = (10 + k * 10) * kMs;
      int64_t done = static_cast<int64_t>(start + kMs);
      if (abort_at_sec > 0 && k >= 6) done = static_cast<int64_t>(abort_at_sec * kSec) - static_cast<int64_t>(kMs);
      for (const auto& [nr, ns] : never)
        if (nr == r && ns == k) done = kNever;
      b.Coll(world, "AllReduce", k, 1024, start, done);
    }
    if (abort_at_sec > 0) end = static_cast<uint64_t>(abort_at_sec * kSec) + 500 * kMs;
    b.Heartbeats(0, end - 100 * kMs);
    b.FinalizeComm(world, end - 50 * kMs);
    b.Finalize(end, true);
    EXPECT_TRUE(b.WriteTo(dir + "/" + b.FileName()));
  }
  return dir;
}

// NCCL 2.28 sometimes does not deliver a kernel channel's start event (seen
// on H200s, about 1 operation in 5,000 under load), so that operation never
// completes in the file. Its rank's next operation on the communicator
// completed, and NCCL runs a communicator's kernels in order: it completed.
// Before this, a healthy GPU benchmark was diagnosed "STUCK".
TEST(ModelTest, ALaterCompletionProvesALostOne) {
  std::string dir = WriteLostCompletions({{1, 5}});
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
  int lost = 0;
  for (const Op& o : m.ops) {
    EXPECT_EQ(o.state, OpState::kCompleted) << "rank " << o.rank << " #" << o.seq;
    if (o.completion_lost) {
      ++lost;
      EXPECT_EQ(o.rank, 1);
      EXPECT_EQ(o.seq, 5u);
      EXPECT_EQ(o.done_ns, kNoTime);
      EXPECT_FALSE(o.has_gpu);
    }
  }
  EXPECT_EQ(lost, 1);
  auto d = Diagnose(m);
  EXPECT_EQ(d.findings_size(), 0) << FormatText(d);
  EXPECT_EQ(ExitStatus(d), 0) << FormatText(d);
  EXPECT_NE(FormatText(d).find("rank 1: 1 operation never completed in the file, but did: a later operation on the "
                               "same communicator completed"),
            std::string::npos)
      << FormatText(d);
}

// The last operation has no later one: it stays in flight.
TEST(ModelTest, NothingLaterProvesNothing) {
  std::string dir = WriteLostCompletions({{1, 299}});
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
  for (const Op& o : m.ops) {
    EXPECT_FALSE(o.completion_lost);
    if (o.rank == 1 && o.seq == 299) {
      EXPECT_EQ(o.state, OpState::kInFlight);
    }
  }
}

// A real hang: AllReduce #5 never completes on either rank; the later ones
// "complete" only when the watchdog's abort at 30 s makes every kernel exit.
// Those completions are the abort's, so they prove nothing: still a hang.
TEST(ModelTest, CompletionsByTheAbortProveNothing) {
  std::string dir = WriteLostCompletions({{0, 5}, {1, 5}}, 30.0);
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
  for (const Op& o : m.ops) {
    EXPECT_FALSE(o.completion_lost) << "rank " << o.rank << " #" << o.seq;
    if (o.seq == 5) {
      EXPECT_EQ(o.state, OpState::kInFlight);
    }
  }
  auto d = Diagnose(m);
  ASSERT_NE(d.findings_size(), 0);
  EXPECT_NE(d.verdict().find("AllReduce #5"), std::string::npos) << d.verdict();
  EXPECT_EQ(ExitStatus(d), 1);
}

TEST(ModelTest, HostsAreAlignedByCollectiveEnds) {
  // Two hosts whose realtime clocks disagree by 3 ms: after alignment the
  // collectives' ends agree.
  std::string dir = TempDir("align");
  for (int r = 0; r < 2; ++r) {
    testing::ProcSpec spec;
    spec.host = r == 0 ? "a" : "b";
    spec.pid = 700 + r;
    spec.launcher_rank = r;
    spec.mono_base_ns = (r == 0 ? 5 : 900) * kSec;            // unrelated monotonic clocks
    spec.realtime_base_ns += r == 0 ? 0 : 3 * kMs;              // host b's realtime is 3 ms fast
    testing::TraceBuilder b(spec);
    int w = b.AddComm(0x77, "world", 2, r, 1 * kMs);
    for (uint64_t k = 0; k < 20; ++k) {
      testing::OpOpts o;
      b.Coll(w, "AllReduce", k, 4096, (10 + k) * kMs, static_cast<int64_t>((10 + k) * kMs + 500 * kUs), o);
    }
    b.Finalize(1 * kSec);
    ASSERT_TRUE(b.WriteTo(dir + "/" + b.FileName()));
  }
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
  ASSERT_EQ(m.hosts.size(), 2u);
  EXPECT_LT(m.alignment_error_ns, 50 * kUs) << m.alignment_method;
  // The header pairs alone would leave host b 3 ms off; the ends pull it back.
  EXPECT_NE(m.alignment_method.find("refined"), std::string::npos) << m.alignment_method;
}

// A completion record lost on the way (the proxy thread had no buffer):
// the op's own stuck report saw every kernel channel stop. Completed, with
// the completion lost, never a hang.
TEST(ModelTest, AStuckReportThatSawEveryChannelStopProvesTheCompletion) {
  std::string dir = TempDir("proven");
  for (int r = 0; r < 2; ++r) {
    testing::ProcSpec spec;
    spec.pid = 700 + r;
    spec.launcher_rank = r;
    spec.stuck_sec = 2;
    testing::TraceBuilder b(spec);
    int world = b.AddComm(0xc0de, "world", 2, r, 1 * kMs);
    b.Coll(world, "AllReduce", 0, 1024, 10 * kMs, static_cast<int64_t>(12 * kMs));
    testing::OpOpts o;
    o.nchannels = 2;
    o.progress.kernel_channels_started = 2;
    o.progress.kernel_channels_stopped = r == 0 ? 2 : 0;
    // Rank 0's completion never reaches its file; rank 1's arrives.
    b.Coll(world, "AllReduce", 1, 1024, 20 * kMs, r == 0 ? testing::kNever : static_cast<int64_t>(22 * kMs), o);
    b.Heartbeats(0, 5 * kSec);
    b.Finalize(5 * kSec, true);
    ASSERT_TRUE(b.WriteTo(dir + "/" + b.FileName()));
  }
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
  int lost = 0;
  for (const Op& op : m.ops) lost += op.completion_lost;
  EXPECT_EQ(lost, 1);
  report::Diagnosis d = Diagnose(m);
  EXPECT_EQ(d.findings_size(), 0) << FormatText(d);
  EXPECT_NE(FormatText(d).find("its stuck report saw every kernel channel stop"), std::string::npos) << FormatText(d);
}

// Two ranks, AllReduce #0..#1199 every ms. Rank 0's completions of #1024
// and later never reach its file, and at 1.3 s its file counts the loss
// (`lost`, written at 1.3 s, after their Op records). #1200 at 2 s then
// hangs on both ranks, and the files go on to 12 s.
std::string WriteCountedLoss(const testing::DropCounts& lost) {
  std::string dir = TempDir("counted");
  for (int r = 0; r < 2; ++r) {
    testing::ProcSpec spec;
    spec.pid = 800 + r;
    spec.launcher_rank = r;
    spec.stuck_sec = 0;
    testing::TraceBuilder b(spec);
    int world = b.AddComm(0xb0b, "world", 2, r, 1 * kMs);
    for (uint64_t k = 0; k < 1200; ++k) {
      const uint64_t start = (10 + k) * kMs;
      b.Coll(world, "AllReduce", k, 1024, start, r == 0 && k >= 1024 ? kNever : static_cast<int64_t>(start + 500 * kUs));
    }
    if (r == 0) b.Drops(1300 * kMs, lost);
    b.Coll(world, "AllReduce", 1200, 1024, 2 * kSec, kNever);
    b.Heartbeats(0, 12 * kSec);
    b.Finalize(12 * kSec, false);
    EXPECT_TRUE(b.WriteTo(dir + "/" + b.FileName()));
  }
  return dir;
}

// What the plugin's shared lane did to a thread without a buffer before it
// counted lost completions (the file then said only "no buffer: 6,158
// events"): the completions of the burst's last operations were lost, and
// diagnose said "HANG: AllReduce #1026 ... never completed" though every one
// had completed. An operation recorded before such a loss, with no
// completion, is unknown; the hang after it is still found.
TEST(ModelTest, AnOperationWhoseCompletionTheFileMayHaveLostIsNoHang) {
  testing::DropCounts old_plugin;
  old_plugin.no_thread_slot = 6158;
  old_plugin.completions_counted = false;
  // Today's plugin loses completions only with the batches it fails to
  // write (or with a destroyed CUDA context), and counts them.
  testing::DropCounts counted;
  counted.write_failed = 400;
  counted.completions_lost = 176;
  for (const testing::DropCounts& lost : {old_plugin, counted}) {
    std::string dir = WriteCountedLoss(lost);
    Model m;
    std::string err;
    ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
    const Liveness l = JudgeLiveness(m);
    int unknown = 0;
    for (uint32_t oi = 0; oi < m.ops.size(); ++oi) {
      const Op& o = m.ops[oi];
      if (o.seq == 1200) {
        EXPECT_EQ(l.of_op[oi], OpLiveness::kHung) << "rank " << o.rank;
      } else if (o.rank == 0 && o.seq >= 1024) {
        EXPECT_TRUE(o.completion_maybe_lost) << "#" << o.seq;
        EXPECT_EQ(l.of_op[oi], OpLiveness::kUnknown) << "#" << o.seq;
        ++unknown;
      } else {
        EXPECT_EQ(l.of_op[oi], OpLiveness::kFinished) << "rank " << o.rank << " #" << o.seq;
      }
    }
    EXPECT_EQ(unknown, 176);
    report::Diagnosis d = Diagnose(m);
    const std::string text = FormatText(d);
    EXPECT_EQ(d.verdict().rfind("INCOMPLETE EVIDENCE (rank 0 lost ", 0), 0u) << text;
    EXPECT_NE(d.verdict().find("AllReduce #1200"), std::string::npos) << text;
    for (uint64_t k = 1024; k < 1200; ++k)
      EXPECT_EQ(text.find("AllReduce #" + std::to_string(k) + " "), std::string::npos) << text;
  }
}

// Drops that lose no completion (a full ring, where the plugin counts its
// lost completions) leave the judgement alone: rank 0's #1024 and later
// wait 10 s without a completion, a hang.
TEST(ModelTest, DropsThatLoseNoCompletionChangeNothing) {
  testing::DropCounts ring_full;
  ring_full.ring_full = 5000;
  std::string dir = WriteCountedLoss(ring_full);
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
  const Liveness l = JudgeLiveness(m);
  for (uint32_t oi = 0; oi < m.ops.size(); ++oi) {
    const Op& o = m.ops[oi];
    EXPECT_FALSE(o.completion_maybe_lost);
    if (o.rank == 0 && o.seq >= 1024) {
      EXPECT_EQ(l.of_op[oi], OpLiveness::kHung) << "#" << o.seq;
    }
  }
}

// NCCL 2.31's RAS took KernelLaunch out of the mask (completions from CUDA
// events): an operation started between the plugin's last read of the old
// mask and its read of the new one may have no launch of its own, and the
// completion the plugin gave it may be an earlier launch's. Not taken; one
// from kernel channels there is real.
TEST(ModelTest, AMaskChangeVoidsCudaEventCompletionsInItsWindowOnly) {
  testing::ProcSpec ps;
  ps.stuck_sec = 0;
  testing::TraceBuilder b(ps);
  const int w = b.AddComm(0x3A5, "world", 1, 0, testing::kSec);
  testing::OpOpts ev;
  ev.from_event = true;
  const uint64_t since = 3 * testing::kSec, seen = since + 10 * testing::kMs;
  b.Coll(w, "AllReduce", 0, 8, since - testing::kMs, static_cast<int64_t>(since + 20 * testing::kMs), ev);
  b.Coll(w, "AllReduce", 1, 8, since + testing::kMs, static_cast<int64_t>(since + 20 * testing::kMs), ev);
  // On another communicator: a later completion on the same one would
  // prove #1 complete (kernels run in order), which is sound.
  const int w2 = b.AddComm(0x3A6, "other", 1, 0, testing::kSec);
  b.Coll(w2, "AllReduce", 0, 8, since + 2 * testing::kMs, static_cast<int64_t>(since + 3 * testing::kMs));
  b.MaskChange(seen, 0x806, 0x6, since, 0x800);
  b.Finalize(5 * testing::kSec);
  Model m;
  std::string err;
  ASSERT_TRUE(LoadModelFromBytes({{"m.ncclwatch", b.Bytes()}}, LoadOptions(), &m, &err)) << err;
  ASSERT_EQ(m.ops.size(), 3u);
  ASSERT_EQ(m.procs[0].mask_changes.size(), 1u);
  EXPECT_FALSE(m.procs[0].damaged);
  EXPECT_EQ(m.ops[0].state, OpState::kCompleted);  // its call read the old mask
  EXPECT_FALSE(m.ops[0].mask_unseen);
  EXPECT_EQ(m.ops[1].state, OpState::kInFlight);   // maybe an earlier launch's completion
  EXPECT_TRUE(m.ops[1].mask_unseen);
  EXPECT_EQ(m.ops[1].done_ns, kNoTime);
  EXPECT_EQ(m.ops[2].state, OpState::kCompleted);  // from kernel channels: real
  EXPECT_TRUE(m.ops[2].mask_unseen);
  const Liveness lv = JudgeLiveness(m, LivenessOptions());
  EXPECT_EQ(lv.of_op[1], OpLiveness::kUnknown);
}

// A completion from a CUDA event carries when the writer saw the stream
// reach the kernel; the model keeps how long before the completion that
// was, which tells a kernel that waited on its GPU from one that ran late.
TEST(ModelTest, PolledCompletionsKeepWhenTheGpuGotToTheKernel) {
  testing::ProcSpec ps;
  ps.stuck_sec = 0;
  testing::TraceBuilder b(ps);
  const int w = b.AddComm(0x3B5, "world", 1, 0, testing::kSec);
  testing::OpOpts seen;
  seen.from_event = true;
  seen.event_started_ns = static_cast<int64_t>(2 * testing::kSec + 5 * testing::kMs);
  testing::OpOpts unseen;
  unseen.from_event = true;
  b.Coll(w, "AllReduce", 0, 8, 2 * testing::kSec, static_cast<int64_t>(2 * testing::kSec + 65 * testing::kMs), seen);
  b.Coll(w, "AllReduce", 1, 8, 3 * testing::kSec, static_cast<int64_t>(3 * testing::kSec + 9 * testing::kMs), unseen);
  b.Finalize(5 * testing::kSec);
  Model m;
  std::string err;
  ASSERT_TRUE(LoadModelFromBytes({{"m.ncclwatch", b.Bytes()}}, LoadOptions(), &m, &err)) << err;
  ASSERT_EQ(m.ops.size(), 2u);
  EXPECT_TRUE(m.ops[0].polled);
  EXPECT_EQ(m.ops[0].polled_held_ns, 60 * testing::kMs);
  EXPECT_EQ(m.ops[1].polled_held_ns, 0u);
}

// Sampled events (NCCLWATCH_EVENT_INTERVAL_US), read from a file: an
// operation launched without an event of its own carries it (completed from
// a later event, or in flight and then unknown, never hung by itself), and
// a stuck report's window maps to the file's operations.
TEST(ModelTest, SampledEventsReadFromAFile) {
  testing::ProcSpec ps;
  ps.stuck_sec = 0;
  testing::TraceBuilder b(ps);
  const int w = b.AddComm(0x3A7, "world", 1, 0, testing::kSec);
  testing::OpOpts own;
  own.from_event = true;
  testing::OpOpts without = own;
  without.launch_without_event = true;
  const uint64_t t = 2 * testing::kSec;
  b.Coll(w, "AllReduce", 0, 8, t, static_cast<int64_t>(t + 5 * testing::kMs), own);
  b.Coll(w, "AllReduce", 1, 8, t + testing::kMs, static_cast<int64_t>(t + 5 * testing::kMs), without);
  const uint64_t a = b.Coll(w, "AllReduce", 2, 8, t + 2 * testing::kMs, -1, without);
  const uint64_t z = b.Coll(w, "AllReduce", 3, 8, t + 3 * testing::kMs, -1, without);
  testing::InFlightProgress in_window;
  in_window.gpu = 3;  // GPU_IN_WINDOW
  in_window.window_first_event_id = a;
  in_window.window_last_event_id = z;
  b.Stuck(t + 90 * testing::kSec, {{a, in_window}, {z, in_window}});
  b.Finalize(t + 100 * testing::kSec);
  Model m;
  std::string err;
  ASSERT_TRUE(LoadModelFromBytes({{"m.ncclwatch", b.Bytes()}}, LoadOptions(), &m, &err)) << err;
  ASSERT_EQ(m.ops.size(), 4u);
  EXPECT_FALSE(m.procs[0].damaged) << (m.procs[0].issues.empty() ? "" : m.procs[0].issues[0]);
  EXPECT_FALSE(m.ops[0].without_event);
  EXPECT_EQ(m.ops[0].state, OpState::kCompleted);
  EXPECT_TRUE(m.ops[1].without_event);
  EXPECT_EQ(m.ops[1].state, OpState::kCompleted);  // a later event proved it
  EXPECT_TRUE(m.ops[2].without_event);
  EXPECT_EQ(m.ops[2].state, OpState::kInFlight);
  ASSERT_EQ(m.procs[0].stucks.size(), 1u);
  ASSERT_EQ(m.procs[0].stucks[0].ops.size(), 2u);
  const StuckOp& s = m.procs[0].stucks[0].ops[0];
  EXPECT_EQ(s.gpu, 3);
  EXPECT_EQ(s.window_first, 2u);
  EXPECT_EQ(s.window_last, 3u);
  const Liveness lv = JudgeLiveness(m, LivenessOptions());
  EXPECT_EQ(lv.of_op[2], OpLiveness::kUnknown) << "in flight without an event of its own: unknown, not hung";
  EXPECT_EQ(lv.of_op[3], OpLiveness::kUnknown);
}

}  // namespace
}  // namespace ncclwatch::tools
