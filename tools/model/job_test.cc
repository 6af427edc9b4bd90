// Summaries of synthetic long jobs (tools/testing/trace_builder.h): what a
// merge of per-node summaries says against diagnose on the traces.

#include "tools/model/job.h"
#include "tools/model/summary_merge.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"
#include "tools/stats/stats.h"
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
  uint64_t largest_samples_bytes = 0;  // the largest ArrivalSamples (one rank, one communicator)
  uint32_t largest_stride_log2 = 0;
  uint64_t fewest_samples = UINT64_MAX;  // of any rank on any communicator
  uint64_t cut_ops = 0;              // over every process
  uint32_t checkpoint_every = 0;     // the widest interval after thinning
  report::Diagnosis traces, summaries;
  // The second round (summarize --collectives with what the first asks,
  // RefineRanges), where Judge was asked for it.
  std::vector<CollectiveRange> refine;
  std::string refined_line;
  int refined_exit = -1;
  uint64_t refined_bytes = 0;
  uint64_t asked_kept = 0;  // asked_collectives over every process (of the second round, if any)
  uint64_t refined_cut_ops = 0;
  std::vector<CollectiveRange> refine_again;  // what the second round's merge still asks
  report::Diagnosis refined;
};

// Each host's summary of `files` in `dir`, named after `tag`; adds to
// `r`'s sizes and counts, returns the paths.
std::vector<std::string> SummarizeHosts(const JobSpec& spec, const std::vector<std::string>& files,
                                        const std::string& dir, const std::string& tag, const SummarizeOptions& opts,
                                        Outcome* r, uint64_t* bytes_total) {
  std::vector<std::string> summaries;
  std::string error;
  for (size_t first = 0; first < files.size(); first += spec.ranks_per_host) {
    std::vector<std::string> node(files.begin() + first,
                                  files.begin() + std::min(files.size(), first + spec.ranks_per_host));
    SummaryResult s;
    EXPECT_TRUE(Summarize(node, opts, &s, &error)) << error;
    for (const summary::SummaryProcess& p : s.procs) {
      r->largest_proc_bytes = std::max<uint64_t>(r->largest_proc_bytes, p.ByteSizeLong());
      r->cut_ops += p.cut_ops() + p.cut_stuck_ops();
      r->checkpoint_every = std::max(r->checkpoint_every, p.checkpoint_every());
      r->asked_kept += static_cast<uint64_t>(p.asked_collectives_size());
      for (const summary::ArrivalSamples& a : p.samples()) {
        r->largest_samples_bytes = std::max<uint64_t>(r->largest_samples_bytes, a.ByteSizeLong());
        r->largest_stride_log2 = std::max(r->largest_stride_log2, a.stride_log2());
        r->fewest_samples = std::min<uint64_t>(r->fewest_samples, static_cast<uint64_t>(a.count()));
      }
    }
    const std::string bytes = EncodeSummary(s);
    *bytes_total += bytes.size();
    summaries.push_back(dir + "/" + tag + std::to_string(first) + ".ncclsummary");
    std::ofstream(summaries.back(), std::ios::binary) << bytes;
  }
  return summaries;
}

// The job's files, each host's summary, and both verdicts; with
// `second_round`, the summaries made again with what the first merge asks
// (diagnose --refine-args), and their verdict.
Outcome Judge(const JobSpec& spec, const std::string& name, SummarizeOptions opts, bool second_round = false) {
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
  r.traces = full;
  const std::vector<std::string> summaries = SummarizeHosts(spec, files, dir, "node", opts, &r, &r.summary_bytes);
  Model sm;
  EXPECT_TRUE(BuildJobModel(summaries, LoadOptions(), &sm, &error)) << error;
  const report::Diagnosis d = Diagnose(sm);
  r.summaries_line = d.verdict();
  r.summaries_exit = ExitStatus(d);
  r.summaries = d;
  r.refine = RefineRanges(sm);
  if (!second_round) return r;
  opts.collectives = r.refine;
  Outcome second;  // its sizes apart: the asked collectives are outside the cap
  const std::vector<std::string> again = SummarizeHosts(spec, files, dir, "again", opts, &second, &r.refined_bytes);
  r.asked_kept = second.asked_kept;
  r.refined_cut_ops = second.cut_ops;
  Model rm;
  EXPECT_TRUE(BuildJobModel(again, LoadOptions(), &rm, &error)) << error;
  r.refined = Diagnose(rm);
  r.refined_line = r.refined.verdict();
  r.refined_exit = ExitStatus(r.refined);
  r.refine_again = RefineRanges(rm);
  return r;
}

Outcome Judge(const JobSpec& spec, const std::string& name, uint64_t window = 64, bool second_round = false) {
  SummarizeOptions opts;
  opts.window = window;
  return Judge(spec, name, opts, second_round);
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

// The second round: the first merge names the range and asks for it
// (RefineRanges, what diagnose --refine-args prints, also in the first
// line); summaries made again with it name the operation as the traces do,
// in a line of their own, and ask nothing more.
TEST(SummaryJobTest, TheSecondRoundNamesTheOperation) {
  JobSpec spec = LongJob();
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 5 && op == 20) p.count = 4096;
  };
  const Outcome r = Judge(spec, "second-round", 64, true);
  ASSERT_EQ(r.refine.size(), 1u);
  EXPECT_EQ(r.refine[0].from, 1u);
  EXPECT_EQ(r.refine[0].to, 64u);
  const std::string arg = "--collectives=" + FormatCollectiveRanges(r.refine);
  EXPECT_NE(r.summaries_line.find("summarize the nodes again adding " + arg + " (diagnose --refine-args prints it)"),
            std::string::npos)
      << r.summaries_line;
  EXPECT_EQ(r.refined_line, r.traces_line);
  EXPECT_EQ(r.refined_exit, r.traces_exit);
  EXPECT_EQ(r.refined_line.rfind("MISMATCH: AllReduce #10 on comm 'world' (8 ranks): rank 5 called count 4,096", 0),
            0u)
      << r.refined_line;
  // Folded: the range is not said again as a finding of its own.
  for (const report::Finding& f : r.refined.findings())
    EXPECT_EQ(f.summary().find("signature chains"), std::string::npos) << f.summary();
  EXPECT_TRUE(r.refine_again.empty()) << FormatCollectiveRanges(r.refine_again);
  // Bounded: each rank keeps its 64 asked collectives, no more.
  EXPECT_EQ(r.asked_kept, 8u * 64);
  EXPECT_GT(r.refined_bytes, r.summary_bytes);
  EXPECT_LT(r.refined_bytes - r.summary_bytes, 8u * 64 * 128);
}

// Rank 5 calls a Broadcast where the others call their 11th AllReduce, and
// the job ends in a deadlock (the functions' counters no longer line up):
// the traces' first line. Behind it the traces name the first collective
// out of turn, though every later one of rank 5's is shifted too (the whole
// job is one cycle of the merged order, searched from its start). The
// first round places it between collectives #1 and #64 (the windows' later
// order mismatch of rank 5 is its consequence, said as its evidence); the
// second names it as the traces do (an ORDER MISMATCH of the cycle finder
// over the collectives put back, not of FindMismatches: the range is folded
// into it all the same), the first line unchanged, and asks no third round.
TEST(SummaryJobTest, TheSecondRoundOfAFunctionMismatchAsksNoThird) {
  JobSpec spec = LongJob();
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 5 && op == 20) p.func = "Broadcast";
  };
  const Outcome r = Judge(spec, "func-second-round", 64, true);
  ASSERT_FALSE(r.refine.empty()) << r.summaries_line;
  EXPECT_EQ(r.summaries_line, r.traces_line);
  EXPECT_EQ(r.refined_line, r.traces_line);
  EXPECT_EQ(r.refined_exit, r.traces_exit);
  EXPECT_TRUE(r.refine_again.empty()) << FormatCollectiveRanges(r.refine_again);
  auto has = [](const report::Diagnosis& d, const std::string& text) {
    for (const report::Finding& f : d.findings())
      if (f.summary().find(text) != std::string::npos) return true;
    return false;
  };
  const std::string first_out_of_turn =
      "ORDER MISMATCH: rank 5 issued Broadcast #10 before AllReduce #10 on comm 'world' (8 ranks) where ranks "
      "0-4,6,7 issued AllReduce #10 first; both completed on every rank, each against the other: their "
      "results are wrong";
  EXPECT_TRUE(has(r.traces, first_out_of_turn));
  EXPECT_TRUE(has(r.summaries, "signature chains"));
  EXPECT_FALSE(has(r.summaries, "ORDER MISMATCH"));
  bool folded = false;
  for (const report::Finding& f : r.summaries.findings())
    for (const report::Evidence& e : f.evidence())
      folded |= f.summary().find("signature chains") != std::string::npos &&
                e.text().rfind("in the windows, later: ORDER MISMATCH: rank 5 issued Broadcast", 0) == 0;
  EXPECT_TRUE(folded);
  EXPECT_TRUE(has(r.refined, first_out_of_turn));
  EXPECT_FALSE(has(r.refined, "signature chains"));
  ASSERT_EQ(r.refined.findings_size(), r.traces.findings_size());
  for (int i = 0; i < r.traces.findings_size(); ++i)
    EXPECT_EQ(r.refined.findings(i).summary(), r.traces.findings(i).summary());
}

// A mismatch the windows hold: found as before, nothing to ask; asking
// anyway (a range of the let-go ones) changes nothing.
TEST(SummaryJobTest, AMismatchInsideTheWindowIsUnaffected) {
  JobSpec spec = LongJob();
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 5 && op == 1990) p.count = 4096;
  };
  const Outcome r = Judge(spec, "in-window", 64, true);
  EXPECT_EQ(r.summaries_line, r.traces_line);
  EXPECT_TRUE(r.refine.empty()) << FormatCollectiveRanges(r.refine);
  EXPECT_EQ(r.refined_line, r.traces_line);
  Model m;
  std::string error;
  SummarizeOptions opts;
  opts.collectives = {{0, 1, 64}};
  ASSERT_TRUE(BuildJobModel({std::string(getenv("TEST_TMPDIR")) + "/in-window"}, LoadOptions(), &m, &error));
  opts.collectives[0].comm_hash = m.comms[0].hash;
  const Outcome asked = Judge(spec, "in-window-asked", opts);
  EXPECT_EQ(asked.summaries_line, r.traces_line);
  EXPECT_EQ(asked.asked_kept, 8u * 64);
}

// What was put back is history: a healthy job's verdict from summaries
// that kept asked collectives is the one without them (no HANG, no
// straggler of them, the same totals), and so is one where a node was not
// asked (its members cannot answer: nothing is put back).
TEST(SummaryJobTest, AskedCollectivesChangeNoOtherVerdict) {
  JobSpec spec = LongJob();
  const Outcome plain = Judge(spec, "asked-healthy-plain");
  Model m;
  std::string error;
  ASSERT_TRUE(BuildJobModel({std::string(getenv("TEST_TMPDIR")) + "/asked-healthy-plain"}, LoadOptions(), &m, &error));
  SummarizeOptions opts;
  opts.collectives = {{m.comms[0].hash, 1, 64}, {m.comms[0].hash, 500, 563}};
  const Outcome asked = Judge(spec, "asked-healthy", opts);
  EXPECT_EQ(asked.asked_kept, 8u * 128);
  EXPECT_EQ(asked.summaries_line, plain.summaries_line);
  EXPECT_EQ(asked.summaries_exit, plain.summaries_exit);
  EXPECT_EQ(asked.summaries.operations(), plain.summaries.operations());
  // Every rank on one node: OK from the summary, with or without them.
  spec.ranks_per_host = 8;
  const Outcome node = Judge(spec, "asked-healthy-node", opts);
  EXPECT_EQ(node.summaries_line.rfind("OK: ", 0), 0u) << node.summaries_line;
  EXPECT_EQ(node.summaries_line, node.traces_line);

  // The mismatch job, one node asked and the other not: the first round's
  // range, no HANG or INCOMPLETE from the half put back.
  spec = LongJob();
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 5 && op == 20) p.count = 4096;
  };
  const Outcome first = Judge(spec, "half-asked", 64, true);
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/half-asked";
  Model half;
  ASSERT_TRUE(BuildJobModel({dir + "/node0.ncclsummary", dir + "/again4.ncclsummary"}, LoadOptions(), &half, &error))
      << error;
  EXPECT_EQ(Diagnose(half).verdict(), first.summaries_line);
  EXPECT_TRUE(half.asked_ops.empty());
}

// Asked for a communicator no rank has, or positions past a rank's last
// collective: nothing added, said in a note, the verdict the same.
TEST(SummaryJobTest, AskingForWhatIsNotThereAddsNothing) {
  JobSpec spec = LongJob();
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 5 && op == 20) p.count = 4096;
  };
  const Outcome first = Judge(spec, "not-there-plain");
  SummarizeOptions opts;
  opts.collectives = {{0xdeadbeefull, 1, 64}};
  const Outcome r = Judge(spec, "not-there", opts);
  EXPECT_EQ(r.asked_kept, 0u);
  EXPECT_EQ(r.summaries_line, first.summaries_line);
  SummaryResult s;
  std::string error;
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/not-there";
  ASSERT_TRUE(Summarize({dir}, opts, &s, &error)) << error;
  ASSERT_FALSE(s.notes.empty());
  EXPECT_NE(s.notes.back().find("--collectives: no rank here is a member of communicator 0x00000000deadbeef"),
            std::string::npos)
      << s.notes.back();
  // Past the last collective (2,000 per rank): nothing kept.
  Model m;
  ASSERT_TRUE(BuildJobModel({dir}, LoadOptions(), &m, &error)) << error;
  opts.collectives = {{m.comms[0].hash, 5000, 5063}};
  const Outcome past = Judge(spec, "past-the-end", opts);
  EXPECT_EQ(past.asked_kept, 0u);
  EXPECT_EQ(past.summaries_line, first.summaries_line);
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

// 'world' spans the two nodes: no summary holds every rank's arrivals, but
// each samples them across the whole job (one in 8 of 2,000 collectives),
// and the merge judges the samples: a healthy job is OK, as from the
// traces, even with the hosts' clocks 40 ms apart (the alignment's error
// raises no false straggler).
TEST(SummaryJobTest, AHealthyLongJobAcrossNodesIsOkFromTheSamples) {
  JobSpec spec = LongJob();
  spec.rank_hook = [](int rank, testing::RankPlan& p) {
    p.realtime_error_ns = rank < 4 ? -20 * static_cast<int64_t>(testing::kMs) : 20 * static_cast<int64_t>(testing::kMs);
    p.drift_ppm = rank < 4 ? 0 : 5;
  };
  const Outcome r = Judge(spec, "healthy");
  EXPECT_EQ(r.traces_line.rfind("OK: ", 0), 0u) << r.traces_line;
  EXPECT_EQ(r.summaries_line, r.traces_line);
  EXPECT_EQ(r.summaries_exit, 0);
  EXPECT_EQ(r.largest_stride_log2, 3u);
  for (const report::Finding& f : r.summaries.findings()) EXPECT_NE(f.kind(), report::STRAGGLER) << f.summary();
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
  // Across nodes the windows' arrivals (the last 64) are all on time; the
  // samples across the job find it: the traces' culprit and share.
  spec.ranks_per_host = 4;
  const Outcome across = Judge(spec, "straggler-across");
  EXPECT_EQ(across.summaries_exit, across.traces_exit) << across.summaries_line;
  EXPECT_EQ(across.summaries_line.rfind("STRAGGLER: rank 3 arrived last at 177 of 246 collectives sampled across "
                                        "the job (one in 8 on comm 'world' (8 ranks); 72%), a median 2.0 ms",
                                        0),
            0u)
      << across.summaries_line;
}

// Rank 6 late at every AllReduce only, a quarter of its collectives, in a
// step of AllReduce, Broadcast, AllGather, ReduceScatter (it sleeps before
// each all_reduce): the traces name it from its AllReduce row. Across
// nodes only the samples can; were they every 8th position, all would be
// ReduceScatters, on time, and the summaries would say OK.
TEST(SummaryJobTest, AStragglerAtOneFunctionOfTheStepIsSampled) {
  JobSpec spec = LongJob();
  spec.funcs = {"AllReduce", "Broadcast", "AllGather", "ReduceScatter"};
  spec.step_ns = 5 * testing::kMs;
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 6 && p.func == "AllReduce") p.start_ns += 2 * testing::kMs;
  };
  const Outcome r = Judge(spec, "straggler-one-function");
  EXPECT_EQ(r.traces_line.rfind("STRAGGLER: rank 6 ", 0), 0u) << r.traces_line;
  EXPECT_NE(r.traces_line.find("AllReduce"), std::string::npos) << r.traces_line;
  EXPECT_EQ(r.summaries_line.rfind("STRAGGLER: rank 6 ", 0), 0u) << r.summaries_line;
  EXPECT_NE(r.summaries_line.find("AllReduce"), std::string::npos) << r.summaries_line;
  EXPECT_NE(r.summaries_line.find("sampled across the job (one in 8 on comm 'world'"), std::string::npos)
      << r.summaries_line;
  EXPECT_EQ(r.summaries_exit, r.traces_exit);
}

// The merge of `dir`'s summaries (`nodes`), each process changed by
// `strip` first: what a summary without some of its parts says.
report::Diagnosis Remerged(const std::string& dir, const std::vector<std::string>& nodes,
                           const std::function<void(summary::SummaryProcess*)>& strip) {
  std::vector<summary::SummaryProcess> procs;
  std::vector<std::string> sources;
  for (const std::string& node : nodes) {
    SummaryResult s;
    std::string error;
    EXPECT_TRUE(ReadSummaryFile(dir + node, &s, &error)) << error;
    for (summary::SummaryProcess& p : s.procs) {
      strip(&p);
      procs.push_back(std::move(p));
      sources.push_back(dir + node);
    }
  }
  Model m;
  std::string error;
  EXPECT_TRUE(BuildModelFromSummaries(std::move(procs), {}, {}, LoadOptions(), &m, &error, &sources)) << error;
  MatchOps(&m);
  AlignClocks(&m);
  return Diagnose(m);
}

// With their arrival samples removed: what the summaries said before they
// kept any (the windows only).
report::Diagnosis WithoutSamples(const std::string& dir) {
  return Remerged(dir, {"/node0.ncclsummary", "/node4.ncclsummary"},
                  [](summary::SummaryProcess* p) { p->clear_samples(); });
}

// With the kernels' GPU-held times removed from the arrival digests and
// samples: what summaries made before they carried them say.
report::Diagnosis WithoutHeldTimes(const std::string& dir, const std::vector<std::string>& nodes) {
  return Remerged(dir, nodes, [](summary::SummaryProcess* p) {
    for (summary::ArrivalSamples& a : *p->mutable_samples()) a.clear_held();
    // An older summary made no digest for a process with such completions.
    if (p->has_arrivals() && p->arrivals().gpu_held()) p->clear_arrivals();
  });
}

// Rank 6 (on the second node) late by 2 ms at every collective, no error:
// the summaries name it as the traces do, over their samples, and the
// finding stands (not dropped, not "windows only").
TEST(SummaryJobTest, AStragglerAtEveryCollectiveIsNamedFromTheSamples) {
  JobSpec spec = LongJob();
  spec.step_ns = 5 * testing::kMs;
  spec.op_hook = [](int rank, int, OpPlan& p) {
    if (rank == 6) p.start_ns += 2 * testing::kMs;
  };
  const Outcome r = Judge(spec, "straggler-every");
  EXPECT_EQ(r.traces_line.rfind("STRAGGLER: rank 6 arrived last at 2,000 of 2,000 collectives", 0), 0u)
      << r.traces_line;
  EXPECT_EQ(r.summaries_exit, r.traces_exit) << r.summaries_line;
  ASSERT_GT(r.summaries.findings_size(), 0) << r.summaries_line;
  const report::Finding& f = r.summaries.findings(0);
  EXPECT_EQ(f.kind(), report::STRAGGLER);
  ASSERT_EQ(f.culprits_size(), 1);
  EXPECT_EQ(f.culprits(0).name(), r.traces.findings(0).culprits(0).name());
  EXPECT_EQ(r.summaries_line.rfind("STRAGGLER: rank 6 arrived last at 246 of 246 collectives sampled across the job "
                                   "(one in 8 on comm 'world' (8 ranks); 100%), a median 2.0 ms after the median rank",
                                   0),
            0u)
      << r.summaries_line;
  EXPECT_EQ(r.summaries_line.find("windows only"), std::string::npos) << r.summaries_line;
  EXPECT_EQ(r.summaries.incomplete_size(), 0);
}

// Rank 2 late only at the first 1,000 of 2,000 collectives, long before the
// windows: the windows alone find nothing (INCOMPLETE), the samples find
// the traces' straggler.
TEST(SummaryJobTest, AStragglerOnlyInTheFirstHalfIsFoundFromTheSamples) {
  JobSpec spec = LongJob();
  spec.step_ns = 5 * testing::kMs;
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 2 && op < 1000) p.start_ns += 2 * testing::kMs;
  };
  const Outcome r = Judge(spec, "straggler-first-half");
  EXPECT_EQ(r.traces_line.rfind("STRAGGLER: rank 2 arrived last at 1,000 of 2,000 collectives (50%)", 0), 0u)
      << r.traces_line;
  EXPECT_EQ(r.summaries_exit, r.traces_exit) << r.summaries_line;
  ASSERT_GT(r.summaries.findings_size(), 0) << r.summaries_line;
  EXPECT_EQ(r.summaries.findings(0).kind(), r.traces.findings(0).kind());
  ASSERT_EQ(r.summaries.findings(0).culprits_size(), 1);
  EXPECT_EQ(r.summaries.findings(0).culprits(0).name(), r.traces.findings(0).culprits(0).name());
  EXPECT_EQ(r.summaries_line.rfind("STRAGGLER: rank 2 arrived last at 124 of 246 collectives sampled across the job", 0),
            0u)
      << r.summaries_line;
  // Without the samples: what the summaries said before.
  const report::Diagnosis windows = WithoutSamples(std::string(getenv("TEST_TMPDIR")) + "/straggler-first-half");
  EXPECT_EQ(ExitStatus(windows), 3) << windows.verdict();
  EXPECT_EQ(windows.verdict().rfind("INCOMPLETE: ", 0), 0u) << windows.verdict();
}

// Completions from CUDA events (the default from profiler API v5): a
// healthy long job is OK from the summaries, across nodes (the samples
// carry each kernel's GPU-held time) and within one (the digest counts
// them), where summaries without them said INCOMPLETE.
TEST(SummaryJobTest, AHealthyJobWithEventCompletionsIsOkFromTheSummaries) {
  JobSpec spec = LongJob();
  spec.event_completions = true;
  for (int per_host : {4, 8}) {
    spec.ranks_per_host = per_host;
    const std::string name = "healthy-events-" + std::to_string(per_host);
    const Outcome r = Judge(spec, name);
    EXPECT_EQ(r.traces_line.rfind("OK: ", 0), 0u) << r.traces_line;
    EXPECT_EQ(r.summaries_line, r.traces_line) << per_host;
    EXPECT_EQ(r.summaries_exit, 0) << per_host;
    const std::vector<std::string> nodes =
        per_host == 4 ? std::vector<std::string>{"/node0.ncclsummary", "/node4.ncclsummary"}
                      : std::vector<std::string>{"/node0.ncclsummary"};
    const report::Diagnosis older = WithoutHeldTimes(std::string(getenv("TEST_TMPDIR")) + "/" + name, nodes);
    EXPECT_EQ(older.verdict().rfind("INCOMPLETE: ", 0), 0u) << per_host << ": " << older.verdict();
  }
}

// Rank 5's GPU gets to its AllReduce kernels 40 ms late (other work ahead
// of them on its GPU) at the first 1,800 of 2,000 collectives, while its
// host enqueues them in time; the windows (the last 64) are all on time.
// Within a node the digest names it in the traces' words; across nodes the
// samples do, said to be sampled. Without held times: INCOMPLETE.
TEST(SummaryJobTest, ARankHeldOnItsGpuBeforeTheWindowIsFound) {
  JobSpec spec = LongJob();
  spec.event_completions = true;
  spec.step_ns = 60 * testing::kMs;
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 5 && op < 1800 && p.func == "AllReduce") p.gpu_held_ns = 40 * testing::kMs;
  };
  spec.ranks_per_host = 8;
  const Outcome node = Judge(spec, "held-node");
  EXPECT_EQ(node.traces_line.rfind("STRAGGLER: rank 5's GPU got to AllReduce on comm 'world' (8 ranks) last at 900 "
                                   "of 1,000 (90%), a median 40.0 ms",
                                   0),
            0u)
      << node.traces_line;
  EXPECT_NE(node.traces_line.find("its host enqueued them in time"), std::string::npos) << node.traces_line;
  EXPECT_EQ(node.summaries_line, node.traces_line);
  EXPECT_EQ(node.summaries_exit, node.traces_exit);
  EXPECT_EQ(WithoutHeldTimes(std::string(getenv("TEST_TMPDIR")) + "/held-node", {"/node0.ncclsummary"})
                .verdict()
                .rfind("INCOMPLETE: ", 0),
            0u);

  spec.ranks_per_host = 4;
  const Outcome across = Judge(spec, "held-across");
  EXPECT_EQ(across.traces_line, node.traces_line);
  EXPECT_EQ(across.summaries_exit, across.traces_exit) << across.summaries_line;
  // 89% of the AllReduces sampled, where the traces count 90% of all.
  EXPECT_EQ(across.summaries_line.rfind("STRAGGLER: rank 5's GPU got to AllReduce on comm 'world' (8 ranks) last at "
                                        "119 of 134 sampled across the job (one in 8 on comm 'world' (8 ranks); "
                                        "89%), a median 40.0 ms",
                                        0),
            0u)
      << across.summaries_line;
  EXPECT_NE(across.summaries_line.find("its host enqueued them in time"), std::string::npos) << across.summaries_line;
  const report::Diagnosis older = WithoutHeldTimes(std::string(getenv("TEST_TMPDIR")) + "/held-across",
                                                   {"/node0.ncclsummary", "/node4.ncclsummary"});
  EXPECT_EQ(older.verdict().rfind("INCOMPLETE: ", 0), 0u) << older.verdict();
}

// `stats` of the summaries in `dir` (node0 and node4) and of its traces.
struct StatsPair {
  stats::Stats traces, summaries;
};
StatsPair StatsOfBoth(const JobSpec& spec, const std::string& name) {
  Judge(spec, name);
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  StatsPair out;
  Model tm, sm;
  std::string error;
  EXPECT_TRUE(BuildJobModel({dir + "/node0.ncclsummary", dir + "/node4.ncclsummary"}, LoadOptions(), &sm, &error))
      << error;
  out.summaries = ComputeStats(sm);
  std::vector<std::string> traces;
  for (const std::string& f : testing::WriteJob(BuildJob(spec), dir)) traces.push_back(f);
  EXPECT_TRUE(BuildJobModel(traces, LoadOptions(), &tm, &error)) << error;
  out.traces = ComputeStats(tm);
  return out;
}
const stats::RankRow* RankRowOf(const stats::Stats& s, int rank) {
  for (const stats::RankRow& r : s.ranks())
    if (r.comm() == "world" && r.rank() == rank) return &r;
  return nullptr;
}
const stats::StatRow* RowOf(const stats::Stats& s, const std::string& func) {
  for (const stats::StatRow& r : s.rows())
    if (r.comm() == "world" && r.func() == func) return &r;
  return nullptr;
}

// Rank 6 (second node) 2 ms late at the first 1,400 of 2,000 collectives;
// the windows (the last 64) are all on time. `stats` from the summaries
// takes each rank's lateness and each row's arrival skew on 'world', which
// spans both summaries, from the collectives sampled across the job, as the
// traces take them from all: rank 6 late by 2 ms at the median, where the
// windows would show it on time. Said in a note and in the rows' stride.
TEST(SummaryJobTest, StatsTakeSkewAndLatenessAcrossNodesFromTheSamples) {
  JobSpec spec = LongJob();
  spec.step_ns = 5 * testing::kMs;
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 6 && op < 1400) p.start_ns += 2 * testing::kMs;
  };
  const StatsPair s = StatsOfBoth(spec, "stats-across");
  const stats::RankRow* t6 = RankRowOf(s.traces, 6);
  const stats::RankRow* s6 = RankRowOf(s.summaries, 6);
  const stats::RankRow* s1 = RankRowOf(s.summaries, 1);
  ASSERT_NE(t6, nullptr);
  ASSERT_NE(s6, nullptr);
  ASSERT_NE(s1, nullptr);
  EXPECT_NEAR(t6->lateness_p50_us(), 2000, 50);
  EXPECT_NEAR(s6->lateness_p50_us(), 2000, 50);
  EXPECT_NEAR(s1->lateness_p50_us(), 0, 50);
  EXPECT_EQ(s6->stride(), 8u);
  EXPECT_EQ(t6->stride(), 0u);
  EXPECT_GT(s6->samples(), 200u);  // about 2,000 / 8, warm-up left out
  EXPECT_LT(s6->samples(), 300u);
  const stats::StatRow* tr = RowOf(s.traces, "AllReduce");
  const stats::StatRow* sr = RowOf(s.summaries, "AllReduce");
  ASSERT_NE(tr, nullptr);
  ASSERT_NE(sr, nullptr);
  EXPECT_NEAR(tr->skew_p50_us(), 2000, 50);
  EXPECT_NEAR(sr->skew_p50_us(), 2000, 50);
  EXPECT_EQ(sr->skew_stride(), 8u);
  EXPECT_GT(sr->skew_samples(), 100u);
  bool noted = false;
  for (const std::string& n : s.summaries.notes()) {
    EXPECT_EQ(n.find("windows only"), std::string::npos) << n;
    noted |= n.find("sampled across the job: one in 8 on 'world' (in JSON") != std::string::npos;
  }
  EXPECT_TRUE(noted);
}

// One node's summary beside the other node's trace files (read whole):
// rank 6, in the traces, late at the first 1,000 of 2,000 collectives.
// What node 0's summary let go the merge lets go of the traces too, so
// rank 6 is judged from the samples (trace files read beside summaries are
// sampled too), as the summaries of both nodes would be.
TEST(SummaryJobTest, TracesBesideSummariesAreJudgedFromTheSamples) {
  JobSpec spec = LongJob();
  spec.step_ns = 5 * testing::kMs;
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 6 && op < 1000) p.start_ns += 2 * testing::kMs;
  };
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/beside-samples";
  mkdir(dir.c_str(), 0755);
  const std::vector<std::string> files = testing::WriteJob(BuildJob(spec), dir);
  Model whole;
  std::string error;
  ASSERT_TRUE(BuildJobModel({dir}, LoadOptions(), &whole, &error)) << error;
  const report::Diagnosis traces = Diagnose(whole);
  ASSERT_EQ(traces.verdict().rfind("STRAGGLER: rank 6 arrived last at 1,000 of 2,000 collectives", 0), 0u)
      << traces.verdict();
  SummaryResult s;
  ASSERT_TRUE(Summarize({files.begin(), files.begin() + 4}, SummarizeOptions(), &s, &error)) << error;
  const std::string node0 = dir + "/node0.ncclsummary";
  std::ofstream(node0, std::ios::binary) << EncodeSummary(s);
  std::vector<std::string> inputs = {node0};
  inputs.insert(inputs.end(), files.begin() + 4, files.end());
  Model m;
  ASSERT_TRUE(BuildJobModel(inputs, LoadOptions(), &m, &error)) << error;
  const report::Diagnosis d = Diagnose(m);
  EXPECT_EQ(ExitStatus(d), ExitStatus(traces)) << d.verdict();
  EXPECT_EQ(d.verdict().rfind("STRAGGLER: rank 6 arrived last at 124 of 246 collectives sampled across the job", 0),
            0u)
      << d.verdict();
}

// Rank 6 late at every collective on 'world' (across the nodes), on time
// on its 'tp' with rank 7 (a fifth of its collectives): 'tp' is sampled
// one in 2, 'world' one in 8, about 200 samples each, so about half its
// samples are late; weighted by stride they stand for the traces' 80%.
TEST(SummaryJobTest, ASampledShareIsWeightedByStride) {
  JobSpec spec = LongJob();
  spec.comms = {{"world", 0, {}}, {"tp", 0, {6, 7}}};
  for (int k = 0; k < 2000; ++k) {
    testing::JobOp op;
    op.comm = k % 5 == 4 ? 1 : 0;
    op.start_ns = spec.first_op_ns + static_cast<uint64_t>(k) * 5 * testing::kMs;
    spec.ops.push_back(op);
  }
  spec.op_hook = [](int rank, int, OpPlan& p) {
    if (rank == 6 && p.comm == 0) p.start_ns += 2 * testing::kMs;
  };
  const Outcome r = Judge(spec, "weighted");
  EXPECT_EQ(r.traces_line.rfind("STRAGGLER: rank 6 arrived last at 1,600 of 2,000 collectives (80%)", 0), 0u)
      << r.traces_line;
  EXPECT_EQ(r.summaries_exit, r.traces_exit) << r.summaries_line;
  EXPECT_EQ(r.summaries_line.rfind("STRAGGLER: rank 6 arrived last at 186 of 383 collectives sampled across the job ("
                                   "one in 8 on comm 'world' (8 ranks), one in 2 on comm 'tp' (2 ranks); 79% "
                                   "of the collectives they stand for)",
                                   0),
            0u)
      << r.summaries_line;
}

// A long job: each rank keeps at most 256 samples a communicator (every
// 128th of 20,000 collectives), about 12 bytes each, and its summary stays
// within the 64 KB cap with nothing cut.
TEST(SummaryJobTest, SamplesStayBoundedInALongJob) {
  JobSpec spec = LongJob();
  spec.nranks = 4;  // two nodes still, at half the test's time
  spec.ranks_per_host = 2;
  spec.ncolls = 20000;
  spec.step_ns = 5 * testing::kMs;
  spec.op_hook = [](int rank, int, OpPlan& p) {
    if (rank == 3) p.start_ns += 2 * testing::kMs;
  };
  const Outcome r = Judge(spec, "samples-long");
  EXPECT_EQ(r.largest_stride_log2, 7u);
  EXPECT_GE(r.fewest_samples, 150u);
  EXPECT_LE(r.largest_samples_bytes, 3u << 10);
  EXPECT_LT(r.largest_proc_bytes, 64u << 10);
  EXPECT_EQ(r.cut_ops, 0u);
  EXPECT_EQ(r.summaries_exit, r.traces_exit) << r.summaries_line;
  EXPECT_EQ(r.traces_line.rfind("STRAGGLER: rank 3 arrived last at 20,000 of 20,000 collectives", 0), 0u)
      << r.traces_line;
  EXPECT_EQ(r.summaries_line.rfind("STRAGGLER: rank 3 arrived last at ", 0), 0u) << r.summaries_line;
  EXPECT_NE(r.summaries_line.find("sampled across the job (one in 128 on comm 'world' (4 ranks)"), std::string::npos)
      << r.summaries_line;
  printf("20,000 collectives: samples every %llu, at least %llu a rank, at most %llu bytes a rank; largest "
         "process record %llu bytes\n",
         1ull << r.largest_stride_log2, static_cast<unsigned long long>(r.fewest_samples),
         static_cast<unsigned long long>(r.largest_samples_bytes),
         static_cast<unsigned long long>(r.largest_proc_bytes));
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
  const Outcome r = Judge(spec, "thin", opts, true);
  EXPECT_LE(r.largest_proc_bytes, 8u << 10);
  EXPECT_GE(r.checkpoint_every, 2u);
  EXPECT_EQ(r.cut_ops, 0u);
  EXPECT_EQ(r.summaries_exit, 1) << r.summaries_line;
  EXPECT_EQ(r.summaries_line.rfind("MISMATCH: rank 5 issued collectives on comm 'world' (8 ranks) that differ from "
                                   "ranks 0-4,6,7's",
                                   0),
            0u)
      << r.summaries_line;
  // The second round names the operation all the same, the asked records
  // outside the cap (nothing of the window cut for them).
  ASSERT_FALSE(r.refine.empty());
  EXPECT_EQ(r.refined_line, r.traces_line);
  EXPECT_EQ(r.refined_cut_ops, 0u);
  EXPECT_GT(r.asked_kept, 0u);
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

// A damaged summary whose prefix lacks the checkpoint its window's chain
// continues from (summarize always writes it): that window's chain values
// are unknown and compared with nothing, so no chain MISMATCH blames its rank.
TEST(SummaryJobTest, AMissingCheckpointWhereTheWindowStartsBlamesNoOne) {
  JobSpec spec = LongJob();
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/no-base";
  mkdir(dir.c_str(), 0755);
  const std::vector<std::string> files = testing::WriteJob(BuildJob(spec), dir);
  SummarizeOptions opts;
  opts.window = 64;
  std::vector<std::string> summaries;
  std::string error;
  size_t removed = 0;
  for (size_t first = 0; first < files.size(); first += spec.ranks_per_host) {
    std::vector<std::string> node(files.begin() + first, files.begin() + first + spec.ranks_per_host);
    SummaryResult s;
    ASSERT_TRUE(Summarize(node, opts, &s, &error)) << error;
    if (first == 0) {
      for (summary::CommPrefix& p : *s.procs[1].mutable_prefixes()) {
        google::protobuf::RepeatedPtrField<summary::Checkpoint> kept;
        for (const summary::Checkpoint& k : p.checkpoints())
          if (k.position() != p.collectives()) *kept.Add() = k;
          else ++removed;
        p.mutable_checkpoints()->Swap(&kept);
      }
    }
    summaries.push_back(dir + "/node" + std::to_string(first) + ".ncclsummary");
    std::ofstream(summaries.back(), std::ios::binary) << EncodeSummary(s);
  }
  ASSERT_GT(removed, 0u);
  Model m;
  ASSERT_TRUE(BuildJobModel(summaries, LoadOptions(), &m, &error)) << error;
  EXPECT_TRUE(m.chain_mismatches.empty());
  const report::Diagnosis d = Diagnose(m);
  for (const report::Finding& f : d.findings()) EXPECT_NE(f.kind(), report::MISMATCH) << f.summary();
}

// The verdict does not depend on the order the summaries are named in
// (processes come in that order). Each rank on a node of its own, so 24
// summaries (node0, node1, node10, ... when listed), and a hang to judge.
TEST(SummaryJobTest, TheOrderOfTheSummariesChangesNoVerdict) {
  JobSpec spec = LongJob();
  spec.nranks = 24;
  spec.ranks_per_host = 1;
  spec.ncolls = 300;
  spec.funcs = {"AllReduce"};
  spec.op_hook = [](int rank, int op, OpPlan& p) {
    if (rank == 17 && op == 290) p.skip = true;
  };
  const Outcome r = Judge(spec, "many-nodes");
  EXPECT_EQ(r.traces_line.rfind("HANG: rank 17 never joined", 0), 0u) << r.traces_line;
  EXPECT_EQ(r.summaries_line, r.traces_line);
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/many-nodes";
  std::vector<std::string> summaries;
  for (int n = 0; n < 24; ++n) summaries.push_back(dir + "/node" + std::to_string(n) + ".ncclsummary");
  Model a, b;
  std::string error;
  ASSERT_TRUE(BuildJobModel(summaries, LoadOptions(), &a, &error)) << error;
  std::reverse(summaries.begin(), summaries.end());
  ASSERT_TRUE(BuildJobModel(summaries, LoadOptions(), &b, &error)) << error;
  ASSERT_EQ(a.procs.size(), 24u);
  ASSERT_EQ(b.procs.size(), 24u);
  // Processes in the order of the files named, as read one by one.
  for (size_t i = 0; i < 24; ++i) EXPECT_EQ(a.procs[i].path, b.procs[23 - i].path) << i;
  EXPECT_EQ(Diagnose(a).verdict(), Diagnose(b).verdict());
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
