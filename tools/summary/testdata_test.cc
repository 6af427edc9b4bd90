// Every recording under testdata/: diagnose's first line and exit status
// from per-node summaries equal those from the trace files (issue 32), with
// the default window (summaries per host, and one of every file); with a
// window of 2 operations, the same line, a MISMATCH the signature chains
// found naming the traces' culprits, or an INCOMPLETE line (exit 3): never
// OK and never a culprit the traces would not name.

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tools/diagnose/diagnose.h"
#include "tools/model/inputs.h"
#include "tools/model/model.h"
#include "tools/reader/reader.h"
#include "tools/summary/job.h"
#include "tools/summary/summary.h"

namespace ncclwatch::tools {
namespace {

// Folders under `dir` holding *.ncclwatch files themselves.
void RecordingFolders(const std::string& dir, std::vector<std::string>* out) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) names.push_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  bool traces = false;
  for (const std::string& n : names) {
    if (n == "." || n == "..") continue;
    const std::string p = dir + "/" + n;
    struct stat st;
    if (stat(p.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) RecordingFolders(p, out);
    else traces |= IsTraceFileName(n);
  }
  if (traces) out->push_back(dir);
}

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
};

Verdict Judge(const std::vector<std::string>& paths) {
  Model m;
  std::string error;
  if (!BuildJobModel(paths, LoadOptions(), &m, &error)) return {"UNUSABLE: " + error, 2};
  const report::Diagnosis d = Diagnose(m);
  Verdict v{d.verdict(), ExitStatus(d), {}};
  if (d.findings_size() > 0)
    for (const report::ProcRef& p : d.findings(0).culprits()) v.culprits.insert(p.name());
  return v;
}

// The folder's summaries (one per host, or one of every file) written under
// the test's temporary folder; their paths.
std::vector<std::string> Summaries(const std::string& folder, uint64_t window, bool per_host, int* made) {
  const TraceInputs in = ListFiles({folder}, &IsTraceFileName);
  std::map<std::string, std::vector<std::string>> groups;
  for (const std::string& f : in.files) groups[per_host ? HostOf(f) : ""].push_back(f);
  std::string tmp = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  std::vector<std::string> out;
  for (const auto& [host, files] : groups) {
    SummarizeOptions opts;
    opts.window = window;
    SummaryResult s;
    std::string error;
    if (!Summarize(files, opts, &s, &error)) continue;
    std::string name = folder + "-" + host + "-" + std::to_string(window) + ".ncclsummary";
    std::replace(name.begin(), name.end(), '/', '_');
    const std::string path = tmp + "/" + name;
    std::ofstream(path, std::ios::binary | std::ios::trunc) << EncodeSummary(s);
    out.push_back(path);
    ++*made;
  }
  return out;
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

TEST(SummaryTestdataTest, DefaultWindowGivesTheTracesVerdict) {
  int compared = 0, multi_host = 0, stragglers_unjudged = 0;
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
      // A straggler of a job longer than the window: the summaries keep no
      // arrival times of what they let go, and say so (never OK).
      if (full.line.rfind("STRAGGLER: ", 0) == 0 &&
          s.line.find("whose arrival times (stragglers, late ranks) are not judged") != std::string::npos) {
        EXPECT_EQ(s.line.rfind("INCOMPLETE: ", 0), 0u) << folder << ": " << s.line;
        EXPECT_EQ(s.exit, 3) << folder;
        ++stragglers_unjudged;
        continue;
      }
      EXPECT_EQ(s.line, full.line) << folder << (per_host ? " (per host)" : " (one summary)");
      EXPECT_EQ(s.exit, full.exit) << folder;
    }
  }
  EXPECT_GE(compared, 200);
  // testdata/torch/gpu-slow-events-4r and -4gpu: 80 operations per rank.
  EXPECT_LE(stragglers_unjudged, 4);
  printf("compared %d summary sets; %d folders with several hosts; %d stragglers unjudged\n", compared, multi_host,
         stragglers_unjudged);
}

TEST(SummaryTestdataTest, SmallWindowGivesTheSameVerdictOrIncomplete) {
  int same = 0, incomplete = 0, chains = 0;
  for (const std::string& folder : Folders()) {
    const Verdict full = Judge({folder});
    int made = 0;
    const std::vector<std::string> sums = Summaries(folder, 2, true, &made);
    if (sums.empty()) continue;
    const Verdict s = Judge(sums);
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
    ++incomplete;
    EXPECT_EQ(s.line.rfind("INCOMPLETE: ", 0), 0u) << folder << ":\n  summaries: " << s.line << "\n  traces:    " << full.line;
    EXPECT_EQ(s.exit, 3) << folder;
  }
  printf("window 2: %d the same, %d MISMATCH by the chains with the traces' culprits, %d incomplete\n", same, chains,
         incomplete);
}

}  // namespace
}  // namespace ncclwatch::tools
