// Short deterministic runs of the baseline fuzz target (no libFuzzer, any
// config): the baselines `ncclwatch stats --format=json` makes of three
// recordings, cut at many offsets, with bytes changed at a fixed seed, with
// a number replaced by one no baseline may hold, and with a row doubled;
// then every input kept in tools/fuzz/seeds/baseline/ (inputs libFuzzer
// found). The target traps on a broken promise (baseline_fuzzer.cc); each
// run here must return.

#include <dirent.h>
#include <stdint.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tools/cli.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace ncclwatch::tools {
namespace {

void RunTarget(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

std::string Baseline(const std::string& dir) {
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"ncclwatch", "stats", "--format=json", dir}, out, err), 0) << err.str();
  return out.str();
}

// The offsets of the numbers in `json` that are values (after ": " or in
// a list), the start of each.
std::vector<size_t> Numbers(const std::string& json) {
  std::vector<size_t> at;
  for (size_t i = 1; i < json.size(); ++i) {
    const char c = json[i], before = json[i - 1];
    if ((c == '-' || (c >= '0' && c <= '9')) && (before == ' ' || before == '[' || before == '\n')) at.push_back(i);
  }
  return at;
}

size_t NumberEnd(const std::string& json, size_t at) {
  size_t e = at;
  while (e < json.size() && json[e] != ',' && json[e] != '\n' && json[e] != ']' && json[e] != '}') ++e;
  return e;
}

TEST(BaselineFuzzRegressionTest, DamagedBaselinesOfRecordings) {
  std::mt19937_64 rng(7);
  int runs = 0;
  for (const char* dir : {"testdata/gpu/healthy", "testdata/gpu-events4/straggler", "testdata/torch/healthy-events-4r"}) {
    const std::string good = Baseline(dir);
    ASSERT_GT(good.size(), 1000u) << dir;
    RunTarget(good);
    ++runs;
    for (size_t cut = 0; cut < good.size(); cut += good.size() / 40 + 1, ++runs) RunTarget(good.substr(0, cut));
    for (int i = 0; i < 60; ++i, ++runs) {
      std::string b = good;
      for (int k = 0; k < 1 + i % 4; ++k) b[rng() % b.size()] = static_cast<char>(rng());
      RunTarget(b);
    }
    const std::vector<size_t> numbers = Numbers(good);
    ASSERT_GT(numbers.size(), 50u);
    for (const char* bad : {"\"NaN\"", "\"Infinity\"", "\"-Infinity\"", "-1", "0", "-0", "1e999", "4294967296",
                            "2147483648", "-2147483649", "1e-320", "\"12\"", "true", "null", "[]", "{}"})
      for (int i = 0; i < 12; ++i, ++runs) {
        std::string b = good;
        const size_t at = numbers[rng() % numbers.size()];
        b.replace(at, NumberEnd(b, at) - at, bad);
        RunTarget(b);
      }
    // The first row twice, and a row that holds every key twice.
    const size_t rows = good.find("\"rows\": [");
    ASSERT_NE(rows, std::string::npos);
    const size_t first = good.find('{', rows), end = good.find("\n  }", first) + 4;
    std::string twice = good;
    twice.insert(end, "," + good.substr(first, end - first));
    RunTarget(twice);
    std::string keys = good;
    keys.insert(first + 1, good.substr(first + 1, end - first - 2) + ",");
    RunTarget(keys);
    runs += 2;
  }
  EXPECT_GT(runs, 800);
}

TEST(BaselineFuzzRegressionTest, KeptInputs) {
  const std::string dir = "tools/fuzz/seeds/baseline";
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(dir + "/" + e->d_name, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    RunTarget(s.str());
    ++n;
  }
  closedir(d);
  EXPECT_GT(n, 0);
}

}  // namespace
}  // namespace ncclwatch::tools
