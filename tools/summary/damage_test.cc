// A summary whose bytes changed after it was written is never evidence:
// every byte of one rank's summary of two recordings (a skipped collective
// and a healthy job, each rank summarized alone), changed one at a time, gives
// diagnose's verdict on the intact summaries or one that says the evidence
// is incomplete or unusable, never another finding or an OK the job did not
// earn. The per-record CRC-32 (tools/model/summary_format.h) is what holds
// this; the test fails without it (a changed count or hash reads as a
// mismatch).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/model/inputs.h"
#include "tools/model/summary_format.h"
#include "tools/summary/summary.h"
#include "tools/summary/test_summaries.h"

namespace ncclwatch::tools {
namespace {

using testing::ReadBytes;
using testing::SaysDamaged;
using testing::Summaries;
using testing::Verdict;
using testing::WriteBytes;

// Every byte of the first rank's summary, changed one at a time (by one of
// three masks in turn: a low bit, a varint's continuation bit, all bits),
// the other ranks' summaries intact.
void EveryByteOf(const std::string& folder, const std::string& tag) {
  const std::vector<std::string> paths = Summaries(folder, false, tag);
  ASSERT_GT(paths.size(), 1u);
  const std::string intact = Verdict(paths);
  ASSERT_FALSE(SaysDamaged(intact)) << intact;
  const std::string& path = paths[0];
  const std::string bytes = ReadBytes(path);
  const uint8_t masks[] = {0x01, 0x80, 0xff};
  size_t changed = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const uint8_t mask = masks[i % 3];
    std::string b = bytes;
    b[i] = static_cast<char>(static_cast<uint8_t>(b[i]) ^ mask);
    WriteBytes(path, b);
    const std::string v = Verdict(paths);
    if (v != intact) ++changed;
    EXPECT_TRUE(v == intact || SaysDamaged(v))
        << path << " byte " << i << " ^ " << int{mask} << ": " << v << "\n  intact: " << intact;
  }
  WriteBytes(path, bytes);
  // The changes were seen: the checksums make nearly every one damage.
  EXPECT_GT(changed, bytes.size() * 9 / 10) << tag;
}

TEST(SummaryDamage, EveryByteOfASkipJobsSummary) { EveryByteOf("testdata/gpu/skip", "skip"); }

TEST(SummaryDamage, EveryByteOfAHealthyJobsSummary) { EveryByteOf("testdata/gpu/healthy", "healthy"); }

// A node summary damaged before it was gathered into a group's: the
// group's verdict is the nodes' own, its INCOMPLETE naming the same file,
// offset and record (SummaryHeader.read_errors), never a finding or an OK
// the damage hid. One byte in 13, each changed by all bits.
TEST(SummaryDamage, AGroupOfADamagedNodeSaysWhatItsNodesSay) {
  const std::vector<std::string> paths = Summaries("testdata/gpu/skip", false, "group-skip");
  ASSERT_GT(paths.size(), 1u);
  const std::string group = testing::Tmp() + "/group-skip.ncclsummary";
  const std::string bytes = ReadBytes(paths[0]);
  size_t damaged = 0;
  for (size_t i = 0; i < bytes.size(); i += 13) {
    std::string b = bytes;
    b[i] = static_cast<char>(~static_cast<uint8_t>(b[i]));
    WriteBytes(paths[0], b);
    const std::string nodes = Verdict(paths);
    SummaryResult s;
    std::string error;
    if (!Summarize(paths, SummarizeOptions(), &s, &error)) {
      EXPECT_TRUE(SaysDamaged(nodes)) << "byte " << i << ": no group made (" << error << "), yet: " << nodes;
      continue;
    }
    WriteBytes(group, EncodeSummary(s));
    EXPECT_EQ(Verdict({group}), nodes) << "byte " << i;
    damaged += SaysDamaged(nodes);
  }
  WriteBytes(paths[0], bytes);
  EXPECT_GT(damaged, bytes.size() / 13 / 2);
}

// A summary of the previous format (version 2: the same records, no
// checksums) still reads; a checked file whose version byte was changed to
// 2 does not.
TEST(SummaryDamage, AnUncheckedVersionTwoSummaryStillReads) {
  // At the default window, and at 2 with a checkpoint every 2 collectives
  // (prefixes and chains to check: tools/model/summary_checks.h).
  for (uint64_t window : {64, 2}) {
    SummaryResult s;
    std::string error;
    const TraceInputs in = ListFiles({"testdata/gpu/healthy"}, &IsTraceFileName);
    SummarizeOptions opts;
    opts.window = window;
    opts.checkpoint_every = window == 2 ? 2 : opts.checkpoint_every;
    ASSERT_TRUE(Summarize(in.files, opts, &s, &error)) << error;
    s.header.set_version(2);
    const std::string checked = EncodeSummary(s);
    // Each frame without its four checksum bytes (length, body, CRC).
    std::vector<size_t> starts = SummaryFrameStarts(checked);
    ASSERT_EQ(starts.size(), 1 + s.procs.size());
    starts.push_back(checked.size());
    std::string plain;
    for (size_t k = 0; k + 1 < starts.size(); ++k) plain.append(checked, starts[k], starts[k + 1] - starts[k] - 4);
    SummaryResult back;
    ASSERT_TRUE(ParseSummary("v2", plain, &back, &error)) << error;
    EXPECT_EQ(error, "");
    EXPECT_EQ(back.procs.size(), s.procs.size());
    SummaryResult lied;
    EXPECT_FALSE(ParseSummary("v3", checked, &lied, &error));
    EXPECT_NE(error.find("says format version 2 but carries a version 3 checksum"), std::string::npos) << error;
  }
}

// One process's record changed in a summary of four: the other three are
// read, and the error names the one that is not.
TEST(SummaryDamage, OneDamagedProcessLeavesTheOthersRead) {
  SummaryResult s;
  std::string error;
  const TraceInputs in = ListFiles({"testdata/gpu/healthy"}, &IsTraceFileName);
  ASSERT_TRUE(Summarize(in.files, SummarizeOptions(), &s, &error)) << error;
  ASSERT_EQ(s.procs.size(), 4u);
  std::string bytes = EncodeSummary(s);
  // The second process's record: past the header's frame and the first's.
  const std::vector<size_t> starts = SummaryFrameStarts(bytes);
  ASSERT_EQ(starts.size(), 5u);
  bytes[(starts[2] + starts[3]) / 2] ^= 0x01;
  SummaryResult back;
  EXPECT_FALSE(ParseSummary("n.ncclsummary", bytes, &back, &error));
  EXPECT_EQ(back.procs.size(), 3u);
  EXPECT_EQ(error, "n.ncclsummary: offset " + std::to_string(starts[2]) +
                       ": record 2 (process 2) does not match its checksum: its bytes changed after it was "
                       "written; it is not read");
  // Its length changed instead: the boundary after it cannot be trusted.
  bytes[(starts[2] + starts[3]) / 2] ^= 0x01;
  bytes[starts[2]] ^= 0x01;
  SummaryResult cut;
  EXPECT_FALSE(ParseSummary("n.ncclsummary", bytes, &cut, &error));
  EXPECT_EQ(cut.procs.size(), 1u);
  EXPECT_NE(error.find("record 2 (process 2) does not match its checksum: its bytes changed after it was written; "
                       "it and what follows are not read"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace ncclwatch::tools
