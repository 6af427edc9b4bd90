// Short deterministic runs of the summary fuzz target (no libFuzzer, any
// config): the summaries of recordings under testdata/gpu (the second
// round's among them), each cut at many
// offsets and with bytes changed at a fixed seed. Each run must return; the
// process's peak RSS must stay small (no allocation for a claimed count).

#include <stdint.h>
#include <sys/resource.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"
#include "tools/model/inputs.h"
#include "tools/model/job.h"
#include "tools/model/summary_merge.h"
#include "tools/summary/summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace ncclwatch::tools {
namespace {

long PeakKb() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

void RunTarget(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

TEST(SummaryFuzzRegressionTest, CutAndChangedSummariesOfRecordings) {
  int runs = 0;
  for (const char* dir : {"testdata/gpu/skip", "testdata/gpu/count", "testdata/gpu-events4/swap",
                          "testdata/gpu-events/kill"}) {
    // The last: a second round's summary (summarize --collectives), its
    // asked collectives beside the window, every communicator asked.
    // Window 0: a group of its ranks, each summarized alone, whose
    // processes refer to each other for what they share.
    for (uint64_t window : {uint64_t{64}, uint64_t{2}, uint64_t{3}, uint64_t{0}}) {
      SummarizeOptions opts;
      opts.window = window;
      SummaryResult s;
      std::string error;
      if (window == 0) {
        std::vector<std::string> nodes;
        for (const std::string& f : ListFiles({dir}, &IsTraceFileName).files) {
          SummaryResult node;
          ASSERT_TRUE(Summarize({f}, SummarizeOptions(), &node, &error)) << error;
          nodes.push_back(::testing::TempDir() + "/node" + std::to_string(nodes.size()) + kSummaryExtension);
          std::ofstream(nodes.back(), std::ios::binary | std::ios::trunc) << EncodeSummary(node);
        }
        ASSERT_TRUE(Summarize(nodes, SummarizeOptions(), &s, &error)) << error;
        ASSERT_GT(s.header.nodes(), 1u) << dir;
      } else if (window == 3) {
        ASSERT_TRUE(Summarize({dir}, opts, &s, &error)) << error;
        for (const summary::SummaryProcess& p : s.procs)
          for (const summary::CommPrefix& c : p.prefixes())
            if (c.comm_hash() != 0) opts.collectives.push_back(CollectiveRange{c.comm_hash(), 1, 64});
        s = SummaryResult();
      }
      if (window != 0) {
        ASSERT_TRUE(Summarize({dir}, opts, &s, &error)) << error;
      }
      if (window == 3) {
        int asked = 0;
        for (const summary::SummaryProcess& p : s.procs) asked += p.asked_collectives_size();
        EXPECT_GT(asked, 0) << dir;
      }
      const std::string bytes = EncodeSummary(s);
      RunTarget(bytes);
      ++runs;
      for (size_t cut = 1; cut < bytes.size(); cut += 1 + bytes.size() / 97, ++runs) RunTarget(bytes.substr(0, cut));
      std::mt19937_64 rng(window * 1000 + bytes.size());
      for (int i = 0; i < 200; ++i, ++runs) {
        std::string b = bytes;
        for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) b[rng() % b.size()] = static_cast<char>(rng());
        RunTarget(b);
      }
    }
  }
  printf("%d runs, peak RSS %ld KB\n", runs, PeakKb());
  // ASan keeps up to 256 MB of freed memory in quarantine: the bound is
  // for an allocation the size of a claimed count (gigabytes), not a tight one.
  EXPECT_LT(PeakKb(), 1024 * 1024);
}

// Summaries of recordings made under caps far below what they need
// (--max-kb-per-rank): each process record stays within its cap unless its
// records besides operations pass it, the target runs on them, and a
// merge of a summary the cap cut is never OK and blames no one.
TEST(SummaryFuzzRegressionTest, SummariesUnderTightCaps) {
  int merged_cut = 0;
  for (const char* dir : {"testdata/gpu/skip", "testdata/gpu/count", "testdata/gpu-events4/swap",
                          "testdata/gpu-events/kill", "testdata/gpu/healthy"}) {
    for (uint64_t cap : {uint64_t{256}, uint64_t{1024}, uint64_t{4096}}) {
      SCOPED_TRACE(std::string(dir) + " cap " + std::to_string(cap));
      SummarizeOptions opts;
      opts.window = 2;
      opts.checkpoint_every = 1;
      opts.max_bytes_per_rank = cap;
      SummaryResult s;
      std::string error;
      if (!Summarize({dir}, opts, &s, &error)) continue;  // a folder this checkout lacks
      bool cut = false;
      for (const summary::SummaryProcess& p : s.procs) {
        cut |= p.cut_ops() > 0 || p.cut_stuck_ops() > 0;
        int ops = 0;
        for (const summary::WindowRecord& w : p.records()) {
          trace::Record r;
          ops += r.ParseFromString(w.record()) && r.has_op();
        }
        if (ops > 0) {
          EXPECT_LE(p.ByteSizeLong(), cap) << p.path();
        }
      }
      RunTarget(EncodeSummary(s));
      if (!cut) continue;
      ++merged_cut;
      Model m;
      ASSERT_TRUE(BuildModelFromSummaries(s.procs, {}, {}, LoadOptions(), &m, &error)) << error;
      MatchOps(&m);
      AlignClocks(&m);
      const report::Diagnosis d = Diagnose(m);
      EXPECT_EQ(ExitStatus(d), 3) << d.verdict();
      EXPECT_NE(d.verdict().find("--max-kb-per-rank"), std::string::npos) << d.verdict();
      for (const report::Finding& f : d.findings()) EXPECT_EQ(f.culprits_size(), 0) << f.summary();
    }
  }
  EXPECT_GE(merged_cut, 10);  // the caps bind
}

}  // namespace
}  // namespace ncclwatch::tools
