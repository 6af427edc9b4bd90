// NCCL 2.31's RAS changes the event mask of a whole job mid-run
// (trace::MaskChange): files from the trace builder, through BuildModel and
// Diagnose. A change that took away the completion source or the
// collectives makes the evidence incomplete, never OK, and never a hang for
// want of a completion; one that took away nothing is a note under Input.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"
#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools {
namespace {

using testing::kMs;
using testing::kSec;
using testing::kUs;

constexpr uint64_t kMask = 0x46;      // Coll | P2p | KernelCh: the plugin's default
constexpr uint64_t kKernelCh = 0x40;

std::string TempDir() { return testing::NewTestDir("mask_change"); }

// Two ranks run AllReduce #0..#9 (10 ms apart from 3 s, each completing in
// 1 ms), then `after` adds what follows on each rank's builder; both stay
// alive (heartbeats) until 20 s and finalize cleanly.
report::Diagnosis RunTwoRanks(const std::function<void(int rank, testing::TraceBuilder& b, int comm)>& after,
                      Model* model = nullptr) {
  const std::string dir = TempDir();
  std::vector<testing::TraceBuilder> files;
  for (int rank = 0; rank < 2; ++rank) {
    testing::ProcSpec ps;
    ps.pid = 900 + rank;
    ps.launcher_rank = rank;
    ps.launcher_world_size = 2;
    ps.event_mask = kMask;
    ps.stuck_sec = 0;  // the plugin's own stuck reports are tested in plugin/writer/mask_test.cc
    testing::TraceBuilder b(ps);
    const int w = b.AddComm(0x3A5, "world", 2, rank, 2 * kSec);
    for (uint64_t k = 0; k < 10; ++k) {
      const uint64_t t = 3 * kSec + k * 10 * kMs;
      b.Coll(w, "AllReduce", k, 1024, t, static_cast<int64_t>(t + kMs));
    }
    after(rank, b, w);
    b.Heartbeats(kSec, 20 * kSec);
    b.FinalizeComm(w, 20 * kSec + kMs);
    b.Finalize(20 * kSec + 2 * kMs);
    files.push_back(std::move(b));
  }
  testing::WriteJob(files, dir);
  Model m;
  std::string err;
  EXPECT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
  report::Diagnosis d = Diagnose(m);
  std::cout << "---- " << ::testing::UnitTest::GetInstance()->current_test_info()->name() << "\n" << FormatText(d);
  if (model != nullptr) *model = std::move(m);
  return d;
}

// What the plugin writes when RAS takes KernelCh away at ~4 s: AllReduce #10
// started after the writer's last read of the old mask and before it saw
// the new one (tracked, never completes); #11 and #12 came after (written
// with NO_COMPLETION_MASK). With `record` false the MaskChange is left out,
// as a plugin that did not watch the mask would: then #10 reads as hung.
void KernelChTakenAway(int, testing::TraceBuilder& b, int w, bool record) {
  const uint64_t since = 4 * kSec, seen = 4 * kSec + 10 * kMs;
  b.Coll(w, "AllReduce", 10, 1024, since + 2 * kMs, testing::kNever);
  if (record) b.MaskChange(seen, kMask, kMask & ~kKernelCh, since, kKernelCh);
  testing::OpOpts untracked;
  untracked.completion_tracked = false;
  untracked.no_completion = trace::NO_COMPLETION_MASK;
  b.Coll(w, "AllReduce", 11, 1024, seen + 5 * kMs, testing::kNever, untracked);
  b.Coll(w, "AllReduce", 12, 1024, seen + 15 * kMs, testing::kNever, untracked);
}

TEST(MaskChange, CompletionSourceTakenAwayIsIncompleteAndNoHang) {
  // Without the record, the operation that lost its completion is a hang:
  // what the record must prevent.
  report::Diagnosis blind = RunTwoRanks([](int r, testing::TraceBuilder& b, int w) { KernelChTakenAway(r, b, w, false); });
  ASSERT_GE(blind.findings_size(), 1) << blind.verdict();

  Model m;
  report::Diagnosis d =
      RunTwoRanks([](int r, testing::TraceBuilder& b, int w) { KernelChTakenAway(r, b, w, true); }, &m);
  EXPECT_EQ(d.findings_size(), 0) << d.verdict();
  EXPECT_EQ(d.verdict().rfind("INCOMPLETE: no problem found", 0), 0u) << d.verdict();
  EXPECT_NE(d.verdict().find("NCCL's event mask stopped completions (KernelCh) on ranks 0,1 at "), std::string::npos)
      << d.verdict();
  EXPECT_EQ(d.exit_status(), 3);
  EXPECT_EQ(ExitStatus(d), 3);
  // The change, per process, under Input.
  int notes = 0;
  for (const report::InputIssue& i : d.input_issues())
    if (i.kind() == report::InputIssue::MASK_CHANGE) {
      ++notes;
      EXPECT_NE(i.text().find("from Coll|P2p|KernelCh to Coll|P2p"), std::string::npos) << i.text();
      EXPECT_NE(i.text().find("are not judged hung for want of one"), std::string::npos) << i.text();
    }
  EXPECT_EQ(notes, 2);
  // The model: #10 lost its completion source, and so did #11 and #12.
  ASSERT_EQ(m.procs.size(), 2u);
  ASSERT_EQ(m.procs[0].mask_changes.size(), 1u);
  EXPECT_TRUE(m.procs[0].mask_changes[0].LostSource());
  EXPECT_FALSE(m.procs[0].mask_changes[0].LostColl());
  for (const Op& op : m.ops) EXPECT_EQ(op.mask_unseen, op.seq >= 10) << op.seq;
}

TEST(MaskChange, CollTakenAwayIsIncompleteNeverOk) {
  // RAS keeps only P2p and KernelCh: the collectives after it go unreported
  // on both ranks, which alone would read as a healthy, idle job.
  report::Diagnosis d = RunTwoRanks([](int, testing::TraceBuilder& b, int) {
    b.MaskChange(4 * kSec + 10 * kMs, kMask, 0x44, 4 * kSec, kKernelCh);
  });
  EXPECT_EQ(d.verdict().rfind("INCOMPLETE", 0), 0u) << d.verdict();
  EXPECT_EQ(d.verdict().find("OK"), std::string::npos) << d.verdict();
  EXPECT_NE(d.verdict().find("stopped collectives on ranks 0,1"), std::string::npos) << d.verdict();
  EXPECT_EQ(d.exit_status(), 3);
}

TEST(MaskChange, AHarmlessChangeLeavesTheVerdictWithANote) {
  const report::Diagnosis plain = RunTwoRanks([](int, testing::TraceBuilder&, int) {});
  // ProxyOp added: nothing a verdict needs is taken away.
  const report::Diagnosis d = RunTwoRanks([](int, testing::TraceBuilder& b, int) {
    b.MaskChange(4 * kSec + 10 * kMs, kMask, kMask | 0x8, 4 * kSec, kKernelCh);
  });
  EXPECT_EQ(d.verdict(), plain.verdict());
  EXPECT_EQ(d.verdict().rfind("OK", 0), 0u) << d.verdict();
  EXPECT_EQ(d.exit_status(), 0);
  EXPECT_EQ(d.incomplete_size(), 0);
  int notes = 0;
  for (const report::InputIssue& i : d.input_issues())
    if (i.kind() == report::InputIssue::MASK_CHANGE) {
      ++notes;
      EXPECT_NE(i.text().find("nothing the verdict needs was taken away"), std::string::npos) << i.text();
      EXPECT_NE(i.text().find("0x46 to 0x4e"), std::string::npos) << i.text();
    }
  EXPECT_EQ(notes, 2);
  EXPECT_NE(FormatText(d).find("NCCL's event mask changed at "), std::string::npos) << FormatText(d);
}

// Values no plugin writes: masks past 32 bits, a source that is neither
// KernelCh nor KernelLaunch, a last read after the change. No crash; the
// file is damaged there, and the change is read as taking everything away:
// the operation after it is not hung, the verdict incomplete.
TEST(MaskChange, AbsurdValuesAreDamageNotACrash) {
  Model m;
  report::Diagnosis d = RunTwoRanks(
      [](int rank, testing::TraceBuilder& b, int w) {
        if (rank == 0) b.MaskChange(4 * kSec + 10 * kMs, UINT64_MAX, 1ull << 40, 4 * kSec + 20 * kMs, 12345);
        b.Coll(w, "AllReduce", 10, 1024, 4 * kSec + 12 * kMs, rank == 0 ? testing::kNever : int64_t(4 * kSec + 13 * kMs));
      },
      &m);
  ASSERT_EQ(m.procs.size(), 2u);
  const Proc& p0 = m.procs[0].launcher_rank == 0 ? m.procs[0] : m.procs[1];
  EXPECT_TRUE(p0.damaged);
  ASSERT_EQ(p0.mask_changes.size(), 1u);
  EXPECT_TRUE(p0.mask_changes[0].damaged);
  EXPECT_TRUE(p0.mask_changes[0].TakesAwayEvidence());
  EXPECT_LE(p0.mask_changes[0].since_ns, p0.mask_changes[0].time_ns);
  EXPECT_EQ(d.verdict().rfind("INCOMPLETE", 0), 0u) << d.verdict();
  EXPECT_EQ(d.exit_status(), 3);
  for (const report::Finding& f : d.findings()) EXPECT_NE(f.kind(), report::STUCK_IN_PROGRESS) << f.summary();
}

}  // namespace
}  // namespace ncclwatch::tools
