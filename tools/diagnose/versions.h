// What each NCCL release lets a verdict rest on: the lines diagnose prints
// under "Versions", from each file's NCCL version, profiler API and event
// mask. One line per combination of NCCL and CUDA driver that ran, then
// each known limit or fault of those releases that applies to the files
// given, with how many processes it touches. docs/nccl-versions.md ("What
// diagnose says per release") lists the rows; versions_test holds each.
//
// Thread safety: pure functions.
#ifndef TOOLS_DIAGNOSE_VERSIONS_H_
#define TOOLS_DIAGNOSE_VERSIONS_H_

#include <string>
#include <vector>

#include "tools/model/model.h"

namespace ncclwatch::tools {

// NCCL's version as major*10000 + minor*100 + patch (2.29.7: 22907; 0 when
// the string is not "MAJOR.MINOR[.PATCH...]").
int NcclVersionCode(const std::string& version);

// The newest NCCL whose source ncclwatch was checked against.
inline constexpr int kNewestNcclRead = 23203;  // 2.32.3

// The "Versions" lines of `model`'s processes.
std::vector<std::string> VersionLines(const Model& model);

}  // namespace ncclwatch::tools

#endif  // TOOLS_DIAGNOSE_VERSIONS_H_
