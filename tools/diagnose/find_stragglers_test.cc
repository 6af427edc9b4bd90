// STRAGGLER (find_stragglers.h), through Diagnose.

#include "tools/diagnose/diagnose.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/diagnose/test_job.h"

namespace ncclwatch::tools {
namespace {

using namespace diagnose_testing;  // NOLINT: the tests' own job builder

TEST(FindStragglers, StragglerIsAWarning) {
  Job j;
  j.Procs(4, 3.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  for (int k = 1; k <= 10; ++k)
    for (uint32_t p = 0; p < 4; ++p) {
      double t = 0.1 * k;
      double late = p == 2 ? 0.005 + 0.001 * (k % 3) : 0.0001 * p;
      j.Coll(p, w, k, "AllReduce", 1024, t + late, t + 0.009);
    }
  for (uint32_t p = 0; p < 4; ++p) j.Finalize(p, 3.0);
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_EQ(d.findings_size(), 1) << FormatText(d);
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(f.kind(), report::STRAGGLER);
  EXPECT_EQ(f.severity(), report::SEVERITY_WARNING);
  EXPECT_EQ(d.severity(), report::SEVERITY_WARNING);
  EXPECT_EQ(Names(f.culprits()), V{"rank 2"});
  EXPECT_EQ(f.straggler().collectives(), 10u);
  EXPECT_EQ(f.straggler().late(), 10u);
  EXPECT_NEAR(f.straggler().max_lag_ms(), 6.8, 0.01);
  EXPECT_NEAR(f.straggler().median_lag_ms(), 5.8, 0.01);
  EXPECT_EQ(d.verdict(),
            "STRAGGLER: rank 2 arrived last at 10 of 10 collectives (100%), a median 5.8 ms after the median rank "
            "(max 6.8 ms) [cause: rank 2's resources]");
  EXPECT_EQ(ExitStatus(d), 1);
}

// Rank 2 sleeps before each AllReduce and nothing else: late at 8 of its
// 24 collectives, a third, and a straggler at AllReduce all the same.
TEST(FindStragglers, StragglerAtOneFunction) {
  Job j;
  j.Procs(4, 3.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  for (int k = 1; k <= 8; ++k)
    for (uint32_t p = 0; p < 4; ++p) {
      const double t = 0.3 * k, jitter = 0.0001 * p;
      j.Coll(p, w, k, "AllReduce", 1024, t + (p == 2 ? 0.05 : jitter), t + 0.06);
      j.Coll(p, w, 100 + k, "AllGather", 1024, t + 0.07 + jitter, t + 0.08);
      j.Coll(p, w, 200 + k, "Broadcast", 1024, t + 0.09 + jitter, t + 0.1);
    }
  for (uint32_t p = 0; p < 4; ++p) j.Finalize(p, 3.0);
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_EQ(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).kind(), report::STRAGGLER);
  EXPECT_EQ(Names(d.findings(0).culprits()), V{"rank 2"});
  EXPECT_EQ(d.findings(0).func(), "AllReduce");
  EXPECT_EQ(d.verdict().rfind("STRAGGLER: rank 2 arrived last at 8 of 8 AllReduce on comm 'world' (4 ranks) (100%)", 0),
            0u)
      << d.verdict();
}

TEST(FindStragglers, EvenArrivalsAreNoStraggler) {
  Job j;
  j.Procs(4, 3.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  for (int k = 1; k <= 10; ++k)
    for (uint32_t p = 0; p < 4; ++p) j.Coll(p, w, k, "AllReduce", 1024, 0.1 * k + 0.0002 * ((p + k) % 4), 0.1 * k + 0.009);
  for (uint32_t p = 0; p < 4; ++p) j.Finalize(p, 3.0);
  EXPECT_EQ(Diagnose(j.Finish()).findings_size(), 0);
}

}  // namespace
}  // namespace ncclwatch::tools
