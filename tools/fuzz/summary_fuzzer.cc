// libFuzzer target: per-node summaries (tools/summary/) as the merge reads
// them. The input is one summary file: ParseSummary (the processes before
// any damage kept), then the job's model from them (BuildModelFromSummaries:
// settling what was let go, comparing signature chains), MatchOps,
// AlignClocks, stats (the summaries' sketches) and diagnose with its text
// view. When the input's last byte is even, each process is first brought
// under a cap of 64 times it (CapSummaryProcess: thinned checkpoints, cut
// windows and stuck reports), as summarize does. Nothing may crash, hang or
// allocate unbounded memory, whatever the summary claims (counts, seqs,
// checkpoint positions).
#include <stddef.h>
#include <stdint.h>

#include <string>
#include <utility>

#include <google/protobuf/stubs/logging.h>

#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"
#include "tools/stats/stats.h"
#include "tools/model/job.h"
#include "tools/model/summary_merge.h"
#include "tools/summary/summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  using namespace ncclwatch::tools;
  SummaryResult s;
  std::string error;
  const bool whole = ParseSummary("fuzz.ncclsummary", std::string(reinterpret_cast<const char*>(data), size), &s, &error);
  if (s.procs.empty()) return 0;
  const uint8_t last = data[size - 1];  // size > 0: a process was parsed
  if (last % 2 == 0)
    for (ncclwatch::summary::SummaryProcess& p : s.procs) CapSummaryProcess(uint64_t{last} * 64, 64, &p);
  std::vector<std::string> errors;
  if (!whole) errors.push_back(error);
  Model model;
  if (!BuildModelFromSummaries(std::move(s.procs), std::move(errors), {}, LoadOptions{}, &model, &error)) return 0;
  MatchOps(&model);
  AlignClocks(&model);
  // Its stats rows too: sketches and counts as the file claims them.
  const ncclwatch::stats::Stats st = ComputeStats(model);
  if (st.rows_size() < 0) return 1;
  const ncclwatch::report::Diagnosis d = Diagnose(model);
  const std::string text = FormatText(d);
  return text.empty() ? 0 : ExitStatus(d) > 3;
}
