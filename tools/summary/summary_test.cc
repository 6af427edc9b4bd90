// The summary file: what summarize writes and what a reader refuses (a
// trace file, a newer format, a cut or damaged summary), naming the file,
// the offset and the problem.

#include "tools/summary/summary.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tools/diagnose/diagnose.h"
#include "tools/model/job.h"
#include "tools/model/summary_merge.h"
#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools {
namespace {

using testing::BuildJob;
using testing::JobSpec;

std::string Dir(const std::string& name) {
  const std::string d = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  mkdir(d.c_str(), 0755);
  return d;
}

// Each node's summary of `files`, four ranks a node: the processes in
// order, each with its node's name.
void SummarizeNodesOfFour(const std::vector<std::string>& files, std::vector<summary::SummaryProcess>* procs,
                          std::vector<std::string>* sources) {
  for (size_t first = 0; first + 4 <= files.size(); first += 4) {
    SummaryResult s;
    std::string error;
    EXPECT_TRUE(Summarize({files.begin() + first, files.begin() + first + 4}, SummarizeOptions(), &s, &error)) << error;
    for (summary::SummaryProcess& p : s.procs) {
      procs->push_back(std::move(p));
      sources->push_back("node" + std::to_string(first));
    }
  }
}

// A healthy 4-rank job's files and its summary's bytes.
std::string JobSummary(const std::string& dir, std::vector<std::string>* files = nullptr) {
  JobSpec spec;
  spec.ncolls = 200;
  const std::vector<std::string> f = testing::WriteJob(BuildJob(spec), dir);
  if (files != nullptr) *files = f;
  SummarizeOptions opts;
  SummaryResult s;
  std::string error;
  EXPECT_TRUE(Summarize({dir}, opts, &s, &error)) << error;
  return EncodeSummary(s);
}

// Each rank decides alone what its summary lets go, and the merge cannot
// settle a collective one rank let go as finished while its peer kept it
// as evidence (a completion that may be an abort's). So the decision is
// the model's own: a rule stricter than the model's (any wait over 1 s
// near the end) had a recorded rank let a collective go after 994 ms
// while its peer, 13 ms longer in it, kept it. Here rank 0 comes 1.2 s
// late to three collectives near the end, so rank 1 waits 1.2 s in each;
// each rank is summarized alone at a window of 1. With the default stuck
// limit the model takes such a wait for a straggler's, not an abort's;
// with a stuck limit of 1 s only the later prompt collectives prove them.
// Either way, the summaries read as the traces do: OK.
TEST(SummaryWindowTest, RanksOfACollectiveLetItGoAlike) {
  for (const double stuck_sec : {60.0, 1.0}) {
    JobSpec spec;
    spec.nranks = 2;
    spec.ranks_per_host = 1;
    spec.ncolls = 20;
    spec.stuck_sec = stuck_sec;
    spec.rank_hook = [](int, testing::RankPlan& r) { r.proc.auto_stuck = false; };
    spec.op_hook = [](int rank, int op, testing::OpPlan& p) {
      if (op >= 14 && op < 17 && rank == 0) p.start_ns += 1200 * testing::kMs;
      if (op >= 17) p.start_ns += 1400 * testing::kMs;  // after the late ones ended, on both
    };
    const std::string dir = Dir("agree-" + std::to_string(static_cast<int>(stuck_sec)));
    const std::vector<std::string> files = testing::WriteJob(BuildJob(spec), dir);
    ASSERT_EQ(files.size(), 2u);
    std::vector<std::string> nodes;
    uint64_t let_go = 0;
    for (const std::string& f : files) {
      SummarizeOptions opts;
      opts.window = 1;
      SummaryResult s;
      std::string error;
      ASSERT_TRUE(Summarize({f}, opts, &s, &error)) << error;
      for (const summary::SummaryProcess& p : s.procs) let_go += p.let_go_ops();
      nodes.push_back(f + kSummaryExtension);
      std::ofstream(nodes.back(), std::ios::binary | std::ios::trunc) << EncodeSummary(s);
    }
    EXPECT_EQ(let_go, 2u * 19) << "stuck limit " << stuck_sec << " s: each rank lets go all but its last";
    Model traces, summaries;
    std::string error;
    ASSERT_TRUE(BuildJobModel(files, LoadOptions(), &traces, &error)) << error;
    ASSERT_TRUE(BuildJobModel(nodes, LoadOptions(), &summaries, &error)) << error;
    const std::string verdict = Diagnose(traces).verdict();
    EXPECT_EQ(verdict.rfind("OK", 0), 0u) << "stuck limit " << stuck_sec << " s: " << verdict;
    EXPECT_EQ(Diagnose(summaries).verdict(), verdict) << "stuck limit " << stuck_sec << " s";
  }
}

// A group summary made again into the folder of its nodes' summaries
// gathers the nodes, not itself; a folder beside trace files is searched
// for traces only.
TEST(SummaryGroupTest, AGroupIsMadeOfItsNodesAndNeverOfItself) {
  const std::string traces = Dir("group-traces"), nodes = Dir("group-nodes");
  std::vector<std::string> files;
  JobSummary(traces, &files);
  for (size_t i = 0; i < files.size(); ++i) {
    SummaryResult s;
    std::string error;
    ASSERT_TRUE(Summarize({files[i]}, SummarizeOptions(), &s, &error)) << error;
    std::ofstream(nodes + "/node" + std::to_string(i) + kSummaryExtension, std::ios::binary) << EncodeSummary(s);
  }
  // A node's summary left beside the traces is not gathered with them.
  {
    SummaryResult s;
    std::string error;
    ASSERT_TRUE(Summarize({files[0]}, SummarizeOptions(), &s, &error)) << error;
    std::ofstream(traces + "/old" + kSummaryExtension, std::ios::binary) << EncodeSummary(s);
    SummaryResult again;
    ASSERT_TRUE(Summarize({traces}, SummarizeOptions(), &again, &error)) << error;
    EXPECT_EQ(again.header.nodes(), 0u);
    EXPECT_EQ(again.procs.size(), files.size());
  }
  SummarizeOptions opts;
  opts.out_path = nodes + "/group" + kSummaryExtension;
  for (int round = 0; round < 2; ++round) {
    SummaryResult g;
    std::string error;
    ASSERT_TRUE(Summarize({nodes}, opts, &g, &error)) << error;
    EXPECT_EQ(g.header.nodes(), files.size()) << "round " << round;
    EXPECT_EQ(g.procs.size(), files.size());
    EXPECT_EQ(g.header.read_errors_size(), 0);
    std::ofstream(opts.out_path, std::ios::binary | std::ios::trunc) << EncodeSummary(g);
  }
  std::vector<std::string> node_paths;
  for (size_t i = 0; i < files.size(); ++i) node_paths.push_back(nodes + "/node" + std::to_string(i) + kSummaryExtension);
  Model a, b;
  std::string error;
  ASSERT_TRUE(BuildJobModel(node_paths, LoadOptions(), &a, &error)) << error;
  ASSERT_TRUE(BuildJobModel({opts.out_path}, LoadOptions(), &b, &error)) << error;
  EXPECT_EQ(Diagnose(b).verdict(), Diagnose(a).verdict());
  EXPECT_EQ(Diagnose(a).verdict().rfind("OK", 0), 0u) << Diagnose(a).verdict();
}

TEST(SummaryFileTest, ReadsBackWhatItWrote) {
  std::vector<std::string> files;
  const std::string bytes = JobSummary(Dir("back"), &files);
  EXPECT_TRUE(LooksLikeSummary(bytes.substr(0, 4096)));
  SummaryResult s;
  std::string error;
  ASSERT_TRUE(ParseSummary("node.ncclsummary", bytes, &s, &error)) << error;
  EXPECT_EQ(s.header.format(), kSummaryFormat);
  EXPECT_EQ(s.header.version(), kPlainSummaryVersion);
  EXPECT_EQ(s.header.window(), 64u);
  ASSERT_EQ(s.procs.size(), 4u);
  for (const summary::SummaryProcess& p : s.procs) {
    EXPECT_EQ(p.let_go_ops(), 200u - 64u) << p.path();
    ASSERT_EQ(p.prefixes_size(), 1);
    EXPECT_EQ(p.prefixes(0).collectives(), 136u);
    EXPECT_EQ(p.prefixes(0).colls(0).func(), "AllReduce");
    EXPECT_EQ(p.prefixes(0).colls(0).seq(), 135u);
  }
}

TEST(SummaryFileTest, ATraceFileIsNoSummary) {
  std::vector<std::string> files;
  JobSummary(Dir("trace"), &files);
  std::string bytes;
  std::ifstream in(files[0], std::ios::binary);
  bytes.assign(std::istreambuf_iterator<char>(in), {});
  EXPECT_FALSE(LooksLikeSummary(bytes.substr(0, 4096)));
  SummaryResult s;
  std::string error;
  EXPECT_FALSE(ParseSummary("x.ncclsummary", bytes, &s, &error));
  EXPECT_EQ(error, "x.ncclsummary: offset 0: not an ncclwatch summary (its first record is no summary header)");
}

TEST(SummaryFileTest, ANewerVersionIsRefusedClearly) {
  SummaryResult s;
  s.header.set_format(kSummaryFormat);
  s.header.set_version(kSummaryVersion + 1);
  SummaryResult back;
  std::string error;
  EXPECT_FALSE(ParseSummary("n.ncclsummary", EncodeSummary(s), &back, &error));
  EXPECT_NE(error.find("n.ncclsummary: offset 0: summary format version " + std::to_string(kSummaryVersion + 1) +
                       ", newer than this ncclwatch reads (" + std::to_string(kSummaryVersion) + ")"),
            std::string::npos)
      << error;
}

TEST(SummaryFileTest, ACutSummaryKeepsTheProcessesBeforeTheCut) {
  const std::string bytes = JobSummary(Dir("cut"));
  SummaryResult whole;
  std::string error;
  ASSERT_TRUE(ParseSummary("n", bytes, &whole, &error));
  for (size_t cut : {bytes.size() - 1, bytes.size() / 2, size_t{5}}) {
    SummaryResult s;
    EXPECT_FALSE(ParseSummary("n.ncclsummary", bytes.substr(0, cut), &s, &error));
    EXPECT_EQ(error.rfind("n.ncclsummary: offset ", 0), 0u) << error;
    EXPECT_NE(error.find("past the end of the file"), std::string::npos) << error;
    EXPECT_LT(s.procs.size(), whole.procs.size());
  }
}

TEST(SummaryFileTest, DamageIsNamedWithItsOffset) {
  std::string bytes = JobSummary(Dir("damage"));
  SummaryResult whole;
  std::string error;
  ASSERT_TRUE(ParseSummary("n", bytes, &whole, &error));
  // The second record's first byte after its length: field 2 made an
  // invalid wire type.
  size_t pos = 0;
  uint64_t len = static_cast<uint8_t>(bytes[0]);
  pos = 1 + len + 4;  // the header is short: a one-byte length; then its checksum
  size_t at = pos;
  while (static_cast<uint8_t>(bytes[at]) & 0x80) ++at;
  bytes[at + 1] = static_cast<char>(0x17);  // field 2, wire type 7: no such type
  SummaryResult s;
  EXPECT_FALSE(ParseSummary("n.ncclsummary", bytes, &s, &error));
  EXPECT_EQ(error, "n.ncclsummary: offset " + std::to_string(pos) +
                       ": record 1 (process 1) does not match its checksum: its bytes changed after it was "
                       "written; it is not read");
  EXPECT_EQ(s.procs.size(), whole.procs.size() - 1);  // the next frame's checksum holds: the rest is read
}

// A record with an element smaller than any summarize writes (an empty
// stats row: two bytes, a hundred once parsed) is refused before it is
// parsed, checksum right or not, named with its offset, record and field;
// the others are read. So is a second record of one process, and a
// hundred thousand such records make an error of a few sentences.
TEST(SummaryFileTest, ElementsSummarizeNeverWritesAreRefused) {
  SummaryResult s;
  std::string error;
  JobSummary(Dir("implausible"));
  ASSERT_TRUE(Summarize({Dir("implausible")}, SummarizeOptions(), &s, &error)) << error;
  ASSERT_EQ(s.procs.size(), 4u);
  s.procs[1].add_rows();
  s.procs.push_back(s.procs[2]);
  std::string bytes = EncodeSummary(s);
  const std::vector<size_t> starts = SummaryFrameStarts(bytes);
  ASSERT_EQ(starts.size(), 6u);
  SummaryResult back;
  EXPECT_FALSE(ParseSummary("n.ncclsummary", bytes, &back, &error));
  EXPECT_EQ(back.procs.size(), 3u);
  EXPECT_EQ(error, "n.ncclsummary: offset " + std::to_string(starts[2]) + ": record 2 (process 2) is not what "
                   "summarize writes: rows[" + std::to_string(s.procs[1].rows_size() - 1) +
                   "] is 0 bytes: summarize writes every one with at least 5 (its communicator and its count of "
                   "operations): damaged, or made to take far more memory than its bytes; it is not read; "
                   "n.ncclsummary: offset " + std::to_string(starts[5]) + ": record 5 (process 5) is the same "
                   "process as record 3: summarize writes each once: damaged, or made to take far more memory "
                   "than its bytes; it is not read");

  SummaryResult many;
  many.header = s.header;
  many.procs.resize(100000);
  EXPECT_FALSE(ParseSummary("n.ncclsummary", EncodeSummary(many), &back, &error));
  EXPECT_LT(error.size(), 1000u) << error;
  EXPECT_NE(error.find(": record 1 (process 1) is not what summarize writes: it names no trace file: "),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("; and 99996 more records like these are not read"), std::string::npos) << error;
}

// Many files read together (on several threads where the host has cores)
// give each file what reading it alone gives, in its own place: a cut
// file's error and the processes before its cut, a missing file's error.
TEST(SummaryFileTest, ManyFilesReadTogetherAsEachAlone) {
  const std::string dir = Dir("many");
  const std::string bytes = JobSummary(Dir("many-job"));
  std::vector<std::string> files;
  for (int i = 0; i < 40; ++i) {
    files.push_back(dir + "/node" + std::to_string(i) + ".ncclsummary");
    if (i == 13) continue;  // never written
    std::ofstream(files.back(), std::ios::binary) << (i == 7 || i == 31 ? bytes.substr(0, bytes.size() * i / 40) : bytes);
  }
  std::vector<SummaryResult> together;
  std::vector<std::string> errors;
  ReadSummaryFiles(files, &together, &errors);
  ASSERT_EQ(together.size(), files.size());
  ASSERT_EQ(errors.size(), files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    SummaryResult alone;
    std::string error;
    const bool ok = ReadSummaryFile(files[i], &alone, &error);
    EXPECT_EQ(errors[i].empty(), ok) << i;
    EXPECT_EQ(errors[i], ok ? "" : error) << i;
    ASSERT_EQ(together[i].procs.size(), alone.procs.size()) << i;
    for (size_t p = 0; p < alone.procs.size(); ++p)
      EXPECT_EQ(together[i].procs[p].SerializeAsString(), alone.procs[p].SerializeAsString()) << i << " " << p;
  }
  EXPECT_NE(errors[13].find("node13.ncclsummary"), std::string::npos) << errors[13];
  EXPECT_NE(errors[31].find("past the end of the file"), std::string::npos) << errors[31];
  EXPECT_GT(together[31].procs.size(), 0u);
  EXPECT_LT(together[31].procs.size(), together[0].procs.size());
  EXPECT_EQ(together[39].procs.size(), 4u);
}

TEST(SummaryFileTest, ACutSummaryMakesTheVerdictIncomplete) {
  const std::string dir = Dir("cutjob");
  std::vector<std::string> files;
  const std::string bytes = JobSummary(dir, &files);
  const std::string sums = Dir("cutjob-summaries");
  std::ofstream(sums + "/a.ncclsummary", std::ios::binary) << bytes.substr(0, bytes.size() - 10);
  Model m;
  std::string error;
  ASSERT_TRUE(BuildJobModel({sums}, LoadOptions(), &m, &error)) << error;
  const report::Diagnosis d = Diagnose(m);
  EXPECT_EQ(ExitStatus(d), 3);
  EXPECT_EQ(d.verdict().rfind("INCOMPLETE", 0), 0u) << d.verdict();
  ASSERT_FALSE(m.errors.empty());
  EXPECT_NE(m.errors[0].find("a.ncclsummary: offset "), std::string::npos) << m.errors[0];
}

TEST(SummaryFileTest, AForeignFileNamedAsASummaryIsNoTrace) {
  const std::string d = Dir("foreign");
  std::ofstream(d + "/x.ncclsummary") << "hello, not a summary\n";
  Model m;
  std::string error;
  EXPECT_FALSE(BuildJobModel({d}, LoadOptions(), &m, &error));
  EXPECT_NE(error.find("x.ncclsummary"), std::string::npos) << error;
}

TEST(SummaryFileTest, StatsRowsRoundTripAndAnOlderSummaryIsNamed) {
  const std::string bytes = JobSummary(Dir("digests"));
  SummaryResult s;
  std::string error;
  ASSERT_TRUE(ParseSummary("node.ncclsummary", bytes, &s, &error)) << error;
  ASSERT_EQ(s.procs.size(), 4u);
  // Every operation of the file as rows, the window notwithstanding.
  uint64_t ops = 0;
  for (const summary::RowDigest& r : s.procs[0].rows()) ops += r.ops();
  EXPECT_TRUE(s.procs[0].digested());
  EXPECT_EQ(ops, 200u);
  EXPECT_EQ(s.procs[0].whole_comms_size(), 1);
  std::vector<std::string> sources(4, "node.ncclsummary");
  Model m;
  ASSERT_TRUE(BuildModelFromSummaries(s.procs, {}, {}, LoadOptions(), &m, &error, &sources)) << error;
  EXPECT_TRUE(m.undigested.empty());
  for (const Proc& p : m.procs) EXPECT_TRUE(p.digested) << p.path;
  ASSERT_FALSE(m.procs[0].row_digests.empty());
  uint64_t sampled = 0;
  for (const RowDigest& d : m.procs[0].row_digests) sampled += d.gpu.count() + d.cpu.count() + d.polled.count();
  EXPECT_GT(sampled, 64u);  // more than the window holds
  // A summary without them (an older ncclwatch's) is named: stats and
  // check refuse it rather than take a window for the job.
  s.procs[1].set_digested(false);
  s.procs[1].clear_rows();
  // And one whose sketch is damaged (counts past any bound).
  summary::Sketch* bad = s.procs[2].mutable_rows(0)->mutable_gpu();
  for (int i = 0; i < 10000; ++i) bad->add_pos(1);
  // And a size bucket no size has.
  s.procs[3].mutable_rows(0)->set_bucket(99);
  Model old;
  ASSERT_TRUE(BuildModelFromSummaries(s.procs, {}, {}, LoadOptions(), &old, &error, &sources)) << error;
  ASSERT_EQ(old.undigested.size(), 3u);
  EXPECT_NE(old.undigested[0].find("an older ncclwatch wrote it"), std::string::npos) << old.undigested[0];
  EXPECT_NE(old.undigested[1].find("damaged"), std::string::npos) << old.undigested[1];
  EXPECT_NE(old.undigested[2].find("damaged"), std::string::npos) << old.undigested[2];
  // Without sources (a fuzzer's call) the damage is still named.
  Model nameless;
  ASSERT_TRUE(BuildModelFromSummaries(s.procs, {}, {}, LoadOptions(), &nameless, &error)) << error;
  EXPECT_EQ(nameless.undigested.size(), 2u);
  for (const Proc& p : nameless.procs) EXPECT_EQ(p.digested, p.path != s.procs[1].path() &&
                                                               p.path != s.procs[2].path() &&
                                                               p.path != s.procs[3].path()) << p.path;
}

TEST(SummaryFileTest, SketchesRoundTripThroughTheirMessage) {
  Sketch s;
  for (int64_t v : {-5000, -3, 0, 0, 1, 77, 123456789}) s.Add(v);
  summary::Sketch p;
  SketchToProto(s, &p);
  Sketch back;
  ASSERT_TRUE(SketchFromProto(p, &back));
  EXPECT_TRUE(back == s);
  summary::Sketch far = p;
  far.set_pos_offset(INT32_MAX);  // no offset + i overflow: refused
  EXPECT_FALSE(SketchFromProto(far, &back));
  Sketch empty;
  ASSERT_TRUE(SketchFromProto(summary::Sketch(), &empty));
  EXPECT_TRUE(empty.empty());
}

// One node's 8 ranks of a 16,384-rank 'world', with a 2-rank 'tp' pair each,
// numbered from `first`: the same operations and times whatever `first`.
// Local rank 3 arrives 2 ms late; local rank 7 never issues the last
// collective.
std::string WriteNode(const std::string& dir, int first) {
  const char* funcs[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast"};
  for (int l = 0; l < 8; ++l) {
    const int r = first + l;
    testing::ProcSpec spec;
    spec.host = "node";
    spec.pid = 10000 + l;
    spec.launcher_rank = r;
    spec.launcher_world_size = 16384;
    testing::TraceBuilder b(spec);
    const int world = b.AddComm(0x5000, "world", 16384, r, 1 * testing::kMs);
    const int tp = b.AddComm(0x7000 + static_cast<uint64_t>(l / 2), "tp", 2, l % 2, 2 * testing::kMs);
    uint64_t seq_world[4] = {0, 0, 0, 0}, seq_tp[4] = {0, 0, 0, 0};
    const int colls = 200;
    for (int k = 0; k < colls; ++k) {
      if (k == colls - 1 && l == 7) continue;
      const int f = k % 4;
      const uint64_t start = 10 * testing::kMs + static_cast<uint64_t>(k) * 3 * testing::kMs +
                             static_cast<uint64_t>((l * 37 + k * 11) % 50) * testing::kUs + (l == 3 ? 2 * testing::kMs : 0);
      const int64_t done = k == colls - 1 ? testing::kNever
                                          : static_cast<int64_t>(10 * testing::kMs + static_cast<uint64_t>(k) * 3 * testing::kMs +
                                                                 2500 * testing::kUs);
      const uint64_t count = uint64_t{1} << (10 + k % 12);
      if (k % 5 == 4) b.Coll(tp, funcs[f], seq_tp[f]++, count, start, done);
      else b.Coll(world, funcs[f], seq_world[f]++, count, start, done);
    }
    b.Heartbeats(0, 10 * testing::kMs + colls * 3 * testing::kMs + 10 * testing::kSec);
    EXPECT_TRUE(b.WriteTo(dir + "/" + b.FileName()));
  }
  return dir;
}

// A match keeps one slot per rank present (tools/model/model.h,
// Comm::slot_rank): the node of ranks 16,376 to 16,383 keeps 8 per
// collective of 'world', the node of ranks 0 to 7 one per rank. Their
// digests, matched alike, are the same.
TEST(SummaryFileTest, ANodeOfTheHighestRanksDigestsAsTheLowest) {
  SummaryResult lo, hi;
  std::string error;
  ASSERT_TRUE(Summarize({WriteNode(Dir("lowest"), 0)}, SummarizeOptions(), &lo, &error)) << error;
  ASSERT_TRUE(Summarize({WriteNode(Dir("highest"), 16376)}, SummarizeOptions(), &hi, &error)) << error;
  ASSERT_EQ(lo.procs.size(), 8u);
  ASSERT_EQ(hi.procs.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    const summary::SummaryProcess &a = lo.procs[i], &b = hi.procs[i];
    EXPECT_TRUE(b.digested());
    EXPECT_EQ(a.let_go_ops(), b.let_go_ops()) << i;
    EXPECT_EQ(a.let_go_completed(), b.let_go_completed()) << i;
    ASSERT_EQ(a.rows_size(), b.rows_size()) << i;
    ASSERT_GT(b.rows_size(), 0) << i;
    for (int k = 0; k < a.rows_size(); ++k)
      EXPECT_EQ(a.rows(k).SerializeAsString(), b.rows(k).SerializeAsString()) << i << " " << k;
    ASSERT_EQ(a.ranks_size(), b.ranks_size()) << i;
    for (int k = 0; k < a.ranks_size(); ++k)
      EXPECT_EQ(a.ranks(k).SerializeAsString(), b.ranks(k).SerializeAsString()) << i << " " << k;
    EXPECT_EQ(a.arrivals().SerializeAsString(), b.arrivals().SerializeAsString()) << i;
    EXPECT_EQ(std::vector<std::string>(a.whole_comms().begin(), a.whole_comms().end()),
              std::vector<std::string>(b.whole_comms().begin(), b.whole_comms().end()))
        << i;
  }
  // Every collective of 'world' was matched (one call per collective, held
  // by the process whose op is first), so the calls add up alike.
  uint64_t calls = 0;
  for (const summary::SummaryProcess& p : hi.procs)
    for (const summary::RowDigest& r : p.rows()) calls += r.calls();
  EXPECT_GT(calls, 0u);
}

// The stride: a power of two, the smallest that keeps at most 256 samples.
TEST(ArrivalSamplesTest, TheStrideIsTheSmallestPowerOfTwoWithinTheBound) {
  EXPECT_EQ(SampleStrideLog2(0), 0u);
  EXPECT_EQ(SampleStrideLog2(256), 0u);
  EXPECT_EQ(SampleStrideLog2(257), 1u);
  EXPECT_EQ(SampleStrideLog2(2000), 3u);
  EXPECT_EQ(SampleStrideLog2(20000), 7u);
  for (uint64_t n : {uint64_t{1}, uint64_t{511}, uint64_t{512}, uint64_t{513}, uint64_t{99999}, uint64_t{1} << 40,
                     UINT64_MAX}) {
    const uint32_t l = SampleStrideLog2(n);
    EXPECT_LE(n >> l, kMaxArrivalSamples) << n;
    if (l > 0) {
      EXPECT_GT(n >> (l - 1), kMaxArrivalSamples) << n;
    }
  }
}

// Which positions a stride samples: all at stride 1; nested (a position
// stride 2S samples, stride S samples too); about one in S; and spread
// over every phase of a periodic step, where multiples of S would all fall
// on the same one.
TEST(ArrivalSamplesTest, SampledPositionsNestAndIgnoreAStepsPeriod) {
  for (uint64_t p = 1; p <= 1000; ++p) EXPECT_TRUE(SampledPosition(p, 0)) << p;
  for (uint32_t l = 0; l < 12; ++l)
    for (uint64_t p = 1; p <= 20000; ++p)
      if (SampledPosition(p, l + 1)) {
        ASSERT_TRUE(SampledPosition(p, l)) << p << " at " << l;
      }
  const uint64_t n = 64000;
  for (uint32_t l : {3u, 5u, 7u}) {
    uint64_t k = 0;
    std::map<uint64_t, std::vector<uint64_t>> by_phase;  // period -> per phase
    for (uint64_t period : {2, 3, 4, 8}) by_phase[period].assign(period, 0);
    for (uint64_t p = 1; p <= n; ++p) {
      if (!SampledPosition(p, l)) continue;
      ++k;
      for (auto& [period, c] : by_phase) ++c[p % period];
    }
    const double expect = static_cast<double>(n >> l);
    EXPECT_GT(k, 0.8 * expect) << l;
    EXPECT_LT(k, 1.2 * expect) << l;
    for (const auto& [period, c] : by_phase)
      for (uint64_t phase = 0; phase < period; ++phase)
        EXPECT_GT(c[phase], 0.6 * static_cast<double>(k) / period) << "period " << period << " phase " << phase;
  }
}

// Rank 7 stops after 600 of 1,100 collectives (the others' later ones
// never complete): it samples one in 4, the others one in 8; every
// position stride 8 samples that they completed is in each member's
// samples (the sets nest), and the merge lines them up there.
TEST(ArrivalSamplesTest, MembersWithDifferentStridesShareTheLargestOnesPositions) {
  JobSpec spec;
  spec.nranks = 8;
  spec.ranks_per_host = 4;
  spec.ncolls = 1100;
  spec.op_hook = [](int rank, int op, testing::OpPlan& p) {
    if (rank == 7 && op >= 600) p.skip = true;
  };
  const std::string dir = Dir("strides");
  const std::vector<std::string> files = testing::WriteJob(BuildJob(spec), dir);
  std::vector<summary::SummaryProcess> procs;
  std::vector<std::string> sources;
  SummarizeNodesOfFour(files, &procs, &sources);
  ASSERT_EQ(procs.size(), 8u);
  for (size_t i = 0; i < procs.size(); ++i) {
    ASSERT_EQ(procs[i].samples_size(), 1) << i;
    const summary::ArrivalSamples& a = procs[i].samples(0);
    EXPECT_EQ(a.collectives(), i == 7 ? 600u : 1100u) << i;
    EXPECT_EQ(a.stride_log2(), i == 7 ? 2u : 3u) << i;
    std::vector<ArrivalSample> v;
    ASSERT_TRUE(DecodeSamples(a, &v)) << i;
    EXPECT_LE(v.size(), kMaxArrivalSamples);
    std::set<uint64_t> at;
    for (const ArrivalSample& x : v) {
      EXPECT_TRUE(SampledPosition(x.position, a.stride_log2())) << i;
      EXPECT_GT(x.duration_ns, 0u);
      at.insert(x.position);
    }
    for (uint64_t p = 1; p <= 600; ++p)
      if (SampledPosition(p, 3)) {
        EXPECT_TRUE(at.count(p)) << i << " lacks " << p;
      }
    // Encoded back, the same bytes.
    summary::ArrivalSamples again = a;
    EncodeSamples(v, &again);
    EXPECT_EQ(again.SerializeAsString(), a.SerializeAsString()) << i;
  }
  Model m;
  std::string error;
  ASSERT_TRUE(BuildModelFromSummaries(procs, {}, {}, LoadOptions(), &m, &error, &sources)) << error;
  ASSERT_EQ(m.sampled.size(), 1u);
  const SampledComm& sc = m.sampled[0];
  EXPECT_EQ(sc.stride, 8u);
  EXPECT_TRUE(sc.covered);
  std::vector<uint64_t> shared;
  for (uint64_t p = 1; p <= 600; ++p)
    if (SampledPosition(p, 3)) shared.push_back(p);
  EXPECT_GT(shared.size(), 50u);  // about 600 / 8
  EXPECT_LT(shared.size(), 100u);
  EXPECT_EQ(sc.positions, shared);
  EXPECT_EQ(sc.local_starts_ns.size(), shared.size() * 8);

  // A member without samples (an older summary): nothing lined up.
  std::vector<summary::SummaryProcess> older = procs;
  older[3].clear_samples();
  Model o;
  ASSERT_TRUE(BuildModelFromSummaries(older, {}, {}, LoadOptions(), &o, &error, &sources)) << error;
  EXPECT_TRUE(o.sampled.empty());

  // Under a tighter cap the samples thin (the stride doubling, the
  // positions still its own) before any operation is cut.
  summary::SummaryProcess capped = procs[0];
  CapSummaryProcess(capped.ByteSizeLong() - 800, 64, &capped);
  EXPECT_EQ(capped.cut_ops(), 0u);
  ASSERT_EQ(capped.samples_size(), 1);
  EXPECT_GT(capped.samples(0).stride_log2(), 3u);
  std::vector<ArrivalSample> v;
  ASSERT_TRUE(DecodeSamples(capped.samples(0), &v));
  EXPECT_GE(v.size(), kMinSampledCollectives);
  for (const ArrivalSample& x : v) EXPECT_TRUE(SampledPosition(x.position, capped.samples(0).stride_log2()));
}

// A damaged message decodes to nothing.
// Samples of communicator 1 over 100 collectives at stride 4, with the
// functions `funcs`, none encoded yet; `at`: the first three positions
// stride 4 samples.
summary::ArrivalSamples StrideFour(const std::vector<std::string>& funcs, std::vector<uint64_t>* at) {
  summary::ArrivalSamples a;
  a.set_comm_hash(1);
  a.set_collectives(100);
  a.set_stride_log2(2);
  for (const std::string& f : funcs) a.add_functions(f);
  at->clear();
  for (uint64_t p = 1; at->size() < 3; ++p)
    if (SampledPosition(p, 2)) at->push_back(p);
  return a;
}

TEST(ArrivalSamplesTest, DamagedSamplesAreRefused) {
  std::vector<uint64_t> at;
  summary::ArrivalSamples a = StrideFour({"AllReduce", "Broadcast"}, &at);
  ASSERT_LT(at[2], 90u);
  EncodeSamples({{at[0], 1000, 10, 0, 3}, {at[1], 2000, 10, 1, 3}, {at[2], 3000, 10, 0, 5}}, &a);
  std::vector<ArrivalSample> v;
  ASSERT_TRUE(DecodeSamples(a, &v));
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[2].position, at[2]);
  EXPECT_EQ(v[2].start_ns, 3000);
  EXPECT_EQ(v[1].seq, 3u);
  EXPECT_EQ(v[2].seq, 5u);
  auto refused = [&](const std::function<void(summary::ArrivalSamples*)>& damage) {
    summary::ArrivalSamples b = a;
    damage(&b);
    return !DecodeSamples(b, &v);
  };
  // Samples encoded as given, whatever they say.
  auto encoded = [&](std::vector<ArrivalSample> x) {
    return [x](summary::ArrivalSamples* b) { EncodeSamples(x, b); };
  };
  uint64_t unsampled = at[0] + 1;
  while (SampledPosition(unsampled, 2)) ++unsampled;
  EXPECT_TRUE(refused([](summary::ArrivalSamples* b) { b->set_count(4); }));  // fewer than it says
  EXPECT_TRUE(refused([](summary::ArrivalSamples* b) { b->set_count(2); }));  // bytes after them
  EXPECT_TRUE(refused([](summary::ArrivalSamples* b) { b->mutable_packed()->pop_back(); }));  // cut short
  EXPECT_TRUE(refused(encoded({{at[0], 1000, 10, 0, 3}, {at[1], 2000, 10, 2, 3}})));  // no such function
  EXPECT_TRUE(refused(encoded({{at[0], 1000, 10, 0, 3}, {at[0], 2000, 10, 1, 3}})));  // a position twice
  EXPECT_TRUE(refused([&](summary::ArrivalSamples* b) { b->set_collectives(at[1]); }));  // past the collectives
  EXPECT_TRUE(refused(encoded({{unsampled, 1000, 10, 0, 3}})));                    // not its stride's
  EXPECT_TRUE(refused(encoded({{at[0], -5, 10, 0, 3}})));                          // before the file
  EXPECT_TRUE(refused([](summary::ArrivalSamples* b) { b->set_stride_log2(63); }));
  EXPECT_FALSE(refused([](summary::ArrivalSamples*) {}));
}

// GPU-held times ride beside the samples, to the us, unknown ones kept
// unknown; a list that is not one per sample is damage.
TEST(ArrivalSamplesTest, HeldTimesRoundTripAndAWrongCountIsRefused) {
  std::vector<uint64_t> at;
  summary::ArrivalSamples a = StrideFour({"AllReduce"}, &at);
  std::vector<ArrivalSample> in = {{at[0], 1000, 10, 0, 3, 0},
                                   {at[1], 2000, 10, 0, 4, -1},
                                   {at[2], 3000, 10, 0, 5, 40'000'123}};
  std::vector<ArrivalSample> v;
  EncodeSamples(in, &a);  // without: none carried
  EXPECT_TRUE(a.held().empty());
  ASSERT_TRUE(DecodeSamples(a, &v));
  for (const ArrivalSample& x : v) EXPECT_EQ(x.held_ns, -1);
  EncodeSamples(in, &a, true);
  ASSERT_TRUE(DecodeSamples(a, &v));
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].held_ns, 0);
  EXPECT_EQ(v[1].held_ns, -1);
  EXPECT_EQ(v[2].held_ns, 40'000'000);
  EXPECT_EQ(v[2].seq, 5u);
  summary::ArrivalSamples b = a;
  b.mutable_held()->pop_back();  // two
  EXPECT_FALSE(DecodeSamples(b, &v));
  b = a;
  b.mutable_held()->push_back('\x01');  // four
  EXPECT_FALSE(DecodeSamples(b, &v));
}

// Size buckets ride beside the samples where every sample has one; a list
// that is not one per sample, a bucket past 63, or warm-up seqs that are
// not one per function are damage.
TEST(ArrivalSamplesTest, BucketsRoundTripAndDamageIsRefused) {
  std::vector<uint64_t> at;
  summary::ArrivalSamples a = StrideFour({"AllReduce"}, &at);
  a.add_first_seqs(0);
  std::vector<ArrivalSample> in = {{at[0], 1000, 10, 0, 3, -1, -2}, {at[1], 2000, 10, 0, 4, -1, 20},
                                   {at[2], 3000, 10, 0, 5, -1, 63}};
  std::vector<ArrivalSample> v;
  EncodeSamples(in, &a);
  ASSERT_TRUE(DecodeSamples(a, &v));
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].bucket, -2);
  EXPECT_EQ(v[1].bucket, 20);
  EXPECT_EQ(v[2].bucket, 63);
  summary::ArrivalSamples b = a;
  b.mutable_buckets()->pop_back();
  EXPECT_FALSE(DecodeSamples(b, &v));
  b = a;
  (*b.mutable_buckets())[2] = 66;  // 64 plus 2
  EXPECT_FALSE(DecodeSamples(b, &v));
  b = a;
  b.add_first_seqs(7);  // two for one function
  EXPECT_FALSE(DecodeSamples(b, &v));
  // One sample without a bucket: none written.
  in[1].bucket = kNoBucket;
  EncodeSamples(in, &a);
  EXPECT_TRUE(a.buckets().empty());
  ASSERT_TRUE(DecodeSamples(a, &v));
  EXPECT_EQ(v[0].bucket, kNoBucket);
}

// Rank 5 skips the 101st collective (one function only): from there its
// positions name the others' next collectives. The merge lines up only
// where every member's sample is the same collective (function and seq).
TEST(ArrivalSamplesTest, PositionsAfterASkippedCollectiveAreNotLinedUp) {
  JobSpec spec;
  spec.nranks = 8;
  spec.ranks_per_host = 4;
  spec.ncolls = 1000;
  spec.op_hook = [](int rank, int op, testing::OpPlan& p) {
    if (rank == 5 && op == 100) p.skip = true;
  };
  const std::string dir = Dir("skipped");
  const std::vector<std::string> files = testing::WriteJob(BuildJob(spec), dir);
  std::vector<summary::SummaryProcess> procs;
  std::vector<std::string> sources;
  SummarizeNodesOfFour(files, &procs, &sources);
  Model m;
  std::string error;
  ASSERT_TRUE(BuildModelFromSummaries(procs, {}, {}, LoadOptions(), &m, &error, &sources)) << error;
  ASSERT_EQ(m.sampled.size(), 1u);
  const SampledComm& sc = m.sampled[0];
  ASSERT_GE(sc.stride, 4u);
  uint32_t l = 0;
  while ((uint64_t{1} << l) < sc.stride) ++l;
  // The positions up to 100 are the same collectives on every rank; none after.
  std::vector<uint64_t> expect;
  for (uint64_t p = 1; p <= 100; ++p)
    if (SampledPosition(p, l)) expect.push_back(p);
  EXPECT_GT(expect.size(), 5u);
  EXPECT_EQ(sc.positions, expect);
}

}  // namespace
}  // namespace ncclwatch::tools
