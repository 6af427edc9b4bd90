// What reading a summary costs follows its bytes, whatever it was built to
// hold. Summaries made to exhaust memory (millions of empty sub-messages,
// each two bytes on the wire and a hundred or more once parsed, with their
// checksums right) are read under a memory limit of 20 times their bytes
// plus 200 MB, and diagnose says the evidence is incomplete, never a
// finding: the reader refuses their records (tools/model/summary_shape.h).
// Summaries made of the smallest elements summarize could write, which it
// reads, stay within the bound docs/security.md states (about 120 times
// their bytes; the limit here is 128 times plus 200 MB). Each run prints
// its peak (docs/benchmarks/diary.md, "Summaries built to cost memory").

#include <gtest/gtest.h>
#include <malloc.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "tools/diagnose/diagnose.h"
#include "tools/model/inputs.h"
#include "tools/model/job.h"
#include "tools/model/summary_format.h"
#include "tools/summary/summary.h"
#include "tools/testing/memory_limit.h"

namespace ncclwatch::tools {
namespace {

std::string Tmp() { return getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp"; }

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"); 0 if unknown.
uint64_t StatusBytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) << 10;
  return 0;
}

// A real summary: the healthy recording's four ranks, on one node.
SummaryResult Healthy() {
  SummaryResult s;
  std::string error;
  const TraceInputs in = ListFiles({"testdata/gpu/healthy"}, &IsTraceFileName);
  EXPECT_TRUE(Summarize(in.files, SummarizeOptions(), &s, &error)) << error;
  EXPECT_EQ(s.procs.size(), 4u);
  return s;
}

// `s` written (EncodeSummary: every record's checksum right) to `name`,
// and `s` freed with the memory that built it, so that the child's peak
// below is its own; the file's path and bytes.
std::pair<std::string, uint64_t> Write(SummaryResult* s, const std::string& name) {
  const std::string bytes = EncodeSummary(*s);
  *s = SummaryResult();
  const std::string path = Tmp() + "/" + name + kSummaryExtension;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  malloc_trim(0);
  return {path, bytes.size()};
}

// Diagnose on `path` alone, in a child limited to `times` its bytes plus
// 200 MB: it must end by itself, with a verdict that says the evidence is
// incomplete or unusable where `refused`. Prints the verdict and the
// child's peak.
void DiagnosedWithinLimit(const std::string& path, uint64_t bytes, uint64_t times = 20, bool refused = true) {
  const uint64_t limit = times * bytes + (200ull << 20);
  const testing::LimitedRun run = testing::RunWithMemoryLimit(
      limit,
      [&] {
        const uint64_t before = StatusBytes("VmRSS");
        Model m;
        std::string error;
        std::string verdict;
        if (!BuildJobModel({path}, LoadOptions(), &m, &error)) verdict = "UNUSABLE INPUT: " + error;
        else verdict = Diagnose(m).verdict();
        const uint64_t peak = StatusBytes("VmHWM") - before;
        printf("%s: %.1f MB read with a peak of %.0f MB (%.1f times its bytes)\n  verdict: %.300s\n",
               path.substr(path.rfind('/') + 1).c_str(), bytes / 1e6, peak / 1e6, static_cast<double>(peak) / static_cast<double>(bytes),
               verdict.c_str());
        return !refused || verdict.rfind("INCOMPLETE", 0) == 0 || verdict.rfind("UNUSABLE", 0) == 0 ? 0 : 1;
      },
      300);
  EXPECT_TRUE(run.exited && run.status == 0)
      << path << ": " << run.how << " under a limit of " << (limit >> 20) << " MiB"
      << (testing::MemoryLimitApplies() ? "" : " (no limit: ASan)");
}

// Two million empty stats rows appended to a real summary's first process.
TEST(SummaryMemory, EmptyRowsInARealSummary) {
  SummaryResult s = Healthy();
  for (int i = 0; i < 2000000; ++i) s.procs[0].add_rows();
  const auto [path, bytes] = Write(&s, "empty-rows");
  DiagnosedWithinLimit(path, bytes);
}

// 4.5 MB of empty process records after a real summary's.
TEST(SummaryMemory, EmptyProcessRecords) {
  SummaryResult s = Healthy();
  // Each framed: a length, two bytes of body and a checksum.
  s.procs.resize(s.procs.size() + 4500000 / 7);
  const auto [path, bytes] = Write(&s, "empty-processes");
  DiagnosedWithinLimit(path, bytes);
}

// 10 MB of empty window records in a real summary's first process.
TEST(SummaryMemory, EmptyWindowRecords) {
  SummaryResult s = Healthy();
  for (int i = 0; i < 5000000; ++i) s.procs[0].add_records();
  const auto [path, bytes] = Write(&s, "empty-window");
  DiagnosedWithinLimit(path, bytes);
}

// Each kind of element at the fewest bytes summarize writes for one, as
// many as fill 4 MB of a real summary's first process: read, not refused,
// within the stated bound. The costliest, a stats row of 7 bytes, becomes
// a message and a model row of five sketches, about 800 bytes.
TEST(SummaryMemory, TheSmallestElementsSummarizeWrites) {
  struct Kind {
    const char* name;
    std::function<void(summary::SummaryProcess*, int)> add;
  };
  const std::string op("\x2a\x00", 2);  // a trace record: an operation
  const std::vector<Kind> kinds = {
      {"rows", [](summary::SummaryProcess* p, int) {
         summary::RowDigest* r = p->add_rows();
         r->set_comm("a");
         r->set_ops(1);
       }},
      {"ranks", [](summary::SummaryProcess* p, int) { p->add_ranks()->set_comm("a"); }},
      {"records", [&](summary::SummaryProcess* p, int) { p->add_records()->set_record(op); }},
      {"prefixes", [](summary::SummaryProcess* p, int i) { p->add_prefixes()->set_comm_hash(1000 + i); }},
      {"samples", [](summary::SummaryProcess* p, int i) { p->add_samples()->set_comm_hash(1000 + i); }},
      {"arrivals", [](summary::SummaryProcess* p, int i) { p->mutable_arrivals()->add_rows()->set_comm_hash(1 + i); }},
      {"p2p", [](summary::SummaryProcess* p, int i) {
         if (p->prefixes_size() == 0) p->add_prefixes()->set_comm_hash(77);
         p->mutable_prefixes(0)->add_p2p()->set_peer(1 + i);
       }},
  };
  for (const Kind& k : kinds) {
    SummaryResult s = Healthy();
    summary::SummaryProcess* p = &s.procs[0];
    const size_t start = p->ByteSizeLong();
    for (int i = 0; p->ByteSizeLong() < start + 4000000;)
      for (int n = 0; n < 10000; ++n) k.add(p, i++);
    const auto [path, bytes] = Write(&s, std::string("smallest-") + k.name);
    DiagnosedWithinLimit(path, bytes, 128, false);
  }
  // Processes that name their file and hold nothing else (summarize
  // writes one for a file whose first record is no header).
  SummaryResult s = Healthy();
  for (int i = 0; i < 300000; ++i) s.procs.emplace_back().set_path("p" + std::to_string(i));
  const auto [path, bytes] = Write(&s, "smallest-processes");
  DiagnosedWithinLimit(path, bytes, 128, false);
}

}  // namespace
}  // namespace ncclwatch::tools
