// Verdicts on incomplete or damaged evidence, from real recordings made
// incomplete or damaged on purpose: never "OK", the first line says why, exit
// status 3, and a rank whose file is damaged is never blamed for what its
// file cannot show.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"

namespace ncclwatch::tools {
namespace {

std::vector<std::string> TraceFiles(const std::string& dir) {
  std::vector<std::string> out;
  FILE* p = popen(("ls " + dir + "/*.ncclwatch").c_str(), "r");
  char line[4096];
  while (p != nullptr && fgets(line, sizeof(line), p) != nullptr) {
    std::string s = line;
    s.erase(s.find_last_not_of("\n") + 1);
    out.push_back(s);
  }
  if (p != nullptr) pclose(p);
  std::sort(out.begin(), out.end());
  return out;
}

std::string Read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A copy of a recording's folder, each file passed through `edit` (by index).
template <typename Edit>
std::string CopyEdited(const std::string& scenario, const std::string& tag, Edit edit) {
  std::string base = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  std::string dir = base + "/" + tag + "-XXXXXX";
  dir = mkdtemp(&dir[0]);
  std::vector<std::string> files = TraceFiles("testdata/gpu/" + scenario);
  for (size_t i = 0; i < files.size(); ++i) {
    std::string bytes = Read(files[i]);
    if (!edit(i, &bytes)) continue;
    std::ofstream(dir + "/" + files[i].substr(files[i].rfind('/') + 1), std::ios::binary) << bytes;
  }
  return dir;
}

report::Diagnosis DiagnoseDir(const std::string& dir) {
  Model m;
  std::string error;
  EXPECT_TRUE(BuildModel({dir}, LoadOptions(), &m, &error)) << error;
  return Diagnose(m);
}

TEST(EvidenceTest, AMissingFileIsNeverOk) {
  std::string dir = CopyEdited("healthy", "three", [](size_t i, std::string*) { return i != 3; });
  report::Diagnosis d = DiagnoseDir(dir);
  EXPECT_EQ(ExitStatus(d), 3);
  EXPECT_EQ(d.verdict().rfind("INCOMPLETE: no problem found in the 3 processes given, but no file for rank", 0), 0u)
      << d.verdict();
  EXPECT_NE(d.verdict().find("(3 of 4 given)"), std::string::npos) << d.verdict();
}

TEST(EvidenceTest, FilesCutBeforeAnyOperationAreNeverOk) {
  std::string dir = CopyEdited("healthy", "cut", [](size_t, std::string* b) {
    b->resize(b->size() / 7);
    return true;
  });
  report::Diagnosis d = DiagnoseDir(dir);
  EXPECT_EQ(ExitStatus(d), 3);
  EXPECT_EQ(d.verdict().rfind("INCOMPLETE: ", 0), 0u) << d.verdict();
  EXPECT_NE(d.verdict().find("cannot tell whether the job was healthy"), std::string::npos) << d.verdict();
}

TEST(EvidenceTest, AFlippedByteIsDamageNotAMismatch) {
  // Rank 3's file of `skip`, one byte at offset 489: its operations then name
  // strings the file never defines. It used to read as "rank 3 called no datatype".
  std::string dir = CopyEdited("skip", "flip", [](size_t i, std::string* b) {
    if (i == 3) (*b)[489] ^= 0x1f;
    return true;
  });
  report::Diagnosis d = DiagnoseDir(dir);
  EXPECT_EQ(ExitStatus(d), 3);
  EXPECT_EQ(d.verdict().rfind("INCOMPLETE EVIDENCE (rank 3's file is damaged at offset ", 0), 0u) << d.verdict();
  for (const report::Finding& f : d.findings()) EXPECT_NE(f.kind(), report::MISMATCH) << f.summary();
  EXPECT_NE(d.verdict().find("HANG: rank 3 never joined AllReduce #4 on comm 'world' (4 ranks)"), std::string::npos)
      << d.verdict();
}

TEST(EvidenceTest, ADamagedFileIsNotADeadRank) {
  // 100 bytes of garbage a third into rank 1's file of `skip`: what rank 1
  // did after them cannot be read. It used to read as "rank 1 died".
  std::string dir = CopyEdited("skip", "garbage", [](size_t i, std::string* b) {
    if (i != 1) return true;
    unsigned x = 7;
    for (size_t k = 0; k < 100; ++k) {
      x = x * 1103515245u + 12345u;
      (*b)[b->size() / 3 + k] = static_cast<char>(x >> 16);
    }
    return true;
  });
  report::Diagnosis d = DiagnoseDir(dir);
  EXPECT_EQ(ExitStatus(d), 3);
  EXPECT_EQ(d.verdict().rfind("INCOMPLETE EVIDENCE (rank 1's file is damaged at offset ", 0), 0u) << d.verdict();
  EXPECT_NE(d.verdict().find("HANG: rank 3 never joined AllReduce #4"), std::string::npos) << d.verdict();
  for (const report::Finding& f : d.findings()) {
    EXPECT_NE(f.kind(), report::DEAD_RANK) << f.summary();
    for (const report::ProcRef& c : f.culprits()) EXPECT_NE(c.name(), "rank 1") << f.summary();
  }
}

TEST(EvidenceTest, TheKilledRanksFileAloneIsNeverOk) {
  // The file of `kill`'s rank 1 (the rank that was killed) without the others.
  std::string dir = CopyEdited("kill", "alone", [](size_t i, std::string*) { return i == 1; });
  report::Diagnosis d = DiagnoseDir(dir);
  EXPECT_EQ(ExitStatus(d), 3) << d.verdict();
  EXPECT_EQ(d.verdict().rfind("INCOMPLETE", 0), 0u) << d.verdict();
}

}  // namespace
}  // namespace ncclwatch::tools
