#include "plugin/core/process_info.h"

#include <stdlib.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

namespace ncclwatch::plugin {
namespace {

void UnsetLauncherVariables() {
  for (const char* v : {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK", "PMIX_RANK", "WORLD_SIZE",
                        "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                        "SLURM_LOCALID", "MPI_LOCALRANKID", "NCCLWATCH_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"})
    unsetenv(v);
}

// The first launcher variable that holds a number wins, and says which it
// was; a job id likewise.
TEST(ProcessInfoTest, LauncherVariablesInTheirOrder) {
  UnsetLauncherVariables();
  setenv("OMPI_COMM_WORLD_RANK", "5", 1);
  setenv("SLURM_PROCID", "9", 1);
  setenv("RANK", "not a number", 1);
  setenv("SLURM_NTASKS", "16", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("SLURM_JOB_ID", "4242", 1);
  const ProcessInfo info = ReadProcessInfo();
  EXPECT_EQ(info.launcher_rank, 5);
  EXPECT_EQ(info.launcher_rank_source, "OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(info.launcher_world_size, 16);
  EXPECT_EQ(info.launcher_local_rank, 1);
  EXPECT_EQ(info.job_id, "4242");
  EXPECT_EQ(info.pid, getpid());
  EXPECT_FALSE(info.hostname.empty());
  ASSERT_FALSE(info.argv.empty());
  EXPECT_NE(info.argv[0].find("process_info_test"), std::string::npos) << info.argv[0];
  UnsetLauncherVariables();
  const ProcessInfo none = ReadProcessInfo();
  EXPECT_EQ(none.launcher_rank, -1);
  EXPECT_TRUE(none.launcher_rank_source.empty());
  EXPECT_TRUE(none.job_id.empty());
}

TEST(ProcessInfoTest, SafeNamesAreFileNames) {
  EXPECT_EQ(SafeName("node-01.cluster_a"), "node-01.cluster_a");
  EXPECT_EQ(SafeName("a/b c;d"), "a_b_c_d");
  EXPECT_EQ(SafeName(""), "host");
}

TEST(ProcessInfoTest, NcclVersionCodes) {
  EXPECT_EQ(NcclVersionString(22809), "2.28.9");
  EXPECT_EQ(NcclVersionString(23004), "2.30.4");
  EXPECT_EQ(NcclVersionString(22304), "2.23.4");
  EXPECT_EQ(NcclVersionString(2804), "2.8.4");  // before 2.9: two digits a part
}

}  // namespace
}  // namespace ncclwatch::plugin
