// A node summary made at a window of 64 operations and cut by a group to a
// window of K (group.h, window_summary.h RewindowProcess) is the summary
// the node would have made at K from its traces: every process equal,
// field for field (MessageDifferencer), for a synthetic job (a mismatch,
// point-to-point operations, a straggler and a hang) and for every
// recording under testdata/ (the CI reruns included: they are longer than
// a node's window), with and without collectives asked. Checked
// on the rule alone, for every process, and through a group made of the
// node's summary file, which keeps whole a process its node let go
// nothing of (group.cc says why). And where a group does cut (the CI
// reruns, the synthetic job), at its default window it gives its nodes'
// findings: first line, exit status, every finding's kind and culprits.
//
// What legitimately differs, and so is not compared:
//  - the header: a group's says how many nodes it stands for, and its
//    window is the group's;
//  - SummaryProcess.checkpoint_every, which a group makes explicit (its
//    header's interval may not be each input's); it is compared against
//    the node's header instead;
//  - the cap: it is left off (max_bytes_per_rank 0), since what the cap
//    thins or cuts depends on the window it measures; a process the cap
//    cut is kept whole by a group (never re-cut), which CappedProcessStays
//    checks.

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "tools/diagnose/diagnose.h"
#include "tools/model/inputs.h"
#include "tools/model/job.h"
#include "tools/model/summary_format.h"
#include "tools/model/window_summary.h"
#include "tools/summary/summary.h"
#include "tools/summary/test_summaries.h"
#include "tools/testing/synthetic_job.h"

namespace ncclwatch::tools {
namespace {

using testing::RecordingFolders;

namespace t = testing;

std::string Tmp() { return getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp"; }

// The synthetic job (tools/testing/synthetic_job.h) of `ranks` ranks and
// `colls` collectives, with a send and a receive in each pair every 7th
// step. Its host folders.
std::vector<std::string> WriteJob(const std::string& dir, int ranks, int colls) {
  t::SyntheticJob job;
  job.ranks = ranks;
  job.colls = colls;
  job.p2p = true;
  std::vector<std::string> hosts;
  std::string error;
  EXPECT_TRUE(t::WriteSyntheticJob(dir, job, &hosts, &error)) << error;
  return hosts;
}

SummarizeOptions Options(uint64_t window, uint64_t group_window, const std::vector<CollectiveRange>& asked) {
  SummarizeOptions o;
  o.window = window;
  o.group_window = group_window;
  o.max_bytes_per_rank = 0;
  o.collectives = asked;
  return o;
}

// Every communicator of `s` asked from its first collective to its 64th.
std::vector<CollectiveRange> AskFirst(const SummaryResult& s) {
  std::vector<CollectiveRange> asked;
  for (const summary::SummaryProcess& p : s.procs)
    for (const summary::CommPrefix& c : p.prefixes())
      if (c.comm_hash() != 0 &&
          std::none_of(asked.begin(), asked.end(), [&](const CollectiveRange& a) { return a.comm_hash == c.comm_hash(); }))
        asked.push_back(CollectiveRange{c.comm_hash(), 1, 64});
  return asked;
}

struct Counts {
  int processes = 0;  // compared
  int cut = 0;        // of them, cut by the group
};

// Whether `a` and `b` are equal, field for field; else what differs.
::testing::AssertionResult Same(const summary::SummaryProcess& a, const summary::SummaryProcess& b) {
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  if (differ.Compare(a, b)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << diff;
}

// The node summary of `files` at 64 cut to each window of `windows`, by
// the rule (RewindowProcess) and by a group made of it (Summarize), against
// the node's own summary at that window.
void Compare(const std::vector<std::string>& files, const std::string& tag, const std::vector<uint64_t>& windows,
             bool ask, Counts* n) {
  std::vector<CollectiveRange> asked;
  if (ask) {
    SummaryResult first;
    std::string error;
    if (!Summarize(files, Options(64, 64, {}), &first, &error)) return;
    asked = AskFirst(first);
  }
  SummaryResult node;
  std::string error;
  if (!Summarize(files, Options(64, 64, asked), &node, &error)) return;
  std::string name = tag + (ask ? "-asked" : "") + kSummaryExtension;
  std::replace(name.begin(), name.end(), '/', '_');
  const std::string path = Tmp() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << EncodeSummary(node);
  for (const uint64_t k : windows) {
    SummaryResult direct, group;
    ASSERT_TRUE(Summarize(files, Options(k, k, asked), &direct, &error)) << tag << ": " << error;
    ASSERT_TRUE(Summarize({path}, Options(64, k, {}), &group, &error)) << tag << ": " << error;
    EXPECT_EQ(group.header.window(), k) << tag;
    EXPECT_EQ(group.header.read_errors_size(), 0) << tag;
    ASSERT_EQ(group.procs.size(), direct.procs.size()) << tag;
    ASSERT_EQ(node.procs.size(), direct.procs.size()) << tag;
    for (size_t i = 0; i < direct.procs.size(); ++i) {
      const summary::SummaryProcess& d = direct.procs[i];
      const std::string what = tag + (ask ? " (asked)" : "") + " at window " + std::to_string(k) + ", " + d.path();
      // The rule alone.
      summary::SummaryProcess cut = node.procs[i];
      ASSERT_TRUE(RewindowProcess(k, node.header.checkpoint_every(), &cut, &error)) << what << ": " << error;
      EXPECT_TRUE(Same(d, cut)) << what << ": cut by the rule, it differs from the node's own";
      // The group: the same, but for a process its node let go nothing
      // of, which it keeps as written.
      summary::SummaryProcess g = group.procs[i];
      EXPECT_EQ(g.checkpoint_every(), node.header.checkpoint_every()) << what;
      g.clear_checkpoint_every();
      const bool kept = node.procs[i].let_go_ops() == 0;
      EXPECT_TRUE(Same(kept ? node.procs[i] : d, g)) << what << ": the group's differs from the node's";
      ++n->processes;
      n->cut += !kept && g.let_go_ops() > node.procs[i].let_go_ops();
    }
  }
}

TEST(RewindowTest, SyntheticJobCutByTheGroupIsTheNodesAtThatWindow) {
  const std::vector<std::string> hosts = WriteJob(Tmp() + "/job", 16, 300);
  Counts n;
  for (const std::string& host : hosts)
    for (bool ask : {false, true}) Compare({host}, host, {1, 2, 4, 8, 16, 63, 64}, ask, &n);
  EXPECT_EQ(n.processes, 2 * 16 * 7);
  EXPECT_GE(n.cut, 2 * 16 * 6);  // every window but 64 lets more go
}

TEST(RewindowTest, RecordingsCutByTheGroupAreTheNodesAtThatWindow) {
  std::vector<std::string> folders;
  RecordingFolders("testdata", &folders);
  ASSERT_GE(folders.size(), 100u);
  Counts n;
  for (const std::string& folder : folders)
    for (bool ask : {false, true}) Compare({folder}, folder, {2, 8}, ask, &n);
  printf("compared %d processes, %d of them cut by the group\n", n.processes, n.cut);
  EXPECT_GE(n.processes, 1000);
  EXPECT_GE(n.cut, 300);
}

// Diagnose's findings on `paths`: each one's kind and culprits, in order,
// after the first line and the exit status.
std::vector<std::string> Findings(const std::vector<std::string>& paths) {
  Model m;
  std::string error;
  if (!BuildJobModel(paths, LoadOptions(), &m, &error)) return {"UNUSABLE: " + error};
  const report::Diagnosis d = Diagnose(m);
  std::vector<std::string> out{d.verdict(), std::to_string(ExitStatus(d))};
  for (const report::Finding& f : d.findings()) {
    std::set<std::string> culprits;
    for (const report::ProcRef& p : f.culprits()) culprits.insert(p.name());
    std::string line = report::FindingKind_Name(f.kind()) + ":";
    for (const std::string& c : culprits) line += " " + c;
    out.push_back(line);
  }
  return out;
}

// Where a group does cut (jobs longer than the nodes' window: the CI
// reruns, slowed ones included, and the synthetic job, one summary per
// host), a group at its default window gives the nodes' findings: the
// same first line, exit status, and every finding's kind and culprits.
TEST(RewindowTest, GroupAtItsDefaultWindowGivesTheNodesFindings) {
  std::vector<std::vector<std::string>> jobs;
  std::vector<std::string> ci;
  RecordingFolders("testdata/ci", &ci);
  ASSERT_GE(ci.size(), 20u);
  for (const std::string& folder : ci) jobs.push_back({folder});
  jobs.push_back(WriteJob(Tmp() + "/findings", 32, 400));
  int compared = 0, cut = 0, referring = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    std::vector<std::string> nodes;
    for (size_t h = 0; h < jobs[j].size(); ++h) {
      SummaryResult s;
      std::string error;
      ASSERT_TRUE(Summarize({jobs[j][h]}, SummarizeOptions(), &s, &error)) << jobs[j][h] << ": " << error;
      nodes.push_back(Tmp() + "/findings-" + std::to_string(j) + "-" + std::to_string(h) + kSummaryExtension);
      std::ofstream(nodes.back(), std::ios::binary | std::ios::trunc) << EncodeSummary(s);
    }
    SummaryResult g;
    std::string error;
    ASSERT_TRUE(Summarize(nodes, SummarizeOptions(), &g, &error)) << error;
    EXPECT_EQ(g.header.window(), kGroupWindow);
    for (const summary::SummaryProcess& p : g.procs) cut += p.let_go_ops() > 0;
    const std::string group = Tmp() + "/findings-" + std::to_string(j) + "-group" + kSummaryExtension;
    bool shared = false;
    std::ofstream(group, std::ios::binary | std::ios::trunc) << testing::EncodeAndReadBack(g, group, &shared);
    referring += shared;
    EXPECT_EQ(Findings({group}), Findings(nodes)) << jobs[j][0];
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(jobs.size()));
  EXPECT_GE(cut, 4 * 20);
  // The synthetic job's members share checkpoints and samples.
  EXPECT_GE(referring, 1);
}

// A process the cap cut (cut_ops) is not the rule's whole output: a group
// keeps it as its node wrote it.
TEST(RewindowTest, CappedProcessStays) {
  const std::vector<std::string> hosts = WriteJob(Tmp() + "/capped", 8, 300);
  SummarizeOptions o = Options(64, 64, {});
  o.max_bytes_per_rank = 4096;
  SummaryResult node, group;
  std::string error;
  ASSERT_TRUE(Summarize({hosts[0]}, o, &node, &error)) << error;
  const std::string path = Tmp() + "/capped.ncclsummary";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << EncodeSummary(node);
  ASSERT_TRUE(Summarize({path}, Options(64, 4, {}), &group, &error)) << error;
  ASSERT_EQ(group.procs.size(), node.procs.size());
  int capped = 0;
  for (size_t i = 0; i < node.procs.size(); ++i) {
    if (node.procs[i].cut_ops() == 0) continue;
    ++capped;
    summary::SummaryProcess g = group.procs[i];
    if (node.procs[i].checkpoint_every() == 0) g.clear_checkpoint_every();
    EXPECT_EQ(g.SerializeAsString(), node.procs[i].SerializeAsString()) << node.procs[i].path();
  }
  EXPECT_GT(capped, 0);
}

}  // namespace
}  // namespace ncclwatch::tools
