#include "tools/watch/watch.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "plugin/core/defaults.h"
#include "tools/model/inputs.h"
#include "tools/model/liveness.h"
#include "tools/model/loader.h"
#include "tools/watch/settled.h"

namespace ncclwatch::tools {
namespace {

// What an error verdict is about, without the durations that grow while
// it holds: the same key poll after poll is the same verdict. Its
// operation is the one diagnose found (Finding.op in `m`, the model
// judged), named as every poll names it (OpKey), never looked up again.
std::string KeyOf(const Model& m, const FuncIds& names, const report::Finding& f) {
  std::string k = std::to_string(f.kind());
  OpKey op;
  if (f.op() > 0 && f.op() <= m.ops.size() && OpKeyOf(m, m.ops[f.op() - 1], names, &op))
    k += "|" + std::to_string(op.comm_hash) + "|" + std::to_string(op.func) + "|" + std::to_string(op.seq) + "|" +
         std::to_string(op.peer) + (op.p2p ? "|p2p" : "|coll");
  else
    k += "|" + std::to_string(f.comm_hash()) + "|-";  // no operation (a straggler, a summary's chain)
  for (const report::ProcRef& p : f.culprits()) k += "|" + p.name();
  for (int fate : f.fates()) k += "|" + std::to_string(fate);
  return k;
}

// The live limit: the plugin's stuck threshold, the largest in the files.
double StuckThreshold(const Model& m) {
  double t = 0;
  for (const Proc& p : m.procs) t = std::max(t, p.stuck_sec);
  return t > 0 ? t : plugin::kDefaultStuckSec;
}

}  // namespace

Watcher::Watcher(std::vector<std::string> paths, WatchOptions opts) : paths_(std::move(paths)), opts_(std::move(opts)) {
  opts_.settle = std::max(opts_.settle, 1);
}

report::Diagnosis Watcher::Verdict(Model* m, const DiagnoseOptions& opts) const {
  return opts_.verdict ? opts_.verdict(m, opts) : Diagnose(*m, opts);
}

void Watcher::Say(const std::string& note, WatchState* s) {
  if (said_.insert(note).second) s->notes.push_back(note);
}

bool Watcher::Read(double now_sec, WatchState* s) {
  // A path named that is not there or not a file or folder is a mistake to
  // say at once; what appears under a folder is followed as it comes.
  if (!checked_paths_) {
    checked_paths_ = true;
    for (const std::string& p : paths_) {
      struct stat st;
      if (stat(p.c_str(), &st) != 0) {
        s->end = WatchState::kUnusable;
        s->waiting = "cannot open " + p + ": " + strerror(errno);
      } else if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
        s->end = WatchState::kUnusable;
        s->waiting = p + ": not a regular file (" + FileTypeName(st.st_mode) + "); trace files are regular files";
      }
      if (s->end == WatchState::kUnusable) return false;
    }
  }
  TraceInputs in = ListFiles(paths_, &IsTraceFileName);
  list_errors_ = in.errors;
  list_notes_ = in.notes;
  for (const std::string& e : in.errors) Say("skipped " + e, s);
  for (const std::string& f : in.files)
    if (!files_.count(f)) files_.emplace(f, std::make_unique<FileWindow>(f, &names_));
  std::set<std::string> listed(in.files.begin(), in.files.end());
  for (auto& [path, fw] : files_) {
    // A file no longer listed (deleted, moved): what was read still stands.
    if (!listed.count(path)) {
      Say(path + ": no longer there; keeping what was read", s);
      continue;
    }
    fw->Follow(opts_.chunk_bytes, &s->notes);
    // Catching up (more is there than a chunk): read on before judging.
    // Each judgement builds the model of every definition read so far,
    // kept for ever, so judging every chunk made catching up on a job of
    // many short-lived communicators quadratic (140,000 took 3.4 times
    // as long as 70,000: BENCHMARKS.md). It stops at half the window's
    // bound, where what settled must be let go before more is read.
    while (fw->backlog() && fw->ops() < opts_.window_ops / 2) fw->Follow(opts_.chunk_bytes, &s->notes);
    s->backlog |= fw->backlog();
    if (fw->grew() || !grew_at_.count(path)) grew_at_[path] = now_sec;
  }
  s->files = files_.size();
  bool any = false;
  for (auto& [path, fw] : files_) any |= fw->has_records();
  if (!any) s->waiting = files_.empty() ? "no trace file yet" : "no record in the trace files yet";
  return any;
}

bool Watcher::Build(bool at_end, const std::map<std::string, uint64_t>* until, Model* m, WatchState* s) {
  std::vector<const FileWindow*> windows;
  std::vector<TraceHeaderFacts> facts;
  std::vector<std::string> names;
  for (auto& [path, fw] : files_) {
    if (!fw->has_records()) continue;
    windows.push_back(fw.get());
    facts.push_back(fw->header());
    names.push_back(path);
  }
  // Files of several jobs stay several jobs: say so at once.
  std::vector<bool> keep;
  std::vector<std::string> notes;
  std::string error;
  if (!ScreenTraceHeaders(opts_.load.job, facts, names, &keep, &notes, &error)) {
    s->end = WatchState::kUnusable;
    s->waiting = error;
    return false;
  }
  LoadOptions load = opts_.load;
  load.windows = true;
  ModelLoader loader(load);
  for (std::string& n : notes) loader.AddNote(std::move(n));
  uint64_t ops = 0;
  for (size_t i = 0; i < windows.size(); ++i) ops += keep[i] ? windows[i]->ops() : 0;
  loader.ReserveOps(ops);
  for (size_t i = 0; i < windows.size(); ++i) {
    if (!keep[i]) continue;
    auto it = until == nullptr ? std::map<std::string, uint64_t>::const_iterator() : until->find(names[i]);
    if (!windows[i]->Feed(&loader, until != nullptr && it != until->end() ? it->second : UINT64_MAX)) break;
  }
  if (!loader.Finish(m, &error)) {
    // Anything else (no communicator shared yet: ranks still starting)
    // may pass while the job runs.
    if (at_end) s->end = WatchState::kUnusable;
    s->waiting = error;
    return false;
  }
  // What the files' reading saw (damage, a cut tail) first: matching
  // judges completions by whether a member's file is whole (match.cc).
  for (Proc& p : m->procs) {
    auto it = files_.find(p.path);
    if (it != files_.end()) it->second->Annotate(&p, at_end);
  }
  MatchOps(m);
  AlignClocks(m);
  for (Comm& c : m->comms) {
    auto it = settled_colls_.find(c.hash);
    if (it != settled_colls_.end() && c.hash != 0) c.settled_colls = it->second;
  }
  m->errors.insert(m->errors.end(), list_errors_.begin(), list_errors_.end());
  m->notes.insert(m->notes.end(), list_notes_.begin(), list_notes_.end());
  s->processes = m->procs.size();
  return true;
}

WatchState Watcher::Poll(double now_sec) {
  last_now_ = now_sec;
  WatchState s;
  if (!Read(now_sec, &s)) return s;
  std::vector<std::pair<std::string, uint64_t>> key = WindowsKey();
  if (!built_.model_ok || key != built_.key) {
    built_ = Built();
    ++s.models_built;
    if (Build(false, nullptr, &built_.model, &s)) {
      built_.model_ok = true;
      built_.key = std::move(key);
    }
  } else {
    s.processes = built_.model.procs.size();
  }
  Model& m = built_.model;
  if (!built_.model_ok) {
    // No model says which operations settled, but the window's bound holds:
    // the oldest go, and the verdict will say so.
    const std::unordered_set<OpKey, OpKeyHash> none;
    for (auto& [path, fw] : files_)
      if (fw->Cut(opts_.window_ops, none) > 0)
        Say(path + ": more than " + std::to_string(opts_.window_ops) + " operations and no model of the job yet; "
                "letting the oldest go (--window-ops): the verdict will say the evidence is incomplete", &s);
    Count(&s);
    // No model, and none to come: every file is done.
    bool over = true;
    for (auto& [path, fw] : files_) over = over && (fw->finalized() || fw->stopped());
    if (over) s.end = WatchState::kUnusable;
    return s;
  }
  DiagnoseOptions live = opts_.diagnose;
  live.min_wait_sec = opts_.live_wait_sec.has_value() ? *opts_.live_wait_sec : StuckThreshold(m);
  live.dead_min_sec = std::max(live.dead_min_sec, live.min_wait_sec);
  live.live = true;  // files still written: no process has ended for that
  s.live_wait_sec = live.min_wait_sec;

  // Over: every file of the job finalized, or past reading, and none still
  // to write its first record (those of other jobs, --job, do not count).
  std::set<std::string> in_model;
  for (const Proc& p : m.procs) in_model.insert(p.path);
  bool over = true;
  for (auto& [path, fw] : files_)
    if (!fw->has_records() || in_model.count(path)) over = over && (fw->finalized() || fw->stopped());
  if (over) {
    built_.model_ok = false;  // annotated and judged as ended below: no poll's model
    for (Proc& p : m.procs) files_.at(p.path)->Annotate(&p, true);
    s.end = WatchState::kFinalized;
    s.diagnosis = Verdict(&m, opts_.diagnose);
    s.have_diagnosis = true;
    Count(&s);
    return s;
  }

  // The horizon: the latest time every file still written covers. A file
  // behind the others is late (a shared filesystem's cache, a copy not yet
  // gathered) or its process died; judged beyond its end, a late rank
  // would seem to have skipped what it did meanwhile. So the job is judged
  // as of the horizon, every file cut there. A file stops holding it back
  // once finalized or damaged, or once it is behind by the live limit and
  // has not grown for as long by the watcher's clock: that process died.
  const Liveness lv = JudgeLiveness(m, live);
  int64_t horizon = INT64_MAX, t_end = INT64_MIN;
  uint32_t latest = kNone;  // the file that holds the horizon back
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    const Proc& p = m.procs[pi];
    if (p.last_ns == kNoTime) continue;
    t_end = std::max(t_end, p.last_ns);
    const FileWindow& fw = *files_.at(p.path);
    const double silent = now_sec - grew_at_[p.path];
    if (fw.finalized() || fw.stopped() || (lv.dead[pi] && silent >= live.min_wait_sec)) continue;
    if (p.last_ns < horizon) horizon = p.last_ns, latest = pi;
  }
  Model& cut = built_.cut;
  const Model* judged = &m;
  if (horizon < t_end) {
    s.behind_sec = static_cast<double>(t_end - horizon) / 1e9;
    std::map<std::string, uint64_t> until;
    for (const Proc& p : m.procs)
      until[p.path] = static_cast<uint64_t>(std::max<int64_t>(horizon - p.offset_ns - static_cast<int64_t>(p.mono_base_ns), 0));
    if (!built_.cut_ok || until != built_.until) {
      built_.diagnosis_ok = false;
      cut = Model();
      ++s.models_built;
      built_.cut_ok = Build(false, &until, &cut, &s);
      built_.until = std::move(until);
    }
    if (built_.cut_ok) judged = &cut;
  }
  // The same model judged with the same options (the live limit is the
  // model's): the same diagnosis.
  if (!built_.diagnosis_ok || built_.judged_cut != (judged == &cut)) {
    built_.diagnosis = Diagnose(*judged, live);
    built_.diagnosis_ok = true;
    built_.judged_cut = judged == &cut;
  }
  s.diagnosis = built_.diagnosis;
  s.have_diagnosis = true;
  if (s.behind_sec >= 1) {
    report::InputIssue* i = s.diagnosis.add_input_issues();
    i->set_kind(report::InputIssue::WINDOW);
    i->set_text("watch judged the job as of " + std::to_string(static_cast<int>(s.behind_sec)) +
                " s before its latest record, the latest time every file still written covers (" +
                ProcName(m, latest) + "'s file is behind)");
  }

  const report::Diagnosis& d = s.diagnosis;
  const bool error = d.findings_size() > 0 && d.findings(0).severity() == report::SEVERITY_ERROR;
  if (error) {
    const std::string key = KeyOf(*judged, names_, d.findings(0));
    same_ = key == last_key_ ? same_ + 1 : 1;
    last_key_ = key;
  } else {
    same_ = 0;
    last_key_.clear();
  }
  if (same_ >= opts_.settle) {
    s.end = WatchState::kProblem;
    built_.model_ok = false;  // the verdict below may join Flight Recorder dumps into it
    const report::Diagnosis live_d = std::move(s.diagnosis);
    s.diagnosis = Verdict(judged == &cut ? &cut : &m, live);
    for (const report::InputIssue& i : live_d.input_issues())
      if (i.kind() == report::InputIssue::WINDOW && i.text().rfind("watch judged", 0) == 0) *s.diagnosis.add_input_issues() = i;
    Count(&s);
    return s;
  }
  // An error finding may rest on operations that finished everywhere (a
  // mismatch does): while one stands, nothing settled is let go. What
  // settled is judged on everything read, the late files' state included.
  LetGo(m, lv, !error, &s);
  return s;
}

std::vector<std::pair<std::string, uint64_t>> Watcher::WindowsKey() const {
  std::vector<std::pair<std::string, uint64_t>> key;
  for (const auto& [path, fw] : files_)
    if (fw->has_records()) key.emplace_back(path, fw->generation());
  // What the listing said goes into the model too.
  for (const std::string& e : list_errors_) key.emplace_back(e, 0);
  for (const std::string& n : list_notes_) key.emplace_back(n, 1);
  return key;
}

void Watcher::LetGo(const Model& m, const Liveness& lv, bool trim_settled, WatchState* s) {
  std::map<std::string, FileWindow*> by_path;
  for (auto& [path, fw] : files_) by_path[path] = fw.get();
  std::vector<FileWindow*> of_proc(m.procs.size(), nullptr);
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    auto it = by_path.find(m.procs[pi].path);
    if (it != by_path.end()) of_proc[pi] = it->second;
  }
  std::vector<std::unordered_map<OpKey, bool, OpKeyHash>> settled(m.procs.size());
  std::vector<std::unordered_set<OpKey, OpKeyHash>> unfinished(m.procs.size());
  const std::vector<bool> go = trim_settled ? SettledOps(m, lv, opts_.keep_recent) : std::vector<bool>(m.ops.size());
  for (uint32_t oi = 0; oi < m.ops.size(); ++oi) {
    const Op& op = m.ops[oi];
    OpKey key;
    if (op.proc >= m.procs.size() || !OpKeyOf(m, op, names_, &key)) continue;
    if (go[oi]) settled[op.proc][key] = op.state == OpState::kCompleted;
    else if (lv.Unfinished(oi)) unfinished[op.proc].insert(key);
  }
  // Collectives completed on every rank, let go: still counted as such.
  for (const Match& mt : m.matches) {
    if (mt.kind != OpKind::kColl || mt.ops.empty() || mt.comm >= m.comms.size() || m.comms[mt.comm].hash == 0) continue;
    bool all = true, any = false;
    for (uint32_t oi : mt.ops) {
      if (oi == kNone) continue;
      any = true;
      all = all && go[oi] && m.ops[oi].state == OpState::kCompleted;
    }
    if (any && all) ++settled_colls_[m.comms[mt.comm].hash];
  }
  std::map<const FileWindow*, const std::unordered_set<OpKey, OpKeyHash>*> unfinished_of;
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi)
    if (of_proc[pi] != nullptr) {
      of_proc[pi]->LetGo(settled[pi]);
      unfinished_of[of_proc[pi]] = &unfinished[pi];
    }
  // Every file, those outside the model too (another job's, with --job).
  const std::unordered_set<OpKey, OpKeyHash> none;
  for (auto& [path, fw] : files_) {
    auto it = unfinished_of.find(fw.get());
    if (fw->Cut(opts_.window_ops, it == unfinished_of.end() ? none : *it->second) > 0)
      Say(path + ": more than " + std::to_string(opts_.window_ops) +
              " operations not yet finished on every rank; letting the oldest go (--window-ops): the verdict "
              "will say the evidence is incomplete",
          s);
  }
  Count(s);
}

void Watcher::Count(WatchState* s) const {
  s->ops_kept = s->ops_let_go = 0;
  for (auto& [path, fw] : files_) {
    s->ops_kept += fw->ops();
    s->ops_let_go += fw->let_go();
  }
}

WatchState Watcher::Conclude() {
  WatchState s;
  Model m;
  if (!Read(last_now_, &s) || !Build(true, nullptr, &m, &s)) {
    if (s.waiting.empty()) s.waiting = "no trace file";
    s.end = WatchState::kUnusable;
    return s;
  }
  s.end = WatchState::kFinalized;
  s.diagnosis = Verdict(&m, opts_.diagnose);
  s.have_diagnosis = true;
  // Stopped (a signal, --timeout) while files were still open: nothing says
  // yet how the job ends, so no OK, only what holds so far.
  size_t open = 0;
  for (const Proc& p : m.procs) open += !p.finalized;
  if (s.diagnosis.exit_status() == 0 && open > 0) {
    s.diagnosis.add_incomplete("the job had not finished when watch stopped (" + std::to_string(open) + " of " +
                               std::to_string(m.procs.size()) + " processes not finalized)");
    s.diagnosis.set_verdict("INCOMPLETE: no problem found so far in " + std::to_string(m.procs.size()) +
                            " processes, but the job had not finished when watch stopped (" + std::to_string(open) +
                            " of " + std::to_string(m.procs.size()) + " not finalized): cannot tell how it ends");
    s.diagnosis.set_exit_status(ExitStatus(s.diagnosis));
  }
  Count(&s);
  return s;
}

}  // namespace ncclwatch::tools
