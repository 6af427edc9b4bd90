#include "tools/model/job.h"

#include <memory>
#include <unordered_map>
#include <utility>

#include "tools/model/file_window.h"
#include "tools/model/inputs.h"
#include "tools/model/loader.h"
#include "tools/model/op_key.h"
#include "tools/model/summary_format.h"
#include "tools/model/summary_merge.h"
#include "tools/model/summary_reread.h"
#include "tools/model/window_summary.h"
#include "tools/reader/reader.h"

namespace ncclwatch::tools {
namespace {

// The trace files among the inputs of a job with summaries, read as pieces
// that let nothing go: each file read once, its records both kept by its
// window and fed to a model of these files, whose whole-file checks (each
// write's records and times, sequence numbers without a gap, across files
// the members and host clocks) are each piece's facts. Screened as
// LoadModel screens files (one job: `job`). What cannot be read is said in
// `errors`; false (with its error first there) when none can.
bool ReadTracesBeside(const std::vector<std::string>& traces, const std::string& job,
                      std::vector<SummaryPiece>* pieces, std::vector<std::string>* errors,
                      std::vector<std::string>* notes) {
  TraceInputs in = ListFiles(traces, &IsTraceFileName);
  std::string error;
  if (!ScreenTraceInputs(job, &in, &error)) {
    errors->push_back(error);
    errors->insert(errors->end(), in.errors.begin(), in.errors.end());
    return false;
  }
  if (in.files.empty()) {
    errors->push_back("no trace file (*.ncclwatch) among " + ListFew(traces));
    errors->insert(errors->end(), in.errors.begin(), in.errors.end());
    notes->insert(notes->end(), in.notes.begin(), in.notes.end());
    return false;
  }
  std::vector<std::string> read_errors = in.errors;
  LoadOptions lo;
  lo.job = job;
  ModelLoader loader(lo);
  loader.ReserveForBytes(in.data_bytes);
  bool feeding = true;  // until the loader stops (LoadModel's rule)
  FuncIds names;
  std::vector<std::pair<SummaryPiece, Proc>> read;  // with what the window saw
  WindowSummaryOptions whole;
  whole.window = UINT64_MAX;
  for (const std::string& f : in.files) {
    TraceReader reader;
    std::string e;
    if (!reader.Open(f, &e)) {
      if (feeding) feeding = loader.FileError(e);
      read_errors.push_back(e);
      continue;
    }
    SummaryPiece piece;
    piece.window = std::make_unique<FileWindow>(f, &names);
    std::vector<std::string> window_notes;
    feeding = piece.window->ReadWhole(&reader, feeding ? &loader : nullptr, &window_notes) && feeding;
    if (!SummarizeWindow(*piece.window, window_notes, whole, false, &piece.sp, &e)) {
      read_errors.push_back(e);
      continue;
    }
    Proc seen;
    piece.window->Annotate(&seen, true);
    read.emplace_back(std::move(piece), std::move(seen));
  }
  Model node;
  std::string load_error;
  loader.Finish(&node, &load_error);
  std::unordered_map<std::string, const Proc*> by_path;
  for (const Proc& p : node.procs) by_path[p.path] = &p;
  const size_t before = pieces->size();
  for (auto& [piece, seen] : read) {
    auto it = by_path.find(piece.sp.path());
    SetFacts(it == by_path.end() ? seen : *it->second, &piece.sp);
    pieces->push_back(std::move(piece));
  }
  notes->insert(notes->end(), in.notes.begin(), in.notes.end());
  if (pieces->size() == before)
    errors->push_back("no usable trace file: " + (read_errors.empty() ? std::string("none") : read_errors[0]));
  errors->insert(errors->end(), read_errors.begin(), read_errors.end());
  return pieces->size() > before;
}

}  // namespace

std::vector<CollectiveRange> RefineRanges(const Model& m) {
  std::vector<CollectiveRange> out;
  for (const ChainMismatch& cm : m.chain_mismatches) {
    if (cm.asked || cm.comm >= m.comms.size() || m.comms[cm.comm].hash == 0) continue;
    const std::vector<CollectiveRange> r = RangesToAsk(m.comms[cm.comm].hash, cm.from, cm.to);
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

bool IsSummaryFile(const std::string& path) {
  std::string head;
  RegularFile f;
  return ReadFileHead(path, 4096, &head, &f) && LooksLikeSummary(head);
}

bool BuildJobModel(const std::vector<std::string>& paths, const LoadOptions& opts, Model* m, std::string* error) {
  TraceInputs in = ListTraceInputs(paths);
  std::vector<std::string> summaries, traces;
  for (const std::string& f : in.files) (IsSummaryFile(f) ? summaries : traces).push_back(f);
  if (summaries.empty()) {
    if (!LoadModel(paths, opts, m, error)) return false;
  } else {
    std::vector<SummaryPiece> pieces;
    std::vector<std::string> errors = in.errors, notes = in.notes;
    // Trace files first: where a summary holds the same process (a summary
    // written into the traces' folder), the screening keeps the first of
    // two equal copies, and the whole file is the better evidence.
    if (!traces.empty()) ReadTracesBeside(traces, opts.job, &pieces, &errors, &notes);
    std::unordered_map<std::string, uint32_t> crcs;
    ReadLightSummaries(summaries, &pieces, &errors, &crcs);
    if (pieces.empty()) {
      *error = errors.empty() ? "no usable summary or trace file" : errors[0];
      m->errors = errors;
      return false;
    }
    SummaryRereader again(std::move(crcs));
    const Reread reread = [&again](size_t i, std::vector<SummaryPiece>* p, std::string* e) {
      return again.Refill(i, p, e);
    };
    if (!BuildModelFromPieces(std::move(pieces), std::move(errors), std::move(notes), opts, m, error, reread))
      return false;
  }
  MatchOps(m);
  AlignClocks(m);
  return true;
}

}  // namespace ncclwatch::tools
