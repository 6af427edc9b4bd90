// The diagnose fuzzer's input format: up to kMaxFiles trace files joined by
// kDelimiter. The first kMaxFiles - 1 delimiters split; anything after the
// last split (delimiters included) is the last file. make_seeds.sh writes
// the same format (printf '\xfeNCW').
#ifndef TOOLS_FUZZ_SPLIT_H_
#define TOOLS_FUZZ_SPLIT_H_

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <utility>
#include <vector>

namespace ncclwatch::fuzz {

inline constexpr size_t kMaxFiles = 4;
inline constexpr char kDelimiter[] = "\xfeNCW";  // 4 bytes
inline constexpr size_t kDelimiterSize = 4;

inline std::vector<std::pair<std::string, std::string>> SplitFiles(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  std::vector<std::pair<std::string, std::string>> files;
  size_t start = 0;
  while (files.size() + 1 < kMaxFiles) {
    size_t at = in.find(kDelimiter, start, kDelimiterSize);
    if (at == std::string::npos) break;
    files.emplace_back("", in.substr(start, at - start));
    start = at + kDelimiterSize;
  }
  files.emplace_back("", in.substr(start));
  for (size_t i = 0; i < files.size(); ++i) files[i].first = "rank" + std::to_string(i) + ".ncclwatch";
  return files;
}

}  // namespace ncclwatch::fuzz

#endif  // TOOLS_FUZZ_SPLIT_H_
