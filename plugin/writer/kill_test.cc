// A process killed with SIGKILL while enqueuing collectives leaves a trace
// file that reads cleanly (at most a cut tail) and holds every operation the
// writer had written while it ran: the file is written as the job goes, not
// at teardown, and the page cache keeps it through the kill.

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "plugin/testing/fake_nccl_host.h"
#include "proto/trace.pb.h"

namespace ncclwatch::testing {
namespace {

constexpr uint64_t kMaxOps = 1 << 20;
constexpr uint64_t kBatch = 100;  // operations between two waits: some 200 records of a ring's 8,192

// Shared with the child (MAP_SHARED): the last operation it enqueued.
struct Progress {
  std::atomic<uint64_t> last_seq;
};

// The highest Op seq in a trace (0 if none).
uint64_t MaxSeq(const Trace& t) {
  uint64_t m = 0;
  for (const OpView& o : t.ops) m = std::max<uint64_t>(m, o.op->seq());
  return m;
}

[[noreturn]] void Child(Progress* p, const std::string& dir) {
  SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_FLUSH_MS", "50"}});
  PluginLib* lib = PluginLib::Shared();
  FakeComm c(lib, 5);
  if (c.Init(0xC0FFEE, "killed", 1, 2, 0) != 0) _exit(2);
  for (uint64_t seq = 1; seq < kMaxOps; ++seq) {
    OpSpec s;
    s.seq = seq;
    s.nchannels = 1;
    s.proxy_peers = {};
    s.api_events = seq % 2 == 0;
    c.RunOp(s);
    p->last_seq.store(seq, std::memory_order_release);
    // A batch at a time, each waited for in the file, as a training loop
    // paces itself: the thread's buffer never overflows, however slow the
    // machine.
    if (seq % kBatch == 0) WaitForTrace(dir, [&](const Trace& t) { return MaxSeq(t) >= seq; });
  }
  _exit(3);  // never reached when the parent kills us
}

TEST(Kill, FileSurvivesSigkill) {
  const std::string dir = MakeTempDir("kill");
  void* mem = mmap(nullptr, sizeof(Progress), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* p = static_cast<Progress*>(mem);

  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) Child(p, dir);

  // Wait until the running child's file holds 200 operations (written by
  // the writer as it goes: nothing has finalized), then kill it.
  const uint64_t kSeen = 200;
  auto before = WaitForTrace(dir, [&](const Trace& t) {
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      ADD_FAILURE() << "child exited early, status " << status;
      return true;
    }
    return MaxSeq(t) >= kSeen;
  });
  const uint64_t must_have = MaxSeq(*before);
  ASSERT_GE(must_have, kSeen);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  const uint64_t last = p->last_seq.load();

  auto t = ReadSingleTrace(dir);
  EXPECT_TRUE(t->raw.only_cut_tail) << ::testing::PrintToString(t->raw.issues);
  EXPECT_TRUE(t->header_first);
  ASSERT_NE(t->header, nullptr);
  EXPECT_EQ(t->header->pid(), pid);
  EXPECT_EQ(t->header->flush_ms(), 50u);
  ASSERT_EQ(t->comm_inits.size(), 1u);
  EXPECT_EQ(t->comm_inits[0]->comm_hash(), 0xC0FFEEu);
  EXPECT_EQ(t->comm_inits[0]->name(), "killed");
  EXPECT_TRUE(t->finalizes.empty());
  EXPECT_TRUE(t->drops.empty());

  std::vector<uint64_t> seqs;
  for (const OpView& o : t->ops) {
    EXPECT_EQ(o.op->comm(), t->comm_inits[0]->comm());
    seqs.push_back(o.op->seq());
  }
  ASSERT_FALSE(seqs.empty());
  for (size_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], i + 1) << "Op seqs are 1, 2, 3, ... in order";
  const uint64_t max_seq = seqs.back();
  printf("child enqueued %llu ops; %llu were in the file before the kill; it has %llu after (cut tail: %d)\n",
         static_cast<unsigned long long>(last), static_cast<unsigned long long>(must_have),
         static_cast<unsigned long long>(max_seq), t->raw.cut_tail ? 1 : 0);
  EXPECT_GE(max_seq, must_have) << "enqueued " << last << " by the kill";
  EXPECT_LE(max_seq, last);
  // Completions are present for all but possibly the last few ops.
  size_t done = 0;
  for (const OpView& o : t->ops) done += o.done_count;
  EXPECT_GE(done + 2, t->ops.size() > must_have ? must_have : t->ops.size());
  munmap(mem, sizeof(Progress));
}

}  // namespace
}  // namespace ncclwatch::testing
