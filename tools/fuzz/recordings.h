// Real recordings (GPU runs, testdata/) built into the binary, for the
// damage fuzzer and its regression test: a libFuzzer binary runs anywhere,
// without the repository. Generated from testdata/ by embed_recordings.sh.
#ifndef TOOLS_FUZZ_RECORDINGS_H_
#define TOOLS_FUZZ_RECORDINGS_H_

#include <string>
#include <utility>
#include <vector>

namespace ncclwatch::fuzz {

struct Recording {
  std::string name;                                         // "gpu/skip": its folder under testdata/
  std::vector<std::pair<std::string, std::string>> files;   // {file name, bytes}, sorted by name
};

// testdata/gpu/skip (a HANG) and testdata/torch/kill-channels-4r (ENDED).
const std::vector<Recording>& Recordings();

}  // namespace ncclwatch::fuzz

#endif  // TOOLS_FUZZ_RECORDINGS_H_
