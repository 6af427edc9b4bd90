// Short deterministic runs of a fuzz target (no libFuzzer, any compiler and
// config): LLVMFuzzerTestOneInput of the target this test is built with
// (FUZZ_TARGET_READER or FUZZ_TARGET_DIAGNOSE, see BUILD) on every trace
// recorded on GPUs (testdata/gpu/) and on mutations of them made here with a
// fixed seed: truncations at many offsets, flipped bytes, spliced huge varint
// lengths, and tiny files claiming huge records. No run may grow the
// process's peak RSS by much. Time is not asserted (a busy machine or a
// sanitizer makes any bound a flake): a hang fails by Bazel's test timeout,
// and the slowest input's time is printed for whoever looks.
//
// Besides, the reader and LoadModel read tiny files claiming huge records
// from disk (the fuzz targets read from memory): neither may allocate for the
// claimed length.

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tools/fuzz/split.h"
#include "tools/model/model.h"
#include "tools/reader/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace ncclwatch::fuzz {
namespace {

constexpr long kMaxRssGrowthKb = 256 * 1024;  // the huge-length inputs must not allocate for the length

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> List(const std::string& dir, bool dirs) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    struct stat st;
    const bool is_dir = stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    if (dirs == is_dir && (dirs || (name.size() > 10 && name.substr(name.size() - 10) == ".ncclwatch")))
      out.push_back(path);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// The scenarios' trace files, each scenario's files sorted.
std::vector<std::vector<std::string>> Scenarios() {
  std::vector<std::vector<std::string>> out;
  for (const std::string& dir : List("testdata/gpu", true)) {
    std::vector<std::string> files;
    for (const std::string& f : List(dir, false)) files.push_back(ReadAll(f));
    if (!files.empty()) out.push_back(std::move(files));
  }
  return out;
}

long PeakRssKb() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

uint64_t SplitMix(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Tiny inputs whose first record claims a huge length.
std::vector<std::string> HugeLengthFiles() {
  return {
      std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10),  // 2^64 - 1
      std::string("\x80\x80\x80\x80\x40\x00\x00\x00\x00\x00", 10),  // 16 GiB
      std::string("\xff\xff\xff\x1f\x00\x00\x00\x00\x00\x00", 10),  // 64 MiB - 1: just under the limit
      std::string("\x80\x80\x80\x20\x0a\x00\x08\x01\x10\x02", 10),  // exactly 64 MiB
      std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 10),  // a varint that never ends
      std::string("\xff\xff\xff\xff\xff", 5),                      // ... and is cut
  };
}

double RunOnce(const std::string& input) {
  auto t0 = std::chrono::steady_clock::now();
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Runner {
  size_t runs = 0;
  double slowest = 0;
  std::string slowest_what;
  void Run(const std::string& input, const std::string& what) {
    double s = RunOnce(input);
    ++runs;
    if (s > slowest) {
      slowest = s;
      slowest_what = what;
    }
  }
};

// Mutations of one input: truncations, flipped bytes, spliced huge lengths.
void Mutate(const std::string& in, uint64_t seed, size_t truncations, size_t flips, Runner* r, const std::string& what) {
  r->Run(in, what);
  if (in.empty()) return;
  const size_t step = std::max<size_t>(1, in.size() / std::max<size_t>(truncations, 1));
  for (size_t n = 0; n < in.size(); n += step) r->Run(in.substr(0, n), what + " cut at " + std::to_string(n));
  uint64_t s = seed;
  for (size_t i = 0; i < flips; ++i) {
    std::string x = in;
    const int k = 1 + static_cast<int>(SplitMix(&s) % 4);
    for (int j = 0; j < k; ++j) {
      const uint64_t v = SplitMix(&s);
      const size_t at = static_cast<size_t>(v % x.size());
      switch ((v >> 32) % 4) {
        case 0: x[at] = static_cast<char>(x[at] ^ (1 << ((v >> 40) % 8))); break;   // one bit
        case 1: x[at] = static_cast<char>(0xff); break;                             // a long varint
        case 2: x[at] = static_cast<char>(v >> 48); break;                          // any byte
        default: x.insert(at, std::string("\xff\xff\xff\xff\x0f", 5)); break;      // a huge field length
      }
    }
    r->Run(x, what + " mutation " + std::to_string(i));
  }
}

// The reader on disk, and LoadModel, with tiny files claiming huge records:
// no allocation for the claimed length (the fuzz targets read from memory).
// First in the file: the peak RSS is still low.
TEST(FuzzRegression, FilesClaimingHugeRecordsDoNotAllocate) {
  const char* tmp = getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp ? tmp : "/tmp") + "/huge_XXXXXX";
  ASSERT_NE(mkdtemp(&dir[0]), nullptr);
  const long before = PeakRssKb();
  int i = 0;
  for (const std::string& bytes : HugeLengthFiles()) {
    const std::string path = dir + "/f" + std::to_string(i++) + ".ncclwatch";
    std::ofstream(path, std::ios::binary) << bytes;
    tools::TraceReader reader;
    std::string error;
    ASSERT_TRUE(reader.Open(path, &error)) << error;
    trace::Record rec;
    uint64_t off = 0;
    while (reader.Next(&rec, &off)) {
    }
    EXPECT_FALSE(reader.issues().empty()) << path;
  }
  // A file larger than the reader's chunk (1 MiB): an unparsable record of
  // 1000 bytes, then a record claiming 64 MiB - 1 bytes of which the file
  // has 2 MiB.
  {
    const std::string path = dir + "/big.ncclwatch";
    std::string big("\xe8\x07", 2);  // 1000
    big.append(1000, '\0');
    big.append("\xff\xff\xff\x1f", 4);
    big.append(2u << 20, '\0');
    std::ofstream(path, std::ios::binary) << big;
    tools::TraceReader reader;
    std::string error;
    ASSERT_TRUE(reader.Open(path, &error)) << error;
    trace::Record rec;
    uint64_t off = 0;
    while (reader.Next(&rec, &off)) {
    }
    ASSERT_EQ(reader.issues().size(), 2u);
    EXPECT_EQ(reader.issues()[0].kind, tools::ReadIssue::kUnparsable);
    EXPECT_EQ(reader.issues()[1].kind, tools::ReadIssue::kCutTail);
  }
  tools::Model m;
  std::string error;
  EXPECT_FALSE(tools::LoadModel({dir}, tools::LoadOptions{}, &m, &error));
  EXPECT_LT(PeakRssKb() - before, 48 * 1024) << "peak RSS grew by " << (PeakRssKb() - before) << " KiB";
}

#if defined(FUZZ_TARGET_READER)

TEST(ReaderFuzzRegression, HugeLengthsDoNotAllocate) {
  const long before = PeakRssKb();
  Runner r;
  for (const std::string& f : HugeLengthFiles()) r.Run(f, "huge length");
  EXPECT_LT(PeakRssKb() - before, kMaxRssGrowthKb);
}

TEST(ReaderFuzzRegression, TestdataAndMutations) {
  auto scenarios = Scenarios();
  ASSERT_GE(scenarios.size(), 10u) << "testdata/gpu not found in the runfiles";
  Runner r;
  uint64_t seed = 1;
  for (const auto& files : scenarios)
    for (const std::string& f : files) {
      Mutate(f, seed, 256, 64, &r, "trace file " + std::to_string(seed));
      ++seed;
    }
  printf("reader: %zu inputs, slowest %.3f s (%s)\n", r.runs, r.slowest, r.slowest_what.c_str());
}

#elif defined(FUZZ_TARGET_DIAGNOSE)

std::string Join(const std::vector<std::string>& files) {
  std::string out;
  for (size_t i = 0; i < files.size(); ++i) out += (i ? std::string(kDelimiter, kDelimiterSize) : "") + files[i];
  return out;
}

TEST(DiagnoseFuzzRegression, SplitFormat) {
  const std::string d(kDelimiter, kDelimiterSize);
  auto f = SplitFiles(reinterpret_cast<const uint8_t*>(""), 0);
  ASSERT_EQ(f.size(), 1u);
  std::string in = "a" + d + "b" + d + d + "c" + d + "e";
  f = SplitFiles(reinterpret_cast<const uint8_t*>(in.data()), in.size());
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].second, "a");
  EXPECT_EQ(f[1].second, "b");
  EXPECT_EQ(f[2].second, "");
  EXPECT_EQ(f[3].second, "c" + d + "e");
}

TEST(DiagnoseFuzzRegression, HugeLengthsDoNotAllocate) {
  const long before = PeakRssKb();
  Runner r;
  auto scenarios = Scenarios();
  ASSERT_FALSE(scenarios.empty());
  for (const std::string& f : HugeLengthFiles()) {
    r.Run(f, "huge length");
    r.Run(Join({scenarios[0][0], f, scenarios[0][1]}), "huge length between two files");
    r.Run(Join({scenarios[0][0] + f}), "huge length after a file");
  }
  EXPECT_LT(PeakRssKb() - before, kMaxRssGrowthKb);
}

// Length-delimited records, as the plugin writes them.
std::string Records(const std::vector<trace::Record>& records) {
  std::string out;
  for (const trace::Record& r : records) {
    std::string body = r.SerializeAsString();
    for (uint64_t n = body.size(); ; n >>= 7) {
      out += static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
      if (n < 0x80) break;
    }
    out += body;
  }
  return out;
}

trace::Record Header(int32_t rank, uint64_t mono, uint64_t realtime) {
  trace::Record r;
  r.mutable_header()->set_hostname("h");
  r.mutable_header()->set_launcher_rank(rank);
  r.mutable_header()->set_mono_base_ns(mono);
  r.mutable_header()->set_realtime_base_ns(realtime);
  return r;
}

trace::Record CommInit(uint32_t comm, uint64_t hash, int32_t nranks, int32_t rank) {
  trace::Record r;
  r.mutable_comm_init()->set_comm(comm);
  r.mutable_comm_init()->set_comm_hash(hash);
  r.mutable_comm_init()->set_nranks(nranks);
  r.mutable_comm_init()->set_rank(rank);
  return r;
}

trace::Record Op(uint32_t comm, uint64_t seq, uint64_t start_ns) {
  trace::Record r;
  r.mutable_op()->set_comm(comm);
  r.mutable_op()->set_seq(seq);
  r.mutable_op()->set_start_ns(start_ns);
  r.mutable_op()->set_completion_tracked(true);
  r.mutable_op()->mutable_completion()->set_done_after_start_ns(UINT64_MAX);
  r.mutable_op()->mutable_completion()->set_gpu_start_delta_ns(INT64_MIN);
  return r;
}

// What the long fuzz runs found, as small inputs.
TEST(DiagnoseFuzzRegression, Findings) {
  Runner r;
  // One file communicator mapped to two hashes: its operations looked up a
  // member of the first communicator in the second's (empty) member list.
  r.Run(Records({Header(0, 1, 2), CommInit(1, 0xa, 2, 0), CommInit(1, 0xb, 2, 0), Op(1, 0, 5)}), "comm remapped");
  // A communicator of 2^31 - 1 ranks, a rank at INT32_MAX: per-rank vectors
  // and loops of that size.
  std::string d(kDelimiter, kDelimiterSize);
  std::string big = Records({Header(INT32_MAX, 1, 2), CommInit(1, 0xa, INT32_MAX, INT32_MAX - 1)});
  for (uint64_t seq = 0; seq < 500; ++seq) big += Records({Op(1, seq, seq)});
  r.Run(big, "huge communicator");
  // Times near 2^64 everywhere (signed overflow in the model's arithmetic,
  // found by replaying the corpus under UBSan).
  r.Run(Records({Header(0, UINT64_MAX, UINT64_MAX), CommInit(1, 0xa, 2, 0), Op(1, 0, UINT64_MAX)}) + d +
            Records({Header(1, 0, 0), CommInit(1, 0xa, 2, 1), Op(1, 0, 0)}),
        "extreme times");
  tools::Model m;
  std::string error;
  ASSERT_TRUE(tools::LoadModelFromBytes({{"a", Records({Header(0, 1, 2), CommInit(1, 0xa, INT32_MAX, 0)})}},
                                        tools::LoadOptions{}, &m, &error))
      << error;
  EXPECT_TRUE(m.comms.empty());
  ASSERT_EQ(m.procs.size(), 1u);
  ASSERT_FALSE(m.procs[0].issues.empty());
  EXPECT_NE(m.procs[0].issues[0].find("skipped (damaged)"), std::string::npos) << m.procs[0].issues[0];
  EXPECT_TRUE(m.procs[0].damaged);
}

TEST(DiagnoseFuzzRegression, TestdataAndMutations) {
  auto scenarios = Scenarios();
  ASSERT_GE(scenarios.size(), 10u) << "testdata/gpu not found in the runfiles";
  Runner r;
  uint64_t seed = 1;
  for (const auto& files : scenarios) {
    std::vector<std::string> four(files.begin(), files.begin() + std::min<size_t>(files.size(), 4));
    r.Run(Join(four), "scenario");
    // One rank's file mutated, the others intact.
    for (size_t k = 0; k < four.size(); ++k) {
      std::vector<std::string> x = four;
      const std::string orig = x[k];
      const size_t step = std::max<size_t>(1, orig.size() / 12);
      for (size_t n = 0; n < orig.size(); n += step) {
        x[k] = orig.substr(0, n);
        r.Run(Join(x), "scenario, one file cut");
      }
      uint64_t s = seed++;
      for (int i = 0; i < 12; ++i) {
        x[k] = orig;
        for (int j = 0; j < 3; ++j) {
          const uint64_t v = SplitMix(&s);
          const size_t at = static_cast<size_t>(v % x[k].size());
          x[k][at] = (v >> 32) % 2 ? static_cast<char>(v >> 40) : static_cast<char>(x[k][at] ^ (1 << ((v >> 48) % 8)));
        }
        r.Run(Join(x), "scenario, one file mutated");
      }
    }
    // A rank missing, a rank twice, one file alone.
    r.Run(Join({four.begin(), four.end() - 1}), "scenario without its last rank");
    r.Run(Join({four[0], four[0], four.back()}), "scenario with a rank twice");
    r.Run(four[0], "one rank alone");
  }
  // Whole-input mutations (delimiters included) of one scenario.
  Mutate(Join(scenarios[0]), 99, 32, 48, &r, "scenario 0");
  printf("diagnose: %zu inputs, slowest %.3f s (%s)\n", r.runs, r.slowest, r.slowest_what.c_str());
}

#else
#error "build with FUZZ_TARGET_READER or FUZZ_TARGET_DIAGNOSE"
#endif

}  // namespace
}  // namespace ncclwatch::fuzz
