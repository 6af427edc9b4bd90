// What the tests of summaries built on recordings share: summaries of a
// testdata folder written to the test's temporary folder, and diagnose's
// verdict on them (damage_test, edit_test).
//
// Thread safety: one thread.

#ifndef TOOLS_SUMMARY_TEST_SUMMARIES_H_
#define TOOLS_SUMMARY_TEST_SUMMARIES_H_

#include <string>
#include <vector>

#include "tools/model/summary_format.h"
#include "tools/summary/summary.h"

namespace ncclwatch::tools::testing {

// The test's temporary folder.
std::string Tmp();

// Diagnose's verdict on `paths` (BuildJobModel), or "UNUSABLE INPUT: ..."
// where no model is made.
std::string Verdict(const std::vector<std::string>& paths);

// Whether `verdict` says the evidence is incomplete or unusable.
bool SaysDamaged(const std::string& verdict);

void WriteBytes(const std::string& path, const std::string& bytes);
std::string ReadBytes(const std::string& path);

// The trace files of `folder` summarized with `opts` (EXPECTs that they
// are): one summary of all (`whole`) or one per file, each its own node.
std::vector<SummaryResult> SummarizeFolder(const std::string& folder, bool whole, const SummarizeOptions& opts);

// The same, written as `tag`-N.ncclsummary under Tmp(); their paths.
std::vector<std::string> Summaries(const std::string& folder, bool whole, const std::string& tag,
                                   const SummarizeOptions& opts = SummarizeOptions());

// Folders under `dir` holding *.ncclwatch files themselves, in name order,
// appended to `out`.
void RecordingFolders(const std::string& dir, std::vector<std::string>* out);

// A group's summary `s` encoded and read back (EncodeSummary,
// ParseSummary), expected to give, process by process, field for field
// (MessageDifferencer) and byte for byte, the processes given, and to be
// no larger than its processes written whole; smaller where any refers to
// another (then `*shared`, where given, is set). Its bytes.
std::string EncodeAndReadBack(const SummaryResult& s, const std::string& what, bool* shared = nullptr);

}  // namespace ncclwatch::tools::testing

#endif  // TOOLS_SUMMARY_TEST_SUMMARIES_H_
