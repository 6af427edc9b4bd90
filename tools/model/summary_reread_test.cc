// The two readings of a job's summaries (summary_reread.h): what the first
// lets go, the second gives back field for field, from node summaries and
// from a group's (whose references are resolved again); a file changed
// between the readings is named once, and the verdict says its evidence is
// incomplete. And what diagnose keeps: no stats rows (LoadOptions), the
// same verdict.

#include "tools/model/summary_reread.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/util/message_differencer.h>

#include "tools/diagnose/diagnose.h"
#include "tools/model/job.h"
#include "tools/model/summary_merge.h"
#include "tools/summary/group.h"
#include "tools/summary/summary.h"
#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools {
namespace {

using google::protobuf::util::MessageDifferencer;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A job of 16 ranks on 4 nodes, 600 collectives of two functions, rank 5's
// count wrong at one of them: each node's summary at a window of 8 (so its
// prefixes hold checkpoints, and its processes stats rows and samples),
// and one group of all four. Returns {group, node0, ..., node3}.
std::vector<std::string> MakeSummaries(const std::string& name) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  mkdir(dir.c_str(), 0755);
  mkdir((dir + "/traces").c_str(), 0755);
  testing::JobSpec spec;
  spec.nranks = 16;
  spec.ranks_per_host = 4;
  spec.ncolls = 600;
  spec.funcs = {"AllReduce", "Broadcast"};
  spec.step_ns = 2 * testing::kMs;
  spec.op_hook = [](int rank, int op, testing::OpPlan& p) {
    if (rank == 5 && op == 40) p.count = 4096;
  };
  const std::vector<std::string> files = testing::WriteJob(testing::BuildJob(spec), dir + "/traces");
  std::vector<std::string> out = {dir + "/group.ncclsummary"};
  SummarizeOptions opts;
  opts.window = 8;
  std::string error;
  for (size_t first = 0; first < files.size(); first += 4) {
    SummaryResult s;
    EXPECT_TRUE(Summarize({files.begin() + first, files.begin() + first + 4}, opts, &s, &error)) << error;
    out.push_back(dir + "/node" + std::to_string(first / 4) + ".ncclsummary");
    Write(out.back(), EncodeSummary(s));
  }
  SummaryResult group;
  EXPECT_TRUE(Summarize({out.begin() + 1, out.end()}, opts, &group, &error)) << error;
  EXPECT_GT(group.header.nodes(), 0u);
  Write(out[0], EncodeSummary(group));
  return out;
}

// Every process of `files`, read whole, in file order.
std::vector<summary::SummaryProcess> ReadWhole(const std::vector<std::string>& files) {
  std::vector<summary::SummaryProcess> all;
  for (const std::string& f : files) {
    SummaryResult s;
    std::string error;
    EXPECT_TRUE(ReadSummaryFile(f, &s, &error)) << error;
    for (summary::SummaryProcess& p : s.procs) all.push_back(std::move(p));
  }
  return all;
}

// The first reading of `files`.
struct Light {
  std::vector<SummaryPiece> pieces;
  std::vector<std::string> errors;
  std::unordered_map<std::string, uint32_t> crcs;
};
Light ReadLight(const std::vector<std::string>& files) {
  Light l;
  ReadLightSummaries(files, &l.pieces, &l.errors, &l.crcs);
  return l;
}

TEST(SummaryRereadTest, TheSecondReadingGivesEveryProcessBackWhole) {
  const std::vector<std::string> files = MakeSummaries("whole");
  const std::vector<summary::SummaryProcess> whole = ReadWhole(files);
  auto [pieces, errors, crcs] = ReadLight(files);
  EXPECT_TRUE(errors.empty()) << errors[0];
  ASSERT_EQ(pieces.size(), 32u);  // the group's 16 and the nodes' 16
  ASSERT_EQ(whole.size(), pieces.size());
  uint64_t checkpoints = 0, rows = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    // Light: the header record at most, no checkpoints, rows or digests;
    // the samples and the counts kept.
    const summary::SummaryProcess& sp = pieces[i].sp;
    EXPECT_TRUE(pieces[i].light);
    EXPECT_LE(sp.records_size(), 1);
    EXPECT_EQ(pieces[i].records, static_cast<uint64_t>(whole[i].records_size()));
    EXPECT_EQ(sp.rows_size(), 0);
    EXPECT_FALSE(sp.has_arrivals());
    EXPECT_EQ(sp.samples_size(), whole[i].samples_size());
    EXPECT_EQ(sp.let_go_ops(), whole[i].let_go_ops());
    for (const summary::CommPrefix& p : sp.prefixes()) EXPECT_EQ(p.checkpoints_size(), 0);
    for (const summary::CommPrefix& p : whole[i].prefixes()) checkpoints += p.checkpoints_size();
    rows += whole[i].rows_size();
  }
  // What the light pieces let go was there to let go.
  EXPECT_GT(checkpoints, 0u);
  EXPECT_GT(rows, 0u);
  SummaryRereader again(crcs);
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::string error;
    ASSERT_TRUE(again.Refill(i, &pieces, &error)) << error;
    EXPECT_TRUE(MessageDifferencer::Equals(pieces[i].sp, whole[i])) << "piece " << i << " of " << pieces[i].source;
  }
}

TEST(SummaryRereadTest, PiecesAskedOutOfTheFilesOrderAreStillGivenBack) {
  const std::vector<std::string> files = MakeSummaries("order");
  const std::vector<summary::SummaryProcess> whole = ReadWhole(files);
  auto [pieces, errors, crcs] = ReadLight(files);
  ASSERT_EQ(pieces.size(), whole.size());
  SummaryRereader again(crcs);
  // A node's piece first, then the group's (the file before it).
  for (size_t i : {20u, 3u, 31u}) {
    std::string error;
    ASSERT_TRUE(again.Refill(i, &pieces, &error)) << error;
    EXPECT_TRUE(MessageDifferencer::Equals(pieces[i].sp, whole[i])) << "piece " << i;
  }
}

TEST(SummaryRereadTest, AFileChangedBetweenTheReadingsIsNamedOnceAndTheVerdictIsIncomplete) {
  const std::vector<std::string> files = MakeSummaries("changed");
  // Diagnosed as they are: the mismatch, named from the chains.
  Model before;
  std::string error;
  ASSERT_TRUE(BuildJobModel({files.begin() + 1, files.end()}, LoadOptions(), &before, &error)) << error;
  const std::string verdict = Diagnose(before).verdict();
  EXPECT_EQ(verdict.rfind("MISMATCH", 0), 0u) << verdict;

  const std::vector<std::string> nodes(files.begin() + 1, files.end());
  auto [pieces, errors, crcs] = ReadLight(nodes);
  ASSERT_EQ(pieces.size(), 16u);
  // node1 is written again between the readings, as node2.
  const std::string node1 = Slurp(nodes[1]);
  Write(nodes[1], Slurp(nodes[2]));
  {
    SummaryRereader again(crcs);
    std::vector<std::string> said;
    for (size_t i = 0; i < pieces.size(); ++i) {
      std::string e;
      const bool ok = again.Refill(i, &pieces, &e);
      EXPECT_EQ(ok, pieces[i].source != nodes[1]) << "piece " << i;
      if (!e.empty()) said.push_back(e);
    }
    ASSERT_EQ(said.size(), 1u);
    EXPECT_NE(said[0].find(nodes[1] + ": changed"), std::string::npos) << said[0];
  }

  // Through the merge: fed without what the file no longer gives, and the
  // verdict says the evidence is incomplete, naming the file.
  Write(nodes[1], node1);
  Light first = ReadLight(nodes);
  first.crcs[nodes[1]] ^= 1;  // as if the bytes read first were others
  SummaryRereader again(first.crcs);
  Model m;
  ASSERT_TRUE(BuildModelFromPieces(
      std::move(first.pieces), {}, {}, LoadOptions(), &m, &error,
      [&again](size_t i, std::vector<SummaryPiece>* p, std::string* e) { return again.Refill(i, p, e); }))
      << error;
  MatchOps(&m);
  AlignClocks(&m);
  ASSERT_EQ(m.errors.size(), 1u);
  EXPECT_NE(m.errors[0].find(nodes[1]), std::string::npos) << m.errors[0];
  const std::string incomplete = Diagnose(m).verdict();
  EXPECT_EQ(incomplete.rfind("INCOMPLETE", 0), 0u) << incomplete;
  EXPECT_NE(incomplete.find(nodes[1] + ": changed"), std::string::npos) << incomplete;
}

TEST(SummaryRereadTest, WithoutStatsRowsTheModelKeepsNoneAndGivesTheSameVerdict) {
  const std::vector<std::string> files = MakeSummaries("rows");
  std::string error;
  Model with, without;
  ASSERT_TRUE(BuildJobModel({files[0]}, LoadOptions(), &with, &error)) << error;
  LoadOptions lo;
  lo.stats_rows = false;
  ASSERT_TRUE(BuildJobModel({files[0]}, lo, &without, &error)) << error;
  ASSERT_EQ(with.procs.size(), 16u);
  ASSERT_EQ(without.procs.size(), with.procs.size());
  size_t rows = 0;
  for (size_t i = 0; i < with.procs.size(); ++i) {
    EXPECT_TRUE(with.procs[i].digested);
    EXPECT_TRUE(without.procs[i].digested);
    EXPECT_TRUE(without.procs[i].row_digests.empty());
    EXPECT_TRUE(without.procs[i].rank_digests.empty());
    rows += with.procs[i].row_digests.size();
  }
  EXPECT_GT(rows, 0u);
  EXPECT_TRUE(without.undigested.empty());
  const report::Diagnosis a = Diagnose(with), b = Diagnose(without);
  EXPECT_EQ(a.verdict(), b.verdict());
  EXPECT_EQ(a.verdict().rfind("MISMATCH", 0), 0u) << a.verdict();
}

}  // namespace
}  // namespace ncclwatch::tools
