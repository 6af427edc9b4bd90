// libFuzzer target: a `check` baseline (`stats --format=json`) on arbitrary
// bytes.
//
// ParseBaseline (tools/stats/baseline_check.h) must refuse with a message
// or accept. What it accepts must hold up: written back by StatsToJson it
// is accepted again, and `check` of its first rows against themselves
// ends, finds no regression (the same samples on both sides), and its
// text, JSON and JUnit reports are made. Nothing may crash, hang or
// allocate unbounded memory.
#include <stddef.h>
#include <stdint.h>

#include <sstream>
#include <string>
#include <string_view>

#include "proto/stats.pb.h"
#include "tools/json.h"
#include "tools/stats/baseline_check.h"
#include "tools/stats/check.h"
#include "tools/stats/stats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ncclwatch::tools;  // NOLINT: a fuzz target's one function
  ncclwatch::stats::Stats s;
  std::string error;
  if (!ParseBaseline(std::string_view(reinterpret_cast<const char*>(data), size), &s, &error)) {
    if (error.empty()) __builtin_trap();
    return 0;
  }
  ncclwatch::stats::Stats again;
  if (!ParseBaseline(StatsToJson(s), &again, &error)) __builtin_trap();
  // Of its first rows only: a bootstrap is 1,000 resamples of each row's
  // samples (check.cc), a second or more under ASan for a whole baseline,
  // and the reader, not the statistics, is what is fuzzed here.
  ncclwatch::stats::Stats few = s;
  if (few.rows_size() > 2) few.mutable_rows()->DeleteSubrange(2, few.rows_size() - 2);
  if (few.ranks_size() > 2) few.mutable_ranks()->DeleteSubrange(2, few.ranks_size() - 2);
  const CheckOptions opts = DefaultCheckOptions();
  const CheckResult r = CompareStats(few, few, opts);
  if (r.regressed != 0 || r.missing != 0 || r.added != 0) __builtin_trap();
  std::ostringstream sink;
  PrintCheck(r, opts, sink);
  sink << JUnitXml(r, opts) << ReportJson(CheckReportOf(r));
  return 0;
}
