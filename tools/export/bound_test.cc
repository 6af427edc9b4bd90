// What `export` and `stats --format=json` write is bounded by the job's
// bytes (docs/security.md): names are cut at the plugin's 256 bytes where
// the tools read them, and at 64 where each operation's events repeat
// them (24 for NCCL's own names; tools/export/timeline.h), so that an
// operation's events are a bounded number of bytes whatever a trace
// defines once. Hostile jobs of 2 ranks x 20,000 collectives: a
// communicator named with a megabyte; one named with the longest name the
// plugin writes (256 bytes) of a character JSON writes as six (\u0001);
// and that name as every name an operation repeats. Byte counts of the
// outputs are deterministic: the bounds are asserted, and each run prints
// its ratios.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <sstream>
#include <string>
#include <vector>

#include "tools/cli.h"
#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools {
namespace {

namespace t = testing;

// The multiples docs/security.md states, per output (measured below: at
// most 70, 38 and 0.03 times; on the recordings 12, 6.2 and 3.1).
constexpr double kMaxJsonTimes = 100;
constexpr double kMaxPerfettoTimes = 50;
constexpr double kMaxStatsTimes = 5;

std::string Tmp() { return getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp"; }

// 2 ranks, each `n` AllReduces on one communicator named `name`; the
// folder and its files' bytes.
std::pair<std::string, uint64_t> Job(const std::string& tag, const std::string& name, int n, bool every = false) {
  const std::string dir = Tmp() + "/" + tag;
  EXPECT_EQ(system(("mkdir -p '" + dir + "'").c_str()), 0);
  uint64_t bytes = 0;
  for (int r = 0; r < 2; ++r) {
    t::ProcSpec spec;
    spec.host = "node" + std::to_string(r);
    spec.pid = 1000 + r;
    spec.launcher_rank = r;
    spec.launcher_world_size = 2;
    t::TraceBuilder b(spec);
    const int comm = b.AddComm(0xc0ffee, name, 2, r, t::kSec);
    uint64_t at = t::kSec + t::kMs;
    t::OpOpts o;
    if (every) {
      o.datatype = name;
      o.algo = name;
      o.proto = name;
    }
    for (int i = 0; i < n; ++i, at += 100 * t::kUs)
      b.Coll(comm, every ? name : "AllReduce", static_cast<uint64_t>(i), 1024, at, at + 20 * t::kUs, o);
    b.Heartbeats(t::kSec, at);
    b.FinalizeComm(comm, at);
    b.Finalize(at + t::kMs);
    bytes += b.Bytes().size();
    EXPECT_TRUE(b.WriteTo(dir + "/" + b.FileName()));
  }
  return {dir, bytes};
}

// What `args` writes to standard output, in bytes.
uint64_t OutputBytes(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  std::vector<std::string> argv = {"ncclwatch"};
  argv.insert(argv.end(), args.begin(), args.end());
  const int status = RunCli(argv, out, err);
  EXPECT_TRUE(status == 0 || status == 1) << args[0] << ": " << status << " " << err.str().substr(0, 300);
  return out.str().size();
}

void Bounded(const std::string& tag, const std::string& name, bool every = false) {
  const auto [dir, in] = Job(tag, name, 20000, every);
  const double json = static_cast<double>(OutputBytes({"export", "--format=json", dir})) / static_cast<double>(in);
  const double perfetto =
      static_cast<double>(OutputBytes({"export", "--format=perfetto", dir})) / static_cast<double>(in);
  const double stats = static_cast<double>(OutputBytes({"stats", "--format=json", dir})) / static_cast<double>(in);
  printf("%s: %llu bytes in; export json %.2fx, perfetto %.2fx; stats json %.2fx\n", tag.c_str(),
         static_cast<unsigned long long>(in), json, perfetto, stats);
  EXPECT_LE(json, kMaxJsonTimes) << tag;
  EXPECT_LE(perfetto, kMaxPerfettoTimes) << tag;
  EXPECT_LE(stats, kMaxStatsTimes) << tag;
}

TEST(ExportBound, ACommunicatorNamedWithAMegabyte) { Bounded("mega", std::string(1 << 20, 'M')); }

TEST(ExportBound, TheLongestNameOfCharactersJsonEscapes) { Bounded("escaped", std::string(256, '\x01')); }

// The same name as every name an operation's events repeat: its
// function, datatype, algorithm and protocol too.
TEST(ExportBound, TheLongestEscapedNameEverywhere) { Bounded("everywhere", std::string(256, '\x01'), true); }

}  // namespace
}  // namespace ncclwatch::tools
