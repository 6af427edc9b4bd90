#include "tools/diagnose/format.h"

#include <stdarg.h>
#include <stdio.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace ncclwatch::tools::diagnose_internal {

std::string Printf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0) return "";
  if (static_cast<size_t>(n) < sizeof(buf)) return std::string(buf, static_cast<size_t>(n));
  std::string s(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, fmt);
  vsnprintf(&s[0], s.size(), fmt, ap);
  va_end(ap);
  s.resize(static_cast<size_t>(n));
  return s;
}

// A duration: "10.0 s", "12.3 ms", "45 us".
std::string Dur(double sec) {
  const double a = std::fabs(sec);
  if (a >= 100) return Printf("%.0f s", sec);
  if (a >= 1) return Printf("%.1f s", sec);
  if (a >= 1e-3) return Printf("%.1f ms", sec * 1e3);
  return Printf("%.0f us", sec * 1e6);
}

// A moment on the job's timeline (seconds since job start).
std::string At(double t) { return Printf("%.2f s", t); }

std::string Thousands(uint64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

std::string Plural(uint64_t n, const char* one, const char* many) {
  return Thousands(n) + " " + (n == 1 ? one : many);
}

// "rank 3", "ranks 0,1,2", "ranks 0-7,9"; names that are not "rank N" are listed as they are.
std::string RankList(const std::vector<std::string>& names) {
  if (names.empty()) return "no rank";
  std::vector<long> nums;
  for (const std::string& n : names) {
    if (n.compare(0, 5, "rank ") != 0) {
      nums.clear();
      break;
    }
    char* end = nullptr;
    long v = strtol(n.c_str() + 5, &end, 10);
    if (end == nullptr || *end != '\0') {
      nums.clear();
      break;
    }
    nums.push_back(v);
  }
  if (nums.size() != names.size()) {
    std::string out;
    for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
    return out;
  }
  std::sort(nums.begin(), nums.end());
  nums.erase(std::unique(nums.begin(), nums.end()), nums.end());
  std::string out = nums.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < nums.size();) {
    size_t j = i;
    while (j + 1 < nums.size() && nums[j + 1] == nums[j] + 1) ++j;
    if (i > 0) out += ',';
    if (j - i >= 3) {
      out += std::to_string(nums[i]) + "-" + std::to_string(nums[j]);
    } else {
      for (size_t k = i; k <= j; ++k) out += (k > i ? "," : "") + std::to_string(nums[k]);
    }
    i = j + 1;
  }
  return out;
}

std::string StateName(uint32_t s) {
  switch (s) {
    case 0: return "SendPosted";
    case 1: return "SendRemFifoWait";
    case 2: return "SendTransmitted";
    case 3: return "SendDone";
    case 4: return "RecvPosted";
    case 5: return "RecvReceived";
    case 6: return "RecvTransmitted";
    case 7: return "RecvDone";
    case 8: return "SendGPUWait";
    case 9: return "SendWait";
    case 10: return "RecvWait";
    case 11: return "RecvFlushWait";
    case 12: return "RecvGPUWait";
    case 19: return "InProgress";
    case 20: return "SendPeerWait";
    default: return "state " + std::to_string(s);
  }
}

std::string MaskChangeLoss(const MaskChange& c) {
  if (c.damaged) return "everything (a damaged record)";
  std::string out;
  auto add = [&](const std::string& what) { out += (out.empty() ? "" : ", ") + what; };
  if (c.LostSource()) add("completions (" + EventMaskNames(c.completion_source) + ")");
  if (c.LostColl()) add("collectives");
  if (c.LostP2p()) add("point-to-point operations");
  return out;
}

std::string WriteErrorMeaning(const std::string& error) {
  if (error == "No space left on device") return error + ": the disk was full";
  if (error == "File too large") return error + ": a file size limit (ulimit -f) was reached";
  if (error == "Disk quota exceeded") return error + ": the user's disk quota was reached";
  if (error == "Input/output error") return error + ": the disk or network filesystem failed";
  return error;
}

}  // namespace ncclwatch::tools::diagnose_internal
