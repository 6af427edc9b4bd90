#include "tools/cli.h"

#include <string>
#include <vector>

#include "tools/diagnose/diagnose.h"
#include "tools/dump.h"
#include "tools/export/export.h"
#include "tools/order.h"
#include "tools/stats/check.h"
#include "tools/stats/stats.h"

namespace ncclwatch::tools {
namespace {

constexpr char kUsage[] =
    "usage: ncclwatch <command> [options] FILE...\n"
    "\n"
    "commands:\n"
    "  diagnose what went wrong and who caused it (the verdict is the first line)\n"
    "  merge    the cross-rank order of operations of a job\n"
    "  export   a Chrome-trace / Perfetto JSON timeline (ui.perfetto.dev, chrome://tracing)\n"
    "  stats    per-collective latency, bandwidth, enqueue delay and arrival skew\n"
    "  check    the CI gate: stats against a baseline, and no diagnose error\n"
    "  dump     print every record of trace files, then a summary per file\n"
    "\n"
    "Each takes the trace files of all ranks: files, or directories of *.ncclwatch.\n"
    "\n"
    "Run 'ncclwatch <command> --help' for a command's options.\n";

constexpr char kDumpUsage[] =
    "usage: ncclwatch dump [--summary] FILE...\n"
    "\n"
    "Prints each record of each ncclwatch trace file (one line per record,\n"
    "with its byte offset), then a summary: operations enqueued, completed,\n"
    "with GPU timing, never completed; drops; read issues such as a cut tail.\n"
    "  --summary   print only the summary lines\n";

}  // namespace

int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err) {
  if (argc < 2) {
    err << kUsage;
    return 2;
  }
  std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    out << kUsage;
    return 0;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "dump") {
    DumpOptions opts;
    std::vector<std::string> files;
    for (const std::string& a : args) {
      if (a == "--help" || a == "-h") {
        out << kDumpUsage;
        return 0;
      } else if (a == "--summary") {
        opts.records = false;
      } else if (!a.empty() && a[0] == '-') {
        err << "ncclwatch dump: unknown option '" << a << "'\n" << kDumpUsage;
        return 2;
      } else {
        files.push_back(a);
      }
    }
    if (files.empty()) {
      err << "ncclwatch dump: no trace file given\n" << kDumpUsage;
      return 2;
    }
    return Dump(files, opts, out, err);
  }
  if (cmd == "merge") return RunMerge(args, out, err);
  if (cmd == "diagnose") return RunDiagnose(args, out, err);
  if (cmd == "export") return RunExport(args, out, err);
  if (cmd == "stats") return RunStats(args, out, err);
  if (cmd == "check") return RunCheck(args, out, err);
  err << "ncclwatch: unknown command '" << cmd << "'\n" << kUsage;
  return 2;
}

}  // namespace ncclwatch::tools
