// ncclwatch watch on synthetic jobs (tools/testing/trace_builder.h) whose
// files grow in a folder as their processes would write them, poll by
// poll: by time (every rank's writes up to a moment, cut mid-record), or
// by arbitrary amounts per file (ranks whose files lag). Each checks the
// verdict against diagnose's on the complete files.

#include "tools/watch/watch.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"
#include "tools/reader/reader.h"
#include "tools/testing/memory_limit.h"
#include "tools/testing/trace_builder.h"
#include "tools/testing/headerless.h"

namespace ncclwatch::tools {
namespace {

using testing::BuildJob;
using testing::JobPlan;
using testing::JobSpec;
using testing::kMs;
using testing::kSec;
using testing::OpPlan;
using testing::RankPlan;

std::string TempDir() { return testing::NewTestDir("watch"); }

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }
// A verdict without its durations, which grow while a hang lasts.
std::string Timeless(const std::string& s) { return std::regex_replace(s, std::regex("[0-9.]+ (s|ms)\\b"), "T"); }

// The culprits by their rank in the finding's communicator: "rank 3" and
// "comm rank 3" (its file not there yet) are the same rank.
std::vector<int> CulpritRanks(const report::Finding& f) {
  std::vector<int> v;
  for (const auto& r : f.culprits()) v.push_back(r.comm_rank());
  return v;
}
double Sec(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

// A job's files, written into a folder a piece at a time.
class GrowingJob {
 public:
  GrowingJob(const JobSpec& spec) : dir_(TempDir()) {
    for (const testing::TraceBuilder& b : BuildJob(spec, &plan_)) {
      names_.push_back(b.FileName());
      full_.push_back(b.Bytes());
    }
    at_.assign(full_.size(), 0);
    // Each file's writes (Batch records) with their times.
    for (const std::string& bytes : full_) {
      TraceReader r;
      r.OpenBytes("f", bytes);
      std::vector<std::pair<uint64_t, uint64_t>> batches;  // (local time, offset)
      trace::Record rec;
      uint64_t off = 0;
      while (r.Next(&rec, &off))
        if (rec.has_batch()) batches.push_back({rec.batch().time_ns(), off});
      batches_.push_back(batches);
    }
  }

  const std::string& dir() const { return dir_; }
  const JobPlan& plan() const { return plan_; }
  size_t files() const { return full_.size(); }
  size_t size(size_t i) const { return full_[i].size(); }
  size_t at(size_t i) const { return at_[i]; }
  bool complete() const {
    for (size_t i = 0; i < full_.size(); ++i)
      if (at_[i] < full_[i].size()) return false;
    return true;
  }

  // File i holds its first n bytes (never fewer than it holds).
  void Grow(size_t i, size_t n) {
    n = std::min(n, full_[i].size());
    if (n <= at_[i] && at_[i] > 0) return;
    std::ofstream f(dir_ + "/" + names_[i], std::ios::binary | std::ios::app);
    f << full_[i].substr(at_[i], n - std::min(n, at_[i]));
    at_[i] = std::max(at_[i], n);
  }
  // Every file holds what its process wrote by true time `t`, and `extra`
  // bytes of its next write (a write(2) seen half done).
  void GrowTo(uint64_t t, size_t extra = 0) {
    for (size_t i = 0; i < full_.size(); ++i) Grow(i, OffsetAt(i, t) + (OffsetAt(i, t) > 0 ? extra : 0));
  }
  size_t OffsetAt(size_t i, uint64_t t) const {
    if (t < plan_.ranks[i].start_ns) return 0;
    const uint64_t local = plan_.Local(static_cast<int>(i), t);
    for (const auto& [time, off] : batches_[i])
      if (time > local) return off;
    return full_[i].size();
  }
  void GrowAll() {
    for (size_t i = 0; i < full_.size(); ++i) Grow(i, full_[i].size());
  }

  // diagnose on the complete files.
  report::Diagnosis Diagnosis() const {
    const std::string dir = TempDir();
    for (size_t i = 0; i < full_.size(); ++i) std::ofstream(dir + "/" + names_[i], std::ios::binary) << full_[i];
    Model m;
    std::string err;
    EXPECT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
    return Diagnose(m);
  }
  // The number of operations of every rank issued by `t` that had not
  // completed by `t - lag`: what a watch at `t` cannot have settled yet.
  // An operation that took longer than kAbortMinWaitSec and completed
  // less than kAbortWindowSec before the end of the files may have been
  // ended by an abort (model.h): it is not settled before, nor is anything
  // after it on its communicator.
  // A Batch's time opens its write: the write holds what came up to a
  // flush interval (100 ms) later, so a file "at t" holds that too.
  uint64_t Unsettled(uint64_t t, uint64_t lag) const {
    const uint64_t written = t + 100 * kMs;
    uint64_t from = t > lag ? t - lag : 0;
    const auto sec = [](double s) { return static_cast<uint64_t>(s * 1e9); };
    for (const auto& ops : plan_.ops)
      for (const OpPlan& p : ops)
        if (p.issued && p.done_ns >= 0 && static_cast<uint64_t>(p.done_ns) <= t &&
            static_cast<uint64_t>(p.done_ns) - p.start_ns >= sec(kAbortMinWaitSec) &&
            static_cast<uint64_t>(p.done_ns) + sec(kAbortWindowSec) + lag >= t)
          from = std::min(from, p.start_ns);
    uint64_t n = 0;
    for (const auto& ops : plan_.ops)
      for (const OpPlan& p : ops)
        if (p.issued && p.start_ns <= written && (p.done_ns < 0 || static_cast<uint64_t>(p.done_ns) >= from)) ++n;
    return n;
  }

 private:
  std::string dir_;
  JobPlan plan_;
  std::vector<std::string> names_, full_;
  std::vector<size_t> at_;
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> batches_;
};

// Ranks 0-2 hang in AllReduce #6, which rank 3 (idle outside NCCL after
// #5, alive) never issues; the plugin's stuck reports come at 5 s.
JobSpec HangSpec() {
  JobSpec spec;
  spec.nranks = 4;
  spec.ncolls = 10;
  spec.stuck_sec = 5;
  spec.rank_hook = [](int rank, RankPlan& r) {
    if (rank == 3) {
      r.idle_after_ns = static_cast<int64_t>(3 * kSec + 5 * 10 * kMs + kMs);
      r.end = testing::RankEnd::kNone;
    }
  };
  return spec;
}

void ExpectSameFinding(const report::Diagnosis& got, const report::Diagnosis& want) {
  ASSERT_GT(got.findings_size(), 0) << got.verdict();
  ASSERT_GT(want.findings_size(), 0) << want.verdict();
  EXPECT_EQ(got.findings(0).kind(), want.findings(0).kind()) << got.verdict();
  EXPECT_EQ(got.findings(0).seq(), want.findings(0).seq()) << got.verdict();
  EXPECT_EQ(got.findings(0).comm(), want.findings(0).comm()) << got.verdict();
  EXPECT_EQ(CulpritRanks(got.findings(0)), CulpritRanks(want.findings(0))) << got.verdict();
}

bool Error(const WatchState& s) {
  return s.have_diagnosis && s.diagnosis.findings_size() > 0 &&
         s.diagnosis.findings(0).severity() == report::SEVERITY_ERROR;
}

// Every poll: an error the watch would act on (once it holds) is the one
// diagnose finds in the complete files, never a rank that is just late.
void CheckPoll(const WatchState& s, const report::Diagnosis& want) {
  if (s.end == WatchState::kProblem || Error(s)) ExpectSameFinding(s.diagnosis, want);
}

TEST(Watch, AHangGrowingByTimeIsFoundOnceTheStuckReportsAreWritten) {
  const JobSpec spec = HangSpec();
  GrowingJob job(spec);
  const report::Diagnosis want = job.Diagnosis();
  ASSERT_EQ(want.findings(0).kind(), report::MISSING_RANK) << want.verdict();
  Watcher w({job.dir()}, {});
  WatchState s = w.Poll(0);
  EXPECT_EQ(s.end, WatchState::kRunning);
  EXPECT_EQ(s.waiting, "no trace file yet");
  uint64_t t = 0, found_at = 0;
  for (int k = 0; !job.complete(); ++k) {
    t += 250 * kMs;
    job.GrowTo(t, (k * 37) % 23);  // and a piece of the next write
    s = w.Poll(Sec(t));
    CheckPoll(s, want);
    if (s.end == WatchState::kProblem) {
      found_at = t;
      break;
    }
  }
  ASSERT_EQ(s.end, WatchState::kProblem) << s.diagnosis.verdict();
  // Not before the evidence: the ranks' stuck reports (5 s after #6 began
  // at 3.06 s), or as long a wait.
  EXPECT_GE(found_at, 8 * kSec);
  EXPECT_EQ(Timeless(FirstLine(FormatText(s.diagnosis))), Timeless(want.verdict()));
  // Read to the end, the verdict is diagnose's on the whole files.
  job.GrowAll();
  s = w.Conclude();
  EXPECT_EQ(s.end, WatchState::kFinalized);
  EXPECT_EQ(FirstLine(FormatText(s.diagnosis)), want.verdict());
  EXPECT_EQ(ExitStatus(s.diagnosis), ExitStatus(want));
}

// Each file grows by its own arbitrary amounts, cut anywhere: at times one
// is far behind the others. No verdict may rest on a file that lags.
TEST(Watch, AHangGrowingByArbitraryPiecesNeverBlamesALaggingRank) {
  const JobSpec spec = HangSpec();
  for (unsigned seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE(seed);
    GrowingJob job(spec);
    const report::Diagnosis want = job.Diagnosis();
    std::mt19937 rng(seed);
    WatchOptions o;
    o.keep_recent = 0;
    Watcher w({job.dir()}, o);
    WatchState s;
    double now = 0;
    while (!job.complete()) {
      for (size_t i = 0; i < job.files(); ++i)
        if (rng() % 3 == 0) job.Grow(i, job.at(i) + rng() % (job.size(i) / 6 + 1));
      s = w.Poll(now += 0.25);
      CheckPoll(s, want);
      if (s.end != WatchState::kRunning) break;
    }
    for (int k = 0; k < 3 && s.end == WatchState::kRunning; ++k) {
      s = w.Poll(now += 0.25);
      CheckPoll(s, want);
    }
    ASSERT_EQ(s.end, WatchState::kProblem) << s.diagnosis.verdict();
    ExpectSameFinding(s.diagnosis, want);
  }
}

// A long healthy job, where a late rank makes the others wait 2.5 s in a
// collective every `every` collectives: diagnose's 1 s would call a
// snapshot of that a hang.
JobSpec LongHealthySpec(int ncolls, int every) {
  JobSpec spec;
  spec.nranks = 4;
  for (int k = 0; k < ncolls; ++k) {
    testing::JobOp op;
    op.count = 4096;
    // A 3 s pause of the schedule after every `every`-th collective.
    const uint64_t pauses = static_cast<uint64_t>(k > 0 ? (k - 1) / every : 0);
    op.start_ns = 3 * kSec + static_cast<uint64_t>(k) * 20 * kMs + pauses * 3 * kSec;
    op.duration_ns = 2 * kMs;
    spec.ops.push_back(op);
  }
  spec.op_hook = [every](int rank, int k, OpPlan& p) {
    if (rank == 2 && k > 0 && k % every == 0) p.start_ns += 2500 * kMs;  // late into the pause
  };
  return spec;
}

TEST(Watch, AHealthyJobIsNeverAProblemAndItsWindowStaysSmall) {
  const int ncolls = 2000;
  GrowingJob job(LongHealthySpec(ncolls, 600));
  const report::Diagnosis want = job.Diagnosis();
  ASSERT_EQ(ExitStatus(want), 0) << want.verdict();
  WatchOptions o;
  o.keep_recent = 0;
  Watcher w({job.dir()}, o);
  Watcher usual({job.dir()}, {});  // keeps the last 100 per rank too
  WatchState s, u;
  uint64_t most = 0;
  for (uint64_t t = 250 * kMs; s.end == WatchState::kRunning; t += 250 * kMs) {
    job.GrowTo(t, (t / kMs) % 29);
    s = w.Poll(Sec(t));
    u = usual.Poll(Sec(t));
    EXPECT_EQ(u.end, s.end);
    if (u.end == WatchState::kRunning) {
      EXPECT_LE(u.ops_kept, job.Unsettled(t, 500 * kMs) + 4 + 4 * 100) << Sec(t);
    }
    ASSERT_TRUE(s.end == WatchState::kRunning || s.end == WatchState::kFinalized) << s.diagnosis.verdict();
    if (s.have_diagnosis && s.diagnosis.findings_size() > 0) {
      EXPECT_NE(s.diagnosis.findings(0).severity(), report::SEVERITY_ERROR) << t << ": " << s.diagnosis.verdict();
    }
    // Kept: what had not finished on every rank half a second ago (the
    // files lag their processes by a write; see Unsettled), and each
    // communicator's last collective completed everywhere.
    if (s.end == WatchState::kRunning) {
      EXPECT_LE(s.ops_kept, job.Unsettled(t, 500 * kMs) + 4) << Sec(t);
    }
    most = std::max(most, s.ops_kept);
    ASSERT_LT(t, 200 * kSec);
  }
  EXPECT_EQ(s.end, WatchState::kFinalized);
  EXPECT_LT(most, 4u * ncolls / 10);  // the job: 8,000 operations
  EXPECT_EQ(FirstLine(FormatText(s.diagnosis)), want.verdict());
  EXPECT_EQ(ExitStatus(s.diagnosis), 0);
  EXPECT_EQ(s.diagnosis.operations(), want.operations());
  EXPECT_EQ(FirstLine(FormatText(u.diagnosis)), want.verdict());
}

// The same growth judged with diagnose's one second while the job runs:
// the late rank's pauses are taken for a hang. Why watch waits longer.
TEST(Watch, DiagnosesOneSecondWhileTheJobRunsWouldCallAPauseAHang) {
  GrowingJob job(LongHealthySpec(700, 600));
  WatchOptions o;
  o.keep_recent = 0;
  o.live_wait_sec = 1.0;
  Watcher w({job.dir()}, o);
  WatchState s;
  for (uint64_t t = 250 * kMs; s.end == WatchState::kRunning && t < 100 * kSec; t += 250 * kMs) {
    job.GrowTo(t);
    s = w.Poll(Sec(t));
  }
  ASSERT_EQ(s.end, WatchState::kProblem);
  EXPECT_EQ(s.diagnosis.verdict().rfind("HANG: rank 2 never joined AllReduce #600", 0), 0u) << s.diagnosis.verdict();
}

// One rank's file lags far behind the others (a slow shared filesystem):
// trimming must keep what it has not finished, and no verdict may blame it.
TEST(Watch, ALaggingFileIsNotBlamedAndTrimmingWaitsForIt) {
  JobSpec spec = HangSpec();
  spec.ncolls = 400;
  spec.rank_hook = [](int rank, RankPlan& r) {
    if (rank == 3) {
      r.idle_after_ns = static_cast<int64_t>(3 * kSec + 300 * 10 * kMs + kMs);
      r.end = testing::RankEnd::kNone;
    }
  };
  GrowingJob job(spec);
  const report::Diagnosis want = job.Diagnosis();
  ASSERT_NE(want.verdict().find("rank 3 never joined AllReduce #301"), std::string::npos) << want.verdict();
  WatchOptions o;
  o.keep_recent = 0;
  Watcher w({job.dir()}, o);
  WatchState s;
  uint64_t t = 0;
  // Rank 1's file shows the job 6 s late.
  for (; t < 20 * kSec && s.end == WatchState::kRunning; t += 250 * kMs) {
    for (size_t i = 0; i < job.files(); ++i) job.Grow(i, job.OffsetAt(i, i == 1 ? std::max<uint64_t>(t, 6 * kSec) - 6 * kSec : t));
    s = w.Poll(Sec(t));
    CheckPoll(s, want);
    if (t > 3 * kSec + 310 * 10 * kMs && t < 9 * kSec) {
      // Rank 1 has not finished what the others did meanwhile: kept.
      EXPECT_GE(s.ops_kept, 3u * 290) << t;
    }
  }
  ASSERT_EQ(s.end, WatchState::kProblem) << s.diagnosis.verdict();
  ExpectSameFinding(s.diagnosis, want);
  EXPECT_EQ(ExitStatus(s.diagnosis), 1);
}

// A poll that finds no window changed (the processes frozen, or gone
// without a word) judges the models the last poll built again, and says
// the same; a file that grows is read and built anew.
TEST(Watch, APollOfUnchangedFilesBuildsNothingAndSaysTheSame) {
  JobSpec spec = HangSpec();
  GrowingJob job(spec);
  Watcher w({job.dir()}, {});
  job.GrowTo(4 * kSec);
  WatchState first = w.Poll(4);
  ASSERT_EQ(first.end, WatchState::kRunning) << first.diagnosis.verdict();
  EXPECT_GE(first.models_built, 1);
  WatchState again = w.Poll(5);
  EXPECT_EQ(again.models_built, 0);
  EXPECT_EQ(again.end, first.end);
  EXPECT_EQ(FormatText(again.diagnosis), FormatText(first.diagnosis));
  EXPECT_EQ(again.processes, first.processes);
  EXPECT_EQ(again.ops_kept, first.ops_kept);
  // One file a write further: that poll builds again.
  const size_t before = job.at(0);
  job.Grow(0, job.OffsetAt(0, 5 * kSec));
  ASSERT_GT(job.at(0), before);
  WatchState grown = w.Poll(6);
  EXPECT_GE(grown.models_built, 1);
}

// The cap: a file keeps at most window_ops operations, even unsettled.
// The verdict then says the evidence is incomplete, and blames no one for
// the history let go.
TEST(Watch, AForcedSmallWindowSaysTheEvidenceIsIncomplete) {
  JobSpec spec = HangSpec();
  spec.ncolls = 400;
  spec.rank_hook = [](int rank, RankPlan& r) {
    if (rank == 3) {
      r.idle_after_ns = static_cast<int64_t>(3 * kSec + 300 * 10 * kMs + kMs);
      r.end = testing::RankEnd::kNone;
    }
  };
  GrowingJob job(spec);
  const report::Diagnosis want = job.Diagnosis();
  WatchOptions o;
  o.keep_recent = 0;
  o.window_ops = 50;
  Watcher w({job.dir()}, o);
  WatchState s;
  bool said = false;
  for (uint64_t t = 0; t < 20 * kSec && s.end == WatchState::kRunning; t += 250 * kMs) {
    for (size_t i = 0; i < job.files(); ++i) job.Grow(i, job.OffsetAt(i, i == 1 ? std::max<uint64_t>(t, 6 * kSec) - 6 * kSec : t));
    s = w.Poll(Sec(t));
    for (const std::string& n : s.notes) said |= n.find("(--window-ops)") != std::string::npos;
    EXPECT_LE(s.ops_kept, 4u * 50 + 4 * 10) << t;  // the cap, plus what one poll reads before it cuts
    if (Error(s)) {
      EXPECT_EQ(CulpritRanks(s.diagnosis.findings(0)), std::vector<int>{3}) << s.diagnosis.verdict();
    }
  }
  EXPECT_TRUE(said);
  ASSERT_EQ(s.end, WatchState::kProblem) << s.diagnosis.verdict();
  EXPECT_EQ(ExitStatus(s.diagnosis), 3) << s.diagnosis.verdict();
  EXPECT_EQ(s.diagnosis.verdict().rfind("INCOMPLETE EVIDENCE (watch let go of ", 0), 0u) << s.diagnosis.verdict();
  // The culprit; the operation may be a later one of those it never
  // joined, the earlier ones let go.
  EXPECT_EQ(s.diagnosis.findings(0).kind(), want.findings(0).kind());
  EXPECT_EQ(CulpritRanks(s.diagnosis.findings(0)), CulpritRanks(want.findings(0))) << s.diagnosis.verdict();
  job.GrowAll();
  s = w.Conclude();
  EXPECT_EQ(ExitStatus(s.diagnosis), 3);
  EXPECT_EQ(CulpritRanks(s.diagnosis.findings(0)), CulpritRanks(want.findings(0))) << s.diagnosis.verdict();
}

// A mismatch that NCCL lets complete: every rank finished it, but the
// evidence is in it. Nothing settled goes while an error finding stands.
TEST(Watch, AMismatchOfOperationsThatCompletedIsKeptAndFound) {
  JobSpec spec;
  spec.nranks = 4;
  spec.ncolls = 200;
  spec.op_hook = [](int rank, int k, OpPlan& p) {
    if (rank == 1 && k == 120) p.count = 7;
  };
  GrowingJob job(spec);
  const report::Diagnosis want = job.Diagnosis();
  ASSERT_EQ(want.findings(0).kind(), report::MISMATCH) << want.verdict();
  WatchOptions o;
  o.keep_recent = 0;
  Watcher w({job.dir()}, o);
  WatchState s;
  uint64_t t = 0;
  for (; s.end == WatchState::kRunning && !job.complete(); t += 100 * kMs) {
    job.GrowTo(t, 5);
    s = w.Poll(Sec(t));
  }
  for (int k = 0; k < 3 && s.end == WatchState::kRunning; ++k) s = w.Poll(Sec(t += 100 * kMs));
  ASSERT_EQ(s.end, WatchState::kProblem) << s.diagnosis.verdict();
  EXPECT_EQ(s.diagnosis.verdict(), want.verdict());
}

TEST(Watch, ADamagedFileIsNamedWithItsOffsetAndTheRestIsDiagnosed) {
  JobSpec spec;
  spec.nranks = 4;
  spec.ncolls = 100;
  GrowingJob job(spec);
  Watcher w({job.dir()}, {});
  WatchState s;
  job.GrowTo(3 * kSec + 50 * 10 * kMs);
  s = w.Poll(1);
  ASSERT_EQ(s.end, WatchState::kRunning);
  // Rank 2's next write is garbage: a record length of 2^63.
  std::string path;
  const size_t at = job.at(2);
  {
    Model m;
    std::string err;
    ASSERT_TRUE(BuildModel({job.dir()}, LoadOptions(), &m, &err));
    for (const Proc& p : m.procs)
      if (p.launcher_rank == 2) path = p.path;
  }
  std::ofstream(path, std::ios::binary | std::ios::app) << std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10);
  s = w.Poll(2);
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_EQ(s.notes[0].rfind(path + ": offset " + std::to_string(at) + ": record length", 0), 0u) << s.notes[0];
  // The others go on to their end; the verdict says the evidence is damaged.
  for (size_t i = 0; i < job.files(); ++i)
    if (i != 2) job.Grow(i, job.size(i));
  s = w.Poll(3);
  ASSERT_EQ(s.end, WatchState::kFinalized) << s.diagnosis.verdict();
  EXPECT_EQ(ExitStatus(s.diagnosis), 3);
  EXPECT_NE(s.diagnosis.verdict().find("rank 2's file is damaged at offset " + std::to_string(at)), std::string::npos)
      << s.diagnosis.verdict();
  // As diagnose says it of the same files.
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({job.dir()}, LoadOptions(), &m, &err)) << err;
  EXPECT_EQ(s.diagnosis.verdict(), Diagnose(m).verdict());
}

TEST(Watch, AReplacedFileIsReadAgainWithANote) {
  JobSpec spec;
  spec.nranks = 2;
  spec.ncolls = 20;
  GrowingJob job(spec);
  job.GrowAll();
  Watcher w({job.dir()}, {});
  WatchState s = w.Poll(0);
  ASSERT_EQ(s.end, WatchState::kFinalized) << s.diagnosis.verdict();
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({job.dir()}, LoadOptions(), &m, &err));
  const std::string path = m.procs[0].path;
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
  s = w.Poll(1);
  ASSERT_FALSE(s.notes.empty());
  EXPECT_NE(s.notes[0].find(path + ": shrank from "), std::string::npos) << s.notes[0];
  EXPECT_EQ(s.end, WatchState::kRunning);  // the file's end is not there yet
  std::ofstream(path, std::ios::binary | std::ios::app) << bytes.substr(bytes.size() / 2);
  s = w.Poll(2);
  EXPECT_EQ(s.end, WatchState::kFinalized);
  EXPECT_EQ(ExitStatus(s.diagnosis), 0) << s.diagnosis.verdict();
}

// Watch feeds each window's records to the loader at their offsets in the
// file: what the loader finds damaged is named where diagnose names it.
// NCCL 2.23.4's files (profiler API v1 to v3) number point-to-point
// operations 0, which the loader takes for damage in each of those records.
TEST(Watch, DamageIsNamedAtTheFilesOffsetsAsDiagnoseNamesIt) {
  // Two ranks; rank 1's file holds a collective of count 0, which NCCL
  // never enqueues: damage at that record's offset.
  const std::string dir = TempDir();
  for (int rank = 0; rank < 2; ++rank) {
    testing::ProcSpec ps;
    ps.pid = 800 + rank;
    ps.launcher_rank = rank;
    ps.launcher_world_size = 2;
    testing::TraceBuilder b(ps);
    const int c = b.AddComm(0xdead1, "world", 2, rank, kMs);
    for (int k = 0; k < 4; ++k) {
      const uint64_t start = 10 * kMs + static_cast<uint64_t>(k) * kMs;
      b.Coll(c, "AllReduce", static_cast<uint64_t>(k), rank == 1 && k == 3 ? 0 : 1024, start,
             static_cast<int64_t>(start + 100 * testing::kUs));
    }
    b.Finalize(20 * kMs);
    ASSERT_TRUE(b.WriteTo(dir + "/" + b.FileName()));
  }
  Watcher w({dir}, {});
  WatchState s = w.Poll(0);
  ASSERT_EQ(s.end, WatchState::kFinalized) << s.waiting;
  Model m;
  std::string error;
  ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &error)) << error;
  const report::Diagnosis d = Diagnose(m, DiagnoseOptions());
  EXPECT_EQ(s.diagnosis.verdict(), d.verdict());
  ASSERT_EQ(s.diagnosis.input_issues_size(), d.input_issues_size())
      << "watch:\n" << s.diagnosis.DebugString() << "diagnose:\n" << d.DebugString();
  int offsets = 0;
  for (int i = 0; i < d.input_issues_size(); ++i) {
    EXPECT_EQ(s.diagnosis.input_issues(i).text(), d.input_issues(i).text());
    offsets += d.input_issues(i).text().find(": offset ") != std::string::npos;
  }
  EXPECT_GT(offsets, 0);
}

TEST(Watch, APathThatIsNotThereIsUnusable) {
  Watcher w({"/nonexistent/traces"}, {});
  WatchState s = w.Poll(0);
  EXPECT_EQ(s.end, WatchState::kUnusable);
  EXPECT_EQ(s.waiting, "cannot open /nonexistent/traces: No such file or directory");
}

// One process's file: a communicator of its own (hash `comm`) and `ncolls`
// completed all-reduces, still running.
std::string OwnCommFile(int64_t pid, uint64_t comm, int ncolls) {
  testing::ProcSpec spec;
  spec.pid = pid;
  testing::TraceBuilder b(spec);
  const int c = b.AddComm(comm, "solo", 1, 0, kMs);
  for (int k = 0; k < ncolls; ++k) {
    const uint64_t start = 10 * kMs + static_cast<uint64_t>(k) * 100 * testing::kUs;
    b.Coll(c, "AllReduce", static_cast<uint64_t>(k), 1024, start, static_cast<int64_t>(start + 50 * testing::kUs));
  }
  b.Heartbeats(0, 10 * kMs + static_cast<uint64_t>(ncolls) * 100 * testing::kUs);
  return b.Bytes();
}


// A file without a header, or a live one truncated while the plugin
// appends, holds operations no model will let go: kept poll after poll
// they would grow without bound. Under a memory
// limit (RLIMIT_AS, but under ASan), 64 MiB of operations without a header
// are named unusable at once, for the reason diagnose gives.
TEST(Watch, AFileWithoutAHeaderIsUnusableWithinBoundedMemory) {
  const std::string dir = TempDir();
  const std::string path = dir + "/h.ncclwatch";
  const std::string body = Headerless(OwnCommFile(7, 0x77, 20000));
  {
    std::ofstream f(path, std::ios::binary);
    for (uint64_t n = 0; n < (64u << 20); n += body.size()) f << body;
  }
  const testing::LimitedRun run = testing::RunWithMemoryLimit(256u << 20, [&] {
    Watcher w({dir}, {});
    WatchState s;
    bool named = false;
    for (int i = 0; i < 100 && s.end == WatchState::kRunning; ++i) {
      s = w.Poll(i);
      for (const std::string& n : s.notes) named |= n.find("the first record is not a process header") != std::string::npos;
    }
    fprintf(stderr, "end %d, waiting: %s\n", static_cast<int>(s.end), s.waiting.c_str());
    return s.end == WatchState::kUnusable && named &&
                   s.waiting == path + ": no process header; not an ncclwatch trace file"
               ? 0
               : 1;
  });
  EXPECT_TRUE(run.exited && run.status == 0) << run.how << (testing::MemoryLimitApplies() ? "" : " (no limit: ASan)");
}

// Files that make no model yet (here: two processes that share no
// communicator, so possibly two jobs) still keep at most --window-ops
// operations each; it used to be every operation they held.
TEST(Watch, OperationsStayBoundedWhileNoModelCanBeMade) {
  const std::string dir = TempDir();
  std::ofstream(dir + "/a.ncclwatch", std::ios::binary) << OwnCommFile(1, 0xa, 5000);
  std::ofstream(dir + "/b.ncclwatch", std::ios::binary) << OwnCommFile(2, 0xb, 5000);
  WatchOptions o;
  o.window_ops = 1000;
  Watcher w({dir}, o);
  WatchState s = w.Poll(0);
  EXPECT_EQ(s.end, WatchState::kRunning);
  EXPECT_NE(s.waiting.find("the files hold 2 jobs"), std::string::npos) << s.waiting;
  EXPECT_EQ(s.ops_kept, 2000u);
  EXPECT_EQ(s.ops_let_go, 8000u);
  ASSERT_EQ(s.notes.size(), 2u);
  EXPECT_EQ(s.notes[0], dir + "/a.ncclwatch: more than 1000 operations and no model of the job yet; letting the "
                              "oldest go (--window-ops): the verdict will say the evidence is incomplete");
}

}  // namespace
}  // namespace ncclwatch::tools
