// `ncclwatch watch`: the cross-rank verdict while the job still runs.
//
// Each rank writes its stuck report before the framework's watchdog kills
// the job; the verdict needs every rank's file, and by the time someone
// runs diagnose the processes are gone. A Watcher follows the files as
// they grow (on a shared filesystem, or gathered) and judges the job after
// every Poll(), so that the verdict is there as soon as the evidence
// suffices.
//
// Each Poll(): list the trace files under the paths (new ones appear as
// ranks start), read what each gained (tools/model/file_window.h), build
// the model of the kept windows and diagnose it. It ends:
//  - when every file is finalized (or damage ended its reading): the
//    verdict is diagnose's, with diagnose's options;
//  - when an error finding (a hang, a mismatch, a dead rank...) stays the
//    same for `settle` polls in a row while no rank's file lags behind the
//    others: that verdict.
// While the job runs, operations are in flight at every file's end and a
// healthy job may wait in a collective for seconds (a checkpoint, a slow
// rank): diagnose's one second would call that a hang. So, until the job
// ends, an operation counts as hung (and a silent rank as dead) only after
// `live_wait_sec`, by default the plugin's own stuck threshold
// (NCCLWATCH_STUCK_SEC, from the files' headers), at which the plugin
// writes its stuck reports, which name the operation hung at once.
//
// Files lag: a shared filesystem's cache, a copy not yet gathered. Judged
// beyond a late file's end, its rank would seem to have skipped what it
// did meanwhile. So the job is judged as of the latest time every file
// still written covers (the horizon), each file cut there, as if read at
// that moment. A file stops holding the horizon back once it is finalized
// or damaged, or once it is behind by the live limit and has not grown for
// as long by the watcher's own clock: that rank's process died.
//
// Memory is bounded over a long job: after each poll, operations every
// rank has finished are let go from every file at once
// (tools/watch/settled.h), keeping `keep_recent` per rank and communicator;
// at most `window_ops` per file are kept, the oldest let go beyond that
// even unsettled, and the verdict then says the evidence is incomplete.
// Nothing is let go while an error finding stands. A poll costs O(window).
//
// No sleeping inside: the caller polls (commands.cc sleeps between polls
// and wakes on a signal), so that tests drive it step by step.
//
// Thread safety: one thread.

#ifndef TOOLS_WATCH_WATCH_H_
#define TOOLS_WATCH_WATCH_H_

#include <stdint.h>

#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "proto/report.pb.h"
#include "tools/diagnose/diagnose.h"
#include "tools/model/liveness.h"
#include "tools/model/model.h"
#include "tools/model/file_window.h"

namespace ncclwatch::tools {

struct WatchOptions {
  LoadOptions load;          // job
  DiagnoseOptions diagnose;  // the verdict once the job is over: diagnose's
  // While the job runs, the wait that makes a hang and the silence that
  // makes a death; unset: the largest NCCLWATCH_STUCK_SEC in the files'
  // headers (the plugin's default when none sets one).
  std::optional<double> live_wait_sec;
  int settle = 2;                       // polls an error verdict must hold
  uint64_t window_ops = 200'000;        // operations kept per file, at most
  // Settled operations kept per rank and communicator: what stragglers
  // are judged over. A poll costs about ranks x communicators x this.
  uint64_t keep_recent = 100;
  // Read per file at a time. A file with more than this to read is read
  // on in the same poll, before the model is built, until its window
  // holds half of window_ops (each model holds every definition read so
  // far: judging every chunk made catching up quadratic).
  uint64_t chunk_bytes = 8ull << 20;
  // The verdict that ends the watch, from its model (default: Diagnose).
  // The command joins PyTorch Flight Recorder dumps here, as diagnose does.
  std::function<report::Diagnosis(Model*, const DiagnoseOptions&)> verdict;
};

struct WatchState {
  enum End { kRunning, kFinalized, kProblem, kUnusable };
  End end = kRunning;
  size_t files = 0;        // trace files found
  size_t processes = 0;    // in the model
  uint64_t ops_kept = 0;
  uint64_t ops_let_go = 0;  // since the start, settled or cut
  bool backlog = false;     // a file holds more than one poll reads: poll again at once
  // Models of the windows this poll built: 0 when no window changed since
  // the last (that poll's models judged again), 2 when a file lagged and
  // the job was judged as of the horizon too.
  int models_built = 0;
  // The job is judged as of a time this far behind its latest record: a
  // file lags (0: none).
  double behind_sec = 0;
  double live_wait_sec = 0;  // the wait that made a hang while the job ran
  // No model yet, and why ("no trace file yet", the loader's error).
  std::string waiting;
  // What happened this poll that a person watching should know: a file
  // replaced, damaged, unreadable (each said once).
  std::vector<std::string> notes;
  bool have_diagnosis = false;
  // The live diagnosis; once ended, the verdict (kUnusable: exit status 2).
  report::Diagnosis diagnosis;
};

class Watcher {
 public:
  Watcher(std::vector<std::string> paths, WatchOptions opts);

  // `now_sec`: the caller's monotonic clock (tests give their own), by
  // which a file's silence is measured.
  WatchState Poll(double now_sec);
  // Reads once more, then diagnose's verdict on what was read, with
  // diagnose's options (end kFinalized; kUnusable when there is none): for
  // a timeout, or a signal.
  WatchState Conclude();

 private:
  // Lists and reads the files; false when no file has a record yet.
  bool Read(double now_sec, WatchState* s);
  // The model of the windows; false with s->waiting (or kUnusable) when none.
  // With `until` (path -> file time), each file as of that time.
  bool Build(bool at_end, const std::map<std::string, uint64_t>* until, Model* m, WatchState* s);
  void LetGo(const Model& m, const Liveness& live, bool trim_settled, WatchState* s);
  void Say(const std::string& note, WatchState* s);
  void Count(WatchState* s) const;
  report::Diagnosis Verdict(Model* m, const DiagnoseOptions& opts) const;

  std::vector<std::string> paths_;
  WatchOptions opts_;
  FuncIds names_;
  std::map<std::string, std::unique_ptr<FileWindow>> files_;
  std::map<std::string, double> grew_at_;  // now_sec of each file's latest growth
  double last_now_ = 0;
  std::vector<std::string> list_errors_, list_notes_;
  std::unordered_map<uint64_t, uint64_t> settled_colls_;  // comm hash -> collectives let go
  std::set<std::string> said_;
  // What the last poll built, kept while no window changes: a poll of a job
  // whose files did not change (its processes frozen or gone) judges it
  // again at no cost. Its key: each window's path and generation, and what
  // the listing of the paths said.
  struct Built {
    std::vector<std::pair<std::string, uint64_t>> key;
    bool model_ok = false;
    Model model;
    bool cut_ok = false;  // `cut`, the model as of `until`
    std::map<std::string, uint64_t> until;
    Model cut;
    bool diagnosis_ok = false;  // `diagnosis`: Diagnose of the judged model
    bool judged_cut = false;
    report::Diagnosis diagnosis;
  };
  Built built_;
  std::vector<std::pair<std::string, uint64_t>> WindowsKey() const;
  std::string last_key_;
  int same_ = 0;
  bool checked_paths_ = false;
};

}  // namespace ncclwatch::tools

#endif  // TOOLS_WATCH_WATCH_H_
