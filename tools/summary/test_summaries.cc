#include "tools/summary/test_summaries.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tools/diagnose/diagnose.h"
#include "tools/model/inputs.h"
#include "tools/model/job.h"
#include "tools/model/summary_sharing.h"

namespace ncclwatch::tools::testing {

std::string Tmp() { return getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp"; }

std::string Verdict(const std::vector<std::string>& paths) {
  Model m;
  std::string error;
  if (!BuildJobModel(paths, LoadOptions(), &m, &error)) return "UNUSABLE INPUT: " + error;
  return Diagnose(m).verdict();
}

bool SaysDamaged(const std::string& v) { return v.rfind("INCOMPLETE", 0) == 0 || v.rfind("UNUSABLE", 0) == 0; }

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<SummaryResult> SummarizeFolder(const std::string& folder, bool whole, const SummarizeOptions& opts) {
  const TraceInputs in = ListFiles({folder}, &IsTraceFileName);
  std::vector<std::vector<std::string>> groups;
  if (whole) groups.push_back(in.files);
  else
    for (const std::string& f : in.files) groups.push_back({f});
  std::vector<SummaryResult> out(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    std::string error;
    EXPECT_TRUE(Summarize(groups[g], opts, &out[g], &error)) << error;
  }
  return out;
}

std::vector<std::string> Summaries(const std::string& folder, bool whole, const std::string& tag,
                                   const SummarizeOptions& opts) {
  std::vector<std::string> out;
  const std::vector<SummaryResult> made = SummarizeFolder(folder, whole, opts);
  for (size_t g = 0; g < made.size(); ++g) {
    const std::string path = Tmp() + "/" + tag + "-" + std::to_string(g) + kSummaryExtension;
    WriteBytes(path, EncodeSummary(made[g]));
    out.push_back(path);
  }
  return out;
}

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

std::string EncodeAndReadBack(const SummaryResult& s, const std::string& what, bool* shared) {
  const std::string bytes = EncodeSummary(s);
  SummaryResult back;
  std::string error;
  EXPECT_TRUE(ParseSummary(what, bytes, &back, &error)) << what << ": " << error;
  EXPECT_EQ(back.procs.size(), s.procs.size()) << what;
  for (size_t i = 0; i < std::min(back.procs.size(), s.procs.size()); ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(back.procs[i], s.procs[i]))
        << what << ": process " << i << " (" << s.procs[i].path() << ") reads back otherwise";
    EXPECT_EQ(back.procs[i].SerializeAsString(), s.procs[i].SerializeAsString()) << what << ": process " << i;
  }
  // Written as a node's: every process whole. The header differs by its
  // count of nodes, a few bytes.
  SummaryResult whole;
  whole.header = s.header;
  whole.header.clear_nodes();
  whole.procs = s.procs;
  const std::string plain = EncodeSummary(whole);
  const bool refers = back.header.version() >= kFirstSharingVersion;
  if (refers) EXPECT_LT(bytes.size(), plain.size()) << what;
  else EXPECT_LE(bytes.size(), plain.size() + 8) << what;
  if (shared != nullptr) *shared = refers;
  return bytes;
}

}  // namespace ncclwatch::tools::testing
