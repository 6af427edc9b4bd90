// UNMATCHED_P2P (find_p2p.h), through Diagnose.

#include "tools/diagnose/diagnose.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/diagnose/test_job.h"

namespace ncclwatch::tools {
namespace {

using namespace diagnose_testing;  // NOLINT: the tests' own job builder

TEST(FindP2p, SendWithoutReceive) {
  Job j;
  j.Procs(3, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  j.P2p(0, w, "Send", 2, 1, 4096, 1.0, 1.2);
  j.P2p(2, w, "Recv", 0, 1, 4096, 1.0, 1.2);
  j.P2p(0, w, "Send", 2, 2, 4096, 2.0, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "UNMATCHED P2P: rank 0 sent 4,096 x ncclFloat32 to rank 2 on comm 'world' (3 ranks) (Send #2 between them); "
            "rank 2 never posted the matching Recv; rank 0 waited 13.0 s; rank 2 is alive but idle outside NCCL "
            "after Recv #1 from rank 0 [cause: program logic]");
  EXPECT_EQ(Names(d.findings(0).culprits()), V{"rank 2"});
  EXPECT_EQ(Names(d.findings(0).waiting()), V{"rank 0"});
  EXPECT_TRUE(d.findings(0).p2p());
}

TEST(FindP2p, SendAndReceiveSizesDisagree) {
  Job j;
  j.Procs(2, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1});
  j.P2p(0, w, "Send", 1, 1, 1024, 1.0, -1);
  j.P2p(1, w, "Recv", 0, 1, 2048, 1.0, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.verdict(),
            "UNMATCHED P2P: sizes disagree on comm 'world' (2 ranks): rank 0's Send #1 to rank 1 carries 1,024 x ncclFloat32 "
            "but rank 1's Recv expects 2,048 x ncclFloat32 [cause: program logic]");
  EXPECT_EQ(Names(d.findings(0).culprits()), (V{"rank 0", "rank 1"}));
}

TEST(FindP2p, SameBytesInDifferentDatatypesAgree) {
  Job j;
  j.Procs(2, 2.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1});
  j.P2p(0, w, "Send", 1, 1, 1024, 1.0, 1.1, "ncclFloat32");
  j.P2p(1, w, "Recv", 0, 1, 2048, 1.0, 1.1, "ncclBfloat16");
  for (uint32_t p = 0; p < 2; ++p) j.Finalize(p, 2.0);
  EXPECT_EQ(Diagnose(j.Finish()).findings_size(), 0);
}

}  // namespace
}  // namespace ncclwatch::tools
