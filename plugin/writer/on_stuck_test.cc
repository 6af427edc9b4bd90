#include "plugin/writer/on_stuck.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace ncclwatch::plugin {
namespace {

uint64_t Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Polls until the runner reports `kind`: the writer's cycle, without its
// period. The bound is only against a hang.
OnStuckRunner::Event PollUntil(OnStuckRunner* r, OnStuckRunner::Event::Kind kind) {
  const uint64_t give_up = Now() + 120'000'000'000ull;
  while (Now() < give_up) {
    OnStuckRunner::Event e = r->Poll(Now());
    if (e.kind == kind) return e;
    if (e.kind != OnStuckRunner::Event::kNone) {
      ADD_FAILURE() << "unexpected: " << e.text;
      return e;
    }
    usleep(1000);
  }
  ADD_FAILURE() << "never happened";
  return {};
}

TEST(OnStuck, Substitutes) {
  EXPECT_EQ(ExpandOnStuck("py-spy dump --pid %p > %f.%r.txt", 1234, 3, "/t/a.ncclwatch"),
            "py-spy dump --pid 1234 > /t/a.ncclwatch.3.txt");
  EXPECT_EQ(ExpandOnStuck("100%% %x %", 1, -1, "f"), "100% %x %");
  EXPECT_EQ(ExpandOnStuck("%r", 1, -1, "f"), "-1");
}

TEST(OnStuck, RunsOnceWithItsOutputBesideTheTrace) {
  const std::string trace = ::testing::TempDir() + "/once.ncclwatch";
  OnStuckRunner r;
  OnStuckRunner::Event e = r.Start("echo pid=%p rank=%r file=%f; echo err >&2; exit 3", 4321, 7, trace, 60, Now());
  ASSERT_EQ(e.kind, OnStuckRunner::Event::kStarted) << e.text;
  EXPECT_NE(e.text.find(trace + ".on_stuck.txt"), std::string::npos) << e.text;
  e = PollUntil(&r, OnStuckRunner::Event::kExited);
  EXPECT_NE(e.text.find("exited with status 3"), std::string::npos) << e.text;
  EXPECT_EQ(Read(trace + ".on_stuck.txt"), "pid=4321 rank=7 file=" + trace + "\nerr\n");
  EXPECT_FALSE(r.running());
  // Once per runner (per process).
  EXPECT_EQ(r.Start("echo again", 1, 1, trace, 60, Now()).kind, OnStuckRunner::Event::kNone);
}

TEST(OnStuck, PastItsTimeLimitItsWholeGroupIsKilled) {
  const std::string trace = ::testing::TempDir() + "/slow.ncclwatch";
  OnStuckRunner r;
  // A child of the command, in the background: killed with it.
  const uint64_t started = Now();
  OnStuckRunner::Event e = r.Start("sleep 300 & echo $!; wait", 1, 0, trace, 0.2, started);
  ASSERT_EQ(e.kind, OnStuckRunner::Event::kStarted) << e.text;
  e = PollUntil(&r, OnStuckRunner::Event::kKilled);
  EXPECT_GE(Now(), started + 200'000'000ull);
  EXPECT_NE(e.text.find("killed its process group"), std::string::npos) << e.text;
  // The shell is reaped by a later poll, with nothing more to say.
  const uint64_t give_up = Now() + 120'000'000'000ull;
  while (r.running() && Now() < give_up) {
    EXPECT_EQ(r.Poll(Now()).kind, OnStuckRunner::Event::kNone);
    usleep(1000);
  }
  EXPECT_FALSE(r.running());
  // The background sleep is gone too (it is not our child: kill(pid, 0)).
  std::string out;
  while (out.find('\n') == std::string::npos && Now() < give_up) out = Read(trace + ".on_stuck.txt");
  const pid_t bg = static_cast<pid_t>(atoi(out.c_str()));
  ASSERT_GT(bg, 0) << out;
  while (kill(bg, 0) == 0 && Now() < give_up) usleep(1000);
  EXPECT_EQ(kill(bg, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST(OnStuck, AnUnwritableOutputIsTheCommandsFailureNotOurs) {
  OnStuckRunner r;
  OnStuckRunner::Event e = r.Start("echo hi", 1, 0, "/nonexistent-dir/x.ncclwatch", 60, Now());
  // posix_spawn reports the failed open of its output (glibc), or the
  // child exits 127: never a crash, never a wait.
  if (e.kind == OnStuckRunner::Event::kStarted) {
    e = PollUntil(&r, OnStuckRunner::Event::kExited);
    EXPECT_EQ(e.text.find("status 0"), std::string::npos) << e.text;
  } else {
    EXPECT_EQ(e.kind, OnStuckRunner::Event::kFailed);
    EXPECT_NE(e.text.find("cannot start"), std::string::npos) << e.text;
  }
}

}  // namespace
}  // namespace ncclwatch::plugin
