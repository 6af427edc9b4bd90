// MISMATCH from the per-node summaries' signature chains
// (find_chain_mismatch.h), through Diagnose. The summaries themselves are
// tools/summary:job_test's.

#include "tools/diagnose/diagnose.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/diagnose/test_job.h"

namespace ncclwatch::tools {
namespace {

using namespace diagnose_testing;  // NOLINT: the tests' own job builder

// Rank 3's chain of collective signatures on 'world' differs from the
// others' between #5 and #9, whose operations the summaries let go.
Job ChainJob(bool asked) {
  Job j;
  j.Procs(4, 2.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 12);
  for (uint32_t p = 0; p < 4; ++p) j.Finalize(p, 2.0);
  ChainMismatch cm;
  cm.comm = w;
  cm.from = 5;
  cm.to = 9;
  cm.odd = {3};
  cm.rest = {0, 1, 2};
  cm.asked = asked;
  j.m.chain_mismatches.push_back(cm);
  return j;
}

TEST(FindChainMismatches, NamesTheRanksOutOfTheMajorityAndHowToNameTheOperation) {
  Job j = ChainJob(false);
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_GE(d.findings_size(), 1) << FormatText(d);
  const report::Finding& f = d.findings(0);
  EXPECT_EQ(f.kind(), report::MISMATCH);
  EXPECT_EQ(Names(f.culprits()), V{"rank 3"});
  EXPECT_EQ(f.comm_hash(), 0xabcu);
  EXPECT_NE(f.summary().find("rank 3 issued collectives on comm 'world' (4 ranks) that differ from ranks 0,1,2's"),
            std::string::npos)
      << f.summary();
  EXPECT_NE(f.summary().find("between collectives #5 and #9"), std::string::npos) << f.summary();
  EXPECT_NE(f.summary().find("--collectives="), std::string::npos) << f.summary();
}

TEST(FindChainMismatches, AskedRangeWithoutAnOperationLevelFindingSaysSo) {
  Job j = ChainJob(true);
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_GE(d.findings_size(), 1) << FormatText(d);
  EXPECT_EQ(d.findings(0).kind(), report::MISMATCH);
  EXPECT_NE(d.findings(0).summary().find("no one of them differs on its own"), std::string::npos)
      << d.findings(0).summary();
}

}  // namespace
}  // namespace ncclwatch::tools
