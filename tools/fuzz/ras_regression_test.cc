// Short deterministic runs of the RAS fuzz target (no libFuzzer, any
// config): each answer of tools/ras/testdata/ whole, cut at many offsets,
// with bytes changed at a fixed seed, with a number replaced by one no
// answer holds, and with a line doubled. The target traps on a broken
// promise (ras_fuzzer.cc); each run here must return.

#include <stdint.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace ncclwatch::tools {
namespace {

void RunTarget(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

TEST(RasFuzzRegressionTest, DamagedAnswers) {
  std::mt19937_64 rng(11);
  int runs = 0;
  for (const char* name : {"idle_rank.txt", "idle_rank.json", "dead.txt", "init.json", "v2.24_status.txt"}) {
    std::ifstream f(std::string("tools/ras/testdata/") + name);
    std::stringstream s;
    s << f.rdbuf();
    const std::string good = s.str();
    ASSERT_GT(good.size(), 500u) << name;
    RunTarget(good);
    for (size_t cut = 0; cut < good.size(); cut += good.size() / 80 + 1, ++runs) RunTarget(good.substr(0, cut));
    for (int i = 0; i < 200; ++i, ++runs) {
      std::string b = good;
      for (int k = 0; k < 1 + i % 4; ++k) b[rng() % b.size()] = static_cast<char>(rng());
      RunTarget(b);
    }
    // Every number in turn (some) replaced.
    for (const char* bad : {"-1", "99999999999999999999", "1e999", "0.5", "\"7\"", "null", "[]", "{}", "2147483648",
                            "", "x"})
      for (int i = 0; i < 20; ++i, ++runs) {
        std::string b = good;
        size_t at = rng() % b.size();
        while (at < b.size() && !(b[at] >= '0' && b[at] <= '9')) ++at;
        if (at == b.size()) continue;
        size_t end = at;
        while (end < b.size() && b[end] >= '0' && b[end] <= '9') ++end;
        b.replace(at, end - at, bad);
        RunTarget(b);
      }
    // A line doubled.
    for (int i = 0; i < 30; ++i, ++runs) {
      std::string b = good;
      const size_t start = b.rfind('\n', rng() % b.size());
      const size_t from = start == std::string::npos ? 0 : start + 1;
      const size_t to = b.find('\n', from);
      if (to == std::string::npos) continue;
      b.insert(from, b.substr(from, to + 1 - from));
      RunTarget(b);
    }
  }
  // Inputs no answer looks like.
  RunTarget("");
  RunTarget("{");
  RunTarget(std::string(1 << 16, '{'));
  RunTarget(std::string(1 << 16, '['));
  RunTarget("Communicators...\nGroup\n" + std::string(10000, ' ') + "\n");
  RunTarget(std::string("\0\xff\n#0-0 (", 9));
  EXPECT_GT(runs, 1000);
}

}  // namespace
}  // namespace ncclwatch::tools
