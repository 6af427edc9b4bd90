#include "tools/summary/test_summaries.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>

#include "tools/diagnose/diagnose.h"
#include "tools/model/inputs.h"
#include "tools/model/job.h"

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

}  // namespace ncclwatch::tools::testing
