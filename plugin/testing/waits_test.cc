#include "plugin/testing/waits.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace ncclwatch::testing {
namespace {

std::string NewDir(const std::string& tag) {
  const std::string d = ::testing::TempDir() + "/waits_" + tag + "_" + std::to_string(getpid());
  EXPECT_EQ(mkdir(d.c_str(), 0700), 0) << d;
  return d;
}

// A file another thread creates and then completes: the wait returns its
// whole text, woken by the changes.
TEST(WaitsTest, WaitForFileSeesAFileComeAndGrow) {
  const std::string path = NewDir("file") + "/f.txt";
  std::thread writer([&] {
    std::ofstream out(path);
    out << "first" << std::flush;
    out << " line\n" << std::flush;
  });
  const std::string text =
      WaitForFile(path, [](const std::string& s) { return s.find('\n') != std::string::npos; });
  writer.join();
  EXPECT_EQ(text, "first line\n");
}

TEST(WaitsTest, WaitUntilChecksFirstAndAfterEachChange) {
  const std::string dir = NewDir("until");
  DirWatch w(dir);
  int checks = 0;
  WaitUntil([&] { return ++checks > 0; }, {w.fd()});
  EXPECT_EQ(checks, 1) << "a state that holds already needs no change";
  bool made = false;
  std::thread maker([&] { std::ofstream(dir + "/x") << "x"; });
  WaitUntil([&] { return made = access((dir + "/x").c_str(), F_OK) == 0; }, {w.fd()});
  maker.join();
  EXPECT_TRUE(made);
}

// A child that ends, one that is killed, and a pid that is gone already.
TEST(WaitsTest, WaitGoneReapsItsChildren) {
  const pid_t quick = fork();
  ASSERT_GE(quick, 0);
  if (quick == 0) _exit(0);
  EXPECT_TRUE(WaitGone(quick));
  int status;
  EXPECT_EQ(waitpid(quick, &status, WNOHANG), -1) << "reaped";
  const pid_t slow = fork();
  ASSERT_GE(slow, 0);
  if (slow == 0) {
    pause();
    _exit(0);
  }
  ASSERT_EQ(kill(slow, SIGKILL), 0);
  EXPECT_TRUE(WaitGone(slow));
  EXPECT_TRUE(WaitGone(slow)) << "gone already";
}

}  // namespace
}  // namespace ncclwatch::testing
