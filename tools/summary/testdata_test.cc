// Every recording under testdata/: diagnose's first line and exit status
// from per-node summaries equal those from the trace files, with
// the default window (summaries per host, and one of every file); with a
// window of 2 operations, the same line, a MISMATCH the signature chains
// found naming the traces' culprits, or an INCOMPLETE line (exit 3): never
// OK and never a culprit the traces would not name, after the second round
// (summarize --collectives) too, which turns every chains' MISMATCH into
// the traces' line. And `stats` and
// `check` from summaries give the traces' rows and verdicts, quantiles
// within the sketches' 1%, at both windows. And every summary made of
// them, whole folder or one file, reads back as written. And group
// summaries of those summaries (summarize given summaries), cut to the
// group's window, give the nodes' findings.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tools/diagnose/diagnose.h"
#include "tools/model/inputs.h"
#include "tools/model/model.h"
#include "tools/reader/reader.h"
#include "tools/model/job.h"
#include "tools/model/summary_merge.h"
#include "tools/stats/check.h"
#include "tools/stats/stats.h"
#include "tools/summary/summary.h"
#include "tools/summary/test_summaries.h"

namespace ncclwatch::tools {
namespace {

using testing::RecordingFolders;

std::string HostOf(const std::string& path) {
  TraceReader r;
  std::string e;
  if (!r.Open(path, &e)) return "";
  trace::Record rec;
  uint64_t off;
  for (int i = 0; i < 4 && r.Next(&rec, &off); ++i)
    if (rec.has_header()) return rec.header().hostname();
  return "";
}

struct Verdict {
  std::string line;
  int exit = 2;
  std::set<std::string> culprits;  // of the first finding
  // Every finding, in order: its kind and its culprits.
  std::vector<std::pair<std::string, std::set<std::string>>> findings;
};

std::string Findings(const Verdict& v) {
  std::string out;
  for (const auto& [kind, culprits] : v.findings) {
    out += "  " + kind + ":";
    for (const std::string& c : culprits) out += " " + c;
    out += "\n";
  }
  return out;
}

Verdict Judge(const std::vector<std::string>& paths) {
  Model m;
  std::string error;
  if (!BuildJobModel(paths, LoadOptions(), &m, &error)) return {"UNUSABLE: " + error, 2};
  const report::Diagnosis d = Diagnose(m);
  Verdict v{d.verdict(), ExitStatus(d), {}};
  if (d.findings_size() > 0)
    for (const report::ProcRef& p : d.findings(0).culprits()) v.culprits.insert(p.name());
  for (const report::Finding& f : d.findings()) {
    std::set<std::string> culprits;
    for (const report::ProcRef& p : f.culprits()) culprits.insert(p.name());
    v.findings.emplace_back(report::FindingKind_Name(f.kind()), culprits);
  }
  return v;
}

// The folder's summaries (one per host, or one of every file; with
// `per_file`, one of each file) written under the test's temporary folder;
// their paths.
std::vector<std::string> Summaries(const std::string& folder, uint64_t window, bool per_host, int* made,
                                   const std::vector<CollectiveRange>& collectives = {}, bool per_file = false) {
  const TraceInputs in = ListFiles({folder}, &IsTraceFileName);
  std::map<std::string, std::vector<std::string>> groups;
  for (const std::string& f : in.files)
    groups[per_file ? f.substr(f.rfind('/') + 1) : per_host ? HostOf(f) : ""].push_back(f);
  std::string tmp = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  std::vector<std::string> out;
  for (const auto& [host, files] : groups) {
    SummarizeOptions opts;
    opts.window = window;
    opts.collectives = collectives;
    SummaryResult s;
    std::string error;
    if (!Summarize(files, opts, &s, &error)) continue;
    std::string name = folder + "-" + host + "-" + std::to_string(window) + (collectives.empty() ? "" : "-asked") +
                       ".ncclsummary";
    std::replace(name.begin(), name.end(), '/', '_');
    const std::string path = tmp + "/" + name;
    std::ofstream(path, std::ios::binary | std::ios::trunc) << EncodeSummary(s);
    out.push_back(path);
    ++*made;
  }
  return out;
}

// What the merge of `paths` asks of a second round (diagnose --refine-args).
std::vector<CollectiveRange> Refine(const std::vector<std::string>& paths) {
  Model m;
  std::string error;
  if (!BuildJobModel(paths, LoadOptions(), &m, &error)) return {};
  return RefineRanges(m);
}

std::vector<std::string> Folders() {
  std::vector<std::string> v;
  RecordingFolders("testdata", &v);
  return v;
}

TEST(SummaryTestdataTest, EveryRecordingFolderIsCompared) {
  // The count the comparison below rests on: a glob that lost the folders
  // would compare nothing.
  EXPECT_GE(Folders().size(), 100u);
}

// What summarize writes is never refused: every recording's summaries (of
// the whole folder and of each file alone; at the default window, at 1 to
// 3 operations with and without a tight cap, checkpoints every 1, 2 or 3
// collectives, and second rounds' with collectives asked) read back
// whole, each process as written. The reader's rule on the smallest
// elements (tools/model/summary_shape.h) and its consistency checks
// (tools/model/summary_checks.h) hold this.
TEST(SummaryTestdataTest, EverySummaryReadsBackAsWritten) {
  int summaries = 0, processes = 0;
  for (const std::string& folder : Folders()) {
    const TraceInputs in = ListFiles({folder}, &IsTraceFileName);
    std::vector<std::vector<std::string>> groups{{folder}};
    for (const std::string& f : in.files) groups.push_back({f});
    for (const std::vector<std::string>& group : groups) {
      for (int round = 0; round < 6; ++round) {
        SummarizeOptions opts;
        opts.window = round == 0 ? 64 : round == 3 ? 3 : round == 4 ? 1 : 2;
        opts.max_bytes_per_rank = round == 1 ? 0 : round == 2 ? 256 : round == 4 ? 1024 : round == 5 ? 512
                                                                                        : opts.max_bytes_per_rank;
        if (round == 2) opts.checkpoint_every = 1;
        if (round == 4) opts.checkpoint_every = 3;
        if (round == 5) opts.checkpoint_every = 2;
        SummaryResult s;
        std::string error;
        if (round == 3 || round == 5) {
          // Every communicator's first 64 collectives asked for.
          if (!Summarize(group, opts, &s, &error)) continue;
          for (const summary::SummaryProcess& p : s.procs)
            for (const summary::CommPrefix& c : p.prefixes())
              if (c.comm_hash() != 0) opts.collectives.push_back(CollectiveRange{c.comm_hash(), 1, 64});
          s = SummaryResult();
        }
        if (!Summarize(group, opts, &s, &error)) continue;
        SummaryResult back;
        const std::string what = group[0] + " round " + std::to_string(round);
        EXPECT_TRUE(ParseSummary("n.ncclsummary", EncodeSummary(s), &back, &error)) << what << ": " << error;
        EXPECT_EQ(error, "") << what;
        ASSERT_EQ(back.procs.size(), s.procs.size()) << what;
        for (size_t i = 0; i < s.procs.size(); ++i)
          EXPECT_EQ(back.procs[i].SerializeAsString(), s.procs[i].SerializeAsString()) << what << " process " << i;
        ++summaries;
        processes += static_cast<int>(s.procs.size());
      }
    }
  }
  EXPECT_GE(summaries, 1000);
  printf("%d summaries of %d processes read back as written\n", summaries, processes);
}

TEST(SummaryTestdataTest, DefaultWindowGivesTheTracesVerdict) {
  int compared = 0, multi_host = 0;
  for (const std::string& folder : Folders()) {
    const Verdict full = Judge({folder});
    for (bool per_host : {true, false}) {
      int made = 0;
      const std::vector<std::string> sums = Summaries(folder, 64, per_host, &made);
      if (per_host && made > 1) ++multi_host;
      if (sums.empty()) {
        EXPECT_EQ(full.exit, 2) << folder << ": no summary made, yet the traces give: " << full.line;
        continue;
      }
      const Verdict s = Judge(sums);
      ++compared;
      // Stragglers of jobs longer than the window included: the summaries
      // judge every collective's arrivals (the digests), and with
      // completions from CUDA events the kernels' GPU-held times too
      // (testdata/torch/gpu-slow-events-4r and -4gpu: 80 operations a rank,
      // a rank held on its GPU).
      EXPECT_EQ(s.line, full.line) << folder << (per_host ? " (per host)" : " (one summary)");
      EXPECT_EQ(s.exit, full.exit) << folder;
    }
  }
  EXPECT_GE(compared, 200);
  printf("compared %d summary sets; %d folders with several hosts\n", compared, multi_host);
}

// Summaries `nodes` gathered into group summaries of `size` nodes each (0:
// all in one), as `summarize` given summaries makes them, at the group's
// default window (kGroupWindow); their paths.
std::vector<std::string> Groups(const std::vector<std::string>& nodes, size_t size, const std::string& tag) {
  if (size == 0) size = nodes.size();
  std::string tmp = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  std::vector<std::string> out;
  for (size_t at = 0; at < nodes.size(); at += size) {
    const std::vector<std::string> chunk(nodes.begin() + static_cast<ptrdiff_t>(at),
                                         nodes.begin() + static_cast<ptrdiff_t>(std::min(nodes.size(), at + size)));
    SummaryResult s;
    std::string error;
    EXPECT_TRUE(Summarize(chunk, SummarizeOptions(), &s, &error)) << tag << ": " << error;
    EXPECT_GE(s.header.nodes(), chunk.size()) << tag;
    std::string name = tag + "-group" + std::to_string(size) + "-" + std::to_string(at) + ".ncclsummary";
    std::replace(name.begin(), name.end(), '/', '_');
    const std::string path = tmp + "/" + name;
    // What its processes share, stored once, reads back as given.
    std::ofstream(path, std::ios::binary | std::ios::trunc) << testing::EncodeAndReadBack(s, path);
    out.push_back(path);
  }
  return out;
}

// The same findings at every level: node summaries (per host, and one
// per process) gathered into groups of 1, 2 and all of them, each process
// cut to the group's window, give the nodes' own verdict (first line,
// exit status, culprits) and every finding of theirs, of the same kind
// with the same culprits; per host that verdict is the traces' (above).
// And from nodes at a window of 2 operations (under the group's: kept as
// they are), where chains, gaps and second rounds are at play.
TEST(SummaryTestdataTest, GroupSummariesGiveTheNodesFindings) {
  int compared = 0, traces_line = 0;
  for (const std::string& folder : Folders()) {
    const Verdict full = Judge({folder});
    for (const uint64_t window : {uint64_t{64}, uint64_t{2}}) {
      for (bool per_process : {false, true}) {
        int made = 0;
        const std::vector<std::string> nodes =
            Summaries(folder, window, !per_process, &made, {}, per_process);
        if (nodes.empty()) continue;
        const Verdict node = Judge(nodes);
        const std::string tag = folder + "-" + std::to_string(window) + (per_process ? "-p" : "-h");
        for (size_t size : {size_t{1}, size_t{2}, size_t{0}}) {
          const Verdict group = Judge(Groups(nodes, size, tag));
          EXPECT_EQ(group.line, node.line) << folder << " window " << window << (per_process ? " per process" : " per host")
                                           << ", groups of " << size;
          EXPECT_EQ(group.exit, node.exit) << folder;
          EXPECT_EQ(group.culprits, node.culprits) << folder;
          EXPECT_EQ(group.findings, node.findings) << folder << " window " << window
                                                   << (per_process ? " per process" : " per host") << ", groups of "
                                                   << size << ": the group's\n"
                                                   << Findings(group) << "the nodes'\n"
                                                   << Findings(node);
          ++compared;
          traces_line += group.line == full.line;
        }
        // And a second round asked of the group, gathered again.
        const std::vector<CollectiveRange> ask = Refine(Groups(nodes, 0, tag + "-r"));
        if (ask.empty() || per_process) continue;
        int again = 0;
        const std::vector<std::string> asked = Summaries(folder, window, true, &again, ask);
        EXPECT_EQ(Judge(Groups(asked, 2, tag + "-asked")).line, Judge(asked).line) << folder;
      }
    }
  }
  EXPECT_GE(compared, 1000);
  printf("compared %d group summary sets with their nodes'; %d of them the traces' line\n", compared, traces_line);
}

TEST(SummaryTestdataTest, SmallWindowGivesTheSameVerdictOrIncomplete) {
  int same = 0, incomplete = 0, chains = 0, asked = 0, exact = 0, chains_first = 0, sampled = 0;
  for (const std::string& folder : Folders()) {
    const Verdict full = Judge({folder});
    int made = 0;
    const std::vector<std::string> sums = Summaries(folder, 2, true, &made);
    if (sums.empty()) continue;
    const Verdict first = Judge(sums);
    // The second round where the first asks one (summarize --collectives):
    // its verdict is held to the same rules; where the first round's was
    // the chains' MISMATCH, it is the traces' line itself.
    const std::vector<CollectiveRange> ask = Refine(sums);
    Verdict s = first;
    if (!ask.empty()) {
      int again = 0;
      s = Judge(Summaries(folder, 2, true, &again, ask));
      ++asked;
      exact += s.line == full.line;
      if (first.line.find("seen by the per-node summaries' signature chains") != std::string::npos) {
        ++chains_first;
        EXPECT_EQ(s.line, full.line) << folder << ":\n  first round: " << first.line;
      }
    }
    if (s.line == full.line && s.exit == full.exit) {
      ++same;
      continue;
    }
    // The signature chains found a mismatch whose operation the windows
    // let go: the traces' verdict, its culprits, not its operation.
    if (s.line.find("seen by the per-node summaries' signature chains") != std::string::npos &&
        full.line.rfind("MISMATCH: ", 0) == 0) {
      ++chains;
      EXPECT_EQ(s.culprits, full.culprits) << folder << ":\n  summaries: " << s.line << "\n  traces:    " << full.line;
      EXPECT_FALSE(s.culprits.empty()) << folder;
      EXPECT_EQ(s.exit, full.exit) << folder;
      continue;
    }
    // A straggler the arrival samples show (at these lengths every
    // collective is sampled: the traces' count and line), behind evidence
    // the summaries lack.
    if (full.line.rfind("STRAGGLER: ", 0) == 0 && s.line.rfind("INCOMPLETE EVIDENCE (", 0) == 0 &&
        s.line.size() > full.line.size() &&
        s.line.compare(s.line.size() - full.line.size(), full.line.size(), full.line) == 0) {
      ++sampled;
      EXPECT_EQ(s.exit, 3) << folder;
      continue;
    }
    ++incomplete;
    EXPECT_EQ(s.line.rfind("INCOMPLETE: ", 0), 0u) << folder << ":\n  summaries: " << s.line << "\n  traces:    " << full.line;
    EXPECT_EQ(s.exit, 3) << folder;
  }
  printf("window 2: %d the same, %d MISMATCH by the chains with the traces' culprits, %d the traces' STRAGGLER "
         "from the samples behind INCOMPLETE EVIDENCE, %d incomplete; "
         "%d asked a second round (%d after the chains' MISMATCH), %d of them the traces' line\n",
         same, chains, sampled, incomplete, asked, chains_first, exact);
}

stats::Stats StatsOf(const std::vector<std::string>& paths, bool* ok);
bool Near(double want, double have);

// Each rank summarized alone, so that no summary holds a whole
// communicator: the merge judges arrivals from the samples across the job,
// and, with completions from CUDA events, the kernels' GPU-held times the
// samples carry. On the PyTorch recordings with such completions, a healthy
// job and a straggler (on its host, or held on its GPU: gpu-slow-events)
// get the traces' line at a window of 16 operations, of the 40 to 80 each
// rank has. (At 2 or 8, some of them are INCOMPLETE instead: a completion
// seen late, as CUDA events are, leaves an operation unfinished in one
// window that another rank's summary let go, which they say.)
TEST(SummaryTestdataTest, EachRankAloneGivesTheTracesStragglerOrOk) {
  int compared = 0, held = 0;
  for (const std::string& folder : Folders()) {
    if (folder.find("testdata/torch/") == std::string::npos || folder.find("-events-") == std::string::npos) continue;
    const Verdict full = Judge({folder});
    if (full.line.rfind("OK: ", 0) != 0 && full.line.rfind("STRAGGLER: ", 0) != 0) continue;
    int made = 0;
    const std::vector<std::string> sums = Summaries(folder, 16, false, &made, {}, true);
    ASSERT_GE(made, 4) << folder;
    const Verdict s = Judge(sums);
    EXPECT_EQ(s.line, full.line) << folder;
    EXPECT_EQ(s.exit, full.exit) << folder;
    ++compared;
    // And `stats`' lateness per rank: at these lengths every collective is
    // sampled, so from the samples it is the traces' own.
    bool ok = false;
    const stats::Stats ts = StatsOf({folder}, &ok), ss = StatsOf(sums, &ok);
    ASSERT_EQ(ss.ranks_size(), ts.ranks_size()) << folder;
    for (int i = 0; i < ts.ranks_size(); ++i) {
      const stats::RankRow &t = ts.ranks(i), &r = ss.ranks(i);
      EXPECT_EQ(r.rank(), t.rank()) << folder;
      EXPECT_EQ(r.samples(), t.samples()) << folder << " rank " << t.rank();
      EXPECT_EQ(r.lateness_p50_us(), t.lateness_p50_us()) << folder << " rank " << t.rank();
      // Held times are carried to the us (a polling interval is ~10 ms).
      EXPECT_NEAR(r.gpu_lateness_p50_us(), t.gpu_lateness_p50_us(), 1.0) << folder << " rank " << t.rank();
      // Which function a rank is the most held at is chance below a
      // polling interval; past it, the held rank's.
      if (t.gpu_lateness_p50_us() >= 10'000) {
        EXPECT_EQ(r.gpu_func(), t.gpu_func()) << folder << " rank " << t.rank();
      }
      EXPECT_EQ(r.stride(), 1u) << folder;
    }
    // And each row's arrival skew.
    int skews = 0;
    for (const stats::StatRow& t : ts.rows()) {
      if (t.skew_samples() == 0) continue;
      const stats::StatRow* r = nullptr;
      for (const stats::StatRow& x : ss.rows())
        if (x.comm() == t.comm() && x.func() == t.func() && x.bucket_log2() == t.bucket_log2()) r = &x;
      ASSERT_NE(r, nullptr) << folder << " " << t.func() << " " << t.bucket();
      EXPECT_EQ(r->skew_samples(), t.skew_samples()) << folder << " " << t.func() << " " << t.bucket();
      // The row's other samples are the summaries' sketches: skew joins them.
      EXPECT_TRUE(Near(t.skew_p50_us(), r->skew_p50_us()))
          << folder << " " << t.func() << " " << t.bucket() << ": " << r->skew_p50_us() << " vs " << t.skew_p50_us();
      EXPECT_EQ(r->skew_stride(), 1u) << folder;
      ++skews;
    }
    EXPECT_GT(skews, 0) << folder;
    held += full.line.find("'s GPU got to ") != std::string::npos;
  }
  // healthy-events-4r/8r, straggler-events-4r/8r, gpu-slow-events-4r and -4gpu.
  EXPECT_GE(compared, 6);
  EXPECT_EQ(held, 2);
}

stats::Stats StatsOf(const std::vector<std::string>& paths, bool* ok) {
  Model m;
  std::string error;
  *ok = BuildJobModel(paths, LoadOptions(), &m, &error) && m.undigested.empty();
  return ComputeStats(m);
}

bool Near(double want, double have) {
  return std::fabs(want - have) <= Sketch::kRelativeError * std::fabs(want) * 1.000001 + 0.001;
}

// The rows of `got` (summaries) against `want` (traces); `whole`: every
// communicator was whole in one summary, so skew, lateness and calls are
// the traces' too. Returns what differs, "" when nothing.
std::string DiffStats(const stats::Stats& want, const stats::Stats& got, bool whole) {
  std::string d;
  if (want.rows_size() != got.rows_size()) return "rows " + std::to_string(want.rows_size()) + " vs " +
                                                   std::to_string(got.rows_size());
  for (int i = 0; i < want.rows_size(); ++i) {
    const stats::StatRow& a = want.rows(i);
    const stats::StatRow& b = got.rows(i);
    const std::string row = a.comm() + " " + a.func() + " " + a.bucket() + ": ";
    if (a.func() != b.func() || a.bucket_log2() != b.bucket_log2() || a.comm() != b.comm()) return row + "key";
    if (a.samples() != b.samples() || a.incomplete() != b.incomplete() || a.warmup() != b.warmup() ||
        a.timing() != b.timing())
      d += row + "samples/incomplete/warmup/timing; ";
    if (!Near(a.latency_p50_us(), b.latency_p50_us()) || !Near(a.latency_p99_us(), b.latency_p99_us()) ||
        !Near(a.delay_p50_us(), b.delay_p50_us()) || !Near(a.delay_p99_us(), b.delay_p99_us()) ||
        !Near(a.busbw_gbps(), b.busbw_gbps()))
      d += row + "latency/delay/busbw " + std::to_string(a.latency_p50_us()) + " vs " +
           std::to_string(b.latency_p50_us()) + "; ";
    if (!b.sketched()) d += row + "not marked as sketched; ";
    if (!whole) continue;
    if (a.calls() != b.calls()) d += row + "calls " + std::to_string(a.calls()) + " vs " + std::to_string(b.calls()) + "; ";
    if (a.skew_samples() != b.skew_samples() || !Near(a.skew_p50_us(), b.skew_p50_us()) ||
        !Near(a.skew_p99_us(), b.skew_p99_us()))
      d += row + "skew; ";
  }
  if (!whole) return d;
  if (want.ranks_size() != got.ranks_size()) return d + "rank rows";
  for (int i = 0; i < want.ranks_size(); ++i) {
    const stats::RankRow& a = want.ranks(i);
    const stats::RankRow& b = got.ranks(i);
    if (a.rank() != b.rank() || a.samples() != b.samples() || !Near(a.lateness_p50_us(), b.lateness_p50_us()) ||
        !Near(a.lateness_p99_us(), b.lateness_p99_us()) || a.procs_size() != b.procs_size())
      d += a.comm() + " rank " + std::to_string(a.rank()) + ": lateness; ";
  }
  return d;
}

// A baseline the run regresses from in some rows: the traces' own stats,
// every other row's latencies (and lateness) 30% lower.
stats::Stats Faster(stats::Stats s) {
  for (int i = 0; i < s.rows_size(); i += 2) {
    stats::StatRow* r = s.mutable_rows(i);
    for (double& v : *r->mutable_latency_us()) v *= 0.7;
    r->set_latency_p50_us(r->latency_p50_us() * 0.7);
    r->set_latency_p99_us(r->latency_p99_us() * 0.7);
    if (r->has_busbw_gbps()) r->set_busbw_gbps(r->busbw_gbps() / 0.7);
  }
  for (int i = 0; i < s.ranks_size(); i += 2)
    for (double& v : *s.mutable_ranks(i)->mutable_lateness_us()) v -= 20000;  // 20 ms earlier
  return s;
}

// The run's samples scaled by `f`, as a sketch may shift them.
stats::Stats Scaled(stats::Stats s, double f) {
  for (stats::StatRow& r : *s.mutable_rows()) {
    for (double& v : *r.mutable_latency_us()) v *= f;
    for (double& v : *r.mutable_delay_us()) v *= f;
    for (double& v : *r.mutable_skew_us()) v *= f;
    r.set_latency_p50_us(r.latency_p50_us() * f);
    r.set_latency_p99_us(r.latency_p99_us() * f);
    if (r.has_busbw_gbps()) r.set_busbw_gbps(r.busbw_gbps() / f);
    if (r.has_algbw_gbps()) r.set_algbw_gbps(r.algbw_gbps() / f);
  }
  for (stats::RankRow& r : *s.mutable_ranks()) {
    for (double& v : *r.mutable_lateness_us()) v *= f;
    r.set_lateness_p50_us(r.lateness_p50_us() * f);
    r.set_lateness_p99_us(r.lateness_p99_us() * f);
  }
  return s;
}

TEST(SummaryTestdataTest, StatsAndCheckFromSummariesGiveTheTracesRowsAndVerdicts) {
  int compared = 0, whole_compared = 0, judged = 0, regressed = 0, items = 0, borderline = 0;
  for (const std::string& folder : Folders()) {
    bool ok = false;
    const stats::Stats want = StatsOf({folder}, &ok);
    if (!ok) continue;
    const stats::Stats base = Faster(want);
    const CheckResult want_check = CompareStats(base, want, DefaultCheckOptions());
    const CheckResult lo_check = CompareStats(base, Scaled(want, 1 - Sketch::kRelativeError), DefaultCheckOptions());
    const CheckResult hi_check = CompareStats(base, Scaled(want, 1 + Sketch::kRelativeError), DefaultCheckOptions());
    for (auto [window, per_host] : {std::pair<uint64_t, bool>{64, true}, {64, false}, {2, true}, {2, false}}) {
      int made = 0;
      const std::vector<std::string> sums = Summaries(folder, window, per_host, &made);
      if (sums.empty()) continue;
      bool sok = false;
      const stats::Stats got = StatsOf(sums, &sok);
      ASSERT_TRUE(sok) << folder;
      const bool whole = made == 1;
      const std::string where = folder + " window " + std::to_string(window) + (per_host ? " per host" : " one");
      EXPECT_EQ(DiffStats(want, got, whole), "") << where;
      ++compared;
      whole_compared += whole;
      // check's judgement of each row and metric: the same.
      if (!whole) continue;
      const CheckResult got_check = CompareStats(base, got, DefaultCheckOptions());
      ASSERT_EQ(got_check.items.size(), want_check.items.size()) << where;
      for (size_t k = 0; k < got_check.items.size(); ++k) {
        const stats::CheckItem& g = got_check.items[k];
        const stats::CheckItem& w = want_check.items[k];
        ++items;
        // On the edge of significance, the traces' own samples 1% off (the
        // sketches' bound) judge it the other way too: either is right.
        if (g.status() != w.status() && (lo_check.items[k].status() == g.status() ||
                                         hi_check.items[k].status() == g.status())) {
          ++borderline;
          continue;
        }
        EXPECT_EQ(g.status(), w.status())
            << where << ": " << w.comm() << " " << w.func() << " " << w.bucket() << " " << w.metric() << " rank "
            << w.rank() << ": traces " << w.current() << " " << w.change_low_pct() << ".." << w.change_high_pct()
            << " n=" << w.current_samples() << "; summaries " << g.current() << " " << g.change_low_pct() << ".."
            << g.change_high_pct() << " n=" << g.current_samples() << " " << g.note();
      }
      EXPECT_EQ(got_check.failed(), want_check.failed()) << where;
      judged += want_check.judged();
      regressed += want_check.regressed;
    }
  }
  EXPECT_GE(compared, 300);
  EXPECT_GT(regressed, 0);  // the baseline made some rows regress: the comparison can fail
  EXPECT_LE(borderline * 100, items);  // the edge is rare
  printf("stats compared on %d summary sets (%d with every communicator in one summary); check: %d judged, %d "
         "regressed; %d of %d items on the edge of significance, judged as the traces 1%% off judge them\n",
         compared, whole_compared, judged, regressed, borderline, items);
}

}  // namespace
}  // namespace ncclwatch::tools
