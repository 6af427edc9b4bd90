// Summaries of synthetic long jobs (tools/testing/trace_builder.h): what a
// merge of per-node summaries says against diagnose on the traces.

#include "tools/summary/job.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"
#include "tools/summary/summary.h"
#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools {
namespace {

using testing::BuildJob;
using testing::JobSpec;
using testing::OpPlan;

struct Outcome {
  std::string traces_line, summaries_line;
  int traces_exit = -1, summaries_exit = -1;
  uint64_t summary_bytes = 0;
  uint64_t largest_proc_bytes = 0;   // the largest SummaryProcess
  uint64_t cut_ops = 0;              // over every process
  uint32_t checkpoint_every = 0;     // the widest interval after thinning
  report::Diagnosis summaries;
};

// The job's files, each host's summary, and both verdicts.
Outcome Judge(const JobSpec& spec, const std::string& name, SummarizeOptions opts) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  mkdir(dir.c_str(), 0755);
  const std::vector<std::string> files = testing::WriteJob(BuildJob(spec), dir);
  Outcome r;
  Model m;
  std::string error;
  EXPECT_TRUE(BuildJobModel({dir}, LoadOptions(), &m, &error)) << error;
  const report::Diagnosis full = Diagnose(m);
  r.traces_line = full.verdict();
  r.traces_exit = ExitStatus(full);
  std::vector<std::string> summaries;
  for (size_t first = 0; first < files.size(); first += spec.ranks_per_host) {
    std::vector<std::string> node(files.begin() + first,
                                  files.begin() + std::min(files.size(), first + spec.ranks_per_host));
    SummaryResult s;
    EXPECT_TRUE(Summarize(node, opts, &s, &error)) << error;
    for (const summary::SummaryProcess& p : s.procs) {
      r.largest_proc_bytes = std::max<uint64_t>(r.largest_proc_bytes, p.ByteSizeLong());
      r.cut_ops += p.cut_ops() + p.cut_stuck_ops();
      r.checkpoint_every = std::max(r.checkpoint_every, p.checkpoint_every());
    }
    const std::string bytes = EncodeSummary(s);
    r.summary_bytes += bytes.size();
    summaries.push_back(dir + "/node" + std::to_string(first) + ".ncclsummary");
    std::ofstream(summaries.back(), std::ios::binary) << bytes;
  }
  Model sm;
  EXPECT_TRUE(BuildJobModel(summaries, LoadOptions(), &sm, &error)) << error;
  const report::Diagnosis d = Diagnose(sm);
  r.summaries_line = d.verdict();
  r.summaries_exit = ExitStatus(d);
  r.summaries = d;
  return r;
}

Outcome Judge(const JobSpec& spec, const std::string& name, uint64_t window = 64) {
  SummarizeOptions opts;
  opts.window = window;
  return Judge(spec, name, opts);
}

JobSpec LongJob() {
  JobSpec spec;
  spec.nranks = 8;
  spec.ranks_per_host = 4;
  spec.ncolls = 2000;
  spec.funcs = {"AllReduce", "Broadcast"};
  spec.step_ns = 2 * testing::kMs;
  return spec;
}

TEST(SummaryJobTest, AHangAtTheEndGivesTheTracesVerdict) {
  JobSpec spec = LongJob();
  spec.funcs = {"AllReduce"};
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 3 && op == 1990) p.skip = true;
  };
  const Outcome r = Judge(spec, "hang");
  EXPECT_EQ(r.traces_line.rfind("HANG: rank 3 never joined", 0), 0u) << r.traces_line;
  EXPECT_EQ(r.summaries_line, r.traces_line);
  EXPECT_EQ(r.summaries_exit, r.traces_exit);
  // Bounded: each rank's summary is a window, not its 2,000 operations.
  EXPECT_LT(r.summary_bytes / 8, 64u << 10);
}

TEST(SummaryJobTest, AnEarlyMismatchIsFoundThroughTheChains) {
  JobSpec spec = LongJob();
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 5 && op == 20) p.count = 4096;
  };
  const Outcome r = Judge(spec, "mismatch");
  EXPECT_EQ(r.traces_line.rfind("MISMATCH: AllReduce #10", 0), 0u) << r.traces_line;
  // The same culprit, and where: the operation itself went with the window.
  EXPECT_EQ(r.summaries_exit, 1) << r.summaries_line;
  EXPECT_EQ(r.summaries_line.rfind("MISMATCH: rank 5 issued collectives on comm 'world' (8 ranks) that differ from "
                                   "ranks 0-4,6,7's in function, count, datatype or root between collectives #1 "
                                   "and #64 of the communicator",
                                   0),
            0u)
      << r.summaries_line;
  EXPECT_NE(r.summaries_line.find("signature chains"), std::string::npos) << r.summaries_line;
}

TEST(SummaryJobTest, AnOperationOneRankLetGoAndAnotherNeverFinishedIsIncomplete) {
  JobSpec spec = LongJob();
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 2 && op == 200) p.never_completes = true;
  };
  SummarizeOptions opts;
  opts.max_bytes_per_rank = 0;  // rank 2 keeps its 1,800 operations after #100: past the cap
  const Outcome r = Judge(spec, "conflict", opts);
  EXPECT_NE(r.traces_exit, 0) << r.traces_line;
  EXPECT_EQ(r.summaries_exit, 3) << r.summaries_line;
  EXPECT_EQ(r.summaries_line.rfind("INCOMPLETE: the summaries cannot tell what went wrong: ", 0), 0u)
      << r.summaries_line;
  EXPECT_NE(r.summaries_line.find("AllReduce #100 of rank 2"), std::string::npos) << r.summaries_line;
  EXPECT_NE(r.summaries_line.find("larger --window"), std::string::npos) << r.summaries_line;
}

// 'world' spans the two nodes: no summary holds every rank's arrivals, so
// the straggler finder cannot judge what they let go.
TEST(SummaryJobTest, AHealthyLongJobAcrossNodesIsNeverOkFromSummariesThatLetGo) {
  const Outcome r = Judge(LongJob(), "healthy");
  EXPECT_EQ(r.traces_line.rfind("OK: ", 0), 0u) << r.traces_line;
  EXPECT_EQ(r.summaries_exit, 3);
  EXPECT_NE(r.summaries_line.find("arrival times (stragglers, late ranks) are not judged"), std::string::npos)
      << r.summaries_line;
}

// Every rank on one node: its summary holds every collective's arrivals
// (ArrivalDigest), so what it let go is judged, and a healthy job is OK.
TEST(SummaryJobTest, AHealthyLongJobWithinANodeIsOkFromItsSummary) {
  JobSpec spec = LongJob();
  spec.ranks_per_host = 8;
  const Outcome r = Judge(spec, "healthy-node");
  EXPECT_EQ(r.traces_line.rfind("OK: ", 0), 0u) << r.traces_line;
  EXPECT_EQ(r.summaries_line, r.traces_line);
  EXPECT_EQ(r.summaries_exit, 0);
}

// Rank 3 late at the first 1,500 of 2,000 collectives, all let go: the
// traces' STRAGGLER, word for word, from the summary.
TEST(SummaryJobTest, AStragglerBeforeTheWindowIsFound) {
  JobSpec spec = LongJob();
  spec.ranks_per_host = 8;
  spec.step_ns = 5 * testing::kMs;
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 3 && op < 1500) p.start_ns += 2 * testing::kMs;
  };
  const Outcome r = Judge(spec, "straggler-node");
  EXPECT_EQ(r.traces_line.rfind("STRAGGLER: rank 3 arrived last at 1,500 of 2,000 collectives", 0), 0u)
      << r.traces_line;
  EXPECT_EQ(r.summaries_line, r.traces_line);
  EXPECT_EQ(r.summaries_exit, r.traces_exit);
  // Across nodes the windows' arrivals (the last 64, all on time) are all
  // the summaries hold: never a verdict of them, INCOMPLETE.
  spec.ranks_per_host = 4;
  const Outcome across = Judge(spec, "straggler-across");
  EXPECT_EQ(across.summaries_exit, 3) << across.summaries_line;
  EXPECT_NE(across.summaries_line.find("arrival times (stragglers, late ranks) are not judged"), std::string::npos)
      << across.summaries_line;
}

TEST(SummaryJobTest, AWindowLongerThanTheJobGivesTheTracesVerdict) {
  SummarizeOptions opts;
  opts.window = 5000;
  opts.max_bytes_per_rank = 0;  // 2,000 operations: past the cap
  const Outcome r = Judge(LongJob(), "whole", opts);
  EXPECT_EQ(r.summaries_line, r.traces_line);
  EXPECT_EQ(r.summaries_exit, 0);
}

// The size cap per rank (--max-kb-per-rank). A checkpoint per collective
// over 2,000 of them passes 8 KB: thinned, they fit, and the early
// mismatch is still found with its culprit, placed less closely.
TEST(SummaryJobTest, CheckpointsPastTheCapAreThinnedAndTheMismatchStaysFound) {
  JobSpec spec = LongJob();
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 5 && op == 20) p.count = 4096;
  };
  SummarizeOptions opts;
  opts.checkpoint_every = 1;
  opts.max_bytes_per_rank = 0;
  const Outcome whole = Judge(spec, "thin-uncapped", opts);
  EXPECT_GT(whole.largest_proc_bytes, 8u << 10);  // the cap below binds
  EXPECT_EQ(whole.checkpoint_every, 0u);
  opts.max_bytes_per_rank = 8 << 10;
  const Outcome r = Judge(spec, "thin", opts);
  EXPECT_LE(r.largest_proc_bytes, 8u << 10);
  EXPECT_GE(r.checkpoint_every, 2u);
  EXPECT_EQ(r.cut_ops, 0u);
  EXPECT_EQ(r.summaries_exit, 1) << r.summaries_line;
  EXPECT_EQ(r.summaries_line.rfind("MISMATCH: rank 5 issued collectives on comm 'world' (8 ranks) that differ from "
                                   "ranks 0-4,6,7's",
                                   0),
            0u)
      << r.summaries_line;
}

// An operation that never finishes keeps every later one in its rank's
// window: unbounded without the cap. With it, the summary stays under the
// cap, and the verdict says INCOMPLETE, why, and blames no one.
TEST(SummaryJobTest, AWindowPastTheCapIsCutAndTheVerdictIsIncomplete) {
  JobSpec spec = LongJob();
  spec.ncolls = 1000;  // a smaller cap than the default, for a shorter test
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 2 && op == 5) p.never_completes = true;
  };
  SummarizeOptions opts;
  opts.window = 5000;  // nothing let go: the uncapped summaries judge as the traces
  opts.max_bytes_per_rank = 0;
  const Outcome whole = Judge(spec, "cut-uncapped", opts);
  EXPECT_GT(whole.largest_proc_bytes, 16u << 10);
  EXPECT_EQ(whole.summaries_line, whole.traces_line);
  EXPECT_EQ(whole.traces_exit, 1) << whole.traces_line;
  opts.max_bytes_per_rank = 16 << 10;
  const Outcome r = Judge(spec, "cut", opts);
  EXPECT_LE(r.largest_proc_bytes, 16u << 10);
  EXPECT_GT(r.cut_ops, 0u);
  EXPECT_EQ(r.summaries_exit, 3) << r.summaries_line;
  EXPECT_EQ(r.summaries_line.rfind("INCOMPLETE: the summaries cannot tell what went wrong: ", 0), 0u)
      << r.summaries_line;
  EXPECT_NE(r.summaries_line.find("to stay within --max-kb-per-rank"), std::string::npos) << r.summaries_line;
  for (const report::Finding& f : r.summaries.findings()) EXPECT_EQ(f.culprits_size(), 0) << f.summary();
}

// A summary written into the traces' own folder holds the same processes
// as the trace files beside it: each is read once, from the whole file, and
// the note names the summary's copy.
TEST(SummaryJobTest, ASummaryBesideItsTracesYieldsToThem) {
  JobSpec spec = LongJob();
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 3 && op == 1990) p.skip = true;
  };
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/beside";
  mkdir(dir.c_str(), 0755);
  const std::vector<std::string> files = testing::WriteJob(BuildJob(spec), dir);
  Model whole;
  std::string error;
  ASSERT_TRUE(BuildJobModel({dir}, LoadOptions(), &whole, &error)) << error;
  SummarizeOptions opts;
  opts.window = 2;
  SummaryResult s;
  ASSERT_TRUE(Summarize(files, opts, &s, &error)) << error;
  const std::string summary = dir + "/node.ncclsummary";
  std::ofstream(summary, std::ios::binary) << EncodeSummary(s);

  Model m;
  ASSERT_TRUE(BuildJobModel({dir}, LoadOptions(), &m, &error)) << error;
  ASSERT_EQ(m.procs.size(), files.size());
  EXPECT_EQ(m.ops.size(), whole.ops.size());
  for (const Proc& p : m.procs) EXPECT_EQ(p.settled_ops, 0u) << p.path;
  int copies = 0;
  for (const std::string& n : m.notes)
    if (n.rfind("the copy of ", 0) == 0 && n.find(" in " + summary + " holds the same process as ") != std::string::npos)
      ++copies;
  EXPECT_EQ(copies, static_cast<int>(files.size())) << ::testing::PrintToString(m.notes);
  EXPECT_EQ(Diagnose(m).verdict(), Diagnose(whole).verdict());
}

}  // namespace
}  // namespace ncclwatch::tools
