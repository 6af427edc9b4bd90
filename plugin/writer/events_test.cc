// Completions from CUDA events (NCCLWATCH_COMPLETIONS=events), end to end:
// the built plugin, driven by the fake NCCL host with NCCL 2.28's call order
// (KernelLaunch start, cuLaunchKernelEx, KernelLaunch stop, then the plan's
// ops on the same thread), over a fake CUDA driver whose streams run only
// when the test says (plugin/testing/fake_cuda.cc).

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "plugin/abi/profiler_common.h"
#include "plugin/testing/fake_cuda_host.h"
#include "plugin/testing/fake_nccl_host.h"
#include "proto/trace.pb.h"
#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"

namespace ncclwatch::testing {
namespace {

constexpr uintptr_t kCtx1 = 0xC1;
constexpr uintptr_t kCtx2 = 0xC2;
void* const kStreamA = reinterpret_cast<void*>(0x5A00);
void* const kStreamB = reinterpret_cast<void*>(0x5B00);

class EventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda_ = LoadFakeCuda();
    ASSERT_NE(cuda_, nullptr);
    cuda_->make_current(kCtx1);
    dir_ = MakeTempDir("events");
    SetPluginEnv({{"NCCLWATCH_DIR", dir_},
                  {"NCCLWATCH_COMPLETIONS", "events"},
                  {"NCCLWATCH_STUCK_SEC", "0.3"},
                  {"NCCLWATCH_FLUSH_MS", "10"},
                  {"NCCLWATCH_HEARTBEAT_MS", "20"}});
    ClearLogs();
  }
  // The plugin's settings for a test that needs one more than events and a
  // short flush (no stuck threshold, no fast heartbeat).
  void EventsEnv(const std::string& name, const std::string& value) {
    SetPluginEnv({{"NCCLWATCH_DIR", dir_},
                  {"NCCLWATCH_COMPLETIONS", "events"},
                  {name, value},
                  {"NCCLWATCH_FLUSH_MS", "10"}});
  }
  // The fork tests below must find no thread of an earlier test's v7
  // kernel channels. The sampled-events tests step the plugin's clock:
  // back to 0 once their communicators are finalized.
  void TearDown() override {
    StopFakeProfilerThread();
    ResetPluginClock();
  }
  // An all-reduce whose kernel is queued on `stream` (the fake GPU runs it
  // only when told).
  OpSpec Op(uint64_t seq, void* stream) {
    OpSpec s;
    s.seq = seq;
    s.stream = stream;
    s.proxy_peers = {};
    FakeCuda* cuda = cuda_;
    s.launch = [cuda](void* st) { cuda->launch(st); };
    s.captured = [cuda](void* st) { return cuda->is_capturing(st) != 0; };
    return s;
  }
  static const trace::Op* OpWithSeq(const Trace& t, uint64_t seq, const OpView** view = nullptr) {
    for (const OpView& o : t.ops)
      if (o.op->seq() == seq) {
        if (view != nullptr) *view = &o;
        return o.op;
      }
    return nullptr;
  }
  static bool Done(const Trace& t, uint64_t seq) {
    const OpView* v = nullptr;
    return OpWithSeq(t, seq, &v) != nullptr && v->done_count > 0;
  }

  FakeCuda* cuda_ = nullptr;
  std::string dir_;
};

// By default (NCCLWATCH_COMPLETIONS unset: auto) a process with libcuda
// on profiler API v5+ takes CUDA events; on v4 it takes kernel channels,
// without a warning, and the file header says which and why.
TEST_F(EventsTest, EventsAreTheDefaultWhereTheyCanBeHad) {
  SetPluginEnv({{"NCCLWATCH_DIR", dir_}, {"NCCLWATCH_FLUSH_MS", "10"}});
  {
    FakeComm c(PluginLib::Shared(), 5);
    ASSERT_EQ(c.Init(0xE5, "auto5", 1, 2, 0), 0);
    EXPECT_NE(c.mask() & nccl::kKernelLaunch, 0);
    EXPECT_EQ(c.mask() & nccl::kKernelCh, 0);
    c.RunOp(Op(1, kStreamA));
    std::unique_ptr<Trace> t = WaitForTrace(dir_, [](const Trace& x) { return OpWithSeq(x, 1) != nullptr; });
    EXPECT_EQ(t->header->completions(), "events");
    EXPECT_EQ(t->header->completion_source(), trace::COMPLETION_SOURCE_CUDA_EVENTS);
    cuda_->run(kStreamA);
    ASSERT_EQ(c.Finalize(), 0);
  }
  const std::string dir4 = MakeTempDir("events_v4");
  SetPluginEnv({{"NCCLWATCH_DIR", dir4}, {"NCCLWATCH_FLUSH_MS", "10"}});
  ClearLogs();
  FakeComm c(PluginLib::Shared(), 4);
  ASSERT_EQ(c.Init(0xE4, "auto4", 1, 2, 0), 0);
  EXPECT_NE(c.mask() & nccl::kKernelCh, 0);
  c.RunOp(Op(1, kStreamA));
  ASSERT_EQ(c.Finalize(), 0);
  std::unique_ptr<Trace> t = WaitForTrace(dir4, [](const Trace& x) { return !x.finalizes.empty(); });
  EXPECT_EQ(t->header->completions().rfind("channels (CUDA-event completions need profiler API v5", 0), 0u)
      << t->header->completions();
  EXPECT_EQ(t->header->completion_source(), trace::COMPLETION_SOURCE_KERNEL_CHANNELS);
  for (const std::string& w : Warnings()) EXPECT_EQ(w.find("CUDA-event"), std::string::npos) << w;
}

// NCCL 2.31 (API v7) charges kernel channels to every kernel: the default
// never asks for them there, and a user who does is told the price in the
// init line and the file header, whether as the completion source or as
// raw records beside CUDA events.
TEST_F(EventsTest, KernelChannelsOnV7AreAskedOnlyByNameAndPriced) {
  struct Case {
    const char* completions;
    const char* events;
    bool kernel_ch;
    const char* source;  // how the header's completions start
  } cases[] = {{"auto", "default", false, "events"},
               {"channels", "default", true, "channels (NCCLWATCH_COMPLETIONS=channels; NCCL 2.31"},
               {"auto", "default,kernelch", true, "events (kernelch in NCCLWATCH_EVENTS; NCCL 2.31"}};
  for (const Case& k : cases) {
    const std::string dir = MakeTempDir("v7cost");
    SetPluginEnv({{"NCCLWATCH_DIR", dir},
                  {"NCCLWATCH_COMPLETIONS", k.completions},
                  {"NCCLWATCH_EVENTS", k.events},
                  {"NCCLWATCH_FLUSH_MS", "10"}});
    ClearLogs();
    FakeComm c(PluginLib::Shared(), 7);
    ASSERT_EQ(c.Init(0xEC, "v7cost", 1, 2, 0), 0);
    EXPECT_EQ((c.mask() & nccl::kKernelCh) != 0, k.kernel_ch) << k.completions << " " << k.events;
    c.RunOp(Op(1, kStreamA));
    cuda_->run(kStreamA);
    ASSERT_EQ(c.Finalize(), 0);
    std::unique_ptr<Trace> t = WaitForTrace(dir, [](const Trace& x) { return !x.finalizes.empty(); });
    const std::string& said = t->header->completions();
    EXPECT_EQ(said.rfind(k.source, 0), 0u) << said;
    EXPECT_EQ(said.find("NVIDIA/nccl#2355") != std::string::npos, k.kernel_ch) << said;
    bool init = false;
    for (const LogLine& l : Logs())
      init |= l.text.find("completions from " + said) != std::string::npos;
    EXPECT_TRUE(init) << "the init line carries the price: " << said;
  }
}

TEST_F(EventsTest, OpsCompleteWhenTheirStreamPassesTheLaunch) {
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0xE1, "events", 1, 2, 0), 0);
  // NCCL is asked for launches instead of kernel channels.
  EXPECT_NE(c.mask() & nccl::kKernelLaunch, 0);
  EXPECT_EQ(c.mask() & nccl::kKernelCh, 0);
  for (uint64_t seq = 1; seq <= 3; ++seq) c.RunOp(Op(seq, kStreamA));

  std::unique_ptr<Trace> t = WaitForTrace(dir_, [](const Trace& x) { return OpWithSeq(x, 3) != nullptr; });
  EXPECT_EQ(t->header->completions(), "events");
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    const trace::Op* op = OpWithSeq(*t, seq);
    ASSERT_NE(op, nullptr);
    EXPECT_TRUE(op->completion_tracked()) << op->DebugString();
    EXPECT_FALSE(Done(*t, seq)) << "the GPU has run nothing yet";
  }
  const uint64_t ran_at = MonoNs();
  cuda_->run_some(kStreamA, 3);  // the first launch: its before event, kernel, after event
  t = WaitForTrace(dir_, [&](const Trace& x) { return Done(x, 1) && WriterPast(x, ran_at); });
  EXPECT_FALSE(Done(*t, 2));
  const OpView* v = nullptr;
  OpWithSeq(*t, 1, &v);
  EXPECT_TRUE(v->done.from_event());
  EXPECT_FALSE(v->has_gpu) << "an event gives no GPU timing";
  EXPECT_GE(t->header->mono_base_ns() + v->done_ns, ran_at);
  cuda_->run(kStreamA);
  t = WaitForTrace(dir_, [&](const Trace& x) { return Done(x, 2) && Done(x, 3); });
  ASSERT_EQ(c.Finalize(), 0);
  t = WaitForTrace(dir_, [](const Trace& x) { return !x.finalizes.empty(); });
  EXPECT_TRUE(t->stucks.empty());
  EXPECT_TRUE(t->raw.only_cut_tail);
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    OpWithSeq(*t, seq, &v);
    EXPECT_EQ(v->done_count, 1) << "seq " << seq;
  }
}

// Captured raw (NCCLWATCH_EVENTS naming kernellaunch), a launch's start and
// stop records carry the times they were made, though the launch path reads
// no clock otherwise; and its ops still complete from its events.
TEST_F(EventsTest, RawKernelLaunchRecordsCarryTheirTimes) {
  EventsEnv("NCCLWATCH_EVENTS", "default,kernellaunch");
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0xE8, "rawlaunch", 1, 2, 0), 0);
  const uint64_t before = MonoNs();
  c.RunOp(Op(1, kStreamA));
  c.RunOp(Op(2, kStreamA));
  const uint64_t after = MonoNs();
  cuda_->run(kStreamA);
  std::unique_ptr<Trace> t = WaitForTrace(dir_, [](const Trace& x) { return Done(x, 1) && Done(x, 2); });
  // 1 ms for the conversion of TSC ticks.
  constexpr uint64_t kSlack = 1'000'000;
  std::vector<uint64_t> times;  // each launch's start and stop, in launch order
  for (const trace::EventStart* e : t->starts) {
    if (e->type() != trace::KERNEL_LAUNCH) continue;
    EXPECT_EQ(e->kernel_launch().stream(), reinterpret_cast<uint64_t>(kStreamA));
    const uint64_t start = t->header->mono_base_ns() + e->time_ns();
    EXPECT_GE(start + kSlack, before);
    EXPECT_LE(start, after + kSlack);
    auto stop = t->stop_by_id.find(e->event_id());
    ASSERT_NE(stop, t->stop_by_id.end()) << "launch " << e->event_id() << " has no stop record";
    EXPECT_GE(stop->second->time_ns(), e->time_ns());
    EXPECT_LE(t->header->mono_base_ns() + stop->second->time_ns(), after + kSlack);
    times.push_back(e->time_ns());
    times.push_back(stop->second->time_ns());
  }
  ASSERT_EQ(times.size(), 4u) << "two launches, each started and stopped";
  EXPECT_LT(times[1], times[2]) << "the second launch started after the first stopped";
  ASSERT_EQ(c.Finalize(), 0);
}

// Phases asked for on v7 (NCCLWATCH_EVENTS naming kernelphase): NCCL adds
// KernelCh to the mask (ncclProfilerEnforceMaskDeps) and reports phases only
// under kernel channels. The plugin asks for them itself, so the mask NCCL
// holds is the one it set (no MaskChange, no warning about RAS), and takes
// completions from those channels: CUDA events on top would cost the
// launching thread for nothing. Named, `events` gets a warning; auto none.
TEST_F(EventsTest, PhasesTakeCompletionsFromChannels) {
  for (const char* completions : {"events", "auto"}) {
    const std::string dir = MakeTempDir("phases");
    SetPluginEnv({{"NCCLWATCH_DIR", dir},
                  {"NCCLWATCH_COMPLETIONS", completions},
                  {"NCCLWATCH_EVENTS", "default,kernelphase"},
                  {"NCCLWATCH_FLUSH_MS", "10"}});
    ClearLogs();
    FakeComm c(PluginLib::Shared(), 7);
    ASSERT_EQ(c.Init(0xE9, "phases", 1, 2, 0), 0);
    EXPECT_NE(c.mask() & nccl::kKernelCh, 0) << completions;
    EXPECT_NE(c.mask() & nccl::kKernelPhase, 0) << completions;
    EXPECT_EQ(c.mask() & nccl::kKernelLaunch, 0) << completions;
    const OpSpec spec = Op(0, kStreamA);
    const OpResult ran[2] = {c.RunOp(spec), c.RunOp(Op(1, kStreamA))};
    cuda_->run(kStreamA);
    ASSERT_EQ(c.Finalize(), 0);
    std::unique_ptr<Trace> t = WaitForTrace(dir, [](const Trace& x) { return !x.finalizes.empty(); });
    EXPECT_EQ(t->header->completions().rfind("channels (", 0), 0u) << t->header->completions();
    EXPECT_EQ(t->header->event_mask(), static_cast<uint64_t>(c.mask()));
    for (uint64_t seq = 0; seq <= 1; ++seq) {
      const OpView* v = nullptr;
      ASSERT_NE(OpWithSeq(*t, seq, &v), nullptr);
      EXPECT_EQ(v->done_count, 1) << completions << " seq " << seq;
      EXPECT_TRUE(v->has_gpu) << "kernel channels give GPU timing";
      const std::vector<const trace::EventStart*> phases = t->Children(v->op->event_id(), trace::KERNEL_PHASE);
      EXPECT_EQ(phases.size(), 6u) << "3 phases on each of 2 channels";
      // Each phase's own GPU times, as NCCL reported them: inside its
      // kernel's span, each channel's three end to end, the first two as
      // long as NCCL said.
      std::map<std::pair<uint32_t, int>, std::pair<uint64_t, uint64_t>> span;  // (channel, phase): start, stop
      for (const trace::EventStart* p : phases) {
        ASSERT_TRUE(p->has_kernel_phase());
        ASSERT_EQ(t->ev_gpu_start.count(p->event_id()), 1u);
        ASSERT_EQ(t->state_gpu.count(p->event_id()), 1u);
        const uint64_t start = t->ev_gpu_start.at(p->event_id()), stop = t->state_gpu.at(p->event_id());
        EXPECT_LE(ran[seq].gpu_start, start);
        EXPECT_LT(start, stop);
        EXPECT_LE(stop, ran[seq].gpu_stop);
        span[{p->kernel_phase().channel(), p->kernel_phase().phase()}] = {start, stop};
      }
      for (uint32_t ch = 0; ch < 2; ++ch) {
        const auto at = [&](int phase) { return span[std::make_pair(ch, phase)]; };
        EXPECT_EQ(at(0).second - at(0).first, spec.phase_ends[0]);
        EXPECT_EQ(at(0).second, at(1).first);
        EXPECT_EQ(at(1).second - at(1).first, spec.phase_ends[1] - spec.phase_ends[0]);
        EXPECT_EQ(at(1).second, at(2).first);
      }
    }
    for (const trace::Record& r : t->raw.records) EXPECT_FALSE(r.has_mask_change()) << r.ShortDebugString();
    bool warned = false;
    for (const std::string& w : Warnings()) {
      EXPECT_EQ(w.find("mask changed"), std::string::npos) << w;
      warned |= w.find("kernelphase") != std::string::npos;
    }
    EXPECT_EQ(warned, std::string(completions) == "events") << completions;
    // What the plugin wrote reaches the model: each op's two channels,
    // three phases each, in order. (GPU times reach the CPU clock through
    // an anchor the writer tightens as it goes: records written apart may
    // differ by its polling delay, so their GPU times are checked above, in
    // the GPU's clock.)
    tools::Model m;
    std::string err;
    tools::LoadOptions opts;
    opts.kernel_phases = true;
    ASSERT_TRUE(tools::BuildModel({dir}, opts, &m, &err)) << err;
    ASSERT_EQ(m.procs.size(), 1u);
    const tools::Proc& p = m.procs[0];
    EXPECT_FALSE(p.damaged);
    ASSERT_EQ(p.phases.size(), 12u) << completions;
    for (size_t i = 0; i < p.phases.size(); ++i) {
      const tools::KernelPhaseSpan& ph = p.phases[i];
      ASSERT_LT(ph.op, m.ops.size());
      const tools::Op& op = m.ops[ph.op];
      EXPECT_EQ(op.seq, i / 6);
      EXPECT_EQ(ph.channel, (i / 3) % 2);
      EXPECT_EQ(ph.phase, i % 3);
      EXPECT_LT(ph.start_ns, ph.stop_ns);
    }
  }
}

TEST_F(EventsTest, AGraphCaptureRecordsNoEventAndSaysWhy) {
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0xE2, "graph", 1, 2, 0), 0);
  uint64_t rec0 = 0, q = 0, cr = 0;
  cuda_->counts(&rec0, &q, &cr);
  const uint64_t checks0 = cuda_->capture_checks();
  cuda_->set_capturing(kStreamB, 1);
  c.RunOp(Op(1, kStreamB));
  cuda_->set_capturing(kStreamB, 0);
  uint64_t rec1 = 0;
  cuda_->counts(&rec1, &q, &cr);
  EXPECT_EQ(rec1, rec0) << "no event may be recorded into a capturing stream";
  EXPECT_EQ(cuda_->capture_checks(), checks0) << "NCCL's CollApi said captured: the driver need not be asked";
  c.RunOp(Op(2, kStreamB));  // captured no more: tracked again
  std::unique_ptr<Trace> t = WaitForTrace(dir_, [](const Trace& x) { return OpWithSeq(x, 2) != nullptr; });
  const trace::Op* graph = OpWithSeq(*t, 1);
  ASSERT_NE(graph, nullptr);
  EXPECT_FALSE(graph->completion_tracked());
  EXPECT_EQ(graph->no_completion(), trace::NO_COMPLETION_GRAPH);
  EXPECT_TRUE(OpWithSeq(*t, 2)->completion_tracked());
  cuda_->run(kStreamB);
  t = WaitForTrace(dir_, [](const Trace& x) { return Done(x, 2); });
  EXPECT_FALSE(Done(*t, 1));
  ASSERT_EQ(c.Finalize(), 0);
}

// NCCL 2.28+ tells at each API call whether the group is captured
// (CollApi/P2pApi graphCaptured). The plugin gives each GroupApi a token of
// its own and keeps that answer per communicator under it, so a launch
// under the same token asks the driver nothing; under any other parent (a
// null one, a group whose API events said nothing) it still asks.
TEST_F(EventsTest, NcclsCaptureAnswerIsTrustedOnlyForItsOwnGroup) {
  FakeComm x(PluginLib::Shared(), 5);
  FakeComm y(PluginLib::Shared(), 5);
  ASSERT_EQ(x.Init(0xE6, "x", 1, 2, 0), 0);
  ASSERT_EQ(y.Init(0xE7, "y", 1, 2, 0), 0);
  auto records = [&] {
    uint64_t rec = 0, q = 0, cr = 0;
    cuda_->counts(&rec, &q, &cr);
    return rec;
  };
  auto launch = [&](FakeComm& c, void* parent, void* stream) {
    Ev k;
    k.type = nccl::kKernelLaunch;
    k.parent = parent;
    k.stream = stream;
    void* h = c.Start(k);
    cuda_->launch(stream);
    c.Stop(h);
  };
  auto api = [&](FakeComm& c, void* group, bool captured) {
    Ev a;
    a.type = nccl::kCollApi;
    a.parent = group;
    a.func = "AllReduce";
    a.graph_captured = captured;
    c.Stop(c.Start(a));
  };
  // One group spanning both communicators: x's streams captured, y's not.
  Ev g;
  g.type = nccl::kGroupApi;
  g.group_depth = 1;
  void* group = x.Start(g);
  ASSERT_NE(group, nullptr);
  EXPECT_NE(reinterpret_cast<uintptr_t>(group) >> 63, 0u) << "a token, never one of the plugin's slots";
  x.State(group, nccl::kGroupStartApiStop);
  api(x, group, true);
  api(y, group, false);
  x.State(group, nccl::kGroupEndApiStart);
  cuda_->set_capturing(kStreamA, 1);
  uint64_t checks = cuda_->capture_checks();
  uint64_t rec = records();
  launch(y, group, kStreamB);
  EXPECT_EQ(records(), rec + 2) << "y's group is not captured: both events";
  launch(x, group, kStreamA);
  EXPECT_EQ(records(), rec + 2) << "x's is: none";
  EXPECT_EQ(cuda_->capture_checks(), checks) << "NCCL answered for both";
  x.Stop(group);
  cuda_->set_capturing(kStreamA, 0);

  // A later group whose API events said nothing for y (or x): the old
  // answer is another group's, so the driver is asked.
  void* later = y.Start(g);
  ASSERT_NE(later, nullptr);
  EXPECT_NE(later, group);
  rec = records();
  launch(y, later, kStreamB);
  EXPECT_EQ(cuda_->capture_checks(), checks + 1);
  EXPECT_EQ(records(), rec + 2);
  launch(x, later, kStreamA);  // x's answer was "captured", in the first group
  EXPECT_EQ(cuda_->capture_checks(), checks + 2);
  EXPECT_EQ(records(), rec + 4) << "stream A captured no more: asked, then recorded";
  launch(y, nullptr, kStreamB);  // no parent at all
  EXPECT_EQ(cuda_->capture_checks(), checks + 3);
  y.Stop(later);
  cuda_->run(kStreamA);  // the streams are shared with later tests
  cuda_->run(kStreamB);
  ASSERT_EQ(x.Finalize(), 0);
  ASSERT_EQ(y.Finalize(), 0);
}

// Where the plugin keeps a GroupApi raw (NCCLWATCH_EVENTS names it), its
// handle is a slot, not a token: launches under it ask the driver.
TEST_F(EventsTest, ARawGroupApiLeavesTheCaptureCheckToTheDriver) {
  EventsEnv("NCCLWATCH_EVENTS", "default,groupapi");
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0xE8, "raw", 1, 2, 0), 0);
  const uint64_t checks = cuda_->capture_checks();
  c.RunOp(Op(1, kStreamA));
  EXPECT_EQ(cuda_->capture_checks(), checks + 1);
  cuda_->run(kStreamA);
  ASSERT_EQ(c.Finalize(), 0);
}

TEST_F(EventsTest, StuckReportTellsNeverStartedFromStarted) {
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0xE3, "stuck", 1, 2, 0), 0);
  // Stream A: a host function that never returns holds it; the op's kernel
  // is queued behind it. Stream B: the kernel began and never ends.
  cuda_->block(kStreamA);
  c.RunOp(Op(1, kStreamA));
  c.RunOp(Op(2, kStreamB));
  cuda_->run_some(kStreamB, 1);  // past the event before the kernel only
  std::unique_ptr<Trace> t = WaitForTrace(dir_, [](const Trace& x) {
    return !x.stucks.empty() && x.stucks.back()->ops_size() == 2;
  });
  ASSERT_FALSE(t->stucks.empty());
  std::map<uint64_t, trace::GpuProgress> gpu;
  for (const trace::InFlightOp& o : t->stucks.back()->ops()) {
    gpu[o.seq()] = o.gpu();
    EXPECT_EQ(o.kernel_channels_started(), 0u);  // no channel counts claimed
  }
  EXPECT_EQ(gpu[1], trace::GPU_NOT_STARTED);
  EXPECT_EQ(gpu[2], trace::GPU_STARTED);
  cuda_->unblock(kStreamA);
  cuda_->run(kStreamA);
  cuda_->run(kStreamB);
  t = WaitForTrace(dir_, [](const Trace& x) { return Done(x, 1) && Done(x, 2); });
  // Op 2's kernel was seen started long before it was seen done: both times
  // are in its completion.
  const OpView* v = nullptr;
  OpWithSeq(*t, 2, &v);
  EXPECT_NE(v->done.started_ns(), 0u) << v->done.DebugString();
  EXPECT_LE(v->done.started_ns() + 200'000'000, v->done_ns) << "started before the stuck report, done after";
  ASSERT_EQ(c.Finalize(), 0);
}

// NCCLWATCH_START_EVENTS=0: one event per launch, after the kernel.
// Completions still come; a stuck report no longer claims to know whether
// the GPU started the kernel.
TEST_F(EventsTest, WithoutStartEventsProgressIsUnknown) {
  SetPluginEnv({{"NCCLWATCH_DIR", dir_},
                {"NCCLWATCH_COMPLETIONS", "events"},
                {"NCCLWATCH_START_EVENTS", "0"},
                {"NCCLWATCH_STUCK_SEC", "0.3"},
                {"NCCLWATCH_FLUSH_MS", "10"},
                {"NCCLWATCH_HEARTBEAT_MS", "20"}});
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0xE9, "nostart", 1, 2, 0), 0);
  uint64_t rec0 = 0, q = 0, cr = 0, rec1 = 0;
  cuda_->counts(&rec0, &q, &cr);
  c.RunOp(Op(1, kStreamA));
  cuda_->counts(&rec1, &q, &cr);
  EXPECT_EQ(rec1 - rec0, 1u) << "one event per launch";
  std::unique_ptr<Trace> t = WaitForTrace(dir_, [](const Trace& x) { return !x.stucks.empty(); });
  ASSERT_EQ(t->stucks.back()->ops_size(), 1);
  EXPECT_EQ(t->stucks.back()->ops(0).gpu(), trace::GPU_PROGRESS_UNKNOWN);
  cuda_->run(kStreamA);
  t = WaitForTrace(dir_, [](const Trace& x) { return Done(x, 1); });
  ASSERT_EQ(c.Finalize(), 0);
}

// NCCLWATCH_EVENT_INTERVAL_US: in a burst faster than the interval only the
// first launch records events. Every op of the burst still completes, the
// ones without events of their own when a later launch's event proves them
// (OpDone.from_later_event); until then a stuck report puts them in a window
// and never claims one of them started or not.
TEST_F(EventsTest, SampledEventsProveEveryOpOfABurst) {
  SetPluginEnv({{"NCCLWATCH_DIR", dir_},
                {"NCCLWATCH_COMPLETIONS", "events"},
                {"NCCLWATCH_EVENT_INTERVAL_US", "200000"},
                {"NCCLWATCH_STUCK_SEC", "0.3"},
                {"NCCLWATCH_FLUSH_MS", "10"},
                {"NCCLWATCH_HEARTBEAT_MS", "20"},
                {"NCCLWATCH_CLOCK", "test"}});
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0xEC, "sampled", 1, 2, 0), 0);
  // The writer turns the interval into ticks in its first cycle; until then
  // every launch records.
  std::unique_ptr<Trace> t = WaitForTrace(dir_, [](const Trace& x) { return !x.heartbeats.empty(); });
  EXPECT_EQ(t->header->event_interval_us(), 200000u);
  uint64_t rec0 = 0, q = 0, cr = 0, rec1 = 0;
  cuda_->counts(&rec0, &q, &cr);
  for (uint64_t seq = 1; seq <= 6; ++seq) c.RunOp(Op(seq, kStreamA));
  cuda_->counts(&rec1, &q, &cr);
  EXPECT_EQ(rec1 - rec0, 2u) << "one launch of six recorded its pair";

  t = WaitForTrace(dir_, [](const Trace& x) { return !x.stucks.empty() && x.stucks.back()->ops_size() == 6; });
  ASSERT_FALSE(t->stucks.empty());
  std::map<uint64_t, const trace::InFlightOp*> in_flight;
  for (const trace::InFlightOp& o : t->stucks.back()->ops()) in_flight[o.seq()] = &o;
  ASSERT_EQ(in_flight.size(), 6u);
  EXPECT_EQ(in_flight[1]->gpu(), trace::GPU_NOT_STARTED) << "its own event says so";
  // The window: from op 1 (not done: nothing ran) to the end of the run
  // without events.
  const uint64_t first = OpWithSeq(*t, 1)->event_id(), last = OpWithSeq(*t, 6)->event_id();
  for (uint64_t seq = 2; seq <= 6; ++seq) {
    EXPECT_EQ(in_flight[seq]->gpu(), trace::GPU_IN_WINDOW) << seq;
    EXPECT_EQ(in_flight[seq]->window_first_event_id(), first) << seq;
    EXPECT_EQ(in_flight[seq]->window_last_event_id(), last) << seq;
    EXPECT_TRUE(OpWithSeq(*t, seq)->launch_without_event()) << seq;
  }
  EXPECT_FALSE(OpWithSeq(*t, 1)->launch_without_event());

  // The GPU runs everything; only op 1's event says so yet: ops 2..6 are the
  // burst's tail, proven by the stream's next launch with events.
  cuda_->run(kStreamA);
  const uint64_t ran_at = MonoNs();
  t = WaitForTrace(dir_, [&](const Trace& x) { return Done(x, 1) && WriterPast(x, ran_at + 50'000'000); });
  for (uint64_t seq = 2; seq <= 6; ++seq) EXPECT_FALSE(Done(*t, seq)) << seq;
  StepPluginClock(250'000'000);  // past the interval: the next launch records
  cuda_->counts(&rec0, &q, &cr);
  c.RunOp(Op(7, kStreamA));
  cuda_->counts(&rec1, &q, &cr);
  EXPECT_EQ(rec1 - rec0, 2u);
  cuda_->run(kStreamA);
  t = WaitForTrace(dir_, [](const Trace& x) {
    for (uint64_t seq = 1; seq <= 7; ++seq)
      if (!Done(x, seq)) return false;
    return true;
  });
  for (uint64_t seq = 1; seq <= 7; ++seq) {
    const OpView* v = nullptr;
    OpWithSeq(*t, seq, &v);
    EXPECT_TRUE(v->done.from_event()) << seq;
    EXPECT_EQ(v->done.from_later_event(), seq >= 2 && seq <= 6) << seq;
  }
  ASSERT_EQ(c.Finalize(), 0);
  bool said = false, init = false;
  for (const LogLine& l : Logs()) {
    said |= l.text.find("NCCLWATCH_EVENT_INTERVAL_US=200000: 5 of 7 kernel launches recorded no CUDA events") !=
            std::string::npos;
    init |= l.text.find("completions from events (at most once per stream every 200000 us)") != std::string::npos;
  }
  EXPECT_TRUE(said) << "the closing log says how many launches the interval spared";
  EXPECT_TRUE(init) << "the init line says events are sampled";
}

// Sampled events, two communicators launching on one stream from two
// threads at once: whichever launch records, every op completes once the
// stream has run and a later launch's event proves it, and none completes
// before its kernel ran (the launches' places in stream order are read
// after their kernels are queued).
TEST_F(EventsTest, SampledEventsFromTwoThreadsOnOneStream) {
  SetPluginEnv({{"NCCLWATCH_DIR", dir_},
                {"NCCLWATCH_COMPLETIONS", "events"},
                {"NCCLWATCH_EVENT_INTERVAL_US", "100"},
                {"NCCLWATCH_STUCK_SEC", "0"},
                {"NCCLWATCH_FLUSH_MS", "10"},
                {"NCCLWATCH_HEARTBEAT_MS", "20"},
                {"NCCLWATCH_CLOCK", "test"}});
  FakeComm a(PluginLib::Shared(), 5), b(PluginLib::Shared(), 5);
  ASSERT_EQ(a.Init(0xED, "a", 1, 2, 0), 0);
  ASSERT_EQ(b.Init(0xEE, "b", 1, 2, 0), 0);
  WaitForTrace(dir_, [](const Trace& x) { return !x.heartbeats.empty(); });
  constexpr int kOps = 300;
  auto run = [&](FakeComm* c, uint64_t first) {
    cuda_->make_current(kCtx1);
    for (int i = 0; i < kOps; ++i) {
      c->RunOp(Op(first + i, kStreamA));
      if (i % 50 == 0) StepPluginClock(300'000);  // a few intervals pass: some launches record
    }
  };
  std::thread ta(run, &a, 1000), tb(run, &b, 5000);
  ta.join();
  tb.join();
  const uint64_t ran_at = MonoNs();
  std::unique_ptr<Trace> t = WaitForTrace(dir_, [&](const Trace& x) {
    return OpWithSeq(x, 1000 + kOps - 1) != nullptr && OpWithSeq(x, 5000 + kOps - 1) != nullptr &&
           WriterPast(x, ran_at + 30'000'000);
  });
  for (int i = 0; i < kOps; ++i) {
    EXPECT_FALSE(Done(*t, 1000 + i)) << "nothing ran yet: seq " << 1000 + i;
    EXPECT_FALSE(Done(*t, 5000 + i)) << "nothing ran yet: seq " << 5000 + i;
  }
  cuda_->run(kStreamA);
  StepPluginClock(1'000'000);  // past the interval: the next launch records and proves the tail
  a.RunOp(Op(1000 + kOps, kStreamA));
  cuda_->run(kStreamA);
  t = WaitForTrace(dir_, [&](const Trace& x) {
    for (int i = 0; i <= kOps; ++i)
      if (!Done(x, 1000 + i)) return false;
    for (int i = 0; i < kOps; ++i)
      if (!Done(x, 5000 + i)) return false;
    return true;
  });
  size_t later = 0, own = 0;
  for (const OpView& v : t->ops) {
    if (v.done_count == 0) continue;
    if (v.done.from_later_event()) {
      EXPECT_TRUE(v.op->launch_without_event()) << v.op->seq();
      ++later;
    } else {
      ++own;
    }
  }
  EXPECT_GT(later, 0u);
  EXPECT_GT(own, 1u);
  ASSERT_EQ(a.Finalize(), 0);
  ASSERT_EQ(b.Finalize(), 0);
}

// Several communicators, each with its stream, launched from several
// threads at once (a nonblocking communicator's ops come from NCCL's own
// launch thread): each op follows its own launch.
TEST_F(EventsTest, CommunicatorsStreamsAndThreadsKeepTheirOwnLaunches) {
  FakeComm a(PluginLib::Shared(), 5), b(PluginLib::Shared(), 5);
  ASSERT_EQ(a.Init(0xEA, "a", 1, 2, 0), 0);
  ASSERT_EQ(b.Init(0xEB, "b", 1, 2, 0), 0);
  constexpr int kOps = 200;
  auto run = [&](FakeComm* c, void* stream, uint64_t first) {
    cuda_->make_current(kCtx1);
    for (int i = 0; i < kOps; ++i) c->RunOp(Op(first + i, stream));
  };
  std::thread ta(run, &a, kStreamA, 1000), tb(run, &b, kStreamB, 5000);
  ta.join();
  tb.join();
  cuda_->run(kStreamB);  // only b's GPU work finishes
  const uint64_t ran_at = MonoNs();
  std::unique_ptr<Trace> t = WaitForTrace(dir_, [&](const Trace& x) {
    for (int i = 0; i < kOps; ++i)
      if (!Done(x, 5000 + i)) return false;
    return WriterPast(x, ran_at);
  });
  for (int i = 0; i < kOps; ++i) {
    EXPECT_TRUE(OpWithSeq(*t, 1000 + i)->completion_tracked());
    EXPECT_FALSE(Done(*t, 1000 + i)) << "a's kernels never ran: seq " << 1000 + i;
  }
  cuda_->run(kStreamA);
  t = WaitForTrace(dir_, [&](const Trace& x) { return Done(x, 1000 + kOps - 1); });
  ASSERT_EQ(a.Finalize(), 0);
  ASSERT_EQ(b.Finalize(), 0);
}

// A thread past the buffers (NCCLWATCH_BUFFER_MB=1 gives 4) records no
// event at its launch and counts what it drops; the threads that hold the
// buffers keep their launches' completions.
TEST_F(EventsTest, ALaunchOnAThreadWithoutABufferRecordsNoEvent) {
  EventsEnv("NCCLWATCH_BUFFER_MB", "1");
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0xEC, "nobuf", 1, 2, 0), 0);
  c.RunOp(Op(1, kStreamA));  // this thread's buffer
  // Three threads take the other buffers and keep them until released.
  std::mutex mu;
  std::condition_variable cv;
  int ready = 0;
  bool release = false;
  std::vector<std::thread> holders;
  for (uint64_t i = 0; i < 3; ++i)
    holders.emplace_back([&, poster = c.Alias(), i]() mutable {
      cuda_->make_current(kCtx1);
      poster.RunOp(Op(10 + i, kStreamA));
      std::unique_lock<std::mutex> lock(mu);
      ++ready;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
    });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return ready == 3; });
  }
  uint64_t rec0 = 0, rec1 = 0, q = 0, cr = 0;
  cuda_->counts(&rec0, &q, &cr);
  std::thread([&, poster = c.Alias()]() mutable {
    cuda_->make_current(kCtx1);
    poster.RunOp(Op(20, kStreamA));
  }).join();
  cuda_->counts(&rec1, &q, &cr);
  EXPECT_EQ(rec1, rec0) << "no event for a launch on a thread without a buffer";
  cuda_->run(kStreamA);
  std::unique_ptr<Trace> t = WaitForTrace(
      dir_, [](const Trace& x) { return Done(x, 1) && Done(x, 10) && Done(x, 11) && Done(x, 12); });
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  for (std::thread& h : holders) h.join();
  ASSERT_EQ(c.Finalize(), 0);
  t = WaitForTrace(dir_, [](const Trace& x) { return !x.finalizes.empty(); });
  EXPECT_EQ(OpWithSeq(*t, 20), nullptr) << "its op had no buffer either";
  ASSERT_NE(t->LastDrops(), nullptr);
  EXPECT_GE(t->LastDrops()->no_thread_slot(), 2u) << "its launch and its op";
}

// A plan run from CUDA's host-callback thread (graphs with proxy ops, or
// CUDA_LAUNCH_BLOCKING) has no launch before its ops on that thread: they
// say so rather than take another launch's completion.
TEST_F(EventsTest, OpsWithoutALaunchOnTheirThreadAreUntracked) {
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0xE4, "callback", 1, 2, 0), 0);
  c.RunOp(Op(1, kStreamA));  // this thread's launch
  std::thread callback([&] {
    OpSpec s = Op(2, kStreamA);
    s.api_events = false;  // no GroupApi, CollApi or KernelLaunch there
    FakeComm alias = c.Alias();
    alias.RunOp(s);
  });
  callback.join();
  std::unique_ptr<Trace> t = WaitForTrace(dir_, [](const Trace& x) { return OpWithSeq(x, 2) != nullptr; });
  EXPECT_TRUE(OpWithSeq(*t, 1)->completion_tracked());
  EXPECT_FALSE(OpWithSeq(*t, 2)->completion_tracked());
  EXPECT_EQ(OpWithSeq(*t, 2)->no_completion(), trace::NO_COMPLETION_NO_LAUNCH);
  cuda_->run(kStreamA);
  t = WaitForTrace(dir_, [](const Trace& x) { return Done(x, 1); });
  EXPECT_FALSE(Done(*t, 2));
  ASSERT_EQ(c.Finalize(), 0);
}

// An abort finalizes the communicator with its kernels never finished: the
// file closes with them in flight, and later event completions are harmless.
TEST_F(EventsTest, AbortWithEventsPending) {
  FakeComm keep(PluginLib::Shared(), 5), c(PluginLib::Shared(), 5);
  ASSERT_EQ(keep.Init(0xE5, "keep", 1, 2, 0), 0);
  ASSERT_EQ(c.Init(0xE6, "aborted", 1, 2, 0), 0);
  c.RunOp(Op(1, kStreamA));
  ASSERT_EQ(c.Finalize(), 0);
  cuda_->run(kStreamA);  // the abort ended the kernels
  keep.RunOp(Op(7, kStreamB));
  cuda_->run(kStreamB);
  std::unique_ptr<Trace> t = WaitForTrace(dir_, [](const Trace& x) { return Done(x, 7); });
  ASSERT_EQ(keep.Finalize(), 0);
  t = WaitForTrace(dir_, [](const Trace& x) { return !x.finalizes.empty(); });
  EXPECT_TRUE(t->raw.only_cut_tail);
  ASSERT_NE(OpWithSeq(*t, 1), nullptr);
  EXPECT_FALSE(Done(*t, 1)) << "no completion after its communicator's finalize";
}

// The context is destroyed with launches pending: the writer stops watching
// them without calling into it again, says so once, and a new context works.
TEST_F(EventsTest, ADestroyedContextIsHarmless) {
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0xE7, "ctx", 1, 2, 0), 0);
  c.RunOp(Op(1, kStreamA));
  std::unique_ptr<Trace> t = WaitForTrace(dir_, [](const Trace& x) { return OpWithSeq(x, 1) != nullptr; });
  cuda_->destroy_context(kCtx1);
  WaitForLog("CUDA context was destroyed");  // nothing else announces it
  bool warned = false;
  for (const std::string& w : Warnings()) warned |= w.find("CUDA context was destroyed") != std::string::npos;
  EXPECT_TRUE(warned);
  cuda_->make_current(kCtx2);
  c.RunOp(Op(2, kStreamB));
  cuda_->run(kStreamB);
  t = WaitForTrace(dir_, [](const Trace& x) { return Done(x, 2); });
  EXPECT_FALSE(Done(*t, 1));
  ASSERT_EQ(c.Finalize(), 0);
  cuda_->make_current(kCtx1);
  // Op 1's completion is unknown, and the file says so (no hang to read).
  t = ReadSingleTrace(dir_);
  ASSERT_NE(t->LastDrops(), nullptr);
  EXPECT_EQ(t->LastDrops()->completions_lost(), 1u);
}

// A stream handle that comes back in another context after its own was
// destroyed, while it is still the thread's last stream (the plugin finds
// a thread's last ring without asking the driver for the context): its
// launches get events again, from a ring in the new context, with and
// without the event before the kernel.
TEST_F(EventsTest, AStreamHandleBackInANewContextGetsEventsAgain) {
  for (const char* start_events : {"1", "0"}) {
    SCOPED_TRACE(std::string("NCCLWATCH_START_EVENTS=") + start_events);
    cuda_->make_current(kCtx1);
    const std::string dir = MakeTempDir("handle_back");
    SetPluginEnv({{"NCCLWATCH_DIR", dir},
                  {"NCCLWATCH_COMPLETIONS", "events"},
                  {"NCCLWATCH_START_EVENTS", start_events},
                  {"NCCLWATCH_FLUSH_MS", "10"}});
    FakeComm c(PluginLib::Shared(), 5);
    ASSERT_EQ(c.Init(0xE9, "handle_back", 1, 2, 0), 0);
    c.RunOp(Op(1, kStreamA));
    cuda_->run(kStreamA);
    std::unique_ptr<Trace> t = WaitForTrace(dir, [](const Trace& x) { return Done(x, 1); });
    // Nothing is pending: the writer has no query that could find the
    // context gone before the next launch.
    cuda_->destroy_context(kCtx1);
    cuda_->make_current(kCtx2);
    c.RunOp(Op(2, kStreamA));
    cuda_->run(kStreamA);
    t = WaitForTrace(dir, [](const Trace& x) { return Done(x, 2); });
    const trace::Op* op = OpWithSeq(*t, 2);
    ASSERT_NE(op, nullptr);
    EXPECT_TRUE(op->completion_tracked()) << op->DebugString();
    ASSERT_EQ(c.Finalize(), 0);
  }
  cuda_->make_current(kCtx1);
}

// The process exits with launches pending and its writer still polling:
// exit is clean, and the file holds the ops.
TEST_F(EventsTest, ExitWithEventsPending) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    cuda_->make_current(kCtx1);
    FakeComm c(PluginLib::FreshCopy(), 5);
    if (c.Init(0xE8, "exit", 1, 2, 0) != 0) _exit(3);
    for (uint64_t seq = 1; seq <= 50; ++seq) c.RunOp(Op(seq, kStreamA));
    exit(0);  // atexit hooks run with the writer thread alive
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Three ranks, one process each: AllReduce #1 is issued by every rank; the
// GPUs of ranks 0 and 1 start it (and wait in it for rank 2), while rank 2's
// stream is held by earlier work (a host function that never returns), so
// its GPU never starts it. diagnose names rank 2, from the stuck reports.
TEST_F(EventsTest, DiagnoseNamesTheRankWhoseGpuNeverStartedIt) {
  std::vector<pid_t> ranks;
  for (int r = 0; r < 3; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string mine = dir_ + "/rank" + std::to_string(r);
      mkdir(mine.c_str(), 0755);
      setenv("NCCLWATCH_DIR", mine.c_str(), 1);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", "3", 1);
      cuda_->make_current(kCtx1);
      FakeComm c(PluginLib::FreshCopy(), 5);
      if (c.Init(0x3A3A, "world", 1, 3, r) != 0) _exit(3);
      c.RunOp(Op(0, kStreamA));
      cuda_->run(kStreamA);
      if (r == 2) cuda_->block(kStreamA);
      c.RunOp(Op(1, kStreamA));
      if (r != 2) cuda_->run_some(kStreamA, 1);  // past the event before the kernel
      // Stays alive until its stuck report is on disk, then dies as a
      // watchdog would kill it.
      std::unique_ptr<Trace> t = WaitForTrace(mine, [](const Trace& x) { return !x.stucks.empty(); });
      _exit(t->stucks.empty() ? 4 : 0);
    }
    ranks.push_back(pid);
  }
  for (pid_t pid : ranks) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  tools::Model m;
  std::string err;
  ASSERT_TRUE(tools::BuildModel({dir_}, tools::LoadOptions(), &m, &err)) << err;
  const ncclwatch::report::Diagnosis d = tools::Diagnose(m, tools::DiagnoseOptions());
  const std::string text = tools::FormatText(d);
  ASSERT_GT(d.findings_size(), 0) << text;
  const auto& f = d.findings(0);
  EXPECT_EQ(f.kind(), ncclwatch::report::STUCK_IN_PROGRESS) << text;
  ASSERT_EQ(f.culprits_size(), 1) << text;
  EXPECT_EQ(f.culprits(0).name(), "rank 2") << text;
  EXPECT_EQ(f.waiting_size(), 2) << text;
  EXPECT_NE(d.verdict().find("rank 2's GPU never started it; ranks 0,1 started it and wait"), std::string::npos)
      << text;
}

// Sampled events (NCCLWATCH_EVENT_INTERVAL_US), three ranks: AllReduce #1
// and #4 record events (the interval passed before each), #2 and #3 do not.
// Rank 2's stream is held after #1 by a host function that never returns;
// the GPUs of ranks 0 and 1 pass #2 and #3 and start #4 (the fake's kernels
// do not wait for each other). diagnose names rank 2, whose GPU never
// started #4, and says where its GPU is as the window #2..#3, never one of
// them: nothing proves which.
TEST_F(EventsTest, DiagnoseNamesTheWindowWithSampledEvents) {
  std::vector<pid_t> ranks;
  for (int r = 0; r < 3; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string mine = dir_ + "/rank" + std::to_string(r);
      mkdir(mine.c_str(), 0755);
      setenv("NCCLWATCH_DIR", mine.c_str(), 1);
      setenv("NCCLWATCH_EVENT_INTERVAL_US", "200000", 1);
      setenv("NCCLWATCH_CLOCK", "test", 1);  // stepped below, past the interval
      setenv("NCCLWATCH_STUCK_SEC", "1", 1);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", "3", 1);
      cuda_->make_current(kCtx1);
      FakeComm c(PluginLib::FreshCopy(), 5);
      if (c.Init(0x3B3B, "world", 1, 3, r) != 0) _exit(3);
      // The writer knows the interval in ticks after its first cycle.
      WaitForTrace(mine, [](const Trace& x) { return !x.heartbeats.empty(); });
      c.RunOp(Op(0, kStreamA));
      cuda_->run(kStreamA);
      StepPluginClock(250'000'000);
      c.RunOp(Op(1, kStreamA));
      cuda_->run(kStreamA);
      if (r == 2) cuda_->block(kStreamA);
      c.RunOp(Op(2, kStreamA));
      c.RunOp(Op(3, kStreamA));
      StepPluginClock(250'000'000);
      c.RunOp(Op(4, kStreamA));
      if (r != 2) cuda_->run_some(kStreamA, 3);  // #2's and #3's kernels, #4's event before its kernel
      std::unique_ptr<Trace> t = WaitForTrace(mine, [](const Trace& x) {
        if (x.stucks.empty()) return false;
        for (const trace::InFlightOp& o : x.stucks.back()->ops())
          if (o.seq() == 4) return true;
        return false;
      });
      _exit(t->stucks.empty() ? 4 : 0);
    }
    ranks.push_back(pid);
  }
  for (pid_t pid : ranks) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  tools::Model m;
  std::string err;
  ASSERT_TRUE(tools::BuildModel({dir_}, tools::LoadOptions(), &m, &err)) << err;
  const ncclwatch::report::Diagnosis d = tools::Diagnose(m, tools::DiagnoseOptions());
  const std::string text = tools::FormatText(d);
  ASSERT_GT(d.findings_size(), 0) << text;
  const auto& f = d.findings(0);
  EXPECT_EQ(f.kind(), ncclwatch::report::STUCK_IN_PROGRESS) << text;
  EXPECT_EQ(f.seq(), 4u) << text;
  ASSERT_EQ(f.culprits_size(), 1) << text;
  EXPECT_EQ(f.culprits(0).name(), "rank 2") << text;
  EXPECT_NE(d.verdict().find("rank 2's GPU never started it; ranks 0,1 started it and wait"), std::string::npos)
      << text;
  EXPECT_NE(text.find("somewhere in AllReduce #2..#3, launched without CUDA events of their own"), std::string::npos)
      << text;
  EXPECT_NE(text.find("AllReduce #2 on comm 'world' (3 ranks) for"), std::string::npos) << text;
  EXPECT_NE(text.find("its GPU was somewhere in AllReduce #2..#3 or past it"), std::string::npos) << text;
  // No finding names #2 or #3 alone: rank 2's GPU may be in either.
  for (const auto& g : d.findings()) EXPECT_TRUE(g.seq() != 2 && g.seq() != 3) << text;
}

// Sampled events: a job whose last burst's tail recorded no events and
// whose streams then went idle ends with those operations in flight in its
// files (nothing launched after them to prove them), long enough for stuck
// reports to name their window. That is no hang: diagnose takes them as
// unknown and finds nothing wrong.
TEST_F(EventsTest, AnUnprovenTailIsNoHang) {
  std::vector<pid_t> ranks;
  for (int r = 0; r < 2; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string mine = dir_ + "/rank" + std::to_string(r);
      mkdir(mine.c_str(), 0755);
      setenv("NCCLWATCH_DIR", mine.c_str(), 1);
      setenv("NCCLWATCH_EVENT_INTERVAL_US", "200000", 1);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", "2", 1);
      cuda_->make_current(kCtx1);
      FakeComm c(PluginLib::FreshCopy(), 5);
      if (c.Init(0x3C3C, "world", 1, 2, r) != 0) _exit(3);
      WaitForTrace(mine, [](const Trace& x) { return !x.heartbeats.empty(); });
      for (uint64_t seq = 0; seq < 5; ++seq) c.RunOp(Op(seq, kStreamA));
      cuda_->run(kStreamA);  // all done on the GPU; only #0 has an event to say so
      std::unique_ptr<Trace> t = WaitForTrace(mine, [](const Trace& x) {
        if (x.stucks.empty()) return false;
        for (const trace::InFlightOp& o : x.stucks.back()->ops())
          if (o.gpu() == trace::GPU_IN_WINDOW && o.seq() == 4) return true;
        return false;
      });
      if (c.Finalize() != 0) _exit(5);
      _exit(t->stucks.empty() ? 4 : 0);
    }
    ranks.push_back(pid);
  }
  for (pid_t pid : ranks) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  tools::Model m;
  std::string err;
  ASSERT_TRUE(tools::BuildModel({dir_}, tools::LoadOptions(), &m, &err)) << err;
  size_t without = 0;
  for (const tools::Op& op : m.ops) {
    if (op.seq == 0) {
      EXPECT_EQ(op.state, tools::OpState::kCompleted);
    } else {
      EXPECT_TRUE(op.without_event);
      EXPECT_EQ(op.state, tools::OpState::kInFlight);
      ++without;
    }
  }
  EXPECT_EQ(without, 8u);
  const ncclwatch::report::Diagnosis d = tools::Diagnose(m, tools::DiagnoseOptions());
  const std::string text = tools::FormatText(d);
  EXPECT_LT(d.severity(), ncclwatch::report::SEVERITY_WARNING) << text;
  EXPECT_EQ(text.find("STUCK"), std::string::npos) << text;
  EXPECT_EQ(text.find("HANG"), std::string::npos) << text;
  EXPECT_NE(text.find("its GPU was somewhere in AllReduce #1..#4 or past it"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 0: 4 operations launched without CUDA events of their own"), std::string::npos) << text;
}

}  // namespace
}  // namespace ncclwatch::testing
