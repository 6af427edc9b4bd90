#include "tools/commands.h"

#include <errno.h>
#include <string.h>

#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <stdio.h>
#include <sys/select.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "tools/export/export.h"
#include "tools/export/perfetto.h"
#include "tools/progress.h"
#include "tools/fr/flight_recorder.h"
#include "tools/model/inputs.h"
#include "tools/json.h"
#include "tools/model/model.h"
#include "tools/order/order.h"
#include "tools/ras/client.h"
#include "tools/ras/evidence.h"
#include "tools/ras/parse.h"
#include "tools/reader/reader.h"
#include "tools/stats/baseline_check.h"
#include "tools/stats/openmetrics.h"
#include "tools/stats/stats.h"
#include "tools/model/job.h"
#include "tools/model/summary_merge.h"
#include "tools/summary/summary.h"
#include "tools/text/safe_text.h"
#include "tools/watch/watch.h"

namespace ncclwatch::tools {

std::string CannotWrite(const std::string& path) {
  const int e = errno;
  return "cannot write " + path + (e != 0 ? std::string(": ") + strerror(e) : std::string());
}

namespace {

// The model of `inputs`, or false after saying why ("ncclwatch CMD: ...");
// with `say_skipped`, files that could not be used are named on `err`.
// On a terminal, the files and bytes being read, and the time so far
// (tools/progress.h): a job of many GB takes minutes.
// Summaries (tools/summary/) keep each rank's last operations only: a
// command that draws every operation (`whole`) refuses them rather than
// draw a window as the job; one that needs every operation's timing
// (`digests`: stats, check) reads their stats rows, and refuses a summary
// without them.
bool Load(const char* cmd, const Inputs& inputs, bool say_skipped, Model* m, std::ostream& err,
          std::string* error, bool whole = false, bool digests = false) {
  if (whole) {
    for (const std::string& f : ListTraceInputs(inputs.paths).files)
      if (IsSummaryFile(f)) {
        *error = f + " is a per-node summary, which keeps only each rank's last operations: " + cmd +
                 " needs the trace files (*.ncclwatch) themselves; diagnose, merge, stats and check read summaries";
        err << "ncclwatch " << cmd << ": " << *error << "\n";
        return false;
      }
  }
  Progress progress(inputs.progress);
  if (inputs.progress != nullptr) {
    const TraceInputs listed = ListTraceInputs(inputs.paths);
    progress.Wait(std::string("ncclwatch ") + cmd + ": reading " + WithThousands(listed.files.size()) +
                  (listed.files.size() == 1 ? " file (" : " files (") + FormatBytes(listed.data_bytes) + ")");
  }
  LoadOptions load = inputs.load;
  load.stats_rows = digests;
  const bool ok = BuildJobModel(inputs.paths, load, m, error);
  progress.Done();
  if (!ok) {
    err << "ncclwatch " << cmd << ": " << *error << "\n";
    return false;
  }
  if (say_skipped)
    for (const std::string& e : m->errors) err << "ncclwatch " << cmd << ": skipped " << e << "\n";
  if (digests && !m->undigested.empty()) {
    *error = m->undigested[0] + (m->undigested.size() > 1 ? " (and " + std::to_string(m->undigested.size() - 1) +
                                                                 " more)" : "") +
             ": " + cmd + " needs every operation's timing; summarize the trace files again with this ncclwatch";
    err << "ncclwatch " << cmd << ": " << *error << "\n";
    return false;
  }
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

namespace {

// Input that yields no model: said on `err` ("ncclwatch CMD: ..." by the
// caller); in JSON also on `out`, as a Diagnosis, so that a script reading
// it gets one.
void PrintUnusable(const std::string& format, const std::string& error, const std::vector<std::string>& errors,
                   std::ostream& out) {
  if (format != "json") return;
  report::Diagnosis d;
  d.set_verdict("UNUSABLE INPUT: " + error);
  d.set_exit_status(2);
  for (const std::string& e : errors) {
    report::InputIssue* i = d.add_input_issues();
    i->set_kind(report::InputIssue::UNUSABLE_FILE);
    i->set_text(e);
  }
  out << FormatJson(d);
}

// Diagnose, with the Flight Recorder dumps among the inputs or named with
// --fr: they name the communicators' process groups (before the diagnosis,
// so that its labels carry them) and give each rank's Python call (after it).
report::Diagnosis DiagnoseJoined(const char* cmd, const Inputs& inputs, Model* model, const DiagnoseOptions& opts,
                                 std::ostream& err) {
  std::vector<std::string> candidates = ListFiles(inputs.paths, &MayBeFrDumpName).files;
  std::vector<std::string> named;
  for (const std::string& p : inputs.fr_paths) {
    TraceInputs listed = ListFiles({p}, &MayBeFrDumpName);
    if (listed.files.size() == 1 && listed.files[0] == p) named.push_back(p);
    else candidates.insert(candidates.end(), listed.files.begin(), listed.files.end());
    for (const std::string& e : listed.errors) err << "ncclwatch " << cmd << ": --fr " << e << "\n";
  }
  FrJoin fr = JoinFlightRecorder(candidates, named, model);
  report::Diagnosis d = Diagnose(*model, opts);
  AddFlightRecorderEvidence(*model, fr, &d);
  return d;
}

// The communicators the traces hold: RAS's that are not there never
// finished their init.
std::set<uint64_t> CommHashes(const Model& m) {
  std::set<uint64_t> h;
  for (const Comm& c : m.comms)
    if (c.hash != 0) h.insert(c.hash);
  return h;
}

// A saved RAS answer (`ncclwatch ras > FILE`): a regular file of at most
// kMaxRasAnswerBytes. What is wrong with it is said under the verdict, as
// a Flight Recorder dump that cannot be read is: context, not the verdict.
report::RasReport ReadRasFile(const std::string& path) {
  std::string bytes;
  RegularFile f;
  if (!ReadFileHead(path, kMaxRasAnswerBytes + 1, &bytes, &f))
    return RasReportError(path, (f.not_regular ? "RAS answer " : "cannot read RAS answer ") + path + ": " + f.why);
  if (bytes.size() > kMaxRasAnswerBytes)
    return RasReportError(path, "RAS answer " + path + ": more than 64 MiB, more than RAS writes");
  return RasReportOf(path, bytes);
}

}  // namespace

int DiagnoseCommand(const Inputs& inputs, const std::string& format, const DiagnoseOptions& opts,
                    std::ostream& out, std::ostream& err) {
  Model model;
  std::string error;
  if (!Load("diagnose", inputs, false, &model, err, &error)) {
    PrintUnusable(format, error, model.errors, out);
    return 2;
  }
  report::Diagnosis d = DiagnoseJoined("diagnose", inputs, &model, opts, err);
  if (!inputs.ras_path.empty()) AddRasEvidence(ReadRasFile(inputs.ras_path), CommHashes(model), &d);
  out << (format == "json" ? FormatJson(d) : FormatText(d));
  return ExitStatus(d);
}

int RefineArgsCommand(const Inputs& inputs, std::ostream& out, std::ostream& err) {
  Model model;
  std::string error;
  if (!Load("diagnose", inputs, false, &model, err, &error)) return 2;
  const std::string ranges = FormatCollectiveRanges(RefineRanges(model));
  if (!ranges.empty()) out << "--collectives=" << ranges << "\n";
  return 0;
}

namespace {

// The signal that asked `watch` to stop (0: none). Set by the handler,
// read by the loop: a lock-free atomic is safe in a handler.
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "read and written by a signal handler");

void OnStopSignal(int sig) { g_stop_signal.store(sig); }

// SIGINT and SIGTERM stop `watch` with the verdict on what was read,
// instead of killing it: while it works they are blocked, and only its
// sleep lets them in (pselect), so that one arriving during a poll ends
// the sleep that follows at once. The previous handlers and mask come
// back when it ends.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal.store(0);
    sigemptyset(&stop_);
    sigaddset(&stop_, SIGINT);
    sigaddset(&stop_, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop_, &old_mask_);
    struct sigaction sa = {};
    sa.sa_handler = &OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    // Unblocked first, while the handler is ours: one pending is taken by
    // it, not by a default action that would end the process.
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Sleeps `sec`, or until SIGINT or SIGTERM.
  void Sleep(double sec) const {
    if (sec <= 0 || g_stop_signal.load() != 0) return;
    sigset_t during = old_mask_;
    sigdelset(&during, SIGINT);
    sigdelset(&during, SIGTERM);
    struct timespec ts;
    ts.tv_sec = static_cast<time_t>(sec);
    ts.tv_nsec = static_cast<long>((sec - static_cast<double>(ts.tv_sec)) * 1e9);
    pselect(0, nullptr, nullptr, nullptr, &ts, &during);
  }

 private:
  sigset_t stop_, old_mask_;
  struct sigaction old_int_, old_term_;
};

}  // namespace

int WatchCommand(const Inputs& inputs, const std::string& format, const DiagnoseOptions& opts,
                 const WatchSettings& settings, std::ostream& out, std::ostream& err) {
  WatchOptions o = settings.follow;
  o.load = inputs.load;
  o.diagnose = opts;
  std::set<uint64_t> trace_comms;
  o.verdict = [&](Model* m, const DiagnoseOptions& d) {
    trace_comms = CommHashes(*m);
    return DiagnoseJoined("watch", inputs, m, d, err);
  };
  Watcher watcher(inputs.paths, o);
  StopSignals signals;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto now = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  // NCCL's RAS, once per interval at most: its latest view goes under the
  // verdict; what it newly says of dead, unresponsive or initializing
  // processes is said as it comes (launch counts change every round).
  report::RasReport ras;
  RasLaunchTracker launches;
  double ras_asked = -1;
  std::set<std::string> ras_said;
  auto ask_ras = [&] {
    if (settings.ras_address.empty() || (ras_asked >= 0 && now() - ras_asked < settings.interval_sec)) return;
    ras_asked = now();
    const RasAnswer a = QueryRas(settings.ras_address);
    ras = a.ok ? RasReportOf(a.address, a.body) : RasReportError(settings.ras_address, a.error);
    if (ras.error().empty()) launches.Add(ras.view(), ras_asked);
    std::vector<std::string> say(ras.lines().begin(), ras.lines().end());
    if (!ras.error().empty()) say = {ras.error()};
    for (const std::string& l : say)
      if (l.find(" launches:") == std::string::npos && ras_said.insert(l).second)
        err << "ncclwatch watch: " << (ras.error().empty() ? "RAS: " : "") << l << "\n";
  };
  auto finish = [&](const WatchState& s) {
    for (const std::string& n : s.notes) err << "ncclwatch watch: " << n << "\n";
    if (s.end == WatchState::kUnusable) {
      err << "ncclwatch watch: " << s.waiting << "\n";
      PrintUnusable(format, s.waiting, {}, out);
      return 2;
    }
    report::Diagnosis d = s.diagnosis;
    if (!settings.ras_address.empty()) {
      launches.Note(&ras);
      AddRasEvidence(ras, trace_comms, &d);
    }
    out << (format == "json" ? FormatJson(d) : FormatText(d));
    return ExitStatus(d);
  };
  std::string said_waiting;
  size_t said_files = 0, said_procs = 0;
  bool said_stuck = false;
  for (;;) {
    ask_ras();
    const WatchState s = watcher.Poll(now());
    if (s.end != WatchState::kRunning) return finish(s);
    for (const std::string& n : s.notes) err << "ncclwatch watch: " << n << "\n";
    if (!s.waiting.empty() && s.waiting != said_waiting) {
      err << "ncclwatch watch: waiting: " << s.waiting << "\n";
      said_waiting = s.waiting;
    }
    if (s.files != said_files || s.processes != said_procs) {
      err << "ncclwatch watch: watching " << s.files << (s.files == 1 ? " file" : " files") << " (" << s.processes
          << (s.processes == 1 ? " process" : " processes") << "), " << WithThousands(s.ops_kept) << " operations kept\n";
      said_files = s.files;
      said_procs = s.processes;
    }
    if (!said_stuck && s.live_wait_sec > 0) {
      err << "ncclwatch watch: while the job runs, an operation in flight for " << s.live_wait_sec
          << " s is a hang\n";
      said_stuck = true;
    }
    const bool timed_out = settings.timeout_sec > 0 && now() >= settings.timeout_sec;
    if (g_stop_signal.load() != 0 || timed_out) {
      if (g_stop_signal.load() != 0)
        err << "ncclwatch watch: " << (g_stop_signal.load() == SIGINT ? "SIGINT" : "SIGTERM")
            << ": the verdict on what was read\n";
      else
        err << "ncclwatch watch: --timeout " << settings.timeout_sec << " s: the verdict on what was read\n";
      return finish(watcher.Conclude());
    }
    // A file with more than one poll reads: on at once, to catch up.
    if (s.backlog) continue;
    double sleep = settings.interval_sec;
    if (settings.timeout_sec > 0) sleep = std::min(sleep, settings.timeout_sec - now());
    signals.Sleep(sleep);
  }
}

int RasCommand(const std::string& address, bool json, std::ostream& out, std::ostream& err) {
  RasQueryOptions o;
  o.prefer_json = json;
  const RasAnswer a = QueryRas(address, o);
  if (!a.ok) {
    err << "ncclwatch ras: " << a.error << "\n";
    return 1;
  }
  if (json && !a.json) err << "ncclwatch ras: " << a.format_note << "; its text follows\n";
  out << a.body;
  // Printed as it came; a note when ncclwatch could not read it.
  report::RasView view;
  std::string error;
  if (!ParseRasAnswer(a.body, &view, &error))
    err << "ncclwatch ras: note: diagnose --ras will not read this answer: " << error << "\n";
  return 0;
}

int MergeCommand(const Inputs& inputs, const std::string& format, const std::string& out_path,
                 std::ostream& out, std::ostream& err) {
  Model m;
  std::string error;
  if (!Load("merge", inputs, false, &m, err, &error)) return 2;
  uint64_t let_go = 0;
  for (const Proc& p : m.procs) let_go += p.settled_ops;
  if (let_go > 0)
    err << "ncclwatch merge: summaries among the inputs: the order is of each rank's window, not of the "
        << WithThousands(let_go) << " operations they let go\n";
  report::MergeReport r = MergeReportOf(m, ComputeOrder(m));
  std::ofstream file;
  std::ostream* o = &out;
  if (!out_path.empty()) {
    file.open(out_path, std::ios::binary | std::ios::trunc);
    if (!file) {
      err << "ncclwatch merge: " << CannotWrite(out_path) << "\n";
      return 2;
    }
    o = &file;
  }
  if (format == "text") {
    // Text only: pb is binary (cli.cc filters the other commands' text).
    SafeTextStream text(*o);
    PrintMergeText(r, text);
  } else if (format == "json") {
    *o << ReportJson(r);
  } else {
    MakeValidUtf8(&r);
    r.SerializeToOstream(o);
  }
  return 0;
}

namespace {

// The operations of a finding: its communicator, function and seq on every
// rank (a point-to-point finding: every send and receive of that seq).
std::vector<uint32_t> OpsOfFinding(const Model& m, const report::Finding& f) {
  std::vector<uint32_t> ops;
  if (f.func().empty()) return ops;
  auto comm = m.comm_of_hash.find(f.comm_hash());
  if (comm == m.comm_of_hash.end()) return ops;
  for (uint32_t oi = 0; oi < m.ops.size(); ++oi) {
    const Op& o = m.ops[oi];
    if (o.comm == comm->second && o.seq == f.seq() && (o.kind == OpKind::kP2p) == f.p2p() &&
        (f.p2p() || m.Str(o.func) == f.func()))
      ops.push_back(oi);
  }
  return ops;
}

}  // namespace

int ExportCommand(const Inputs& inputs, const ExportSettings& settings, std::ostream& out, std::ostream& err) {
  Model m;
  std::string error;
  Inputs with_phases = inputs;
  with_phases.load.kernel_phases = true;  // drawn in their channels
  if (!Load("export", with_phases, true, &m, err, &error, true)) return 2;
  ExportOptions cut = settings.cut;
  if (!RanksExist(m, cut.ranks, &error)) {
    err << "ncclwatch export: --ranks: " << error << "\n";
    return 2;
  }
  if (settings.around_finding_margin_sec >= 0) {
    const report::Diagnosis d = Diagnose(m);
    const report::Finding* first = nullptr;
    std::vector<uint32_t> ops;
    for (const report::Finding& f : d.findings()) {
      ops = OpsOfFinding(m, f);
      if (!ops.empty()) {
        first = &f;
        break;
      }
    }
    if (first == nullptr ||
        !WindowAround(m, ops, static_cast<int64_t>(settings.around_finding_margin_sec * 1e9), &cut)) {
      err << "ncclwatch export: --around-finding: no finding names an operation (diagnose: " << d.verdict()
          << ")\n";
      return 2;
    }
    char window[96];
    snprintf(window, sizeof(window), "--from %.6f --to %.6f", static_cast<double>(cut.from_ns) / 1e9,
             static_cast<double>(cut.to_ns) / 1e9);
    err << "ncclwatch export: around " << first->func() << " #" << first->seq() << " on " << first->comm() << ": "
        << window << "\n";
  }
  Progress progress(inputs.progress);
  cut.progress = [&](uint64_t done, uint64_t total) {
    progress.Count("ncclwatch export: writing", done, total, "operations");
  };
  ExportCounts drawn;
  auto write = [&](std::ostream& o) {
    if (settings.format == "perfetto") {
      drawn = WritePerfettoTrace(m, cut, o);
    } else {
      drawn = WriteChromeTrace(m, cut, o);
      o << "\n";
    }
  };
  if (settings.out_path.empty()) {
    write(out);
    return 0;
  }
  std::ofstream f(settings.out_path, std::ios::binary | std::ios::trunc);
  if (!f) {
    err << "ncclwatch export: " << CannotWrite(settings.out_path) << "\n";
    return 2;
  }
  write(f);
  f.close();
  progress.Done();
  if (!f) {
    err << "ncclwatch export: " << CannotWrite(settings.out_path) << "\n";
    return 2;
  }
  err << "ncclwatch export: wrote " << settings.out_path << " (" << drawn.procs << " of " << m.procs.size()
      << " processes, " << drawn.ops << " of " << m.ops.size() << " operations); open it in "
      << (settings.format == "perfetto" ? "ui.perfetto.dev" : "chrome://tracing or ui.perfetto.dev") << "\n";
  return 0;
}

int StatsCommand(const Inputs& inputs, const std::string& format, std::ostream& out,
                 std::ostream& err) {
  stats::Stats s;
  {
    Model m;
    std::string error;
    if (!Load("stats", inputs, true, &m, err, &error, false, true)) return 2;
    s = ComputeStats(m);
  }
  // The model is freed first: protobuf's JSON printer holds about ten times
  // its output, and at 16,384 ranks that came on top of the model's peak
  // (BENCHMARKS.md, "Per-node summaries").
  if (format == "json") out << StatsToJson(s);
  else if (format == "openmetrics" || format == "prometheus")
    WriteOpenMetrics(s, out,
                     {format == "prometheus" ? MetricsText::kPrometheus : MetricsText::kOpenMetrics, inputs.load.job});
  else PrintStatsTable(s, out);
  return 0;
}

// `check` cannot judge (exit 2): said in the JSON and the JUnit file too
// (check.h UnusableCheckReport), as on standard error (by the caller).
int CheckUnusable(const std::string& error, const std::string& format, const std::string& junit_path,
                  std::ostream& out, std::ostream& err) {
  if (format == "json") out << ReportJson(UnusableCheckReport(error));
  if (!junit_path.empty()) {
    std::ofstream jf(junit_path, std::ios::binary | std::ios::trunc);
    jf << UnusableJUnitXml(error);
    jf.close();
    if (!jf) err << "ncclwatch check: " << CannotWrite(junit_path) << "\n";
  }
  return 2;
}

int CheckCommand(const Inputs& inputs, const std::vector<std::string>& baseline_paths, const std::string& format,
                 const std::string& junit_path, const CheckOptions& opts, std::ostream& out, std::ostream& err) {
  std::vector<stats::Stats> baselines;
  std::string error;
  for (const std::string& path : baseline_paths) {
    std::string bytes;
    baselines.emplace_back();
    if (ReadBaseline(path, &bytes, &error)) {
      if (ParseBaseline(bytes, &baselines.back(), &error)) continue;
      error = "baseline " + path + ": " + error;
    }
    err << "ncclwatch check: " << error << "\n";
    return CheckUnusable(error, format, junit_path, out, err);
  }
  Model m;
  if (!Load("check", inputs, true, &m, err, &error, false, true))
    return CheckUnusable(error, format, junit_path, out, err);
  CheckResult r = CompareStats(baselines, ComputeStats(m), opts);
  // The diagnosis diagnose gives on the same inputs (its Flight Recorder
  // join included), so the gate's reason reads as diagnose's verdict.
  AddFindings(DiagnoseJoined("check", inputs, &m, DiagnoseOptions(), err), &r);
  if (format == "json") out << ReportJson(CheckReportOf(r));
  else PrintCheck(r, opts, out);
  if (!junit_path.empty()) {
    std::ofstream jf(junit_path, std::ios::binary | std::ios::trunc);
    jf << JUnitXml(r, opts);
    jf.close();
    if (!jf) {
      err << "ncclwatch check: " << CannotWrite(junit_path) << "\n";
      return 2;
    }
  }
  return r.failed() ? 1 : 0;
}

}  // namespace ncclwatch::tools

namespace ncclwatch::tools {

int SummarizeCommand(const Inputs& inputs, uint64_t window, uint64_t group_window, uint64_t max_kb_per_rank,
                     const std::vector<CollectiveRange>& collectives, const std::string& out_path, std::ostream& out,
                     std::ostream& err) {
  if (out_path.empty()) {
    err << "ncclwatch summarize: --out FILE (-o FILE) is required: where to write the summary\n";
    return 2;
  }
  SummarizeOptions opts;
  opts.window = window;
  opts.group_window = group_window;
  opts.max_bytes_per_rank = max_kb_per_rank << 10;
  opts.job = inputs.load.job;
  opts.out_path = out_path;
  opts.collectives = collectives;
  SummaryResult s;
  std::string error;
  if (!Summarize(inputs.paths, opts, &s, &error)) {
    err << "ncclwatch summarize: " << error << "\n";
    for (const std::string& e : s.errors) err << "ncclwatch summarize: skipped " << e << "\n";
    return 2;
  }
  for (const std::string& e : s.errors) err << "ncclwatch summarize: skipped " << e << "\n";
  for (const std::string& n : s.notes) err << "ncclwatch summarize: " << n << "\n";
  const std::string bytes = EncodeSummary(s);
  // Written whole under another name, then renamed: a merge never reads half a summary.
  const std::string tmp = out_path + ".partial";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f || rename(tmp.c_str(), out_path.c_str()) != 0) {
      err << "ncclwatch summarize: " << CannotWrite(out_path) << "\n";
      remove(tmp.c_str());
      return 2;
    }
  }
  uint64_t let_go = 0, cut = 0, asked = 0;
  for (const summary::SummaryProcess& p : s.procs)
    let_go += p.let_go_ops(), cut += p.cut_ops() + p.cut_stuck_ops(), asked += p.asked_collectives_size();
  out << "ncclwatch summarize: " << s.procs.size() << (s.procs.size() == 1 ? " process" : " processes")
      << (s.header.nodes() > 0 ? " of " + WithThousands(s.header.nodes()) + " node summaries (a group)" : "") << ", "
      << WithThousands(let_go) << " operations let go"
      << (collectives.empty() ? "" : " (" + WithThousands(asked) + " of them kept as asked by --collectives)") << ", "
      << FormatBytes(bytes.size()) << " to " << out_path << "\n";
  if (cut > 0)
    out << "ncclwatch summarize: " << WithThousands(cut)
        << " operations dropped to stay within --max-kb-per-rank: a verdict that needs them says INCOMPLETE\n";
  // Some files could not be summarized: their ranks are missing from it.
  return s.errors.empty() ? 0 : 3;
}

}  // namespace ncclwatch::tools
