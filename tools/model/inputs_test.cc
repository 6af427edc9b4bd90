// The paths a user names, as trace files: folders searched recursively, only
// regular files read (nothing blocks on a FIFO or spins on a device), each
// file once, and nothing sized by a sparse file's claimed length.

#include "tools/model/inputs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/model/model.h"
#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools {
namespace {

using testing::kMs;
using testing::kSec;

std::string TempDir(const std::string& tag) {
  std::string base = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  std::string t = base + "/" + tag + "-XXXXXX";
  return mkdtemp(&t[0]);
}

// A healthy two-rank job, one file per rank in `dir`.
void WriteJob(const std::string& dir) {
  testing::JobSpec spec;
  spec.nranks = 2;
  spec.ncolls = 3;
  testing::WriteJob(testing::BuildJob(spec), dir);
}

bool Has(const std::vector<std::string>& lines, const std::string& part) {
  for (const std::string& l : lines)
    if (l.find(part) != std::string::npos) return true;
  return false;
}

TEST(InputsTest, FoldersAreSearchedRecursively) {
  const std::string root = TempDir("tree");
  ASSERT_EQ(mkdir((root + "/host1").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((root + "/host2").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((root + "/host2/deeper").c_str(), 0755), 0);
  WriteJob(root + "/host1");
  WriteJob(root + "/host2/deeper");
  TraceInputs in = ListTraceInputs({root});
  EXPECT_EQ(in.files.size(), 4u);
  EXPECT_TRUE(in.errors.empty());
  for (const std::string& f : in.files) EXPECT_NE(f.find(".ncclwatch"), std::string::npos);
}

TEST(InputsTest, AFileNamedTwiceIsReadOnceWithANote) {
  const std::string dir = TempDir("twice");
  WriteJob(dir);
  TraceInputs in = ListTraceInputs({dir, dir});
  EXPECT_EQ(in.files.size(), 2u);
  EXPECT_EQ(in.notes.size(), 2u);
  EXPECT_TRUE(Has(in.notes, "again: read once"));

  Model m;
  std::string error;
  ASSERT_TRUE(BuildModel({dir, dir}, LoadOptions(), &m, &error)) << error;
  EXPECT_EQ(m.procs.size(), 2u);  // not 4
  EXPECT_EQ(m.notes.size(), 2u);
}

TEST(InputsTest, SpecialFilesAreRefusedWithoutBlocking) {
  const std::string dir = TempDir("special");
  WriteJob(dir);
  // A FIFO would block open(2) and read(2) forever; /dev/zero would never end.
  ASSERT_EQ(mkfifo((dir + "/fifo.ncclwatch").c_str(), 0644), 0);
  ASSERT_EQ(symlink("/dev/zero", (dir + "/zero.ncclwatch").c_str()), 0);
  TraceInputs in = ListTraceInputs({dir});
  EXPECT_EQ(in.files.size(), 2u);
  EXPECT_TRUE(Has(in.errors, "fifo.ncclwatch: not a regular file (a FIFO)"));
  EXPECT_TRUE(Has(in.errors, "zero.ncclwatch: not a regular file (a character device)"));

  // Named directly, and through the model: skipped with the reason, the rest read.
  Model m;
  std::string error;
  ASSERT_TRUE(BuildModel({dir + "/fifo.ncclwatch", dir}, LoadOptions(), &m, &error)) << error;
  EXPECT_EQ(m.procs.size(), 2u);
  EXPECT_TRUE(Has(m.errors, "a FIFO"));
}

TEST(InputsTest, MissingPathsAndEmptyFoldersSaySo) {
  const std::string dir = TempDir("empty");
  TraceInputs in = ListTraceInputs({dir, dir + "/nope"});
  EXPECT_TRUE(in.files.empty());
  EXPECT_TRUE(Has(in.errors, dir + ": folder holds no *.ncclwatch file"));
  EXPECT_TRUE(Has(in.errors, "cannot open " + dir + "/nope: No such file or directory"));
}

TEST(InputsTest, ASparseFileSizesNothing) {
  // 16 GiB claimed, nothing allocated: the model must not reserve for it.
  const std::string dir = TempDir("sparse");
  const std::string path = dir + "/big.ncclwatch";
  const int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 16ll << 30), 0);
  close(fd);
  TraceInputs in = ListTraceInputs({path});
  ASSERT_EQ(in.files.size(), 1u);
  EXPECT_LT(in.data_bytes, 1u << 20);
  Model m;
  std::string error;
  // Zeros are not records: the file is damaged from its first byte.
  EXPECT_FALSE(BuildModel({path}, LoadOptions(), &m, &error));
  EXPECT_NE(error.find("big.ncclwatch"), std::string::npos) << error;
}

}  // namespace
}  // namespace ncclwatch::tools
