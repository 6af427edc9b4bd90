// `ncclwatch check` on real reruns of one CI benchmark job (testdata/ci/,
// README.md there), each judged against baselines of three other runs, and
// each pair held to the job's own truth (CUDA events around every call): a
// run within 1.1x of the baseline's slowest run on every row must pass; a
// row 1.5x slower than every baseline run should fail and be named: the
// share that is, is held at what was measured. Runs slowed on purpose (ch1-,
// simple-, delay folders, recorded in sessions of their own with plain runs
// beside them) are no reruns. The test prints the false FAILs, the rows
// caught and missed and, per row, the smallest slowdown caught in 95% of
// pairs: the figures the README's CI section gives.

#include <dirent.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "proto/stats.pb.h"
#include "tools/cli.h"
#include "tools/stats/stats.h"

namespace ncclwatch::tools {
namespace {

constexpr char kRoot[] = "testdata/ci";
// A slowdown the gate should catch.
constexpr double kMustCatch = 1.5;
// The share of rows kMustCatch slower by the truth that were named, as
// measured on the recordings (BENCHMARKS.md, "check on a fourth, held-out
// session"): 135 of 171 under channels, 91 of 117 under events, the
// fourth session held out (recorded after the gate's rules were set).
// Under events a delayed row's time spreads over every row queued behind
// it (in slowed-1/delay2-20000-1 the 8 KiB all-reduce ran 1.65x slower by
// the truth, and every row +18% to +21% by the capture), so the row
// itself is often not the one named.
const std::map<std::string, double> kMinCaught = {{"channels", 0.75}, {"events", 0.75}};

std::vector<std::string> Folders(const std::string& dir) {
  std::vector<std::string> v;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.' && e->d_type == DT_DIR) v.push_back(e->d_name);
    closedir(d);
  }
  std::sort(v.begin(), v.end());
  return v;
}

// The job's rows as the truth names them, in the order ci_bench.py runs
// them, with the stats row each one is: (function, its rank among that
// function's size buckets, largest first).
struct TruthRow {
  const char* name;
  const char* func;
  int size_rank;
};
constexpr TruthRow kRows[] = {{"AllReduce 4 MiB", "AllReduce", 0},
                              {"AllGather 1 MiB per rank", "AllGather", 0},
                              {"AllReduce 8 KiB", "AllReduce", 1}};

// The median over ranks of each row's p50 in the job's own CUDA-event times.
std::map<std::string, double> TruthP50(const std::string& dir) {
  std::map<std::string, std::vector<double>> per;
  for (int r = 0;; ++r) {
    std::ifstream f(dir + "/truth-rank" + std::to_string(r) + ".json");
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (text.empty()) break;
    google::protobuf::Struct s;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text, &s).ok()) << dir << " rank " << r;
    for (const auto& [name, row] : s.fields().at("rows").struct_value().fields())
      per[name].push_back(row.struct_value().fields().at("p50_us").number_value());
  }
  std::map<std::string, double> out;
  for (auto& [name, v] : per) {
    std::sort(v.begin(), v.end());
    out[name] = v[v.size() / 2];
  }
  return out;
}

// The stats row's (function, bucket) of each truth row in `s`.
std::map<std::string, std::pair<std::string, int>> RowKeys(const stats::Stats& s) {
  std::map<std::string, std::vector<int>> buckets;
  for (const stats::StatRow& r : s.rows()) buckets[r.func()].push_back(r.bucket_log2());
  for (auto& [f, v] : buckets) std::sort(v.rbegin(), v.rend());
  std::map<std::string, std::pair<std::string, int>> out;
  for (const TruthRow& t : kRows) {
    const auto it = buckets.find(t.func);
    if (it != buckets.end() && t.size_rank < static_cast<int>(it->second.size()))
      out[t.name] = {t.func, it->second[t.size_rank]};
  }
  return out;
}

struct CiRun {
  std::string name;  // plain-3, delay0-10000-1, ch1-1, ...
  std::string dir;
  std::string baseline;  // its stats as a baseline file
  std::map<std::string, double> truth;
};

struct Verdict {
  int status = 0;
  stats::CheckReport rep;
};

Verdict Check(const std::vector<const CiRun*>& base, const CiRun& run) {
  std::vector<std::string> args = {"ncclwatch", "check", "--format=json"};
  for (const CiRun* b : base) args.push_back("--baseline=" + b->baseline);
  args.push_back(run.dir);
  std::ostringstream out, err;
  Verdict v;
  v.status = RunCli(args, out, err);
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(out.str(), &v.rep).ok()) << out.str() << err.str();
  return v;
}

bool Regressed(const stats::CheckReport& rep, const std::pair<std::string, int>& key) {
  for (const stats::CheckItem& it : rep.items())
    if (it.func() == key.first && it.bucket_log2() == key.second && it.status() == "regressed") return true;
  return false;
}

// One recording session: runs made one after another on one machine. The
// plain runs at the top of a capture's folder are one session; each
// `slowed-*` folder under it is another, with plain runs of its own.
struct Session {
  std::string name;
  std::vector<CiRun> plain, slowed;
};

bool LoadSession(const std::string& dir, const std::string& name, Session* s) {
  s->name = name;
  for (const std::string& f : Folders(dir)) {
    const bool is_plain = f.rfind("plain-", 0) == 0;
    const bool is_slowed = f.rfind("ch1-", 0) == 0 || f.rfind("simple-", 0) == 0 || f.rfind("delay", 0) == 0;
    if (!is_plain && !is_slowed) continue;  // runs of another recording (README.md there)
    CiRun r;
    r.name = name.empty() ? f : name + "/" + f;
    r.dir = dir + "/" + f;
    std::ostringstream out, err;
    if (RunCli({"ncclwatch", "stats", "--format=json", r.dir}, out, err) != 0) {
      ADD_FAILURE() << r.dir << err.str();
      return false;
    }
    std::string flat = r.name;
    std::replace(flat.begin(), flat.end(), '/', '-');
    r.baseline = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/" + flat + ".json";
    std::ofstream(r.baseline) << out.str();
    r.truth = TruthP50(r.dir);
    (is_plain ? s->plain : s->slowed).push_back(std::move(r));
  }
  return true;
}

using Triple = std::vector<const CiRun*>;

// The baselines a session offers: three consecutive plain runs, starting at
// each run in turn (one triple where the session has three).
std::vector<Triple> Baselines(const Session& s) {
  std::vector<Triple> t;
  const int n = static_cast<int>(s.plain.size());
  if (n < 3) return t;
  for (int k = 0; k < (n == 3 ? 1 : n); ++k) t.push_back({&s.plain[k], &s.plain[(k + 1) % n], &s.plain[(k + 2) % n]});
  return t;
}

// A pair's row: how much slower the run was than the baseline's slowest
// run by the truth, and whether check named the row.
struct RowPair {
  double ratio;
  bool named;
};

class CiReruns : public ::testing::TestWithParam<std::string> {};

TEST_P(CiReruns, RerunsPassAndSlowedRowsFail) {
  const std::string cap = std::string(kRoot) + "/" + GetParam();
  std::vector<Session> sessions(1);
  ASSERT_TRUE(LoadSession(cap, "", &sessions[0]));
  for (const std::string& f : Folders(cap))
    if (f.rfind("slowed-", 0) == 0) {
      sessions.emplace_back();
      ASSERT_TRUE(LoadSession(cap + "/" + f, f, &sessions.back()));
    }
  ASSERT_GE(sessions[0].plain.size(), 10u) << cap << ": the issue's measure needs at least 10 plain runs";
  std::ostringstream out, err;
  ASSERT_EQ(RunCli({"ncclwatch", "stats", "--format=json", sessions[0].plain[0].dir}, out, err), 0);
  stats::Stats s0;
  std::string error;
  ASSERT_TRUE(StatsFromJson(out.str(), &s0, &error)) << error;
  const std::map<std::string, std::pair<std::string, int>> keys = RowKeys(s0);
  ASSERT_EQ(keys.size(), std::size(kRows));

  std::vector<Triple> baselines;
  for (const Session& s : sessions)
    for (Triple& t : Baselines(s)) baselines.push_back(std::move(t));

  // Every run is judged against every baseline of three runs it is not in,
  // and each pair by the job's own truth. A plain run whose every row is
  // within 1.1x of the slowest baseline run's is a rerun: it must pass. A
  // row slower by 1.5x or more than every baseline run (a slowed run's, or
  // the machine's own: four ranks time-sliced on one GPU run at one of a
  // few speeds, run by run) should fail and be named. In between, the gate
  // may say either; those pairs go into the detection figures below.
  int reruns = 0, false_fails = 0, slower = 0, caught_slower = 0;
  std::vector<std::string> misses;
  std::map<std::string, std::vector<RowPair>> by_row;
  auto judge = [&](const CiRun& run, const Triple& base, bool plain_run) {
    const Verdict v = Check(base, run);
    bool rerun = true;
    const std::string pair = run.name + " against " + base[0]->name + "," + base[1]->name + "," +
                             base[2]->name + ": " + v.rep.verdict();
    for (const TruthRow& t : kRows) {
      double slowest = 0;
      for (const CiRun* b : base) slowest = std::max(slowest, b->truth.at(t.name));
      const double ratio = run.truth.at(t.name) / slowest;
      const bool named = v.status != 0 && Regressed(v.rep, keys.at(t.name));
      rerun = rerun && ratio < 1.1;
      by_row[t.name].push_back({ratio, named});
      if (ratio >= kMustCatch) {
        ++slower;
        caught_slower += named;
        if (!named) misses.push_back(t.name + std::string(" ") + std::to_string(ratio) + "x: " + pair);
      }
    }
    // A run slowed on purpose is no rerun, whatever the truth says of the
    // baseline's slowest run: its delayed row did change.
    if (rerun && plain_run) {
      ++reruns;
      if (v.status != 0) {
        ++false_fails;
        ADD_FAILURE() << "a rerun failed: " << pair;
      }
    }
    for (const stats::CheckItem& it : v.rep.items())
      if (it.has_change_low_pct()) {
        EXPECT_LT(it.change_low_pct(), it.change_high_pct()) << it.ShortDebugString();  // never zero width
      }
  };
  int pairs = 0;
  for (const Session& s : sessions)
    for (const std::vector<CiRun>* runs : {&s.plain, &s.slowed})
      for (const CiRun& r : *runs)
        for (const Triple& t : baselines)
          if (std::find(t.begin(), t.end(), &r) == t.end()) {
            judge(r, t, runs == &s.plain);
            ++pairs;
          }
  for (const std::string& m : misses) printf("%s: 1.5x or more slower by the truth, not named: %s\n", GetParam().c_str(), m.c_str());
  printf("%s: %d pairs; %d false FAIL(s) in %d rerun pairs (every row within 1.1x of the baseline's slowest run "
         "by the truth; a baseline of 3 runs each); %d of %d rows slower by 1.5x or more by the truth named "
         "regressed\n",
         GetParam().c_str(), pairs, false_fails, reruns, caught_slower, slower);
  EXPECT_GE(reruns, 45) << "too few reruns to measure the false FAILs";
  // Rows 1.5x slower by the truth are not all named: on one GPU shared by
  // four ranks the job's own times and the capture's part ways (testdata/
  // ci/README.md). The share named is held at what was measured, so that a
  // change to the gate cannot lose more of them unseen.
  ASSERT_GT(slower, 0);
  EXPECT_GE(caught_slower, kMinCaught.at(GetParam()) * slower)
      << caught_slower << " of " << slower << " rows 1.5x slower by the truth named";

  // Detection by row: of the pairs where the row ran at least x times
  // slower than every baseline run, the share named regressed; and the
  // smallest x from which 95% were.
  constexpr double kSteps[] = {1.1, 1.2, 1.3, 1.4, 1.5, 1.75, 2.0, 2.5, 3.0};
  for (const TruthRow& t : kRows) {
    std::string line;
    double smallest = 0;
    for (const double x : kSteps) {
      int n = 0, named = 0;
      for (const RowPair& p : by_row[t.name])
        if (p.ratio >= x) {
          ++n;
          named += p.named;
        }
      if (n == 0) continue;
      char buf[64];
      snprintf(buf, sizeof buf, " >=%.2fx %d/%d", x, named, n);
      line += buf;
      bool all_above = true;  // 95% from x on, not just at x
      for (const double y : kSteps) {
        int m = 0, k = 0;
        for (const RowPair& p : by_row[t.name])
          if (y >= x && p.ratio >= y) {
            ++m;
            k += p.named;
          }
        all_above = all_above && (m == 0 || k >= 0.95 * m);
      }
      if (smallest == 0 && all_above) smallest = x;
    }
    char from[64] = "at no slowdown these runs reach";
    if (smallest > 0) snprintf(from, sizeof from, "from %.2fx", smallest);
    printf("%s: %s: named regressed, by slowdown:%s; caught in 95%% of pairs %s\n", GetParam().c_str(), t.name,
           line.c_str(), from);
  }
}

INSTANTIATE_TEST_SUITE_P(Captures, CiReruns, ::testing::Values("channels", "events"));

}  // namespace
}  // namespace ncclwatch::tools
