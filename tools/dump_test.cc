// `ncclwatch dump` on a file from the trace builder: a MaskChange (NCCL
// 2.31's RAS changing the event mask) is printed with its bits named, in
// the record lines and in the file's summary; on a per-node summary, what
// its arrival samples carry.

#include "tools/dump.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/summary/summary.h"
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

// A node of a job whose communicator spans two: its summary's samples
// carry each collective's size bucket, and with completions from CUDA
// events its GPU-held time, which dump says.
TEST(Dump, SaysWhatASummarysSamplesCarry) {
  const std::string tmp = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  for (bool events : {false, true}) {
    testing::JobSpec spec;
    spec.nranks = 8;
    spec.ranks_per_host = 4;
    spec.ncolls = 400;
    spec.event_completions = events;
    const std::string dir = tmp + (events ? "/dump-events" : "/dump-channels");
    mkdir(dir.c_str(), 0755);
    const std::vector<std::string> files = testing::WriteJob(testing::BuildJob(spec), dir);
    SummarizeOptions opts;
    opts.window = 16;
    SummaryResult r;
    std::string error;
    ASSERT_TRUE(Summarize({files.begin(), files.begin() + 4}, opts, &r, &error)) << error;
    const std::string path = dir + "/node0.ncclsummary";
    std::ofstream(path, std::ios::binary) << EncodeSummary(r);
    std::ostringstream out, err;
    EXPECT_EQ(Dump({path}, DumpOptions(), out, err), 0) << err.str();
    const std::string want = events ? " arrivals sampled, one in 2 of 400 collectives, with sizes, with GPU-held times\n"
                                    : " arrivals sampled, one in 2 of 400 collectives, with sizes\n";
    EXPECT_NE(out.str().find(want), std::string::npos) << out.str();
  }
}

}  // namespace
}  // namespace ncclwatch::tools
