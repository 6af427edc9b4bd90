// Faults around the plugin, each with the host program going on unharmed and
// the loss visible: fork() in the host process, a file-size limit reached
// mid-run (as a full disk would), and a communicator finalized (aborted) with
// an operation in flight.

#include <gtest/gtest.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "plugin/core/config.h"
#include "plugin/core/core.h"
#include "plugin/testing/fake_nccl_host.h"
#include "plugin/testing/waits.h"
#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"

// Built with ThreadSanitizer? (gcc says __SANITIZE_THREAD__, clang __has_feature.)
#if defined(__SANITIZE_THREAD__)
#define NCCLWATCH_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NCCLWATCH_TSAN 1
#endif
#endif
#ifndef NCCLWATCH_TSAN
#define NCCLWATCH_TSAN 0
#endif
#if defined(__SANITIZE_ADDRESS__)
#define NCCLWATCH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NCCLWATCH_ASAN 1
#endif
#endif
#ifndef NCCLWATCH_ASAN
#define NCCLWATCH_ASAN 0
#endif

namespace ncclwatch::testing {
namespace {

// Waits for `pid` to exit (a hang is Bazel's timeout); returns the wait
// status.
int WaitFor(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// The size of the single file in `dir` (0 if none yet).
uint64_t FileSizeIn(const std::string& dir) {
  std::vector<std::string> files = TraceFiles(dir);
  struct stat st;
  if (files.size() != 1 || stat(files[0].c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_size);
}

OpSpec Coll(uint64_t seq) {
  OpSpec s;
  s.seq = seq;
  s.api_events = false;
  s.net_plugin = false;
  return s;
}

TEST(FaultTest, ForkedChildIsUnharmedAndWritesItsOwnFile) {
#if NCCLWATCH_TSAN
  // ThreadSanitizer does not support a child of a multi-threaded process
  // (it exits 66); the default configuration runs this test.
  GTEST_SKIP() << "fork() after threads is unsupported under ThreadSanitizer";
#endif
#if NCCLWATCH_ASAN
  // clang 14's AddressSanitizer allocator is not fork-safe: in about 1 run
  // of 40, the child's first thread hung at its start inside the allocator
  // (SizeClassAllocator64::GetFromAllocator, on a lock the parent's copy
  // held at fork; gdb stack, 2026-11-22). The default configuration runs it.
  GTEST_SKIP() << "fork() after threads can hang clang 14's AddressSanitizer allocator";
#endif
  std::string dir = MakeTempDir("fork");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_FLUSH_MS", "20"}});
  PluginLib* lib = PluginLib::Shared();
  {
    FakeComm parent(lib, 5);
    ASSERT_EQ(parent.Init(0xf0, "world", 1, 2, 0), 0);
    for (uint64_t k = 0; k < 5; ++k) parent.RunOp(Coll(k));
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      // The child: events on the inherited communicator are ignored, its
      // finalize returns at once, and a communicator of its own works.
      parent.RunOp(Coll(100));
      FakeComm own(lib, 5);
      if (own.Init(0xf1, "child", 1, 1, 0) != 0) _exit(3);
      own.RunOp(Coll(0));
      own.Finalize();
      parent.Finalize();
      _exit(0);
    }
    int status = WaitFor(child);
    ASSERT_TRUE(WIFEXITED(status)) << "child did not exit cleanly: status " << status;
    EXPECT_EQ(WEXITSTATUS(status), 0);
    for (uint64_t k = 5; k < 8; ++k) parent.RunOp(Coll(k));
    parent.Finalize();
  }
  auto files = TraceFiles(dir);
  ASSERT_EQ(files.size(), 2u);
  int parent_ops = -1, child_ops = -1;
  for (const std::string& f : files) {
    auto t = ReadTrace(f);
    ASSERT_NE(t->header, nullptr);
    EXPECT_TRUE(t->raw.issues.empty()) << f;
    if (t->header->pid() == getpid()) parent_ops = static_cast<int>(t->ops.size());
    else child_ops = static_cast<int>(t->ops.size());
  }
  EXPECT_EQ(parent_ops, 8);  // the child's events went nowhere near the parent's file
  EXPECT_EQ(child_ops, 1);
}

TEST(FaultTest, FileSizeLimitMidRunKeepsTheHostGoingAndShowsTheLoss) {
  std::string dir = MakeTempDir("fsize");
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A full disk, as RLIMIT_FSIZE makes it: writes past 16 KiB fail (EFBIG;
    // SIGXFSZ would kill the host if the writer thread did not block it).
    rlimit rl{16 << 10, 16 << 10};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(4);
    SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_FLUSH_MS", "10"}, {"NCCLWATCH_HEARTBEAT_MS", "50"}});
    PluginLib* lib = PluginLib::Shared();
    FakeComm c(lib, 5);
    if (c.Init(0xd15c, "world", 1, 2, 0) != 0) _exit(5);
    // Every 100 operations, wait for the writer to write them (the file
    // grows) or to fail (its warning): the file fills over several batches
    // however busy the machine is.
    uint64_t size = 0;
    DirWatch files(dir);
    LogWatch log;
    for (uint64_t k = 0; k < 1500; ++k) {
      c.RunOp(Coll(k));
      if (k % 100 != 99) continue;
      WaitUntil([&] { return !Warnings().empty() || FileSizeIn(dir) > size; }, {files.fd(), log.fd()});
      size = FileSizeIn(dir);
    }
    c.Finalize();
    _exit(0);
  }
  int status = WaitFor(child);
  ASSERT_TRUE(WIFEXITED(status)) << "the host did not survive: status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  auto files = TraceFiles(dir);
  ASSERT_EQ(files.size(), 1u);
  struct stat st;
  ASSERT_EQ(stat(files[0].c_str(), &st), 0);
  EXPECT_LE(st.st_size, 16 << 10);
  // The file is whole records only (no torn batch), and says what was lost.
  auto t = ReadTrace(files[0]);
  EXPECT_TRUE(t->raw.issues.empty()) << t->raw.issues[0];
  ASSERT_NE(t->LastDrops(), nullptr);
  EXPECT_GT(t->LastDrops()->write_failed(), 0u);
  EXPECT_GT(t->LastDrops()->completions_lost(), 0u);
  EXPECT_EQ(t->LastDrops()->last_write_error(), "File too large");
  EXPECT_GT(t->ops.size(), 50u);
  EXPECT_LT(t->ops.size(), 1500u);
  // And the tools report the loss.
  tools::Model m;
  std::string err;
  ASSERT_TRUE(tools::BuildModel({dir}, tools::LoadOptions(), &m, &err)) << err;
  ASSERT_EQ(m.procs.size(), 1u);
  EXPECT_GT(m.procs[0].drops.write_failed, 0u);
  EXPECT_EQ(m.procs[0].drops.last_write_error, "File too large");
}

// A profiler driven through the core (no NCCL host), writing "t.ncclwatch"
// in `dir` only at ForceFlush, with kernel channels in the mask; null on
// failure. For a forked child that sets its own RLIMIT_FSIZE.
plugin::Profiler* CoreProfiler(const std::string& dir) {
  plugin::ProfilerOptions o;
  o.config.dir = dir;
  std::string err;
  if (!plugin::ParseEvents("default", &o.config.nccl_mask, &o.config.raw_kinds, &err)) return nullptr;
  o.config.flush_ms = 600000;  // writes happen at ForceFlush only
  o.config.heartbeat_ms = 600000;
  o.config.stuck_sec = 0;
  o.config.buffer_mb = 8;
  o.api_version = 5;
  o.file_name_override = "t.ncclwatch";
  return plugin::Profiler::Acquire(o, &err);
}

// `n` AllReduces that complete at enqueue (no channels), numbered on from
// `*seq`, then a write.
void CompletedColls(plugin::Profiler* p, plugin::Context* ctx, uint64_t* seq, int n) {
  for (int i = 0; i < n; ++i) {
    plugin::EventDesc d;
    d.kind = plugin::kEvColl;
    d.seq = ++*seq;
    d.func = "AllReduce";
    d.datatype = "ncclFloat32";
    d.count = 1024;
    d.nchannels = 0;
    void* h = p->Start(ctx, d);
    if (h != nullptr) p->Stop(h);
  }
  p->ForceFlush();
}

// The limit falls a few bytes past the last whole batch, too close for even
// the loss notice: the newest batch is given up for it (counted as lost), and
// later notices replace it. Driven through the core so the test decides when
// the writer writes (ForceFlush); in a child, for its own RLIMIT_FSIZE.
TEST(FaultTest, TheLossShowsEvenWhenTheLimitLeavesNoRoomForTheNotice) {
  const std::string dir = MakeTempDir("noroom");
  const std::string path = dir + "/t.ncclwatch";
  constexpr int kOps = 40;
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    plugin::Profiler* p = CoreProfiler(dir);
    if (p == nullptr) _exit(4);
    plugin::Context* ctx = p->NewContext(0x5ead, "world", 1, 2, 0);
    uint64_t seq = 0;
    CompletedColls(p, ctx, &seq, 1);  // the header's batch, then one with the communicator and an operation
    struct stat st;
    if (stat(path.c_str(), &st) != 0) _exit(5);
    rlimit rl{static_cast<rlim_t>(st.st_size) + 8, static_cast<rlim_t>(st.st_size) + 8};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(6);
    CompletedColls(p, ctx, &seq, kOps);  // fails; 8 bytes are no room for the notice
    CompletedColls(p, ctx, &seq, kOps);  // fails again: a new notice replaces the first
    p->FinalizeContext(ctx);
    plugin::Profiler::Release(p);
    _exit(0);
  }
  int status = WaitFor(child);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  ASSERT_EQ(WEXITSTATUS(status), 0);
  auto t = ReadTrace(path);
  EXPECT_TRUE(t->raw.issues.empty()) << ::testing::PrintToString(t->raw.issues);
  ASSERT_NE(t->header, nullptr);
  // Mostly one notice, replaced as the counts grew; but the records' sizes
  // follow the varint lengths of their times, and a small batch that fits
  // behind a notice keeps that one, the next coming after it. The newest
  // notice counts every loss.
  ASSERT_GE(t->drops.size(), 1u);
  const trace::Drops& d = *t->LastDrops();
  EXPECT_EQ(d.last_write_error(), "File too large");
  EXPECT_GE(d.write_failed(), d.completions_lost());
  // Each had completed (its completion folded into its record): every
  // operation is in the file, or the file says its completion is missing,
  // so that none reads as a hang.
  EXPECT_TRUE(d.completions_counted());
  EXPECT_EQ(t->ops.size() + d.completions_lost(), 1u + 2 * kOps);
  EXPECT_LT(t->ops.size(), 1u + 2 * kOps);  // the limit did cost operations
}

// The disk is full from the first batch after the header: the
// communicator's definition is lost with it. Once writes succeed again the
// plugin defines the communicator again before its operations, so the file
// reads whole (never "damaged"), and diagnose puts the lost writes first,
// with what the error means, in an INCOMPLETE line (exit 3).
TEST(FaultTest, ALostDefinitionIsWrittenAgainAndTheLossLeadsTheVerdict) {
  const std::string dir = MakeTempDir("lostdefs");
  const std::string path = dir + "/t.ncclwatch";
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    plugin::Profiler* p = CoreProfiler(dir);
    if (p == nullptr) _exit(4);
    p->ForceFlush();  // the header's batch
    struct stat st;
    if (stat(path.c_str(), &st) != 0) _exit(5);
    // Soft limit at the header: the next writes fail (EFBIG); the hard
    // limit stays, so the soft one can be raised again.
    rlimit rl{static_cast<rlim_t>(st.st_size), RLIM_INFINITY};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(6);
    plugin::Context* ctx = p->NewContext(0x1057, "world", 1, 2, 0);
    uint64_t seq = 0;
    CompletedColls(p, ctx, &seq, 20);  // lost, with the communicator's definition
    rl.rlim_cur = RLIM_INFINITY;
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(8);
    CompletedColls(p, ctx, &seq, 5);  // written, after the communicator defined again
    p->FinalizeContext(ctx);
    plugin::Profiler::Release(p);
    _exit(0);
  }
  int status = WaitFor(child);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  ASSERT_EQ(WEXITSTATUS(status), 0);
  auto t = ReadTrace(path);
  EXPECT_TRUE(t->raw.issues.empty()) << ::testing::PrintToString(t->raw.issues);
  EXPECT_EQ(t->ops.size(), 5u);
  tools::Model m;
  std::string err;
  ASSERT_TRUE(tools::BuildModel({dir}, tools::LoadOptions(), &m, &err)) << err;
  ASSERT_EQ(m.procs.size(), 1u);
  EXPECT_FALSE(m.procs[0].damaged) << ::testing::PrintToString(m.procs[0].issues);
  ASSERT_EQ(m.comms.size(), 1u);
  EXPECT_EQ(m.comms[0].name, "world");
  EXPECT_EQ(m.ops.size(), 5u);
  EXPECT_GE(m.procs[0].drops.write_failed, 20u);
  tools::MatchOps(&m);
  tools::AlignClocks(&m);
  const report::Diagnosis d = tools::Diagnose(m);
  EXPECT_EQ(d.verdict().rfind("INCOMPLETE", 0), 0u) << d.verdict();
  EXPECT_NE(d.verdict().find(" lost " + std::to_string(m.procs[0].drops.write_failed) +
                             " records in failed writes (File too large: a file size limit (ulimit -f) was reached)"),
            std::string::npos)
      << d.verdict();
  EXPECT_EQ(d.verdict().find("damaged"), std::string::npos) << d.verdict();
  EXPECT_EQ(tools::ExitStatus(d), 3);
}

TEST(FaultTest, FinalizeWithAnOperationInFlightIsAnAbort) {
  std::string dir = MakeTempDir("abort");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_FLUSH_MS", "20"}});
  PluginLib* lib = PluginLib::Shared();
  FakeComm c(lib, 5);
  ASSERT_EQ(c.Init(0xab0, "world", 1, 2, 0), 0);
  c.RunOp(Coll(0));
  OpSpec hung = Coll(1);
  hung.kernel_stop = 0;        // the kernel never finishes...
  hung.stop_proxies = false;   // ...and its transfers stall
  c.RunOp(hung);
  EXPECT_EQ(c.Finalize(), 0);  // ncclCommAbort calls the profiler's finalize like this
  auto t = ReadSingleTrace(dir);
  EXPECT_TRUE(t->raw.issues.empty());
  ASSERT_EQ(t->ops.size(), 2u);
  EXPECT_EQ(t->ops[0].done_count, 1);
  EXPECT_EQ(t->ops[1].done_count, 0);  // in flight at the abort: no completion
  ASSERT_EQ(t->comm_finalizes.size(), 1u);
  EXPECT_EQ(t->comm_finalizes[0]->ops_enqueued(), 2u);
  EXPECT_EQ(t->comm_finalizes[0]->ops_completed(), 1u);
}

bool Warned(const std::string& text) {
  for (const std::string& w : Warnings())
    if (w.find(text) != std::string::npos) return true;
  return false;
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// A link planted at the trace's name (to a file of root's, 0600) is not
// followed: a new name, said once. A FIFO planted at the command's output
// name blocks nothing: NCCLWATCH_ON_STUCK is off, said once. Under umask
// 000 the trace is 0600 all the same.
TEST(FaultTest, FilesAreCreatedWithoutFollowingLinksAndWithAnExactMode) {
  std::string dir = MakeTempDir("nofollow");
  const std::string victim = dir + "/victim", planted = dir + "/trace";
  {
    FILE* f = fopen(victim.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs("original", f);
    fclose(f);
  }
  ASSERT_EQ(chmod(victim.c_str(), 0600), 0);
  ASSERT_EQ(symlink(victim.c_str(), planted.c_str()), 0);
  ASSERT_EQ(mkfifo((dir + "/trace.1.on_stuck.txt").c_str(), 0666), 0);
  plugin::ProfilerOptions o;
  o.config.dir = dir;
  o.config.on_stuck = {"echo", "stuck"};
  o.file_name_override = "trace";  // the name the symlink squats
  o.api_version = 5;
  o.logger = &FakeLogger;
  ClearLogs();
  const mode_t old = umask(000);
  std::string err;
  plugin::Profiler* p = plugin::Profiler::Acquire(o, &err);
  umask(old);
  ASSERT_NE(p, nullptr) << err;
  EXPECT_EQ(p->writer_path(), dir + "/trace.1");  // O_EXCL|O_NOFOLLOW: a new name, not the link
  EXPECT_EQ(ModeOf(p->writer_path()), 0600u);     // not 0666
  plugin::Profiler::Release(p);
  EXPECT_TRUE(Warned("trace file: '" + dir + "/trace' exists already (a symbolic link): not opened, not followed "
                     "(someone else's?); writing " + dir + "/trace.1 instead"))
      << ::testing::PrintToString(Warnings());
  EXPECT_TRUE(Warned("NCCLWATCH_ON_STUCK is off: its output file: '" + dir +
                     "/trace.1.on_stuck.txt' exists already (a FIFO): not opened, not followed"))
      << ::testing::PrintToString(Warnings());
  struct stat st;
  ASSERT_EQ(lstat(planted.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(ModeOf(victim), 0600u);
  char buf[32] = {0};
  FILE* f = fopen(victim.c_str(), "r");
  ASSERT_NE(f, nullptr);
  ASSERT_NE(fgets(buf, sizeof(buf), f), nullptr);
  fclose(f);
  EXPECT_STREQ(buf, "original");  // the link's target was never touched
}

// NCCLWATCH_FILE_MODE, whatever the umask, for both files; the command's
// output file exists from the start (empty until a stuck report).
TEST(FaultTest, FileModeAppliesToBothFiles) {
  std::string dir = MakeTempDir("filemode");
  plugin::ProfilerOptions o;
  o.config.dir = dir;
  o.config.on_stuck = {"echo", "stuck"};
  o.config.file_mode = 0640;
  o.file_name_override = "trace";
  o.api_version = 5;
  o.logger = &FakeLogger;
  ClearLogs();
  const mode_t old = umask(077);
  std::string err;
  plugin::Profiler* p = plugin::Profiler::Acquire(o, &err);
  umask(old);
  ASSERT_NE(p, nullptr) << err;
  EXPECT_EQ(ModeOf(dir + "/trace"), 0640u);
  EXPECT_EQ(ModeOf(dir + "/trace.on_stuck.txt"), 0640u);
  plugin::Profiler::Release(p);
  EXPECT_TRUE(Warnings().empty()) << ::testing::PrintToString(Warnings());
}

}  // namespace
}  // namespace ncclwatch::testing
