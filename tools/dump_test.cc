// `ncclwatch dump` on a file from the trace builder: a MaskChange (NCCL
// 2.31's RAS changing the event mask) is printed with its bits named, in
// the record lines and in the file's summary.

#include "tools/dump.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <sstream>
#include <string>

#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools {
namespace {

using testing::kMs;
using testing::kSec;

TEST(Dump, PrintsAMaskChangeWithItsBitsNamed) {
  const std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/mask.ncclwatch";
  testing::TraceBuilder b;
  const int w = b.AddComm(0x3A5, "world", 2, 0, kSec);
  b.Coll(w, "AllReduce", 0, 1024, 2 * kSec, static_cast<int64_t>(2 * kSec + kMs));
  b.MaskChange(3 * kSec + 10 * kMs, 0x46, 0x6, 3 * kSec, 0x40);
  b.MaskChange(4 * kSec, 0x6, 0x4e, 3 * kSec + 990 * kMs, 0x40);
  b.Finalize(5 * kSec);
  ASSERT_TRUE(b.WriteTo(path));
  std::ostringstream out, err;
  EXPECT_EQ(Dump({path}, DumpOptions(), out, err), 0) << err.str();
  const std::string s = out.str();
  const std::string first =
      "mask change at 3.010 s (file time; last read of the old mask 3.000 s): Coll|P2p|KernelCh -> Coll|P2p "
      "(0x46 -> 0x6), completions from KernelCh: stops completions";
  // Once on its record's line (then the record itself), once in the summary.
  const size_t rec = s.find(first + "  mask_change {");
  EXPECT_NE(rec, std::string::npos) << s;
  EXPECT_NE(s.find("-- " + first + "\n"), std::string::npos) << s;
  EXPECT_NE(s.find("-- mask change at 4.000 s (file time; last read of the old mask 3.990 s): Coll|P2p -> "
                   "Coll|P2p|ProxyOp|KernelCh (0x6 -> 0x4e), completions from KernelCh: stops nothing the analyses "
                   "need\n"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace ncclwatch::tools
