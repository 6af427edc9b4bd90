// The `ncclwatch watch` binary in a process of its own, as a job script
// runs it: it waits for files that appear later, and SIGTERM or SIGINT end
// it at once, in the middle of a long sleep between polls, with the
// verdict on what it read and that verdict's exit status.

#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

std::string TempDir() {
  std::string base = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  std::string tmpl = base + "/watch_cliXXXXXX";
  char* d = mkdtemp(&tmpl[0]);
  return d ? std::string(d) : base;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

const std::vector<std::string> kSkipFiles = {
    "vm-956-1795300952939.ncclwatch", "vm-957-1795300952937.ncclwatch", "vm-959-1795300952939.ncclwatch",
    "vm-961-1795300952938.ncclwatch"};

// `ncclwatch` with `args`, its standard output and error into files.
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::string& dir) : out_(dir + "/out"), err_(dir + "/err") {
    std::vector<std::string> argv = {"tools/ncclwatch"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(&a[0]);
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    // Signals as a shell's background job would get them: not ignored.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    EXPECT_EQ(posix_spawn(&pid_, cargv[0], &fa, &attr, cargv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // Waits until its standard error holds `text`; false once it has exited
  // without writing it. Blocks on the file's writes and the child's exit,
  // no clock: a hang is ended by the test's timeout.
  bool WaitForErr(const std::string& text) {
    const int writes = inotify_init1(IN_CLOEXEC);
    const int exited = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
    EXPECT_GE(writes, 0);
    EXPECT_GE(exited, 0);
    EXPECT_GE(inotify_add_watch(writes, err_.c_str(), IN_MODIFY), 0);
    bool found = false;
    for (;;) {
      // Read after the watch is set: a write between the two is not missed.
      found = ReadFile(err_).find(text) != std::string::npos;
      if (found) break;
      pollfd fds[2] = {{writes, POLLIN, 0}, {exited, POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) break;
      if (fds[1].revents != 0) {
        found = ReadFile(err_).find(text) != std::string::npos;
        break;
      }
      char events[4096];
      if (read(writes, events, sizeof(events)) < 0) break;
    }
    close(writes);
    close(exited);
    return found;
  }
  // Its exit status.
  int Wait() {
    int st = 0;
    if (waitpid(pid_, &st, 0) != pid_) return -1;
    reaped_ = true;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  pid_t pid() const { return pid_; }
  std::string out() const { return ReadFile(out_); }
  std::string err() const { return ReadFile(err_); }

 private:
  std::string out_, err_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// Files of a job still running: each rank's first 1,500 bytes.
std::string LiveDir() {
  const std::string dir = TempDir() + "/traces";
  mkdir(dir.c_str(), 0755);
  for (const std::string& f : kSkipFiles)
    std::ofstream(dir + "/" + f, std::ios::binary) << ReadFile("testdata/gpu/skip/" + f).substr(0, 1500);
  return dir;
}

TEST(WatchCli, AStopSignalEndsALongSleepWithTheVerdictOnWhatWasRead) {
  for (int sig : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(sig);
    const std::string dir = LiveDir();
    // Polls an hour apart: only the signal can end the sleep in time.
    Child c({"watch", "--interval", "3600", dir}, TempDir());
    ASSERT_TRUE(c.WaitForErr("ncclwatch watch: watching 4 files (4 processes)")) << c.err();
    ASSERT_EQ(kill(c.pid(), sig), 0);
    const int status = c.Wait();
    ASSERT_NE(status, -1) << "still running after the signal; stderr:\n" << c.err();
    EXPECT_NE(c.err().find(sig == SIGINT ? "SIGINT: the verdict on what was read" : "SIGTERM: the verdict on what was read"),
              std::string::npos)
        << c.err();
    // The verdict on those files is diagnose's on them.
    Child d({"diagnose", dir}, TempDir());
    EXPECT_EQ(status, d.Wait());
    EXPECT_EQ(c.out(), d.out());
    EXPECT_FALSE(c.out().empty());
  }
}

TEST(WatchCli, FilesThatAppearLaterAreFollowedToTheEnd) {
  const std::string dir = TempDir() + "/traces";
  mkdir(dir.c_str(), 0755);
  Child c({"watch", "--interval", "0.05", dir}, TempDir());
  ASSERT_TRUE(c.WaitForErr("ncclwatch watch: waiting: no trace file yet")) << c.err();
  // The ranks start: their files grow, then end (the job was aborted).
  for (const std::string& f : kSkipFiles)
    std::ofstream(dir + "/" + f, std::ios::binary) << ReadFile("testdata/gpu/skip/" + f).substr(0, 700);
  ASSERT_TRUE(c.WaitForErr("ncclwatch watch: watching 4 files (4 processes)")) << c.err();
  for (const std::string& f : kSkipFiles)
    std::ofstream(dir + "/" + f, std::ios::binary | std::ios::app) << ReadFile("testdata/gpu/skip/" + f).substr(700);
  const int status = c.Wait();
  ASSERT_NE(status, -1) << c.err();
  Child d({"diagnose", "testdata/gpu/skip"}, TempDir());
  EXPECT_EQ(status, d.Wait());
  EXPECT_EQ(status, 1);
  EXPECT_EQ(FirstLine(c.out()), FirstLine(d.out()));
}

}  // namespace
