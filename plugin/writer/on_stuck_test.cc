#include "plugin/writer/on_stuck.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "plugin/core/command_words.h"
#include "plugin/testing/waits.h"

namespace ncclwatch::plugin {
namespace {

using ::ncclwatch::testing::WaitForFile;
using ::ncclwatch::testing::WaitGone;

uint64_t Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string NewDir(const std::string& tag) {
  static int n = 0;
  const std::string d = ::testing::TempDir() + "/on_stuck_" + tag + "_" + std::to_string(getpid()) + "_" +
                        std::to_string(++n);
  EXPECT_EQ(mkdir(d.c_str(), 0700), 0) << d;
  return d;
}

std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> w;
  std::string err;
  EXPECT_TRUE(SplitCommand(text, &w, &err)) << err;
  return w;
}

// Waits until the runner's socket has news (its keeper's report or end).
void WaitForKeeper(const OnStuckRunner& r) {
  pollfd p{r.wait_fd(), POLLIN, 0};
  while (poll(&p, 1, -1) < 0 && errno == EINTR) {
  }
}

// Polls, as the writer's cycle does, each time the keeper has news, until
// the runner reports `kind`.
OnStuckRunner::Event PollUntil(OnStuckRunner* r, OnStuckRunner::Event::Kind kind) {
  for (;;) {
    OnStuckRunner::Event e = r->Poll();
    if (e.kind == kind) return e;
    if (e.kind != OnStuckRunner::Event::kNone) {
      ADD_FAILURE() << "unexpected: " << e.text;
      return e;
    }
    if (r->wait_fd() < 0) {
      ADD_FAILURE() << "the keeper ended without it";
      return {};
    }
    WaitForKeeper(*r);
  }
}

// Then until the keeper is reaped, with nothing more to say. Its end is on
// the socket before the kernel makes it reapable: in between, this loop
// yields.
void PollUntilDone(OnStuckRunner* r) {
  while (r->running()) {
    EXPECT_EQ(r->Poll().kind, OnStuckRunner::Event::kNone);
    if (!r->running()) break;
    WaitForKeeper(*r);
    sched_yield();
  }
  EXPECT_FALSE(r->running());
}

// Waits until `path` holds a whole line; returns it.
std::string FirstLine(const std::string& path) {
  const std::string out =
      WaitForFile(path, [](const std::string& text) { return text.find('\n') != std::string::npos; });
  return out.substr(0, out.find('\n'));
}

struct Job {
  std::string trace;
  std::string out;
  OnStuckRunner runner;
  OnStuckRunner::Event started;
};

// Prepares and starts `command` for a trace named `trace`.
void Start(Job* r, const std::string& trace, const std::string& command, double timeout_sec = 60,
           uint64_t max_bytes = 1 << 20, pid_t pid = 4321, int64_t rank = 7) {
  r->trace = trace;
  r->out = trace + ".on_stuck.txt";
  std::string err;
  ASSERT_TRUE(r->runner.Prepare(Words(command), r->out, 0600, &err)) << err;
  r->started = r->runner.Start(pid, rank, trace, timeout_sec, max_bytes);
  ASSERT_EQ(r->started.kind, OnStuckRunner::Event::kStarted) << r->started.text;
}

TEST(OnStuck, ExecCandidatesFollowExecvp) {
  EXPECT_EQ(ExecCandidates("./x", "/bin"), std::vector<std::string>{"./x"});
  EXPECT_EQ(ExecCandidates("/usr/bin/gdb", "/bin"), std::vector<std::string>{"/usr/bin/gdb"});
  EXPECT_EQ(ExecCandidates("gdb", "/a::/b/"), (std::vector<std::string>{"/a/gdb", "./gdb", "/b//gdb"}));
  EXPECT_EQ(ExecCandidates("gdb", nullptr), (std::vector<std::string>{"/bin/gdb", "/usr/bin/gdb"}));
}

TEST(OnStuck, RunsOnceWithItsOutputBesideTheTrace) {
  Job r;
  Start(&r, NewDir("once") + "/once.ncclwatch",
        "sh -c 'echo pid=$1 rank=$2 file=$3; echo err >&2; exit 3' sh %p %r %f");
  EXPECT_NE(r.started.text.find(r.out), std::string::npos) << r.started.text;
  EXPECT_NE(r.started.text.find("'sh' '-c' 'echo pid=$1"), std::string::npos) << r.started.text;
  OnStuckRunner::Event e = PollUntil(&r.runner, OnStuckRunner::Event::kExited);
  EXPECT_NE(e.text.find("exited with status 3"), std::string::npos) << e.text;
  const std::string want = "pid=4321 rank=7 file=" + r.trace + "\nerr\n";
  EXPECT_EQ(Read(r.out), want);
  EXPECT_NE(e.text.find("(" + std::to_string(want.size()) + " bytes)"), std::string::npos) << e.text;
  PollUntilDone(&r.runner);
  // Once per runner (per process).
  EXPECT_EQ(r.runner.Start(1, 1, r.trace, 60, 1 << 20).kind, OnStuckRunner::Event::kNone);
}

// The trace path is one argument whatever its folder is called, and nothing
// in it runs: each name below would have run `touch` (or split the path)
// when the path was pasted into `sh -c`.
TEST(OnStuck, AHostileFolderNameIsOneArgumentAndRunsNothing) {
  const std::string work = NewDir("hostile");
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(chdir(work.c_str()), 0);  // where a relative `touch` would land
  const std::vector<std::string> names = {"a;touch INJ",     "$(touch INJ)", "`touch INJ`",   "a|touch INJ",
                                          "a&touch INJ",     "a\ntouch INJ", "a b  c\td",     "q'uo\"te\\",
                                          "--x;touch INJ #", "%p %f %%",     "a$IFS;touch INJ"};
  // Without a shell, and through the documented shell form.
  const std::vector<std::string> commands = {"printf %s %f", "sh -c 'printf %s \"$1\"' sh %f"};
  for (const std::string& command : commands) {
    for (const std::string& name : names) {
      SCOPED_TRACE(command + " in folder '" + name + "'");
      const std::string dir = work + "/" + name;
      ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
      Job r;
      Start(&r, dir + "/t.ncclwatch", command);
      PollUntil(&r.runner, OnStuckRunner::Event::kExited);
      EXPECT_EQ(Read(r.out), r.trace);  // byte for byte, one argument
      PollUntilDone(&r.runner);
      EXPECT_NE(access((work + "/INJ").c_str(), F_OK), 0) << "an injected command ran";
      ASSERT_EQ(unlink(r.out.c_str()), 0);
      ASSERT_EQ(rmdir(dir.c_str()), 0);
    }
  }
  ASSERT_EQ(chdir(cwd), 0);
}

// Standard input is /dev/null (a read ends at once), and the command gets no
// descriptor of the host's but 0, 1 and 2.
TEST(OnStuck, StdinIsDevNullAndNoHostDescriptorLeaks) {
  // Not close-on-exec, so a child would inherit it; numbered apart from
  // what sh opens for itself.
  const int null = open("/dev/null", O_RDONLY);
  ASSERT_GE(null, 0);
  const int leak = fcntl(null, F_DUPFD, 100);
  close(null);
  ASSERT_GE(leak, 100);
  Job r;
  Start(&r, NewDir("fds") + "/fds.ncclwatch", "sh -c 'cat; ls /proc/$$/fd | tr \"\\n\" \" \"' sh");
  PollUntil(&r.runner, OnStuckRunner::Event::kExited);
  const std::string out = Read(r.out);
  close(leak);
  // sh's own descriptors; ls's directory is its own (in another process).
  EXPECT_EQ(out.find(" " + std::to_string(leak) + " "), std::string::npos) << out;
  EXPECT_EQ(out.rfind("0 1 2 ", 0), 0u) << out;
  PollUntilDone(&r.runner);
}

TEST(OnStuck, PastItsTimeLimitItsWholeGroupIsKilled) {
  testing::AdoptOrphans();  // orphans come to us, to be reaped
  Job r;
  // A child of the command, in the background: killed with it.
  const uint64_t started = Now();
  Start(&r, NewDir("slow") + "/slow.ncclwatch", "sh -c 'sleep 300 & echo $!; wait'", 0.2);
  OnStuckRunner::Event e = PollUntil(&r.runner, OnStuckRunner::Event::kKilled);
  EXPECT_GE(Now(), started + 200'000'000ull);
  EXPECT_NE(e.text.find("still running after 0.2 s (NCCLWATCH_ON_STUCK_TIMEOUT_SEC): killed its process group"),
            std::string::npos)
      << e.text;
  PollUntilDone(&r.runner);
  const pid_t bg = static_cast<pid_t>(atoi(FirstLine(r.out).c_str()));
  ASSERT_GT(bg, 0);
  EXPECT_TRUE(WaitGone(bg));
}

// When the command ends, what it left in its group is killed at once: an
// `&` child of sh does not outlive it.
TEST(OnStuck, WhatTheCommandLeavesBehindIsKilled) {
  testing::AdoptOrphans();
  Job r;
  Start(&r, NewDir("left") + "/left.ncclwatch", "sh -c 'sleep 300 >/dev/null 2>&1 & echo $!'");
  OnStuckRunner::Event e = PollUntil(&r.runner, OnStuckRunner::Event::kExited);
  EXPECT_NE(e.text.find("exited with status 0"), std::string::npos) << e.text;
  PollUntilDone(&r.runner);
  const pid_t bg = static_cast<pid_t>(atoi(FirstLine(r.out).c_str()));
  ASSERT_GT(bg, 0);
  EXPECT_TRUE(WaitGone(bg));
}

// `yes` writes as fast as it can: the file holds exactly the cap, then one
// line saying so, and `yes` is killed.
TEST(OnStuck, OutputIsCappedAndTheCommandKilled) {
  Job r;
  Start(&r, NewDir("yes") + "/yes.ncclwatch", "yes", 60, 4096);
  OnStuckRunner::Event e = PollUntil(&r.runner, OnStuckRunner::Event::kCut);
  EXPECT_NE(e.text.find("reached 4096 bytes (NCCLWATCH_ON_STUCK_MAX_BYTES): cut there, and its process group killed"),
            std::string::npos)
      << e.text;
  PollUntilDone(&r.runner);
  std::string want;
  while (want.size() < 4096) want += "y\n";
  want += "\n[ncclwatch: output cut at 4096 bytes (NCCLWATCH_ON_STUCK_MAX_BYTES); the command was killed]\n";
  EXPECT_EQ(Read(r.out), want);
}

// The host exits (here without any cleanup, as a crash would): the command
// is killed by its keeper, not left running.
TEST(OnStuck, TheCommandDiesWithTheHost) {
  testing::AdoptOrphans();
  const std::string out = NewDir("host") + "/host.ncclwatch.on_stuck.txt";
  fflush(stdout);
  fflush(stderr);
  const pid_t host = fork();
  ASSERT_GE(host, 0);
  if (host == 0) {
    OnStuckRunner r;
    std::string err;
    std::vector<std::string> w;
    if (!SplitCommand("sh -c 'echo $$; exec sleep 300'", &w, &err)) _exit(2);
    if (!r.Prepare(w, out, 0600, &err)) _exit(3);
    if (r.Start(getpid(), 0, "host.ncclwatch", 600, 1 << 20).kind != OnStuckRunner::Event::kStarted) _exit(4);
    // Until the command is running (its pid is in the file).
    FirstLine(out);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(host, &status, 0), host);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const pid_t sleeper = static_cast<pid_t>(atoi(FirstLine(out).c_str()));
  ASSERT_GT(sleeper, 0);
  EXPECT_TRUE(WaitGone(sleeper)) << "the command outlived its host";
}

// A host that ignores SIGCHLD (its children are reaped by the kernel): the
// command's status still comes through, and the keeper is done all the
// same.
TEST(OnStuck, AHostIgnoringSigchldStillGetsTheStatus) {
  struct sigaction ign, old;
  memset(&ign, 0, sizeof(ign));
  ign.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGCHLD, &ign, &old), 0);
  Job r;
  Start(&r, NewDir("ign") + "/ign.ncclwatch", "sh -c 'exit 5'");
  OnStuckRunner::Event e = PollUntil(&r.runner, OnStuckRunner::Event::kExited);
  EXPECT_NE(e.text.find("exited with status 5"), std::string::npos) << e.text;
  PollUntilDone(&r.runner);
  ASSERT_EQ(sigaction(SIGCHLD, &old, nullptr), 0);
}

TEST(OnStuck, AProgramThatCannotRunIsSaidOnce) {
  const std::string dir = NewDir("missing");
  Job r;
  Start(&r, dir + "/m.ncclwatch", "no-such-program-ncclwatch --x");
  OnStuckRunner::Event e = PollUntil(&r.runner, OnStuckRunner::Event::kFailed);
  EXPECT_EQ(e.text, "NCCLWATCH_ON_STUCK: cannot run 'no-such-program-ncclwatch': No such file or directory");
  PollUntilDone(&r.runner);
  // A file that is not executable; a FIFO as the program (exec refuses it at once).
  const std::string plain = dir + "/plain", fifo = dir + "/fifo";
  ASSERT_EQ(close(open(plain.c_str(), O_WRONLY | O_CREAT, 0644)), 0);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0755), 0);
  for (const std::string& p : {plain, fifo}) {
    Job q;
    Start(&q, dir + "/" + p.substr(p.rfind('/') + 1) + ".ncclwatch", p);
    e = PollUntil(&q.runner, OnStuckRunner::Event::kFailed);
    EXPECT_EQ(e.text, "NCCLWATCH_ON_STUCK: cannot run '" + p + "': Permission denied");
    PollUntilDone(&q.runner);
  }
}

TEST(OnStuck, TheOutputFileIsCreatedWithAnExactMode) {
  const std::string dir = NewDir("mode");
  const mode_t old = umask(000);
  OnStuckRunner a, b;
  std::string err;
  ASSERT_TRUE(a.Prepare({"true"}, dir + "/a", 0600, &err)) << err;
  ASSERT_TRUE(b.Prepare({"true"}, dir + "/b", 0644, &err)) << err;
  umask(old);
  struct stat st;
  ASSERT_EQ(stat((dir + "/a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(stat((dir + "/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
}

// A link planted at the output's name, to a 0600 file: refused, the file
// unchanged, and the command off. A FIFO: refused at once, nothing blocks.
TEST(OnStuck, APlantedOutputNameTurnsTheCommandOff) {
  const std::string dir = NewDir("planted");
  const std::string victim = dir + "/victim";
  {
    std::ofstream v(victim);
    v << "root's";
  }
  ASSERT_EQ(chmod(victim.c_str(), 0600), 0);
  ASSERT_EQ(symlink(victim.c_str(), (dir + "/t.on_stuck.txt").c_str()), 0);
  OnStuckRunner r;
  std::string err;
  EXPECT_FALSE(r.Prepare({"echo", "x"}, dir + "/t.on_stuck.txt", 0600, &err));
  EXPECT_NE(err.find("exists already (a symbolic link): not opened, not followed"), std::string::npos) << err;
  EXPECT_FALSE(r.prepared());
  EXPECT_EQ(r.Start(1, 0, dir + "/t", 60, 1 << 20).kind, OnStuckRunner::Event::kNone);
  EXPECT_EQ(Read(victim), "root's");
  struct stat st;
  ASSERT_EQ(stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);

  ASSERT_EQ(mkfifo((dir + "/f.on_stuck.txt").c_str(), 0666), 0);
  OnStuckRunner f;
  EXPECT_FALSE(f.Prepare({"echo", "x"}, dir + "/f.on_stuck.txt", 0600, &err));
  EXPECT_NE(err.find("(a FIFO)"), std::string::npos) << err;
}

// In a folder another user can write (no sticky bit), the trace's name may
// be swapped for a link to a file only the host's user can read: %f is then
// the command's descriptor 3, which reads the trace the plugin holds open,
// whatever the name points to by the time the command runs.
TEST(OnStuck, ASwappedTraceNameIsNeverFollowed) {
  const std::string dir = NewDir("swap");
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  const std::string trace = dir + "/t.ncclwatch";
  const int fd = open(trace.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "TRACE", 5), 5);
  const std::string victim = NewDir("victim") + "/secret";
  std::ofstream(victim) << "SECRET";
  ASSERT_EQ(chmod(victim.c_str(), 0600), 0);
  OnStuckRunner r;
  std::string err, note;
  ASSERT_TRUE(r.Prepare(Words("sh -c 'cat \"$1\"; printf \" %s\" \"$1\"' sh %f"), trace + ".on_stuck.txt", 0600,
                        &err, fd, trace, &note))
      << err;
  EXPECT_NE(note.find("%f is /proc/self/fd/3"), std::string::npos) << note;
  EXPECT_NE(note.find(dir), std::string::npos) << note;
  // The swap, after start-up and before the hang.
  ASSERT_EQ(rename(trace.c_str(), (dir + "/moved").c_str()), 0);
  ASSERT_EQ(symlink(victim.c_str(), trace.c_str()), 0);
  ASSERT_EQ(write(fd, "+MORE", 5), 5);  // written after the swap: the same file
  EXPECT_EQ(r.Start(1, 0, trace, 60, 1 << 20).kind, OnStuckRunner::Event::kStarted);
  PollUntil(&r, OnStuckRunner::Event::kExited);
  EXPECT_EQ(Read(trace + ".on_stuck.txt"), "TRACE+MORE /proc/self/fd/3");
  PollUntilDone(&r);
  close(fd);
}

// Where no other user can change the folders on the way (ours, or sticky),
// %f stays the trace's path; a command without %f gets no descriptor 3.
TEST(OnStuck, ASafeFolderKeepsThePath) {
  for (mode_t mode : {0700, 01777}) {
    SCOPED_TRACE(mode);
    const std::string dir = NewDir("safe");
    ASSERT_EQ(chmod(dir.c_str(), mode), 0);
    const std::string trace = dir + "/t.ncclwatch";
    const int fd = open(trace.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    OnStuckRunner r;
    std::string err, note;
    ASSERT_TRUE(r.Prepare(Words("printf %s %f"), trace + ".on_stuck.txt", 0600, &err, fd, trace, &note)) << err;
    EXPECT_EQ(note, "");
    r.Start(1, 0, trace, 60, 1 << 20);
    PollUntil(&r, OnStuckRunner::Event::kExited);
    EXPECT_EQ(Read(trace + ".on_stuck.txt"), trace);
    PollUntilDone(&r);
    close(fd);
  }
  const std::string open_dir = NewDir("nof");
  ASSERT_EQ(chmod(open_dir.c_str(), 0777), 0);
  const std::string trace = open_dir + "/t.ncclwatch";
  const int fd = open(trace.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  OnStuckRunner r;
  std::string err, note;
  ASSERT_TRUE(r.Prepare(Words("sh -c 'ls /proc/$$/fd | tr \"\\n\" \" \"' sh"), trace + ".on_stuck.txt", 0600,
                        &err, fd, trace, &note))
      << err;
  EXPECT_EQ(note, "");
  r.Start(1, 0, trace, 60, 1 << 20);
  PollUntil(&r, OnStuckRunner::Event::kExited);
  EXPECT_EQ(Read(trace + ".on_stuck.txt").find(" 3 "), std::string::npos) << Read(trace + ".on_stuck.txt");
  PollUntilDone(&r);
  close(fd);
}

}  // namespace
}  // namespace ncclwatch::plugin
