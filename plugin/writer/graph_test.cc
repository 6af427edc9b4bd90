// Collectives captured into a CUDA graph, on the fake host as NCCL 2.28 to
// 2.32 run them (docs/nccl_call_order.md): at capture, the API events and a
// KernelLaunch only; at each replay, from CUDA's host-callback thread, the
// plan's Group and ops under the capture's CollApi handle, then their kernel
// channels. The plugin gives a captured CollApi a handle of its own
// (CapturedApiToken), so that NCCL numbers each replay apart where kernel
// channels are asked for and the plugin knows its ops came from a graph.
// Two ranks: a job whose every replay completed reads OK; a replay that one
// rank never ran is named as the hang, as an operation from a CUDA graph.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "plugin/testing/fake_nccl_host.h"
#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"

namespace ncclwatch::testing {
namespace {

constexpr int kReplays = 3;

// One rank's job: two eager all-reduces, a capture, kReplays replays (rank
// `skipper` stops before replay `skip`, and the other rank's replay `skip`
// never ends), then two eager all-reduces. Exits 0 when NCCL would have
// numbered every replay apart.
int RunRank(const std::string& dir, int rank, int skipper, int skip) {
  const std::string mine = dir + "/rank" + std::to_string(rank);
  mkdir(mine.c_str(), 0755);
  // Kernel channels give completions here, as they do for a replay on a GPU.
  SetPluginEnv({{"NCCLWATCH_DIR", mine}, {"NCCLWATCH_COMPLETIONS", "channels"}, {"RANK", std::to_string(rank)},
                {"WORLD_SIZE", "2"}});
  FakeComm c(PluginLib::FreshCopy(), 5);
  if (c.Init(0x6a40, "world", 2, 2, rank) != 0) return 3;
  uint64_t seq = 0;
  auto eager = [&] {
    OpSpec s;
    s.seq = seq;
    if (c.RunOp(s).counted) ++seq;
  };
  eager();
  eager();
  OpSpec capture;
  capture.seq = seq;
  capture.captured = [](void*) { return true; };
  capture.defer_to_replays = true;
  const OpResult captured = c.RunOp(capture);
  if (captured.api == nullptr) return 5;  // the plugin gave no handle: replays share a number
  for (int i = 0; i < kReplays; ++i) {
    if (rank == skipper && i == skip) break;
    OpSpec replay;
    replay.seq = seq;
    replay.replay = true;
    replay.replay_api = captured.api;
    replay.kernel_runs = !(rank != skipper && i == skip);
    OpResult r;
    // CUDA's host-callback thread runs each replay's hostStreamPlanTask.
    std::thread callback([&] { r = c.RunOp(replay); });
    callback.join();
    if (!r.counted) return 6;
    ++seq;
    if (!replay.kernel_runs) return c.Finalize() == 0 ? 0 : 4;  // ended while stuck in it
  }
  if (skip >= 0) return c.Finalize() == 0 ? 0 : 4;  // the skipper leaves
  eager();
  eager();
  return c.Finalize() == 0 ? 0 : 4;
}

void RunJob(const std::string& dir, int skipper, int skip) {
  for (int r = 0; r < 2; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) _exit(RunRank(dir, r, skipper, skip));
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << r << " status " << status;
  }
}

TEST(Graph, EveryReplayProvenCompleteReadsOk) {
  const std::string dir = MakeTempDir("graph_ok");
  RunJob(dir, -1, -1);
  tools::Model m;
  std::string err;
  ASSERT_TRUE(tools::BuildModel({dir}, tools::LoadOptions(), &m, &err)) << err;
  for (const tools::Proc& p : m.procs) {
    EXPECT_EQ(p.graph_ops.size(), size_t{kReplays}) << p.path;
    EXPECT_EQ(p.graph_repeats, 0u) << p.path;
    EXPECT_FALSE(p.damaged) << p.path;
  }
  tools::DiagnoseOptions o;
  o.straggler_min_collectives = 1 << 30;  // the ranks run one after the other here
  const report::Diagnosis d = tools::Diagnose(m, o);
  EXPECT_EQ(d.verdict().rfind("OK", 0), 0u) << tools::FormatText(d);
}

TEST(Graph, AReplayOneRankNeverRanIsTheHang) {
  const std::string dir = MakeTempDir("graph_hang");
  RunJob(dir, /*skipper=*/1, /*skip=*/1);
  tools::Model m;
  std::string err;
  ASSERT_TRUE(tools::BuildModel({dir}, tools::LoadOptions(), &m, &err)) << err;
  const report::Diagnosis d = tools::Diagnose(m, tools::DiagnoseOptions());
  const std::string v = d.verdict();
  // Eager #0, #1, replays #2 and #3: rank 1 left before the second replay,
  // which rank 0 never finished.
  EXPECT_NE(v.find("rank 0 ended with it without finishing, in AllReduce #3 (from a CUDA graph)"), std::string::npos)
      << tools::FormatText(d);
  EXPECT_NE(v.find("rank 1 ended first"), std::string::npos) << v;
  EXPECT_EQ(v.find("INCOMPLETE"), std::string::npos) << v;
}

}  // namespace
}  // namespace ncclwatch::testing
