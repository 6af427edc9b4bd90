// libFuzzer target: every analysis of `ncclwatch` on arbitrary trace files.
//
// The input is split into up to 4 files (split.h), loaded in memory
// (LoadModelFromBytes: LoadModel's per-file code path, keeping kernel
// phases as export does: no analysis reads them), then MatchOps,
// AlignClocks, the merge order and its report, diagnose with its text and
// JSON views, stats (table and JSON) and the Chrome trace export. Nothing may
// crash, hang or allocate unbounded memory.
#include <stddef.h>
#include <stdint.h>

#include <sstream>
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "tools/diagnose/diagnose.h"
#include "tools/export/export.h"
#include "tools/fuzz/split.h"
#include "tools/model/model.h"
#include "tools/order/order.h"
#include "tools/stats/stats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Invalid UTF-8 in string fields is logged by libprotobuf on every parse.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  using namespace ncclwatch::tools;
  Model model;
  std::string error;
  LoadOptions opts;
  opts.kernel_phases = true;
  if (!LoadModelFromBytes(ncclwatch::fuzz::SplitFiles(data, size), opts, &model, &error)) return 0;
  MatchOps(&model);
  AlignClocks(&model);

  GlobalOrder order = ComputeOrder(model);
  ncclwatch::report::MergeReport merge = MergeReportOf(model, order);
  std::ostringstream sink;
  PrintMergeText(merge, sink);

  ncclwatch::report::Diagnosis diagnosis = Diagnose(model);
  sink << FormatText(diagnosis) << FormatJson(diagnosis) << ExitStatus(diagnosis);

  ncclwatch::stats::Stats stats = ComputeStats(model);
  PrintStatsTable(stats, sink);
  sink << StatsToJson(stats);

  WriteChromeTrace(model, sink);
  return 0;
}
