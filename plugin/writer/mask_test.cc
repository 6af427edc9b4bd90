// NCCL 2.31's RAS changes the process's event mask after init
// (ncclProfilerSetRasOverride): the real .so, driven by the fake NCCL host
// that stops delivering what the new mask does not ask for, records each
// change, never calls an operation that lost its completion source stuck,
// and never gives it another operation's completion.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "plugin/abi/profiler_common.h"
#include "plugin/testing/fake_cuda_host.h"
#include "plugin/testing/fake_nccl_host.h"
#include "proto/trace.pb.h"

namespace ncclwatch::testing {
namespace {

std::vector<const trace::MaskChange*> MaskChanges(const Trace& t) {
  std::vector<const trace::MaskChange*> out;
  for (const trace::Record& r : t.raw.records)
    if (r.has_mask_change()) out.push_back(&r.mask_change());
  return out;
}

const OpView* OpWithSeq(const Trace& t, uint64_t seq) {
  for (const OpView& o : t.ops)
    if (o.op->seq() == seq) return &o;
  return nullptr;
}

class MaskTest : public ::testing::Test {
 protected:
  void TearDown() override { ClearRasEventMask(); }
};

// Completions from kernel channels: RAS takes KernelCh away, then Coll.
TEST_F(MaskTest, ChannelsTakenAwayMakeNoStuckReportAndCollTakenAwayIsRecorded) {
  const std::string dir = MakeTempDir("mask_channels");
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_COMPLETIONS", "channels"},
                {"NCCLWATCH_STUCK_SEC", "0.2"},
                {"NCCLWATCH_FLUSH_MS", "10"},
                {"NCCLWATCH_HEARTBEAT_MS", "20"}});
  ClearLogs();
  FakeComm c(PluginLib::Shared(), 7);
  ASSERT_EQ(c.Init(0x3A5, "ras", 1, 2, 0), 0);
  const int initial = c.mask();
  ASSERT_NE(initial & nccl::kKernelCh, 0);
  OpSpec ok;
  ok.seq = 1;
  ok.proxy_peers = {};
  c.RunOp(ok);

  SetRasEventMask(initial & ~nccl::kKernelCh);
  std::unique_ptr<Trace> t = WaitForTrace(dir, [](const Trace& x) { return !MaskChanges(x).empty(); });
  std::vector<const trace::MaskChange*> mc = MaskChanges(*t);
  ASSERT_EQ(mc.size(), 1u);
  EXPECT_EQ(mc[0]->old_mask(), static_cast<uint64_t>(initial));
  EXPECT_EQ(mc[0]->new_mask(), static_cast<uint64_t>(initial & ~nccl::kKernelCh));
  EXPECT_EQ(mc[0]->completion_source(), static_cast<uint64_t>(nccl::kKernelCh));
  EXPECT_LE(mc[0]->since_ns(), mc[0]->time_ns());
  EXPECT_EQ(t->header->event_mask(), static_cast<uint64_t>(initial));

  // NCCL reports the op, never its kernel channels.
  OpSpec after = ok;
  after.seq = 2;
  const uint64_t t_after = MonoNs();
  c.RunOp(after);
  // Past the stuck threshold and the release grace (1 s): no report.
  t = WaitForTrace(dir, [&](const Trace& x) { return WriterPast(x, t_after + 1'500'000'000); });
  const OpView* o1 = OpWithSeq(*t, 1);
  const OpView* o2 = OpWithSeq(*t, 2);
  ASSERT_NE(o1, nullptr);
  ASSERT_NE(o2, nullptr);
  EXPECT_EQ(o1->done_count, 1);
  EXPECT_EQ(o2->done_count, 0);
  EXPECT_FALSE(o2->op->completion_tracked()) << o2->op->DebugString();
  EXPECT_EQ(o2->op->no_completion(), trace::NO_COMPLETION_MASK);
  EXPECT_TRUE(t->stucks.empty()) << t->stucks[0]->DebugString();
  EXPECT_EQ(t->heartbeats.back()->ops_in_flight(), 0u) << "let go after its grace";

  // RAS takes the collectives away: NCCL reports none, the file says why.
  SetRasEventMask(initial & ~(nccl::kColl | nccl::kKernelCh));
  t = WaitForTrace(dir, [](const Trace& x) { return MaskChanges(x).size() == 2; });
  OpSpec gone = ok;
  gone.seq = 3;
  c.RunOp(gone);
  ASSERT_EQ(c.Finalize(), 0);
  t = ReadSingleTrace(dir);
  EXPECT_TRUE(t->raw.issues.empty()) << ::testing::PrintToString(t->raw.issues);
  mc = MaskChanges(*t);
  ASSERT_EQ(mc.size(), 2u);
  EXPECT_EQ(mc[1]->old_mask(), static_cast<uint64_t>(initial & ~nccl::kKernelCh));
  EXPECT_EQ(mc[1]->new_mask() & nccl::kColl, 0u);
  EXPECT_GE(mc[1]->since_ns(), mc[0]->time_ns());
  EXPECT_EQ(OpWithSeq(*t, 3), nullptr);

  // Said once through NCCL's logger, as a warning; the later change is info.
  std::vector<std::string> w = Warnings();
  ASSERT_EQ(w.size(), 1u) << ::testing::PrintToString(w);
  EXPECT_NE(w[0].find("event mask changed from"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("KernelCh"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("never reported as stuck"), std::string::npos) << w[0];
}

// An operation enqueued before the change, that never completes, is still a
// hang: the stuck report names it, and only it.
TEST_F(MaskTest, AnOpEnqueuedBeforeTheChangeStillHangs) {
  const std::string dir = MakeTempDir("mask_hang");
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_COMPLETIONS", "channels"},
                {"NCCLWATCH_STUCK_SEC", "0.3"},
                {"NCCLWATCH_FLUSH_MS", "10"},
                {"NCCLWATCH_HEARTBEAT_MS", "20"}});
  ClearLogs();
  FakeComm c(PluginLib::Shared(), 7);
  ASSERT_EQ(c.Init(0x3A6, "ras", 1, 2, 0), 0);
  OpSpec hung;
  hung.seq = 1;
  hung.proxy_peers = {};
  hung.kernel_stop = 0;  // its channels start, none stops
  c.RunOp(hung);
  std::unique_ptr<Trace> t = WaitForTrace(dir, [](const Trace& x) { return OpWithSeq(x, 1) != nullptr; });
  SetRasEventMask(c.mask() & ~nccl::kKernelCh);
  t = WaitForTrace(dir, [](const Trace& x) { return !MaskChanges(x).empty(); });
  OpSpec after = hung;
  after.seq = 2;
  c.RunOp(after);
  t = WaitForTrace(dir, [](const Trace& x) { return !x.stucks.empty() && OpWithSeq(x, 2) != nullptr; });
  ASSERT_EQ(t->stucks.size(), 1u);
  const trace::StuckReport& r = *t->stucks[0];
  ASSERT_EQ(r.ops_size(), 1) << r.DebugString();
  EXPECT_EQ(r.ops(0).seq(), 1u);
  EXPECT_EQ(r.trigger_event_id(), OpWithSeq(*t, 1)->op->event_id());
  EXPECT_TRUE(OpWithSeq(*t, 1)->op->completion_tracked());
  ASSERT_EQ(c.Finalize(), 0);
}

// Completions from CUDA events: without KernelLaunch NCCL starts no launch
// event, and the op that follows would take the previous launch's
// completion. It must get none.
TEST_F(MaskTest, WithoutKernelLaunchAnOpNeverTakesAnEarlierLaunchsCompletion) {
  FakeCuda* cuda = LoadFakeCuda();
  ASSERT_NE(cuda, nullptr);
  cuda->make_current(0xC1);
  const std::string dir = MakeTempDir("mask_events");
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_COMPLETIONS", "events"},
                {"NCCLWATCH_STUCK_SEC", "0.2"},
                {"NCCLWATCH_FLUSH_MS", "10"},
                {"NCCLWATCH_HEARTBEAT_MS", "20"}});
  ClearLogs();
  void* const stream = reinterpret_cast<void*>(0x5A00);
  auto op = [&](uint64_t seq) {
    OpSpec s;
    s.seq = seq;
    s.stream = stream;
    s.proxy_peers = {};
    s.launch = [cuda](void* st) { cuda->launch(st); };
    return s;
  };
  FakeComm c(PluginLib::Shared(), 7);
  ASSERT_EQ(c.Init(0x3A7, "ras", 1, 2, 0), 0);
  ASSERT_NE(c.mask() & nccl::kKernelLaunch, 0);
  c.RunOp(op(1));
  // Written before the change is read: its API call surely read the old
  // mask (one started after the writer's last read of it is unsure).
  WaitForTrace(dir, [](const Trace& x) { return OpWithSeq(x, 1) != nullptr; });
  SetRasEventMask(c.mask() & ~nccl::kKernelLaunch);
  std::unique_ptr<Trace> t = WaitForTrace(dir, [](const Trace& x) { return !MaskChanges(x).empty(); });
  ASSERT_FALSE(MaskChanges(*t).empty());
  EXPECT_EQ(MaskChanges(*t)[0]->completion_source(), static_cast<uint64_t>(nccl::kKernelLaunch));
  c.RunOp(op(2));
  const uint64_t ran_at = MonoNs();
  cuda->run(stream);  // both kernels finish; only op 1 has a launch of its own
  t = WaitForTrace(dir, [&](const Trace& x) {
    const OpView* o1 = OpWithSeq(x, 1);
    return o1 != nullptr && o1->done_count > 0 && OpWithSeq(x, 2) != nullptr && WriterPast(x, ran_at + 500'000'000);
  });
  ASSERT_NE(OpWithSeq(*t, 1), nullptr);
  EXPECT_EQ(OpWithSeq(*t, 1)->done_count, 1) << OpWithSeq(*t, 1)->op->DebugString();
  const OpView* o2 = OpWithSeq(*t, 2);
  ASSERT_NE(o2, nullptr);
  EXPECT_EQ(o2->done_count, 0) << "an earlier launch's completion is not its own";
  EXPECT_FALSE(o2->op->completion_tracked());
  EXPECT_EQ(o2->op->no_completion(), trace::NO_COMPLETION_MASK);
  EXPECT_TRUE(t->stucks.empty());
  ASSERT_EQ(c.Finalize(), 0);
}

}  // namespace
}  // namespace ncclwatch::testing
