// What each `ncclwatch` subcommand does once its flags are parsed (cli.cc):
// load the model, call the analysis, format, write. The analysis libraries
// compute and format only; reading files named on the command line and
// writing outputs is here, with each command's messages and exit status.
//
// Thread safety: each call is independent.

#ifndef TOOLS_COMMANDS_H_
#define TOOLS_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

#include "tools/diagnose/diagnose.h"
#include "tools/export/timeline.h"
#include "tools/model/model.h"
#include "tools/stats/check.h"
#include "tools/model/collectives.h"
#include "tools/watch/watch.h"

namespace ncclwatch::tools {

// What a command reads: the paths named (files and folders) and how.
struct Inputs {
  std::vector<std::string> paths;
  LoadOptions load;
  // diagnose: PyTorch Flight Recorder dumps (files or folders) besides the
  // ones found among `paths` (tools/fr/flight_recorder.h).
  std::vector<std::string> fr_paths;
  // diagnose: a saved answer of NCCL's RAS (`ncclwatch ras > FILE`), whose
  // view goes under the verdict (tools/ras/evidence.h); empty: none.
  std::string ras_path;
  // Where to draw progress while reading and writing (tools/progress.h:
  // std::cerr on a terminal); null: silent.
  std::ostream* progress = nullptr;
};

// "cannot write PATH: why", why from errno (strerror) as the failed call
// left it: call it at once.
std::string CannotWrite(const std::string& path);

// `format`: text or json. Exit: 0 healthy, 1 a problem, 2 unusable input.
int DiagnoseCommand(const Inputs& inputs, const std::string& format, const DiagnoseOptions& opts,
                    std::ostream& out, std::ostream& err);

// `diagnose --refine-args`: the --collectives argument of the second
// summarize round (job.h RefineRanges) on `out`, nothing when no chain
// mismatch needs one. Exit: 0, or 2 when no input could be used.
int RefineArgsCommand(const Inputs& inputs, std::ostream& out, std::ostream& err);

// How `watch` follows a job (tools/watch/watch.h has the rest).
struct WatchSettings {
  double interval_sec = 2;
  double timeout_sec = 0;  // 0: none
  // NCCL's RAS, asked at most once per interval (tools/ras/client.h), its
  // latest view under the verdict; empty: not asked.
  std::string ras_address;
  // What the Watcher is told (settle, window_ops, live_wait_sec); the
  // command sets its inputs, options and verdict.
  WatchOptions follow;
};
// Follows the files until the verdict holds (or the timeout, or SIGINT or
// SIGTERM), sleeping between polls; progress on `err`, the verdict on
// `out` as DiagnoseCommand prints it, and its exit status.
int WatchCommand(const Inputs& inputs, const std::string& format, const DiagnoseOptions& opts,
                 const WatchSettings& settings, std::ostream& out, std::ostream& err);
// `ncclwatch ras`: NCCL's RAS answer at `address` as it came (JSON where
// the server takes it and `json`), for `diagnose --ras FILE`. Exit: 0
// printed, 1 RAS not reachable or its answer incomplete (said on `err`).
int RasCommand(const std::string& address, bool json, std::ostream& out, std::ostream& err);
// `format`: text, json or pb; `out_path` empty: standard output.
int MergeCommand(const Inputs& inputs, const std::string& format, const std::string& out_path,
                 std::ostream& out, std::ostream& err);
// What `export` writes: the format (json or perfetto), where, and the cut.
struct ExportSettings {
  std::string format = "json";
  std::string out_path;     // empty: standard output
  ExportOptions cut;        // --from/--to (ns since the origin), --ranks
  // --around-finding: the window is the first finding's operation (on every
  // rank it was drawn on) widened by this much each side; < 0: not asked.
  double around_finding_margin_sec = -1;
};
// Summarizes the trace files of `inputs` into one summary file at
// `out_path` (tools/summary/). Exit: 0 written, 2 nothing usable or not
// written, 3 written without some files (named on `err`).
// `collectives`: --collectives, the second round of a chain mismatch.
// `group_window`: the window of a group summary (inputs that are summaries).
int SummarizeCommand(const Inputs& inputs, uint64_t window, uint64_t group_window, uint64_t max_kb_per_rank,
                     const std::vector<CollectiveRange>& collectives, const std::string& out_path, std::ostream& out,
                     std::ostream& err);

int ExportCommand(const Inputs& inputs, const ExportSettings& settings, std::ostream& out, std::ostream& err);
// `format`: text, json or openmetrics.
int StatsCommand(const Inputs& inputs, const std::string& format, std::ostream& out,
                 std::ostream& err);
// `baseline_paths`: one stats JSON per baseline run of the job, pooled.
// `format`: text or json (CheckReport).
int CheckCommand(const Inputs& inputs, const std::vector<std::string>& baseline_paths, const std::string& format,
                 const std::string& junit_path, const CheckOptions& opts, std::ostream& out, std::ostream& err);

}  // namespace ncclwatch::tools

#endif  // TOOLS_COMMANDS_H_
