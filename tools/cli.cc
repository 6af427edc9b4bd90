#include "tools/cli.h"

#include <absl/flags/flag.h>
#include <absl/flags/reflection.h>
#include <absl/strings/str_cat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "plugin/core/version.h"
#include "proto/trace.pb.h"
#include "tools/cli_docs.h"
#include "tools/cli_usage.h"
#include "tools/commands.h"
#include "tools/diagnose/diagnose.h"
#include "tools/dump.h"
#include "tools/export/timeline.h"
#include "tools/progress.h"
#include "tools/ras/client.h"
#include "tools/stats/check.h"
#include "tools/model/collectives.h"
#include "tools/model/liveness.h"
#include "tools/summary/summary.h"
#include "tools/text/safe_text.h"

// Every flag of every subcommand, in one place; each subcommand accepts only
// its own (kCommands). Parsed by ParseArgs below, not absl::ParseCommandLine,
// which exits the process on a bad flag: RunCli returns 2 instead, and runs
// in-process in the tests.
ABSL_FLAG(std::string, format, "text",
          "output format (text, json; merge also pb; export json or perfetto; stats also openmetrics, prometheus)");
ABSL_FLAG(bool, json, false, "diagnose: the same as --format=json");
ABSL_FLAG(std::string, out, "", "write the output to this file (-o)");
ABSL_FLAG(double, min_wait, ncclwatch::tools::LivenessOptions().min_wait_sec, "diagnose: seconds in flight that make a hang");
ABSL_FLAG(bool, summary, false, "dump: the summary lines only");
ABSL_FLAG(std::vector<std::string>, baseline, {}, "check: the baseline stats JSON, one per run (repeatable)");
ABSL_FLAG(std::string, junit, "", "check: also write a JUnit XML report");
ABSL_FLAG(std::string, tolerance, "", "check: METRIC=PCT,... (repeatable)");
ABSL_FLAG(bool, strict, false, "check: baseline rows missing from the run fail too");
ABSL_FLAG(std::vector<std::string>, allow_incomplete, {},
          "check: incomplete evidence that does not fail the gate (cuda-graphs)");
ABSL_FLAG(std::string, job, "", "read only the files of this job id");
ABSL_FLAG(std::vector<std::string>, fr, {},
          "diagnose: PyTorch Flight Recorder dumps (files or folders, comma-separated) besides those among the inputs");
ABSL_FLAG(double, interval, ncclwatch::tools::WatchSettings().interval_sec, "watch: seconds between polls");
ABSL_FLAG(int32_t, settle, ncclwatch::tools::WatchOptions().settle, "watch: polls a problem must hold before it is printed");
ABSL_FLAG(double, timeout, 0.0, "watch: seconds until the verdict on what was read (0: none)");
ABSL_FLAG(uint64_t, window_ops, ncclwatch::tools::WatchOptions().window_ops, "watch: operations kept per file, at most");
ABSL_FLAG(uint64_t, window, ncclwatch::tools::SummarizeOptions().window, "summarize: operations kept per rank and communicator beyond those unfinished");
ABSL_FLAG(uint64_t, max_kb_per_rank, ncclwatch::tools::SummarizeOptions().max_bytes_per_rank >> 10, "summarize: the most KB of one rank's summary (0: no cap)");
ABSL_FLAG(std::string, collectives, "",
          "summarize: COMM:FROM-TO,... collectives to keep besides the window (diagnose --refine-args prints it)");
ABSL_FLAG(bool, refine_args, false, "diagnose: print the --collectives argument of summarize's second round");
ABSL_FLAG(double, from, 0.0, "export: the window's start, seconds on the job's timeline");
ABSL_FLAG(double, to, 0.0, "export: the window's end, seconds on the job's timeline");
ABSL_FLAG(bool, around_finding, false, "export: the window around the first finding's operation");
ABSL_FLAG(std::string, ranks, "", "export: only these ranks (0,2-5)");
ABSL_FLAG(std::string, ras, "",
          "watch: also ask NCCL's RAS at HOST:PORT (bare --ras: 127.0.0.1:28028); diagnose: a RAS answer saved by "
          "'ncclwatch ras'; its view goes under the verdict");

namespace ncclwatch::tools {
namespace {

constexpr int kTraceSchemaVersion = trace::SCHEMA_VERSION_CURRENT;

void PrintVersion(std::ostream& out) {
  out << "ncclwatch " << plugin::kPluginVersion << " (trace schema " << kTraceSchemaVersion << ")\n";
}

struct Command {
  const char* name;
  const char* summary;  // its line in the usage, the man page and zsh's completion
  std::string usage;
  std::vector<std::string> flags;  // absl flag names it accepts ("min_wait" is --min-wait too)
  std::vector<std::string> repeatable;  // values of these accumulate, comma-separated
  // Flags that may be given bare (--ras), and the value that means; given
  // bare they never take the next argument as their value.
  std::map<std::string, std::string> bare = {};
  bool takes_traces = true;  // false: its inputs are not trace files (ras)
};

const Command kCommands[] = {
    {"diagnose",
     "what went wrong and who caused it (the verdict is the first line)",
     DiagnoseUsage(),
     {"format", "json", "min_wait", "job", "out", "fr", "refine_args", "ras"},
     {}},
    {"merge", "the cross-rank order of operations of a job", MergeUsage(), {"format", "out", "job"}, {}},
    {"export",
     "a timeline: Perfetto's protobuf (ui.perfetto.dev) or Chrome JSON (chrome://tracing)",
     ExportUsage(),
     {"format", "out", "job", "from", "to", "around_finding", "ranks"},
     {"ranks"}},
    {"stats",
     "per-collective latency, bandwidth, enqueue delay and arrival skew",
     StatsUsage(),
     {"format", "job", "out"},
     {}},
    {"check",
     "the CI gate: stats against a baseline, and no diagnose error",
     CheckUsage(),
     {"baseline", "junit", "tolerance", "strict", "allow_incomplete", "format", "job", "out"},
     {"tolerance", "baseline", "allow_incomplete"}},
    {"dump", "print every record of trace files, then a summary per file", DumpUsage(), {"summary", "out"}, {}},
    {"watch",
     "follow a running job's files; diagnose's verdict as soon as it holds",
     WatchUsage(),
     {"format", "json", "min_wait", "job", "out", "fr", "interval", "settle", "timeout", "window_ops", "ras"},
     {},
     {{"ras", kDefaultRasAddress}}},
    {"summarize",
     "one node's trace files as one small summary, for diagnose and merge",
     SummarizeUsage(),
     {"out", "window", "max_kb_per_rank", "job", "collectives"},
     {"collectives"}},
    {"ras",
     "NCCL's RAS view of a running job, its answer as it came (for diagnose --ras)",
     RasUsage(),
     {"format", "out"},
     {},
     {},
     false},
};

// Flags whose value is a file or folder (the completions offer paths).
const std::set<std::string> kPathFlags = {"out", "baseline", "junit", "fr"};

bool Has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

std::string Usage() {
  std::string u = UsageHead();
  for (const Command& c : kCommands) {
    std::string name = c.name;
    u += "  " + name + std::string(name.size() < 9 ? 9 - name.size() : 2, ' ') + c.summary + "\n";
  }
  return u + UsageTail();
}

// The table as the man page and completions read it (cli_docs.h).
std::vector<CommandDoc> Docs() {
  std::vector<CommandDoc> docs;
  for (const Command& c : kCommands) {
    CommandDoc d{c.name, c.summary, {}};
    for (const std::string& f : c.flags) {
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(f);
      FlagDoc fd;
      fd.name = f;
      std::replace(fd.name.begin(), fd.name.end(), '_', '-');
      fd.help = flag != nullptr ? std::string(flag->Help()) : "";
      // "diagnose: ..." names the command its help is for: here it is under it.
      const size_t colon = fd.help.find(": ");
      if (colon != std::string::npos && fd.help.find(' ') > colon) fd.help.erase(0, colon + 2);
      fd.takes_value = flag == nullptr || !flag->IsOfType<bool>();
      fd.repeatable = Has(c.repeatable, f);
      fd.path = kPathFlags.count(f) > 0;
      d.flags.push_back(fd);
    }
    docs.push_back(d);
  }
  return docs;
}

// The flags and inputs of one subcommand's arguments. Returns -1 to go on,
// else the exit status (0 after --help, 2 after a usage error).
int ParseArgs(const Command& cmd, const std::vector<std::string>& args, std::vector<std::string>* inputs,
              std::set<std::string>* given, std::ostream& out, std::ostream& err) {
  const std::string who = std::string("ncclwatch ") + cmd.name + ": ";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      out << cmd.usage;
      return 0;
    }
    if (a == "--version") {
      PrintVersion(out);
      return 0;
    }
    if (a == "--") {
      inputs->insert(inputs->end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (a.size() < 2 || a[0] != '-') {
      inputs->push_back(a);
      continue;
    }
    std::string name, value;
    bool has_value = false;
    if (a == "-o") {
      name = "out";
    } else if (a.compare(0, 2, "--") == 0) {
      name = a.substr(2);
      const size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
        has_value = true;
      }
      std::replace(name.begin(), name.end(), '-', '_');
    }
    absl::CommandLineFlag* flag = Has(cmd.flags, name) ? absl::FindCommandLineFlag(name) : nullptr;
    // --noFLAG for a boolean flag.
    if (flag == nullptr && !has_value && name.compare(0, 2, "no") == 0 && Has(cmd.flags, name.substr(2))) {
      flag = absl::FindCommandLineFlag(name.substr(2));
      if (flag != nullptr && flag->IsOfType<bool>()) {
        value = "false";
        has_value = true;
      } else {
        flag = nullptr;
      }
    }
    if (flag == nullptr) {
      err << who << "unknown option '" << a << "'\n" << cmd.usage;
      return 2;
    }
    const auto bare = cmd.bare.find(std::string(flag->Name()));
    if (!has_value && bare != cmd.bare.end()) {
      value = bare->second;
    } else if (!has_value) {
      if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        err << who << a << " needs a value\n" << cmd.usage;
        return 2;
      }
    }
    given->insert(std::string(flag->Name()));
    if (Has(cmd.repeatable, name)) {
      const std::string before = flag->CurrentValue();
      if (!before.empty()) value = before + "," + value;
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      std::string dashed(flag->Name());
      std::replace(dashed.begin(), dashed.end(), '_', '-');
      err << who << "bad --" << dashed << " '" << value << "': " << error << "\n" << cmd.usage;
      return 2;
    }
  }
  return -1;
}

int Run(const Command& cmd, const std::vector<std::string>& paths, const std::set<std::string>& given,
        std::ostream& out, std::ostream& err);

// Every command's report goes to --out (-o) when given: merge and export
// write there themselves (binary and streamed output); the others through
// this file.
//
// Messages, and the reports of the commands whose every format is text,
// pass through SafeTextStream: a name the formatter did not escape reaches
// no terminal raw (docs/security.md).
int RunTo(const Command& cmd, const std::vector<std::string>& paths, const std::set<std::string>& given,
          std::ostream& out, std::ostream& raw_err) {
  const std::string name = cmd.name;
  const std::string path = absl::GetFlag(FLAGS_out);
  SafeTextStream err(raw_err);
  if (name == "merge" || name == "export" || name == "summarize") return Run(cmd, paths, given, out, err);
  if (path.empty()) {
    SafeTextStream text(out);
    return Run(cmd, paths, given, text, err);
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) {
    err << "ncclwatch " << name << ": " << CannotWrite(path) << "\n";
    return 2;
  }
  int status;
  {
    SafeTextStream text(file);
    status = Run(cmd, paths, given, text, err);
  }
  file.close();
  if (!file) {
    err << "ncclwatch " << name << ": " << CannotWrite(path) << "\n";
    return 2;
  }
  return status;
}

int Run(const Command& cmd, const std::vector<std::string>& paths, const std::set<std::string>& given,
        std::ostream& out, std::ostream& err) {
  const std::string name = cmd.name;
  const std::string who = "ncclwatch " + name + ": ";
  std::string format = absl::GetFlag(FLAGS_format);
  if (name == "ras") {
    if (paths.size() > 1) {
      err << who << "one RAS address at most, not " << paths.size() << "\n" << cmd.usage;
      return 2;
    }
    if (given.count("format") && format != "json" && format != "text") {
      err << who << "--format must be json or text, not '" << format << "'\n" << cmd.usage;
      return 2;
    }
    return RasCommand(paths.empty() ? kDefaultRasAddress : paths[0], !given.count("format") || format == "json", out,
                      err);
  }
  if (name == "dump") {
    DumpOptions opts;
    opts.records = !absl::GetFlag(FLAGS_summary);
    return Dump(paths, opts, out, err);
  }
  Inputs inputs;
  inputs.paths = paths;
  inputs.load.job = absl::GetFlag(FLAGS_job);
  // watch draws its own progress, one line per change, on any stream.
  if (name != "watch") inputs.progress = ProgressStream(err);
  if (name == "summarize") {
    const uint64_t window = absl::GetFlag(FLAGS_window);
    if (window == 0 || window > (1u << 20)) {
      err << who << "bad --window " << window << ": 1 to 1,048,576 operations\n" << cmd.usage;
      return 2;
    }
    const uint64_t max_kb = absl::GetFlag(FLAGS_max_kb_per_rank);
    if (max_kb > (1u << 22)) {
      err << who << "bad --max-kb-per-rank " << max_kb << ": 0 (no cap) to 4,194,304 KB\n" << cmd.usage;
      return 2;
    }
    std::vector<CollectiveRange> collectives;
    std::string bad;
    if (given.count("collectives") && !ParseCollectiveRanges(absl::GetFlag(FLAGS_collectives), &collectives, &bad)) {
      err << who << "bad --collectives: " << bad << "\n" << cmd.usage;
      return 2;
    }
    // A group's own window unless --window says one for both.
    const uint64_t group_window = given.count("window") ? window : kGroupWindow;
    return SummarizeCommand(inputs, window, group_window, max_kb, collectives, absl::GetFlag(FLAGS_out), out, err);
  }
  if (name == "diagnose" || name == "watch") {
    inputs.fr_paths = absl::GetFlag(FLAGS_fr);
    if (absl::GetFlag(FLAGS_json)) format = "json";
    if (format != "text" && format != "json") {
      err << who << "unknown format '" << format << "' (text or json)\n";
      return 2;
    }
    DiagnoseOptions opts;
    opts.min_wait_sec = absl::GetFlag(FLAGS_min_wait);
    if (!(opts.min_wait_sec >= 0)) {
      err << who << "bad --min-wait '" << opts.min_wait_sec << "'\n" << cmd.usage;
      return 2;
    }
    if (name == "diagnose" && absl::GetFlag(FLAGS_refine_args)) return RefineArgsCommand(inputs, out, err);
    if (name == "diagnose") inputs.ras_path = absl::GetFlag(FLAGS_ras);
    if (name == "diagnose" && given.count("ras") && inputs.ras_path.empty()) {
      err << who << "--ras needs the file of a saved RAS answer (ncclwatch ras > FILE)\n" << cmd.usage;
      return 2;
    }
    if (name == "diagnose") return DiagnoseCommand(inputs, format, opts, out, err);
    WatchSettings w;
    w.interval_sec = absl::GetFlag(FLAGS_interval);
    w.timeout_sec = absl::GetFlag(FLAGS_timeout);
    w.follow.settle = absl::GetFlag(FLAGS_settle);
    w.follow.window_ops = absl::GetFlag(FLAGS_window_ops);
    w.ras_address = absl::GetFlag(FLAGS_ras);
    if (given.count("ras") && w.ras_address.empty()) w.ras_address = kDefaultRasAddress;
    // --min-wait given: the same limit while the job runs as after.
    if (given.count("min_wait")) w.follow.live_wait_sec = opts.min_wait_sec;
    std::string bad;
    if (!(w.interval_sec > 0 && w.interval_sec <= 86400)) bad = "--interval must be above 0 s and at most a day";
    else if (!(w.timeout_sec >= 0)) bad = "--timeout must be 0 (none) or more";
    else if (w.follow.settle < 1) bad = "--settle must be 1 or more";
    else if (w.follow.window_ops < 1) bad = "--window-ops must be 1 or more";
    std::string host;
    int port = 0;
    if (bad.empty() && given.count("ras") && !ParseRasAddress(w.ras_address, &host, &port, &bad)) bad = "--ras: " + bad;
    if (!bad.empty()) {
      err << who << bad << "\n" << cmd.usage;
      return 2;
    }
    return WatchCommand(inputs, format, opts, w, out, err);
  }
  if (name == "merge") {
    if (format != "text" && format != "json" && format != "pb") {
      err << who << "--format must be text, json or pb, not '" << format << "'\n";
      return 2;
    }
    return MergeCommand(inputs, format, absl::GetFlag(FLAGS_out), out, err);
  }
  if (name == "export") {
    ExportSettings s;
    s.format = given.count("format") ? format : "json";
    s.out_path = absl::GetFlag(FLAGS_out);
    if (s.format != "json" && s.format != "perfetto") {
      err << who << "--format must be json or perfetto, not '" << s.format << "'\n";
      return 2;
    }
    const double from = absl::GetFlag(FLAGS_from), to = absl::GetFlag(FLAGS_to);
    const bool around = absl::GetFlag(FLAGS_around_finding);
    std::string bad;
    // Seconds within a century either way: ns fit in 64 bits.
    auto sane = [](double sec) { return sec >= -3.2e9 && sec <= 3.2e9; };
    if (given.count("from") && !sane(from)) bad = "bad --from";
    else if (given.count("to") && !sane(to)) bad = "bad --to";
    else if (given.count("from") && given.count("to") && from > to) bad = "--from must not be after --to";
    else if (around && (given.count("from") || given.count("to"))) bad = "--around-finding sets the window: not with --from or --to";
    if (!bad.empty()) {
      err << who << bad << "\n" << cmd.usage;
      return 2;
    }
    if (given.count("from")) s.cut.from_ns = static_cast<int64_t>(from * 1e9);
    if (given.count("to")) s.cut.to_ns = static_cast<int64_t>(to * 1e9);
    if (around) s.around_finding_margin_sec = 1.0;
    const std::string ranks = absl::GetFlag(FLAGS_ranks);
    if (given.count("ranks") && !ParseRankList(ranks, &s.cut.ranks, &bad)) {
      err << who << "bad --ranks: " << bad << "\n" << cmd.usage;
      return 2;
    }
    return ExportCommand(inputs, s, out, err);
  }
  if (name == "stats") {
    if (format != "text" && format != "json" && format != "openmetrics" && format != "prometheus") {
      err << who << "--format must be text, json, openmetrics or prometheus, not '" << format << "'\n";
      return 2;
    }
    return StatsCommand(inputs, format, out, err);
  }
  // check
  CheckOptions opts = DefaultCheckOptions();
  opts.strict = absl::GetFlag(FLAGS_strict);
  const std::string tolerance = absl::GetFlag(FLAGS_tolerance);
  std::string error;
  if (!tolerance.empty() && !ParseTolerance(tolerance, &opts, &error)) {
    err << who << error << "\n";
    return 2;
  }
  if (!ParseAllowIncomplete(absl::GetFlag(FLAGS_allow_incomplete), &opts, &error)) {
    err << who << error << "\n";
    return 2;
  }
  const std::vector<std::string> baselines = absl::GetFlag(FLAGS_baseline);
  if (baselines.empty()) {
    err << who << "--baseline FILE is required (make one with 'ncclwatch stats --format=json')\n" << cmd.usage;
    return 2;
  }
  if (format != "text" && format != "json") {
    err << who << "--format must be text or json, not '" << format << "'\n";
    return 2;
  }
  return CheckCommand(inputs, baselines, format, absl::GetFlag(FLAGS_junit), opts, out, err);
}

}  // namespace

int RunCli(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  // Flags are process-wide: each run starts from their defaults (tests run
  // many commands in one process). Not absl::FlagSaver, which logs each
  // value it restores on stderr.
  for (const Command& cmd : kCommands)
    for (const std::string& f : cmd.flags) {
      absl::CommandLineFlag* flag = absl::FindCommandLineFlag(f);
      std::string ignored;
      if (flag != nullptr) flag->ParseFrom(flag->DefaultValue(), &ignored);
    }
  if (argv.size() < 2) {
    err << Usage();
    return 2;
  }
  const std::string& name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    out << Usage();
    return 0;
  }
  // For packaging, not in the usage: the man page and completions from the
  // table above.
  if (name == "--print-man") {
    out << ManPage(Docs(), plugin::kPluginVersion);
    return 0;
  }
  if (name == "--print-completion=bash" || name == "--print-completion=zsh") {
    out << (name == "--print-completion=bash" ? BashCompletion(Docs()) : ZshCompletion(Docs()));
    return 0;
  }
  if (name == "--version" || name == "version") {
    PrintVersion(out);
    return 0;
  }
  for (const Command& cmd : kCommands) {
    if (name != cmd.name) continue;
    std::vector<std::string> inputs;
    std::set<std::string> given;
    const int status =
        ParseArgs(cmd, std::vector<std::string>(argv.begin() + 2, argv.end()), &inputs, &given, out, err);
    if (status >= 0) return status;
    if (inputs.empty() && cmd.takes_traces) {
      err << "ncclwatch " << name << ": no trace file or directory given\n" << cmd.usage;
      return 2;
    }
    return RunTo(cmd, inputs, given, out, err);
  }
  err << "ncclwatch: unknown command '" << name << "'\n" << Usage();
  return 2;
}

int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err) {
  return RunCli(std::vector<std::string>(argv, argv + argc), out, err);
}

}  // namespace ncclwatch::tools
