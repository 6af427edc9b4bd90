// The synthetic job written in ranges of hosts is the job written whole,
// file for file and byte for byte: the benchmarks split its writing over
// processes on that.

#include "tools/testing/synthetic_job.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace ncclwatch::tools::testing {
namespace {

std::string Tmp() { return getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp"; }

// Every file under `dir`'s host folders: name -> bytes.
std::map<std::string, std::string> Files(const std::string& dir) {
  std::map<std::string, std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* h = readdir(d)) {
    const std::string host = h->d_name;
    if (host[0] == '.') continue;
    DIR* hd = opendir((dir + "/" + host).c_str());
    if (hd == nullptr) continue;
    while (dirent* f = readdir(hd)) {
      const std::string name = f->d_name;
      if (name[0] == '.') continue;
      std::ifstream in(dir + "/" + host + "/" + name, std::ios::binary);
      std::ostringstream b;
      b << in.rdbuf();
      out[host + "/" + name] = b.str();
    }
    closedir(hd);
  }
  closedir(d);
  return out;
}

TEST(SyntheticJobTest, HostRangesWriteWhatTheWholeJobWrites) {
  for (bool p2p : {false, true}) {
    SyntheticJob job;
    job.ranks = 28;  // 4 hosts, the last of 4 ranks
    job.colls = 40;
    job.p2p = p2p;
    job.benchmark_shape = !p2p;
    const std::string tag = p2p ? "p2p" : "plain";
    std::vector<std::string> whole_hosts, part_hosts;
    std::string error;
    ASSERT_TRUE(WriteSyntheticJob(Tmp() + "/whole-" + tag, job, &whole_hosts, &error)) << error;
    for (auto [first, end] : {std::pair{0, 1}, std::pair{1, 3}, std::pair{3, -1}}) {
      job.first_node = first;
      job.end_node = end;
      ASSERT_TRUE(WriteSyntheticJob(Tmp() + "/parts-" + tag, job, &part_hosts, &error)) << error;
    }
    EXPECT_EQ(whole_hosts.size(), 4u);
    EXPECT_EQ(part_hosts.size(), 4u);
    const auto whole = Files(Tmp() + "/whole-" + tag);
    const auto parts = Files(Tmp() + "/parts-" + tag);
    EXPECT_EQ(whole.size(), 28u);
    ASSERT_EQ(parts.size(), whole.size());
    for (const auto& [name, bytes] : whole) {
      auto it = parts.find(name);
      ASSERT_NE(it, parts.end()) << name;
      EXPECT_TRUE(it->second == bytes) << tag << ": " << name << " differs";
    }
  }
}

TEST(SyntheticJobTest, ARangePastTheJobWritesNothing) {
  SyntheticJob job;
  job.ranks = 16;
  job.colls = 10;
  job.first_node = 2;
  job.end_node = 5;
  std::vector<std::string> hosts;
  std::string error;
  ASSERT_TRUE(WriteSyntheticJob(Tmp() + "/past", job, &hosts, &error)) << error;
  EXPECT_TRUE(hosts.empty());
  EXPECT_TRUE(Files(Tmp() + "/past").empty());
}

}  // namespace
}  // namespace ncclwatch::tools::testing
