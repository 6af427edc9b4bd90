#include "tools/model/summary_merge.h"

#include <stdio.h>

#include <algorithm>
#include <memory>
#include <set>
#include <utility>

#include <google/protobuf/repeated_field.h>

#include "tools/model/inputs.h"
#include "tools/model/loader.h"
#include "tools/model/summary_format.h"
#include "tools/model/summary_merge_internal.h"

namespace ncclwatch::tools {

using namespace merge_internal;  // NOLINT: this library's own parts

namespace {

// ReadDigests' fields of a Proc, from one read before the model was.
void MoveDigests(Proc* from, Proc* to) {
  to->digested = from->digested;
  to->row_digests = std::move(from->row_digests);
  to->rank_digests = std::move(from->rank_digests);
  to->whole_comms = std::move(from->whole_comms);
  to->arrivals = std::move(from->arrivals);
}

TraceHeaderFacts FactsOf(const SummaryPiece& piece) {
  if (piece.window != nullptr) return piece.window->header();
  trace::Record r;
  for (const summary::WindowRecord& w : piece.sp.records())
    if (r.ParseFromString(w.record()) && r.has_header()) return HeaderFactsOf(r.header(), piece.sp.size());
  return TraceHeaderFacts{};
}

// One process per file, one job: the pieces screened as LoadModel screens
// files (`keep`). False with `error` when they hold several jobs.
bool Screen(const std::vector<SummaryPiece>& pieces, const LoadOptions& opts, std::vector<bool>* keep,
            std::vector<std::string>* notes, std::string* error) {
  std::vector<TraceHeaderFacts> facts;
  std::vector<std::string> names;
  for (const SummaryPiece& piece : pieces) {
    facts.push_back(FactsOf(piece));
    names.push_back(piece.source.empty() ? piece.sp.path()
                                         : "the copy of " + piece.sp.path() + " in " + piece.source);
  }
  return ScreenTraceHeaders(opts.job, facts, names, keep, notes, error);
}

// What the merge found of each process, beyond its window: what was
// settled, its digests, the cap's cuts, the facts of its whole file.
struct After {
  // ReadDigests', read as each window is fed; none for a process without
  // digests (a Proc is some 750 bytes, and a hostile summary can hold
  // hundreds of thousands of near-empty processes).
  std::vector<std::unique_ptr<Proc>> digests;
  std::vector<bool> digests_ok;
  std::vector<bool> samples_held;
};

void SetProcessFacts(size_t i, const SummaryPiece& piece, const Settled& settled, After* after,
                     const std::function<void(size_t, const std::string&)>& gap,
                     const std::function<std::string(size_t)>& name, Proc* p, Model* m) {
  const summary::SummaryProcess& sp = piece.sp;
  // Operations the cap cut count in the totals like those let go; the
  // evidence they were is gone, which the gap below says. Those put back
  // are in the model's operations instead; their arrivals are still not
  // judged (Model::asked_ops), so they count as let go there.
  const uint64_t back = std::min<uint64_t>(settled.asked, sp.let_go_ops());
  p->settled_ops = sp.let_go_ops() - back + settled.ops + sp.cut_ops();
  m->summary_let_go += p->settled_ops + back;
  p->settled_completed = sp.let_go_completed() - std::min(back, sp.let_go_completed()) + settled.completed;
  const bool from_summary = !piece.source.empty();
  if (after->digests[i] != nullptr) MoveDigests(after->digests[i].get(), p);
  p->samples_held = after->samples_held[i];
  if (!after->digests_ok[i] || (from_summary && !p->digested))
    m->undigested.push_back(sp.path() + (from_summary ? " (in " + piece.source + ")" : std::string()) + ": " +
                            (sp.digested() ? "its stats rows are damaged"
                                           : "the summary holds no stats rows (an older ncclwatch wrote it)"));
  if (sp.cut_ops() > 0 || sp.cut_stuck_ops() > 0)
    gap(i, "the summary of " + name(i) + " dropped " +
               (sp.cut_ops() > 0 ? std::to_string(sp.cut_ops()) + " of the operations its window kept" : "") +
               (sp.cut_ops() > 0 && sp.cut_stuck_ops() > 0 ? " and " : "") +
               (sp.cut_stuck_ops() > 0 ? std::to_string(sp.cut_stuck_ops()) + " operations its stuck reports listed"
                                       : "") +
               ", to stay within --max-kb-per-rank; summarize with a larger --max-kb-per-rank");
  // What reading the whole file found (FileWindow::Annotate's facts).
  if (sp.damaged()) {
    if (!p->damaged || sp.damaged_at() < p->damaged_at) p->damaged_at = sp.damaged_at();
    p->damaged = true;
    p->damaged_end |= sp.damaged_end();
  }
  p->cut_tail = sp.cut_tail();
  if (p->damaged && p->cut_tail) p->damaged_end = true;
  std::set<std::string> have(p->issues.begin(), p->issues.end());
  for (const std::string& is : sp.issues())
    if (have.insert(is).second) p->issues.push_back(is);
  if (!settled.inconsistent.empty())
    gap(i, "the summary of " + name(i) +
               (from_summary ? " (record " + std::to_string(piece.record) + " of " + piece.source + ")"
                             : std::string()) +
               " is edited or damaged: " + settled.inconsistent);
  if (settled.conflicts > 0)
    gap(i, "the summaries cannot settle " + settled.first_conflict + " of " + name(i) +
               (settled.conflicts > 1 ? " (and " + std::to_string(settled.conflicts - 1) + " more)" : "") +
               ": another rank's summary let it go as completed, while this window keeps it unfinished, or "
               "as evidence (issued last, after an operation not surely finished, or after a long wait); "
               "summarize with a larger --window");
}

// Which of the model's operations were put back (Model::asked_ops).
void MarkAsked(const std::vector<SummaryPiece>& pieces, const std::vector<bool>& keep, const Feeding& f, Model* m) {
  bool any_back = false;
  for (const auto& b : f.put_back) any_back |= !b.empty();
  if (!any_back) return;
  std::unordered_map<std::string, size_t> index_of;
  for (size_t i = 0; i < pieces.size(); ++i)
    if (keep[i]) index_of.emplace(pieces[i].sp.path(), i);
  for (uint32_t oi = 0; oi < m->ops.size(); ++oi) {
    const Op& op = m->ops[oi];
    if (op.kind != OpKind::kColl || op.proc >= m->procs.size() || op.comm >= m->comms.size()) continue;
    auto pi = index_of.find(m->procs[op.proc].path);
    uint16_t func = 0;
    if (pi != index_of.end() && f.names->Find(m->Str(op.func), &func) &&
        f.put_back[pi->second].count({m->comms[op.comm].hash, func, op.seq}))
      m->asked_ops.push_back(oi);
  }
}

}  // namespace

bool BuildModelFromPieces(std::vector<SummaryPiece> pieces, std::vector<std::string> errors,
                          std::vector<std::string> notes, const LoadOptions& opts, Model* m, std::string* error,
                          const Reread& reread) {
  std::vector<bool> keep;
  if (!Screen(pieces, opts, &keep, &notes, error)) {
    m->errors.insert(m->errors.end(), errors.begin(), errors.end());
    return false;
  }
  FuncIds names;
  const Cuts cuts = CollectCuts(pieces, keep, &names);

  LoadOptions lo = opts;
  lo.windows = false;
  ModelLoader loader(lo);
  for (std::string& e : errors) loader.AddError(std::move(e));
  for (std::string& n : notes) loader.AddNote(std::move(n));
  uint64_t nops = 0;
  for (const SummaryPiece& piece : pieces)
    nops += piece.window != nullptr ? piece.window->Records().size()
            : piece.light           ? piece.records
                                    : static_cast<uint64_t>(piece.sp.records_size());
  loader.ReserveOps(nops);

  Feeding f;
  f.cuts = &cuts;
  f.loader = &loader;
  f.names = &names;
  f.settled.resize(pieces.size());
  f.put_back.resize(pieces.size());
  // Each process's digests, read as its window is fed: with 16,384
  // processes, holding their messages beside the model was most of the
  // merge's memory (BENCHMARKS.md).
  After after;
  after.digests.resize(pieces.size());
  after.digests_ok.assign(pieces.size(), true);
  // The arrival samples lined up now, while every summary is parsed, and
  // freed at once: the model built below reuses their memory (at 16,384
  // ranks they were a quarter of the merge's peak, BENCHMARKS.md).
  // Every communicator's samples carry GPU-held times, or the process's
  // are not judged whole for them (Proc::samples_held). Told before the
  // lining up, which empties them.
  after.samples_held.assign(pieces.size(), false);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const summary::SummaryProcess& sp = pieces[i].sp;
    after.samples_held[i] = sp.samples_size() > 0 &&
                            std::all_of(sp.samples().begin(), sp.samples().end(),
                                        [](const summary::ArrivalSamples& a) { return !a.held().empty(); });
  }
  std::vector<std::pair<size_t, uint64_t>> damaged_samples;
  std::vector<LinedUp> lined_up = LineUpSamples(&pieces, keep, &damaged_samples);
  for (SummaryPiece& piece : pieces) Release(piece.sp.mutable_samples());
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!keep[i]) continue;
    if (pieces[i].light) {
      std::string e;
      if (!reread) e = pieces[i].source + ": " + pieces[i].sp.path() + " was not read again";
      if (!(reread && reread(i, &pieces, &e)) && !e.empty()) loader.AddError(e);
      pieces[i].light = false;
    }
    FeedPiece(i, pieces[i], &f);
    // The loader holds the window now, `f.chains` the prefixes; below only
    // the process's facts are read, not these.
    summary::SummaryProcess& sp = pieces[i].sp;
    if (sp.digested()) {
      after.digests[i] = std::make_unique<Proc>();
      after.digests_ok[i] = ReadDigests(sp, after.digests[i].get(), opts.stats_rows);
    }
    Release(sp.mutable_records());
    Release(sp.mutable_prefixes());
    Release(sp.mutable_asked_collectives());
    Release(sp.mutable_rows());
    Release(sp.mutable_ranks());
    sp.clear_arrivals();
    pieces[i].window.reset();
  }

  if (!loader.Finish(m, error)) return false;

  std::unordered_map<std::string, uint32_t> proc_of;
  for (uint32_t pi = 0; pi < m->procs.size(); ++pi) proc_of.emplace(m->procs[pi].path, pi);
  const std::function<std::string(size_t)> name = [&](size_t i) {
    auto it = proc_of.find(pieces[i].sp.path());
    return it == proc_of.end() ? pieces[i].sp.path() : ProcName(*m, it->second);
  };
  const std::function<void(size_t, const std::string&)> gap = [&](size_t i, const std::string& why) {
    auto it = proc_of.find(pieces[i].sp.path());
    if (it == proc_of.end()) return;
    std::string& g = m->procs[it->second].window_gap;
    g += (g.empty() ? "" : "; ") + why;
  };
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!keep[i]) continue;
    auto it = proc_of.find(pieces[i].sp.path());
    if (it == proc_of.end()) continue;
    SetProcessFacts(i, pieces[i], f.settled[i], &after, gap, name, &m->procs[it->second], m);
  }

  // Summarize writes samples that decode: a summary's that do not is
  // damaged or edited, named like a record that fails its checks.
  for (const auto& [i, hash] : damaged_samples) {
    char comm[24];
    snprintf(comm, sizeof(comm), "0x%llx", static_cast<unsigned long long>(hash));
    const std::string where = pieces[i].source.empty()
                                  ? pieces[i].sp.path()
                                  : pieces[i].source + ": record " + std::to_string(pieces[i].record) + " (" +
                                        pieces[i].sp.path() + ")";
    m->errors.push_back(where + ": its arrival samples on comm " + comm +
                        " are not what summarize writes: edited or damaged; that communicator's samples are not "
                        "judged");
  }
  AddSampled(&lined_up, pieces, proc_of, m);
  CompareChains(f.chains, cuts, pieces, proc_of, gap, name, m);
  SetSettledColls(f.chains, cuts, m);
  MarkAsked(pieces, keep, f, m);
  return true;
}

bool BuildModelFromSummaries(std::vector<summary::SummaryProcess> procs, std::vector<std::string> errors,
                             std::vector<std::string> notes, const LoadOptions& opts, Model* m,
                             std::string* error, const std::vector<std::string>* sources) {
  std::vector<SummaryPiece> pieces(procs.size());
  for (size_t i = 0; i < procs.size(); ++i) {
    pieces[i].sp = std::move(procs[i]);
    if (sources != nullptr && i < sources->size()) pieces[i].source = (*sources)[i];
  }
  return BuildModelFromPieces(std::move(pieces), std::move(errors), std::move(notes), opts, m, error);
}

}  // namespace ncclwatch::tools
