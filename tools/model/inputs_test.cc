// The paths a user names, as trace files: folders searched recursively, only
// regular files read (nothing blocks on a FIFO or spins on a device), each
// file once, and nothing sized by a sparse file's claimed length.

#include "tools/model/inputs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/diagnose/diagnose.h"
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
  EXPECT_TRUE(Has(in.errors, dir + ": folder holds no *.ncclwatch or *.ncclsummary file"));
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

// Copies of one process's file (3,000 of them in the report that led here)
// are one process; the longest copy is the one read.
TEST(InputsTest, CopiesOfOneProcessAreOneProcess) {
  const std::string dir = TempDir("copies");
  WriteJob(dir);
  TraceInputs listed = ListTraceInputs({dir});
  ASSERT_EQ(listed.files.size(), 2u);
  std::string bytes;
  {
    FILE* f = fopen(listed.files[0].c_str(), "rb");
    ASSERT_NE(f, nullptr);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, n);
    fclose(f);
  }
  for (int i = 0; i < 5; ++i) {
    // Shorter copies, as if taken while the file was still written.
    const std::string copy = dir + "/copy" + std::to_string(i) + ".ncclwatch";
    FILE* f = fopen(copy.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    fwrite(bytes.data(), 1, bytes.size() - static_cast<size_t>(i + 1) * 7, f);
    fclose(f);
  }
  Model m;
  std::string error;
  ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &error)) << error;
  EXPECT_EQ(m.procs.size(), 2u);
  EXPECT_EQ(m.notes.size(), 5u);
  EXPECT_TRUE(Has(m.notes, "holds the same process as"));
  for (const Proc& p : m.procs) EXPECT_EQ(p.path.find("/copy"), std::string::npos) << p.path;
}

void WriteJobWithId(const std::string& dir, const std::string& job_id, int64_t pid0,
                    uint64_t start_ns = 1'700'000'000 * testing::kSec) {
  testing::JobSpec spec;
  spec.nranks = 2;
  spec.ncolls = 3;
  spec.rank_hook = [&](int rank, testing::RankPlan& plan) {
    plan.proc.job_id = job_id;
    plan.proc.pid = pid0 + rank;
    // The builder sets realtime_base_ns: 1'700'000'000 s + the rank's start + this.
    plan.realtime_error_ns = static_cast<int64_t>(start_ns - 1'700'000'000 * testing::kSec);
  };
  testing::WriteJob(testing::BuildJob(spec), dir);
}

TEST(InputsTest, TwoJobsAreRefusedUnlessOneIsChosen) {
  const std::string dir = TempDir("jobs");
  // A reused folder: job 1002 ran first (2023-11-14 22:13:20 UTC), then 1001
  // a day later.
  WriteJobWithId(dir, "1001", 100, 1'700'086'400 * testing::kSec);
  WriteJobWithId(dir, "1002", 200, 1'700'000'000 * testing::kSec);
  Model m;
  std::string error;
  EXPECT_FALSE(BuildModel({dir}, LoadOptions(), &m, &error));
  // Each job as the flag that reads it, oldest first, with its start (its
  // earliest process's) and that process's file.
  const std::string want =
      "the files hold 2 jobs; read one with --job: "
      "--job=1002 (started 2023-11-14 22:13:20 UTC, 2 files, first " + dir + "/";
  EXPECT_EQ(error.substr(0, want.size()), want) << error;
  EXPECT_NE(error.find("-200-"), std::string::npos) << error;  // rank 0 of job 1002 (pid 200)
  EXPECT_NE(error.find("; --job=1001 (started 2023-11-15 22:13:20 UTC, 2 files, first " + dir + "/"),
            std::string::npos)
      << error;

  LoadOptions pick;
  pick.job = "1002";
  Model one;
  ASSERT_TRUE(BuildModel({dir}, pick, &one, &error)) << error;
  EXPECT_EQ(one.procs.size(), 2u);
  for (const Proc& p : one.procs) EXPECT_GE(p.pid, 200);
  EXPECT_TRUE(Has(one.notes, "job '1001', not '1002': skipped"));

  pick.job = "7";
  Model none;
  EXPECT_FALSE(BuildModel({dir}, pick, &none, &error));
  EXPECT_NE(error.find("no file of job '7' (jobs found: '1001', '1002')"), std::string::npos) << error;
}

TEST(InputsTest, AJobIdThatNeedsQuotingIsQuotedForTheShell) {
  const std::string dir = TempDir("quoted");
  WriteJobWithId(dir, "run 1's", 100);
  WriteJobWithId(dir, "run-2", 200, 1'700'000'100 * testing::kSec);
  Model m;
  std::string error;
  EXPECT_FALSE(BuildModel({dir}, LoadOptions(), &m, &error));
  EXPECT_NE(error.find("--job='run 1'\\''s' (started 2023-11-14 22:13:20 UTC"), std::string::npos) << error;
  EXPECT_NE(error.find("; --job=run-2 (started 2023-11-14 22:15:00 UTC"), std::string::npos) << error;
  LoadOptions pick;
  pick.job = "run 1's";
  Model one;
  ASSERT_TRUE(BuildModel({dir}, pick, &one, &error)) << error;
  EXPECT_EQ(one.procs.size(), 2u);
}

TEST(InputsTest, JobsWithoutIdsAreToldApartByTheirCommunicators) {
  const std::string dir = TempDir("nojobid");
  WriteJobWithId(dir, "", 100);
  testing::JobSpec spec;
  spec.nranks = 2;
  spec.ncolls = 3;
  spec.comms = {{"world", 0x5555, {}}};  // another job's communicator
  spec.rank_hook = [&](int rank, testing::RankPlan& plan) { plan.proc.pid = 300 + rank; };
  testing::WriteJob(testing::BuildJob(spec), dir);
  Model m;
  std::string error;
  EXPECT_FALSE(BuildModel({dir}, LoadOptions(), &m, &error));
  EXPECT_NE(error.find("the files hold 2 jobs (processes that share no communicator)"), std::string::npos) << error;
}

// diagnose says which NCCL and CUDA driver each process ran (from the
// header), one line per combination.
TEST(InputsTest, TheVersionsEachProcessRan) {
  const std::string dir = TempDir("versions");
  testing::JobSpec spec;
  spec.nranks = 3;
  spec.ncolls = 3;
  spec.rank_hook = [](int rank, testing::RankPlan& plan) {
    plan.proc.nccl_version = rank == 2 ? "2.27.7" : "2.28.9";
    plan.proc.cuda_driver_version = 13000;
  };
  testing::WriteJob(testing::BuildJob(spec), dir);
  Model m;
  std::string error;
  ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &error)) << error;
  const std::string text = FormatText(Diagnose(m));
  EXPECT_NE(text.find("Versions: NCCL 2.27.7, CUDA driver 13.0: 1 process\n"
                      "          NCCL 2.28.9, CUDA driver 13.0: 2 processes\n"),
            std::string::npos)
      << text;
}

// NCCL 2.29+ runs Broadcast without Coll events: diagnose says what it
// cannot see, under Versions.
TEST(InputsTest, Nccl229AndLaterAreSaidToHideBroadcasts) {
  const std::string dir = TempDir("v229");
  testing::JobSpec spec;
  spec.nranks = 2;
  spec.ncolls = 2;
  spec.rank_hook = [](int rank, testing::RankPlan& plan) { plan.proc.nccl_version = rank == 0 ? "2.30.7" : "2.28.9"; };
  testing::WriteJob(testing::BuildJob(spec), dir);
  Model m;
  std::string error;
  ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &error)) << error;
  const std::string text = FormatText(Diagnose(m));
  EXPECT_NE(text.find("NCCL 2.29 and later record no Broadcast (run as AllGatherV without Coll events): a hang "
                      "inside a Broadcast is not seen (1 process)"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace ncclwatch::tools
