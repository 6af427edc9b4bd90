#include "tools/commands.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tools/export/export.h"
#include "tools/fr/flight_recorder.h"
#include "tools/model/inputs.h"
#include "tools/json.h"
#include "tools/model/model.h"
#include "tools/order/order.h"
#include "tools/reader/reader.h"
#include "tools/stats/stats.h"

namespace ncclwatch::tools {
namespace {

// The model of `inputs`, or false after saying why ("ncclwatch CMD: ...");
// with `say_skipped`, files that could not be used are named on `err`.
bool Load(const char* cmd, const Inputs& inputs, bool say_skipped, Model* m, std::ostream& err,
          std::string* error) {
  if (!BuildModel(inputs.paths, inputs.load, m, error)) {
    err << "ncclwatch " << cmd << ": " << *error << "\n";
    return false;
  }
  if (say_skipped)
    for (const std::string& e : m->errors) err << "ncclwatch " << cmd << ": skipped " << e << "\n";
  return true;
}

// A baseline's bytes: a regular file (a FIFO would block, /dev/zero never
// end), of at most kMaxBaselineBytes (a stats baseline is kilobytes).
constexpr uint64_t kMaxBaselineBytes = 64ull << 20;

bool ReadBaseline(const std::string& path, std::string* bytes, std::string* error) {
  RegularFile f;
  // One byte past the limit tells a file that grew past it while read.
  const bool ok = ReadFileHead(path, kMaxBaselineBytes + 1, bytes, &f);
  if (!ok && f.not_regular) {
    *error = "baseline " + path + ": " + f.why;
  } else if (!ok) {
    *error = "cannot read baseline " + path + ": " + f.why;
  } else if (f.size > kMaxBaselineBytes || bytes->size() > kMaxBaselineBytes) {
    *error = "baseline " + path + ": " + std::to_string(std::max<uint64_t>(f.size, bytes->size())) +
             " bytes, more than a stats baseline holds (" + std::to_string(kMaxBaselineBytes >> 20) + " MiB at most)";
  } else {
    return true;
  }
  return false;
}

}  // namespace

int DiagnoseCommand(const Inputs& inputs, const std::string& format, const DiagnoseOptions& opts,
                    std::ostream& out, std::ostream& err) {
  Model model;
  std::string error;
  if (!Load("diagnose", inputs, false, &model, err, &error)) {
    if (format == "json") {
      report::Diagnosis d;
      d.set_verdict("UNUSABLE INPUT: " + error);
      d.set_exit_status(2);
      for (const std::string& e : model.errors) {
        report::InputIssue* i = d.add_input_issues();
        i->set_kind(report::InputIssue::UNUSABLE_FILE);
        i->set_text(e);
      }
      out << FormatJson(d);
    }
    return 2;
  }
  // Flight Recorder dumps among the inputs or named with --fr: they name
  // the communicators' process groups (before the diagnosis, so that its
  // labels carry them) and give each rank's Python call (after it).
  std::vector<std::string> candidates = ListFiles(inputs.paths, &MayBeFrDumpName).files;
  std::vector<std::string> named;
  for (const std::string& p : inputs.fr_paths) {
    TraceInputs listed = ListFiles({p}, &MayBeFrDumpName);
    if (listed.files.size() == 1 && listed.files[0] == p) named.push_back(p);
    else candidates.insert(candidates.end(), listed.files.begin(), listed.files.end());
    for (const std::string& e : listed.errors) err << "ncclwatch diagnose: --fr " << e << "\n";
  }
  FrJoin fr = JoinFlightRecorder(candidates, named, &model);
  report::Diagnosis d = Diagnose(model, opts);
  AddFlightRecorderEvidence(model, fr, &d);
  out << (format == "json" ? FormatJson(d) : FormatText(d));
  return ExitStatus(d);
}

int MergeCommand(const Inputs& inputs, const std::string& format, const std::string& out_path,
                 std::ostream& out, std::ostream& err) {
  Model m;
  std::string error;
  if (!Load("merge", inputs, false, &m, err, &error)) return 2;
  report::MergeReport r = MergeReportOf(m, ComputeOrder(m));
  std::ofstream file;
  std::ostream* o = &out;
  if (!out_path.empty()) {
    file.open(out_path, std::ios::binary | std::ios::trunc);
    if (!file) {
      err << "ncclwatch merge: cannot write " << out_path << "\n";
      return 2;
    }
    o = &file;
  }
  if (format == "text") {
    PrintMergeText(r, *o);
  } else if (format == "json") {
    *o << ReportJson(r);
  } else {
    r.SerializeToOstream(o);
  }
  return 0;
}

int ExportCommand(const Inputs& inputs, const std::string& out_path, std::ostream& out,
                  std::ostream& err) {
  Model m;
  std::string error;
  if (!Load("export", inputs, true, &m, err, &error)) return 2;
  if (out_path.empty()) {
    WriteChromeTrace(m, out);
    out << "\n";
    return 0;
  }
  std::ofstream f(out_path, std::ios::binary | std::ios::trunc);
  WriteChromeTrace(m, f);
  f << "\n";
  f.close();
  if (!f) {
    err << "ncclwatch export: cannot write " << out_path << "\n";
    return 2;
  }
  err << "ncclwatch export: wrote " << out_path << " (" << m.procs.size() << " processes, " << m.ops.size()
      << " operations); open it in ui.perfetto.dev or chrome://tracing\n";
  return 0;
}

int StatsCommand(const Inputs& inputs, const std::string& format, std::ostream& out,
                 std::ostream& err) {
  Model m;
  std::string error;
  if (!Load("stats", inputs, true, &m, err, &error)) return 2;
  stats::Stats s = ComputeStats(m);
  if (format == "json") out << StatsToJson(s);
  else PrintStatsTable(s, out);
  return 0;
}

int CheckCommand(const Inputs& inputs, const std::string& baseline_path,
                 const std::string& junit_path, const CheckOptions& opts, std::ostream& out, std::ostream& err) {
  std::string bytes, error;
  if (!ReadBaseline(baseline_path, &bytes, &error)) {
    err << "ncclwatch check: " << error << "\n";
    return 2;
  }
  stats::Stats baseline;
  if (!StatsFromJson(bytes, &baseline, &error)) {
    err << "ncclwatch check: baseline " << baseline_path << ": " << error << "\n";
    return 2;
  }
  Model m;
  if (!Load("check", inputs, true, &m, err, &error)) return 2;
  CheckResult r = CompareStats(baseline, ComputeStats(m), opts);
  AddFindings(Diagnose(m), &r);
  PrintCheck(r, opts, out);
  if (!junit_path.empty()) {
    std::ofstream jf(junit_path, std::ios::binary | std::ios::trunc);
    jf << JUnitXml(r, opts);
    jf.close();
    if (!jf) {
      err << "ncclwatch check: cannot write " << junit_path << "\n";
      return 2;
    }
  }
  return r.failed() ? 1 : 0;
}

}  // namespace ncclwatch::tools
