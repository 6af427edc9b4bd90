#include "tools/model/collectives.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <map>

namespace ncclwatch::tools {
namespace {

// A whole unsigned decimal number (no sign, no blanks), within 64 bits.
bool Number(const std::string& s, uint64_t* v) {
  if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long n = strtoull(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  *v = n;
  return true;
}

bool Hash(std::string s, uint64_t* v) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s = s.substr(2);
  if (s.empty() || s.size() > 16 || s.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) return false;
  *v = strtoull(s.c_str(), nullptr, 16);
  return true;
}

}  // namespace

bool ParseCollectiveRanges(const std::string& text, std::vector<CollectiveRange>* out, std::string* error) {
  out->clear();
  std::map<uint64_t, size_t> per_comm;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    start = comma + 1;
    const std::string at = "'" + item + "': ";
    const size_t colon = item.find(':');
    const size_t dash = colon == std::string::npos ? std::string::npos : item.find('-', colon + 1);
    if (colon == std::string::npos || dash == std::string::npos) {
      *error = at + "expected COMM:FROM-TO (COMM the communicator's hash in hex, FROM and TO positions of its "
                    "collectives, from 1), e.g. 0x5c0e71c9a3b1d2f4:1-64";
      return false;
    }
    CollectiveRange r;
    if (!Hash(item.substr(0, colon), &r.comm_hash) || r.comm_hash == 0) {
      *error = at + "the communicator is its hash in hex, 1 to 16 digits, not 0 (diagnose --refine-args prints it)";
      return false;
    }
    if (!Number(item.substr(colon + 1, dash - colon - 1), &r.from) || !Number(item.substr(dash + 1), &r.to) ||
        r.from == 0 || r.to < r.from) {
      *error = at + "FROM-TO are collective positions from 1, FROM not after TO";
      return false;
    }
    if (r.to - r.from >= kMaxAskedPerRange) {
      *error = at + "at most " + std::to_string(kMaxAskedPerRange) + " collectives per range (split it: " +
               FormatCollectiveRanges(RangesToAsk(r.comm_hash, r.from, r.to)) + ")";
      return false;
    }
    if (++per_comm[r.comm_hash] > kMaxAskedRangesPerComm) {
      *error = "at most " + std::to_string(kMaxAskedRangesPerComm) + " ranges per communicator (" +
               CommHashText(r.comm_hash) + " has more)";
      return false;
    }
    if (per_comm.size() > kMaxAskedComms) {
      *error = "at most " + std::to_string(kMaxAskedComms) + " communicators";
      return false;
    }
    out->push_back(r);
  }
  return true;
}

std::string CommHashText(uint64_t hash) {
  char b[24];
  snprintf(b, sizeof(b), "0x%016" PRIx64, hash);
  return b;
}

std::string FormatCollectiveRanges(const std::vector<CollectiveRange>& ranges) {
  std::string out;
  for (const CollectiveRange& r : ranges)
    out += (out.empty() ? "" : ",") + CommHashText(r.comm_hash) + ":" + std::to_string(r.from) + "-" +
           std::to_string(r.to);
  return out;
}

std::vector<CollectiveRange> RangesToAsk(uint64_t comm_hash, uint64_t from, uint64_t to) {
  std::vector<CollectiveRange> out;
  from = std::max<uint64_t>(from, 1);
  for (uint64_t p = from; p <= to && out.size() < kMaxAskedRangesPerComm; p += kMaxAskedPerRange) {
    out.push_back(CollectiveRange{comm_hash, p, std::min(to, p + kMaxAskedPerRange - 1)});
    if (to - p < kMaxAskedPerRange) break;  // the last piece: p += 64 could wrap
  }
  return out;
}

}  // namespace ncclwatch::tools
