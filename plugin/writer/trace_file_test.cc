#include "plugin/writer/trace_file.h"

#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ncclwatch::plugin {
namespace {

std::string NewDir(const std::string& tag) {
  const std::string d = ::testing::TempDir() + "/trace_file_" + tag + "_" + std::to_string(getpid());
  EXPECT_EQ(mkdir(d.c_str(), 0700), 0) << d;
  return d;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Append(TraceFile* f, const std::string& head, const std::string& body, uint64_t records,
            uint64_t completions = 0) {
  return f->AppendBatch(reinterpret_cast<const uint8_t*>(head.data()), head.size(),
                        reinterpret_cast<const uint8_t*>(body.data()), body.size(), records, completions);
}

TEST(TraceFileTest, BatchesFollowEachOtherWhole) {
  const std::string base = NewDir("whole") + "/t";
  TraceFile f;
  std::string err;
  ASSERT_TRUE(f.Create(base, ".ncclwatch", 0600, &err)) << err;
  EXPECT_EQ(f.path(), base + ".ncclwatch");
  EXPECT_TRUE(f.taken().empty());
  ASSERT_TRUE(Append(&f, "H1", "header", 2));
  ASSERT_TRUE(Append(&f, "H2", "ops", 3, 1));
  EXPECT_EQ(f.records_written(), 5u);
  EXPECT_EQ(f.bytes_written(), 13u);
  EXPECT_EQ(f.records_lost(), 0u);
  f.Close();
  EXPECT_FALSE(f.open());
  EXPECT_EQ(Read(base + ".ncclwatch"), "H1headerH2ops");
}

// A name taken by someone else: the next free one, and the first taken
// name kept to be said.
TEST(TraceFileTest, ATakenNameMovesToTheNextFreeOne) {
  const std::string base = NewDir("taken") + "/t";
  std::ofstream(base + ".ncclwatch") << "someone's";
  TraceFile f;
  std::string err;
  ASSERT_TRUE(f.Create(base, ".ncclwatch", 0600, &err)) << err;
  EXPECT_EQ(f.path(), base + ".1.ncclwatch");
  EXPECT_FALSE(f.taken().empty());
  EXPECT_EQ(Read(base + ".ncclwatch"), "someone's");
  f.Discard();
  EXPECT_NE(access((base + ".1.ncclwatch").c_str(), F_OK), 0) << "discarded";
}

// A write past the file size limit (a full disk, as RLIMIT_FSIZE makes it)
// leaves the file as it was, counts the batch lost, and a loss notice goes
// after the last whole batch, a later one in its place. In a child: the
// limit is the process's.
TEST(TraceFileTest, AFailedBatchIsCutOffCountedAndNoticed) {
  const std::string base = NewDir("fsize") + "/t";
  fflush(stdout);
  fflush(stderr);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);  // EFBIG, as the writer thread gets with every signal blocked
    TraceFile f;
    std::string err;
    if (!f.Create(base, "", 0600, &err)) _exit(2);
    rlimit rl{64, 64};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(3);
    if (!Append(&f, "H", "header", 2)) _exit(4);
    if (Append(&f, "B", std::string(100, 'x'), 7, 3)) _exit(5);  // past 64 bytes
    if (f.records_lost() != 7 || f.completions_lost() != 3 || f.last_error().empty()) _exit(6);
    if (Read(base) != "Hheader") _exit(7);
    auto notice = [](const char* text) {
      return [text](uint8_t* buf, size_t cap) {
        return static_cast<size_t>(snprintf(reinterpret_cast<char*>(buf), cap, "%s", text));
      };
    };
    f.AppendNotice(1, notice("N1"));
    f.AppendNotice(1, notice("N2"));
    if (Read(base) != "HheaderN2") _exit(8);  // the newer notice replaced the one that ended the file
    if (f.records_written() != 3 || f.records_lost() != 7) _exit(9);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the step that failed, numbered in the child";
}

}  // namespace
}  // namespace ncclwatch::plugin
