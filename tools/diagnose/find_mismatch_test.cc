// MISMATCH and ORDER_MISMATCH within one communicator (find_mismatch.h),
// through Diagnose.

#include "tools/diagnose/diagnose.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/diagnose/test_job.h"

namespace ncclwatch::tools {
namespace {

using namespace diagnose_testing;  // NOLINT: the tests' own job builder

TEST(FindMismatches, MismatchNamesTheOddRankOutNotTheMajority) {
  Job j;
  j.Procs(4, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 2);
  for (uint32_t p = 0; p < 4; ++p) j.Coll(p, w, 3, "AllReduce", p == 1 ? 512 : 1024, 1.0, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "MISMATCH: AllReduce #3 on comm 'world' (4 ranks): rank 1 called count 512 where ranks 0,2,3 called count 1,024 [cause: program logic]");
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(f.kind(), report::MISMATCH);
  EXPECT_EQ(Names(f.culprits()), V{"rank 1"});
  EXPECT_EQ(Names(f.waiting()), (V{"rank 0", "rank 2", "rank 3"}));
  // The hang at #3 is explained by the mismatch: no STUCK finding for it.
  EXPECT_EQ(FindKind(d, report::STUCK_IN_PROGRESS), nullptr) << FormatText(d);
  EXPECT_EQ(ExitStatus(d), 1);
}

TEST(FindMismatches, MismatchOfFunctionAndDatatype) {
  Job j;
  j.Procs(3, 15.0);
  uint32_t w = j.Comm("", 0x12ab, {0, 1, 2});
  j.Coll(0, w, 1, "AllReduce", 1024, 1.0, -1);
  j.Coll(1, w, 1, "AllGather", 256, 1.0, -1, "ncclBfloat16");
  j.Coll(2, w, 1, "AllReduce", 1024, 1.0, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "MISMATCH: AllReduce #1 on comm 0x12ab (3 ranks): rank 1 called AllGather count 256 ncclBfloat16 where "
            "ranks 0,2 called AllReduce count 1,024 ncclFloat32 [cause: program logic]");
}

TEST(FindMismatches, MismatchOfRoot) {
  Job j;
  j.Procs(3, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  for (uint32_t p = 0; p < 3; ++p) j.Coll(p, w, 1, "Broadcast", 64, 1.0, -1, "ncclFloat32", p == 0 ? 1 : 0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(), "MISMATCH: Broadcast #1 on comm 'world' (3 ranks): rank 0 called root 1 where ranks 1,2 called root 0 [cause: program logic]");
}

TEST(FindMismatches, MismatchWithoutMajorityNamesEverySide) {
  Job j;
  j.Procs(2, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1});
  j.Coll(0, w, 1, "AllReduce", 1024, 1.0, -1);
  j.Coll(1, w, 1, "AllReduce", 2048, 1.0, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.findings(0).kind(), report::MISMATCH);
  EXPECT_EQ(Names(d.findings(0).culprits()), (V{"rank 0", "rank 1"}));
  EXPECT_NE(d.verdict().find("no majority"), std::string::npos) << d.verdict();
}

// Rank 2 skipped AllReduce #3: its later collectives are the others' next ones.
TEST(FindMismatches, SkippedCollective) {
  Job j;
  j.Procs(3, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  const char* f[] = {"AllReduce", "AllGather", "AllReduce", "AllGather", "AllReduce", "AllGather"};
  for (uint32_t p = 0; p < 3; ++p) {
    uint64_t seq = 1;
    for (int k = 0; k < 6; ++k) {
      if (p == 2 && k == 2) continue;
      j.Coll(p, w, seq++, f[k], k % 2 ? 256 : 1024, 1.0 + 0.1 * k, -1);
    }
  }
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "MISMATCH: rank 2 skipped AllReduce(1,024 ncclFloat32) #3 on comm 'world' (3 ranks): its #3 is the #4 of ranks 0,1 [cause: program logic]");
  EXPECT_EQ(Names(d.findings(0).culprits()), V{"rank 2"});
}

TEST(FindMismatches, ExtraCollective) {
  Job j;
  j.Procs(3, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  for (uint32_t p = 0; p < 3; ++p) {
    uint64_t seq = 1;
    for (int k = 0; k < 4; ++k) {
      if (p == 0 && k == 1) j.Coll(p, w, seq++, "Broadcast", 8, 1.05, -1, "ncclInt64", 0);
      j.Coll(p, w, seq++, k % 2 ? "AllGather" : "AllReduce", k % 2 ? 256 : 1024, 1.0 + 0.1 * k, -1);
    }
  }
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "MISMATCH: rank 0 issued Broadcast(8 ncclInt64) as #2 on comm 'world' (3 ranks), which ranks 1,2 never "
            "issued: its #3 is their #2 [cause: program logic]");
}

TEST(FindMismatches, SwappedOrder) {
  Job j;
  j.Procs(3, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  j.Steps(w, 4);
  for (uint32_t p = 0; p < 3; ++p) {
    const bool odd = p == 2;
    j.Coll(p, w, 5, odd ? "AllGather" : "AllReduce", odd ? 256 : 1024, 1.0, -1);
    j.Coll(p, w, 6, odd ? "AllReduce" : "AllGather", odd ? 1024 : 256, 1.1, -1);
  }
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "ORDER MISMATCH: comm 'world' (3 ranks) #5-#6: rank 2 issued AllGather(256 ncclFloat32) then "
            "AllReduce(1,024 ncclFloat32) where ranks 0,1 issued AllReduce(1,024 ncclFloat32) then AllGather(256 ncclFloat32) [cause: program logic]");
  EXPECT_EQ(d.findings(0).kind(), report::ORDER_MISMATCH);
  EXPECT_EQ(Names(d.findings(0).culprits()), V{"rank 2"});
  EXPECT_EQ(FindKind(d, report::MISMATCH), nullptr);
}

// A count mismatch that completed: the same first line, and that it completed.
TEST(FindMismatches, MismatchThatCompletedSaysTheResultsAreWrong) {
  Job j;
  j.Procs(3, 2.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  j.Steps(w, 2);
  for (uint32_t p = 0; p < 3; ++p) {
    j.Finalize(p, 2.0);
    j.Coll(p, w, 3, "AllReduce", p == 2 ? 512 : 1024, 1.0, 1.01);
  }
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_GE(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).kind(), report::MISMATCH);
  EXPECT_TRUE(d.findings(0).completed());
  EXPECT_EQ(d.verdict(),
            "MISMATCH: AllReduce #3 on comm 'world' (3 ranks): rank 2 called count 512 where ranks 0,1 called count "
            "1,024; it completed on every rank: the results are wrong [cause: program logic]");
}

}  // namespace
}  // namespace ncclwatch::tools
