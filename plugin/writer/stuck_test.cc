// An operation that never completes (one kernel channel never stops, proxy
// operations stop mid-step) makes the plugin write a StuckReport with its
// live progress.

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <map>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "plugin/abi/profiler_common.h"
#include "plugin/testing/fake_nccl_host.h"
#include "plugin/testing/waits.h"
#include "proto/trace.pb.h"

namespace ncclwatch::testing {
namespace {

// Runs `nsteps_done` complete steps of a ProxyOp, then starts one more and
// leaves it in `states` (or stops the ProxyOp if `finish`).
void* Proxy(FakeComm& c, void* op, int channel, int peer, bool is_send, int nsteps, int nsteps_done,
            const std::vector<int>& states, bool finish) {
  Ev e;
  e.type = nccl::kProxyOp;
  e.parent = op;
  e.pid = getpid();
  e.channel = static_cast<uint8_t>(channel);
  e.peer = peer;
  e.nsteps = nsteps;
  e.chunk_size = 1 << 17;
  e.is_send = is_send;
  void* px = c.Start(e);
  EXPECT_NE(px, nullptr) << "a ProxyOp serving a tracked op gets a handle";
  c.State(px, nccl::kProxyOpInProgress);
  auto full = is_send ? std::vector<int>{nccl::kProxyStepSendGPUWait, nccl::kProxyStepSendPeerWait,
                                         nccl::kProxyStepSendWait}
                      : std::vector<int>{nccl::kProxyStepRecvWait, nccl::kProxyStepRecvFlushWait,
                                         nccl::kProxyStepRecvGPUWait};
  for (int step = 0; step < nsteps_done; ++step) {
    Ev s;
    s.type = nccl::kProxyStep;
    s.parent = px;
    s.step = step;
    void* sh = c.Start(s);
    for (int x : full) c.State(sh, x, StArgs{1024});
    c.Stop(sh);
  }
  if (finish) {
    c.Stop(px);
    return px;
  }
  Ev s;
  s.type = nccl::kProxyStep;
  s.parent = px;
  s.step = nsteps_done;
  void* sh = c.Start(s);
  for (int x : states) c.State(sh, x, StArgs{512});
  return px;
}

// Sets up the stuck op on `c`; returns it enqueued.
void MakeStuckOp(FakeComm& c) {
  void* op = c.Start(AllReduceEv(2));
  ASSERT_NE(op, nullptr);
  c.Stop(op);  // enqueued
  Ev k;
  k.type = nccl::kKernelCh;
  k.parent = op;
  k.channel = 0;
  k.ptimer = 1'000'000;
  void* k0 = c.Start(k);
  k.channel = 1;
  k.ptimer = 1'000'100;
  void* k1 = c.Start(k);
  ASSERT_NE(k0, nullptr);
  ASSERT_NE(k1, nullptr);
  StArgs a;
  a.ptimer = 1'005'000;
  c.State(k0, nccl::kKernelChStop, a);
  c.Stop(k0);  // channel 1 never stops
  Proxy(c, op, 0, 3, true, 8, 2, {nccl::kProxyStepSendGPUWait, nccl::kProxyStepSendPeerWait}, false);
  Proxy(c, op, 1, 0, false, 8, 1, {nccl::kProxyStepRecvWait}, false);
  Proxy(c, op, 1, 2, true, 2, 2, {}, true);
}

TEST(Stuck, ReportListsTheStuckOpWithItsProgress) {
  const std::string dir = MakeTempDir("stuck");
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_STUCK_SEC", "0.2"},
                {"NCCLWATCH_FLUSH_MS", "20"},
                {"NCCLWATCH_HEARTBEAT_MS", "50"}});
  ClearLogs();
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0x57AC, "stuck", 2, 4, 1), 0);
  // A healthy op first: it completes and is never reported.
  OpSpec ok;
  ok.seq = 1;
  c.RunOp(ok);
  const uint64_t t0 = MonoNs();
  MakeStuckOp(c);
  if (HasFatalFailure()) return;

  std::unique_ptr<Trace> t = WaitForTrace(dir, [](const Trace& x) { return !x.stucks.empty(); });
  ASSERT_FALSE(t->stucks.empty());
  // Not before the threshold: the report is stamped 0.2 s or more after the op began.
  EXPECT_GE(t->header->mono_base_ns() + t->stucks[0]->time_ns(), t0 + 199'000'000);  // 1 ms for TSC conversion
  // Five thresholds on: still one report per stuck op, heartbeats keep coming.
  t = WaitForTrace(dir, [&](const Trace& x) { return WriterPast(x, t0 + 1'000'000'000); });
  EXPECT_TRUE(t->raw.only_cut_tail);
  ASSERT_EQ(t->stucks.size(), 1u);
  const trace::StuckReport& r = *t->stucks[0];
  EXPECT_DOUBLE_EQ(r.threshold_sec(), 0.2);

  // The stuck op's Op record.
  const trace::Op* stuck_op = nullptr;
  for (const OpView& o : t->ops)
    if (o.op->seq() == 2) stuck_op = o.op;
  ASSERT_NE(stuck_op, nullptr);
  ASSERT_NE(stuck_op->event_id(), 0u);
  EXPECT_EQ(r.trigger_event_id(), stuck_op->event_id());

  ASSERT_EQ(r.ops_size(), 1) << r.DebugString();
  const trace::InFlightOp& f = r.ops(0);
  EXPECT_EQ(f.event_id(), stuck_op->event_id());
  EXPECT_EQ(f.comm(), stuck_op->comm());
  EXPECT_EQ(f.kind(), trace::OP_KIND_COLL);
  EXPECT_EQ(f.seq(), 2u);
  EXPECT_EQ(t->Str(f.func()), "AllReduce");
  EXPECT_EQ(f.count(), 4096u);
  EXPECT_GE(f.age_ns(), 200'000'000u);
  EXPECT_LT(f.age_ns(), 5'000'000'000u);
  EXPECT_TRUE(f.enqueued());
  EXPECT_EQ(f.nchannels(), 2u);
  EXPECT_EQ(f.kernel_channels_started(), 2u);
  EXPECT_EQ(f.kernel_channels_stopped(), 1u);
  EXPECT_EQ(f.proxy_ops_started(), 3u);
  EXPECT_EQ(f.proxy_ops_stopped(), 1u);
  // channel, peer -> progress
  std::map<std::pair<uint32_t, int>, const trace::ProxyProgress*> px;
  for (const trace::ProxyProgress& p : f.proxy()) px[{p.channel(), p.peer()}] = &p;
  ASSERT_EQ(px.size(), 3u) << f.DebugString();
  ASSERT_EQ(px.count({0, 3}), 1u);
  ASSERT_EQ(px.count({1, 0}), 1u);
  ASSERT_EQ(px.count({1, 2}), 1u);
  const trace::ProxyProgress& send = *px[{0, 3}];
  EXPECT_TRUE(send.is_send());
  EXPECT_EQ(send.nsteps(), 8);
  EXPECT_EQ(send.last_step(), 2);
  EXPECT_EQ(send.last_state(), static_cast<uint32_t>(nccl::kProxyStepSendPeerWait));
  EXPECT_FALSE(send.stopped());
  const trace::ProxyProgress& recv = *px[{1, 0}];
  EXPECT_FALSE(recv.is_send());
  EXPECT_EQ(recv.nsteps(), 8);
  EXPECT_EQ(recv.last_step(), 1);
  EXPECT_EQ(recv.last_state(), static_cast<uint32_t>(nccl::kProxyStepRecvWait));
  EXPECT_FALSE(recv.stopped());
  const trace::ProxyProgress& done = *px[{1, 2}];
  EXPECT_TRUE(done.is_send());
  EXPECT_EQ(done.nsteps(), 2);
  EXPECT_EQ(done.last_step(), 1);
  EXPECT_EQ(done.last_state(), static_cast<uint32_t>(nccl::kProxyStepSendWait));
  EXPECT_TRUE(done.stopped());
  for (const trace::ProxyProgress& p : f.proxy()) {
    EXPECT_GT(p.last_update_ns(), 0u);
    EXPECT_LE(p.last_update_ns(), r.time_ns());
  }

  // Heartbeats every 50 ms, counting the op in flight.
  EXPECT_GE(t->heartbeats.size(), 5u);
  ASSERT_FALSE(t->heartbeats.empty());
  EXPECT_EQ(t->heartbeats.back()->ops_in_flight(), 1u);
  // One warning through NCCL's logger.
  std::vector<std::string> w = Warnings();
  ASSERT_EQ(w.size(), 1u) << ::testing::PrintToString(w);

  ASSERT_EQ(c.Finalize(), 0);
  t = ReadSingleTrace(dir);
  EXPECT_TRUE(t->raw.issues.empty()) << ::testing::PrintToString(t->raw.issues);
  EXPECT_EQ(t->stucks.size(), 1u);
  ASSERT_EQ(t->comm_finalizes.size(), 1u);
  EXPECT_EQ(t->comm_finalizes[0]->ops_enqueued(), 2u);
  EXPECT_EQ(t->comm_finalizes[0]->ops_completed(), 1u);
  ASSERT_EQ(t->finalizes.size(), 1u);
}

// NCCLWATCH_ON_STUCK runs once, at the first stuck report, with the pid,
// the rank (here the communicator's: no launcher rank) and the trace file
// substituted, its output beside the trace; NCCL's threads never wait.
TEST(Stuck, OnStuckRunsItsCommandOnce) {
  const std::string dir = MakeTempDir("onstuck");
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_STUCK_SEC", "0.2"},
                {"NCCLWATCH_FLUSH_MS", "20"},
                {"NCCLWATCH_HEARTBEAT_MS", "50"},
                {"NCCLWATCH_ON_STUCK", "echo pid=%p rank=%r file=%f"}});
  for (const char* v : {"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) unsetenv(v);
  ClearLogs();
  FakeComm c(PluginLib::FreshCopy(), 5);
  ASSERT_EQ(c.Init(0x5700, "onstuck", 2, 4, 1), 0);
  MakeStuckOp(c);
  if (HasFatalFailure()) return;
  std::unique_ptr<Trace> t = WaitForTrace(dir, [](const Trace& x) { return !x.stucks.empty(); });
  ASSERT_FALSE(t->stucks.empty());
  const std::string out = t->raw.path + ".on_stuck.txt";
  auto finished = [] {
    for (const LogLine& l : Logs())
      if (l.text.find("NCCLWATCH_ON_STUCK: exited with status 0") != std::string::npos) return true;
    return false;
  };
  WaitForLog("NCCLWATCH_ON_STUCK: exited with status 0");
  ASSERT_TRUE(finished());
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "pid=" + std::to_string(getpid()) + " rank=1 file=" + t->raw.path + "\n");
  // A second stuck operation: another report, no second run.
  MakeStuckOp(c);
  t = WaitForTrace(dir, [](const Trace& x) { return x.stucks.size() >= 2; });
  ASSERT_GE(t->stucks.size(), 2u);
  int started = 0;
  for (const LogLine& l : Logs())
    if (l.text.find("NCCLWATCH_ON_STUCK: started") != std::string::npos) ++started;
  EXPECT_EQ(started, 1);
  ASSERT_EQ(c.Finalize(), 0);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// End to end, in a host process of its own: the trace folder's name is
// hostile, yet the command gets the trace path as one argument and nothing
// in the name runs; the host's finalize returns while the command still
// runs (it never waits for it); and when the host exits, the command dies.
TEST(Stuck, OnStuckInAHostileFolderRunsNothingElseAndDiesWithTheHost) {
  AdoptOrphans();  // the command's remains come to us
  const std::string work = MakeTempDir("hostile");
  const std::string dir = work + "/a;touch INJ1 $(touch INJ2) `touch INJ3`|touch INJ4&touch INJ5\ntouch INJ6 'q\"";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_STUCK_SEC", "0.2"},
                {"NCCLWATCH_FLUSH_MS", "20"},
                {"NCCLWATCH_HEARTBEAT_MS", "50"},
                {"NCCLWATCH_ON_STUCK", "sh -c 'printf \"%%s#END#\" \"$1\"; echo $$; exec sleep 300' sh %f"}});
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(chdir(work.c_str()), 0);  // where an injected relative `touch` would land
  fflush(stdout);
  fflush(stderr);
  const pid_t host = fork();
  ASSERT_GE(host, 0);
  if (host == 0) {
    FakeComm c(PluginLib::FreshCopy(), 5);
    if (c.Init(0x5701, "hostile", 2, 4, 1) != 0) _exit(2);
    MakeStuckOp(c);
    std::unique_ptr<Trace> t = WaitForTrace(dir, [](const Trace& x) { return !x.stucks.empty(); });
    const std::string out = t->raw.path + ".on_stuck.txt";
    // The path holds a newline itself: the pid's line ends after the mark.
    auto pid_line = [](const std::string& text) {
      const size_t mark = text.find("#END#");
      return mark != std::string::npos && text.find('\n', mark) != std::string::npos ? text.substr(mark + 5) : "";
    };
    const std::string text = WaitForFile(out, [&](const std::string& x) { return !pid_line(x).empty(); });
    const pid_t sleeper = static_cast<pid_t>(atoi(pid_line(text).c_str()));
    if (sleeper <= 0) _exit(3);
    if (c.Finalize() != 0) _exit(4);
    // Finalize returned while the command runs on: it did not wait for it.
    _exit(kill(sleeper, 0) == 0 ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(host, &status, 0), host);
  ASSERT_EQ(chdir(cwd), 0);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  ASSERT_EQ(WEXITSTATUS(status), 0);
  std::vector<std::string> traces = TraceFiles(dir);
  ASSERT_EQ(traces.size(), 1u);
  const std::string text = ReadAll(traces[0] + ".on_stuck.txt");
  const size_t mark = text.find("#END#");
  ASSERT_NE(mark, std::string::npos) << text;
  EXPECT_EQ(text.substr(0, mark), traces[0]);  // byte for byte, one argument
  for (const char* inj : {"INJ1", "INJ2", "INJ3", "INJ4", "INJ5", "INJ6"})
    EXPECT_NE(access((work + "/" + inj).c_str(), F_OK), 0) << inj << " was created: an injected command ran";
  const pid_t sleeper = static_cast<pid_t>(atoi(text.c_str() + mark + 5));
  ASSERT_GT(sleeper, 0);
  EXPECT_TRUE(WaitGone(sleeper)) << "the command outlived its host";
}

TEST(Stuck, NoReportWhenOff) {
  const std::string dir = MakeTempDir("stuck-off");
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_STUCK_SEC", "0"},
                {"NCCLWATCH_FLUSH_MS", "20"},
                {"NCCLWATCH_HEARTBEAT_MS", "50"}});
  ClearLogs();
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0x57AD, "stuck-off", 1, 4, 1), 0);
  const uint64_t t0 = MonoNs();
  MakeStuckOp(c);
  // Until the writer has run twice the 0.2 s the test above reports at.
  WaitForTrace(dir, [&](const Trace& x) { return WriterPast(x, t0 + 400'000'000); });
  ASSERT_EQ(c.Finalize(), 0);
  auto t = ReadSingleTrace(dir);
  EXPECT_TRUE(t->stucks.empty());
  EXPECT_TRUE(Warnings().empty());
}

}  // namespace
}  // namespace ncclwatch::testing
