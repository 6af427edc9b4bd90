#include "tools/summary/summary.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <google/protobuf/io/coded_stream.h>

#include "tools/arrivals/digest.h"
#include "tools/model/file_window.h"
#include "tools/model/gpu_held.h"
#include "tools/model/inputs.h"
#include "tools/model/job.h"
#include "tools/model/loader.h"
#include "tools/model/op_key.h"
#include "tools/reader/reader.h"
#include "tools/summary/group.h"
#include "tools/stats/stats.h"

namespace ncclwatch::tools {
namespace {

// Each sample's GPU-held time (`held`, GpuHeldNs of the node's model),
// found by its communicator, function and seq among process `pi`'s
// operations: only where its completions came from CUDA events, which
// alone show it. A sample whose operation the model lacks gets none.
void AddHeldTimes(const Model& node, uint32_t pi, const std::vector<int64_t>& held,
                  google::protobuf::RepeatedPtrField<summary::ArrivalSamples>* samples) {
  const Proc& p = node.procs[pi];
  if (!ShowsGpuHeld(node, p)) return;
  FuncIds names;
  std::unordered_map<OpKey, int64_t, OpKeyHash> of;
  for (uint32_t oi : p.ops) {
    const Op& o = node.ops[oi];
    if (o.kind != OpKind::kColl || o.comm >= node.comms.size() || oi >= held.size()) continue;
    names.Id(node.Str(o.func));
    OpKey key;
    if (OpKeyOf(node, o, names, &key)) of.emplace(key, held[oi] == kNoTime ? -1 : held[oi]);
  }
  std::vector<ArrivalSample> v;
  for (summary::ArrivalSamples& a : *samples) {
    if (!DecodeSamples(a, &v)) continue;
    for (ArrivalSample& x : v) {
      OpKey key;
      key.comm_hash = a.comm_hash();
      key.seq = x.seq;
      auto it = names.Find(a.functions(static_cast<int>(x.func)), &key.func) ? of.find(key) : of.end();
      x.held_ns = it == of.end() ? -1 : it->second;
    }
    EncodeSamples(v, &a, true);
  }
}

// What reading the whole file found (`p`: the node's model of it, else
// what the window's reading saw), then the cap.
void FinishProcess(const Proc& p, const SummarizeOptions& opts, summary::SummaryProcess* out) {
  SetFacts(p, out);
  if (opts.window != UINT64_MAX) CapSummaryProcess(opts.max_bytes_per_rank, opts.checkpoint_every, out);
}

}  // namespace

bool SummarizeFile(const std::string& path, const SummarizeOptions& opts, const Proc* facts,
                   summary::SummaryProcess* out, std::string* error) {
  TraceReader reader;
  if (!reader.Open(path, error)) return false;
  FuncIds names;
  FileWindow w(path, &names);
  std::vector<std::string> notes;
  w.ReadWhole(&reader, nullptr, &notes);
  if (!SummarizeWindow(w, notes, opts, true, out, error)) return false;
  Proc seen;
  w.Annotate(&seen, true);
  FinishProcess(facts != nullptr ? *facts : seen, opts, out);
  return true;
}

namespace {

void CapWindow(uint64_t max_bytes, uint32_t checkpoint_every, summary::SummaryProcess* sp);

}  // namespace

void CapSummaryProcess(uint64_t max_bytes, uint32_t checkpoint_every, summary::SummaryProcess* sp) {
  // The asked collectives aside while the rest is measured and cut.
  google::protobuf::RepeatedPtrField<summary::PastCollective> asked;
  asked.Swap(sp->mutable_asked_collectives());
  CapWindow(max_bytes, checkpoint_every, sp);
  sp->mutable_asked_collectives()->Swap(&asked);
}

namespace {

void CapWindow(uint64_t max_bytes, uint32_t checkpoint_every, summary::SummaryProcess* sp) {
  if (max_bytes == 0 || sp->ByteSizeLong() <= max_bytes) return;
  // Checkpoints grow with the job: thin them first, which costs only how
  // closely a chain mismatch is placed, never a verdict.
  uint64_t every = std::max<uint32_t>(checkpoint_every, 1);
  while (sp->ByteSizeLong() > max_bytes && every < (1ull << 62)) {
    bool thinned = false;
    every *= 2;
    for (summary::CommPrefix& p : *sp->mutable_prefixes()) {
      auto* cs = p.mutable_checkpoints();
      int kept = 0;
      for (int i = 0; i < cs->size(); ++i) {
        if (i + 1 < cs->size() && cs->Get(i).position() % every != 0) continue;  // the last always stays
        if (kept != i) cs->SwapElements(kept, i);
        ++kept;
      }
      thinned |= kept < cs->size();
      while (cs->size() > kept) cs->RemoveLast();
    }
    if (!thinned && std::all_of(sp->prefixes().begin(), sp->prefixes().end(),
                                [](const summary::CommPrefix& p) { return p.checkpoints_size() <= 1; }))
      break;
    sp->set_checkpoint_every(static_cast<uint32_t>(std::min<uint64_t>(every, UINT32_MAX)));
  }
  if (sp->ByteSizeLong() <= max_bytes) return;
  // Then the arrival samples, each communicator's stride doubling while it
  // keeps twice the fewest that judge: that costs how closely a rank's
  // share of late arrivals is counted, not the verdict's ground (the merge
  // takes the largest stride among the members anyway).
  std::vector<ArrivalSample> samples;
  while (sp->ByteSizeLong() > max_bytes) {
    bool thinned = false;
    for (summary::ArrivalSamples& a : *sp->mutable_samples()) {
      if (a.count() < 2 * kMinSampledCollectives || a.stride_log2() >= 62 ||
          !DecodeSamples(a, &samples))
        continue;
      const uint32_t wider = a.stride_log2() + 1;
      samples.erase(std::remove_if(samples.begin(), samples.end(),
                                   [&](const ArrivalSample& x) { return !SampledPosition(x.position, wider); }),
                    samples.end());
      // The hash halves them only on average: never below what judges.
      if (samples.size() < kMinSampledCollectives) continue;
      a.set_stride_log2(a.stride_log2() + 1);
      EncodeSamples(samples, &a, !a.held().empty());
      thinned = true;
    }
    if (!thinned) break;
  }
  if (sp->ByteSizeLong() <= max_bytes) return;
  // Then the window's oldest finished operations; then what stuck reports
  // list beyond each one's oldest operations; then the oldest unfinished
  // operations: what a rank waits in is the evidence most verdicts rest on.
  std::vector<bool> is_op;
  std::vector<bool> finished;
  {
    std::vector<trace::Record> parsed(static_cast<size_t>(sp->records_size()));
    std::vector<const trace::Record*> of;
    for (int i = 0; i < sp->records_size(); ++i) {
      trace::Record& r = parsed[static_cast<size_t>(i)];
      const bool ok = r.ParseFromString(sp->records(i).record());
      of.push_back(ok ? &r : nullptr);
      is_op.push_back(ok && r.has_op());
    }
    uint64_t first_open = UINT64_MAX;
    finished = FinishedOps(of, &first_open);
  }
  trace::Record r;
  std::vector<bool> drop(is_op.size(), false);
  // A record's bytes in its summary: its tag, its length and itself.
  auto framed = [](uint64_t n) {
    return 1 + google::protobuf::io::CodedOutputStream::VarintSize64(n) + n;
  };
  uint64_t cut = 0;
  auto drop_ops = [&](bool finished_only) {
    const uint64_t size = sp->ByteSizeLong();
    if (size <= max_bytes) return;
    const uint64_t excess = size - max_bytes + 32;  // the counts grow by a few bytes
    uint64_t freed = 0;
    for (size_t i = 0; i < is_op.size() && freed < excess; ++i) {
      if (!is_op[i] || drop[i] || (finished_only && !finished[i])) continue;
      drop[i] = true;
      freed += framed(sp->records(static_cast<int>(i)).ByteSizeLong());
      ++cut;
    }
    auto* recs = sp->mutable_records();
    int kept = 0;
    for (int i = 0; i < recs->size(); ++i) {
      const size_t k = static_cast<size_t>(i);
      if (drop[k]) continue;
      if (kept != i) recs->SwapElements(kept, i);
      is_op[static_cast<size_t>(kept)] = is_op[k];
      finished[static_cast<size_t>(kept)] = finished[k];
      ++kept;
    }
    while (recs->size() > kept) recs->RemoveLast();
    is_op.resize(static_cast<size_t>(kept));
    finished.resize(static_cast<size_t>(kept));
    drop.assign(is_op.size(), false);
  };
  drop_ops(true);
  if (sp->ByteSizeLong() > max_bytes) {
    const uint64_t excess = sp->ByteSizeLong() - max_bytes + 32;
    uint64_t freed = 0, trimmed = 0;
    for (summary::WindowRecord& w : *sp->mutable_records()) {
      if (freed >= excess) break;
      if (!r.ParseFromString(w.record()) || !r.has_stuck() || r.stuck().ops_size() <= 1) continue;
      auto* ops = r.mutable_stuck()->mutable_ops();
      std::sort(ops->begin(), ops->end(),
                [](const trace::InFlightOp& a, const trace::InFlightOp& b) { return a.start_ns() < b.start_ns(); });
      while (ops->size() > 1 && freed < excess) {
        freed += framed(ops->Get(ops->size() - 1).ByteSizeLong());
        ops->RemoveLast();
        ++trimmed;
      }
      w.set_record(r.SerializeAsString());
    }
    sp->set_cut_stuck_ops(trimmed);
  }
  drop_ops(false);
  sp->set_cut_ops(sp->cut_ops() + cut);
}

}  // namespace

bool Summarize(const std::vector<std::string>& paths, const SummarizeOptions& opts, SummaryResult* out,
               std::string* error) {
  // Summaries among the inputs make this a group's summary: their
  // processes join those of the trace files (group.h). A folder is
  // searched for summaries only where it holds no trace file, so that a
  // node's summary left beside its traces is not gathered with them.
  TraceInputs all;
  for (const std::string& p : paths) {
    struct stat st;
    const bool folder = stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    TraceInputs in = ListFiles({p}, folder ? &IsTraceFileName : &IsInputFileName);
    if (folder && in.files.empty() && in.errors.empty()) in = ListFiles({p}, &IsSummaryFileName);
    all.files.insert(all.files.end(), in.files.begin(), in.files.end());
    all.errors.insert(all.errors.end(), in.errors.begin(), in.errors.end());
  }
  std::vector<std::string> summaries, traces;
  char* out_real = opts.out_path.empty() ? nullptr : realpath(opts.out_path.c_str(), nullptr);
  for (const std::string& f : all.files) {
    char* real = out_real == nullptr ? nullptr : realpath(f.c_str(), nullptr);
    const bool is_out = real != nullptr && strcmp(real, out_real) == 0;
    free(real);
    if (is_out) {
      out->notes.push_back(f + " is the summary being written: not read");
      continue;
    }
    (IsSummaryFile(f) ? summaries : traces).push_back(f);
  }
  free(out_real);
  if (!summaries.empty()) {
    // What could not be read is carried in the group's header, in the
    // order diagnose of these inputs says it (job.cc): the listing's, the
    // trace files', then the summaries'.
    std::vector<std::string> carried = all.errors;
    bool traced = false;
    if (!traces.empty()) {
      SummaryResult t;
      traced = SummarizeTraces(traces, opts, &t, error);
      if (!traced) carried.push_back(*error);  // not fatal: the summaries may still make the group
      carried.insert(carried.end(), t.errors.begin(), t.errors.end());
      if (traced) *out = std::move(t);
    }
    out->errors = carried;
    return AddSummaries(summaries, carried, traced ? 1 : 0, opts.group_window, out, error);
  }
  return SummarizeTraces(paths, opts, out, error);
}

bool SummarizeTraces(const std::vector<std::string>& paths, const SummarizeOptions& opts, SummaryResult* out,
                     std::string* error) {
  TraceInputs in = ListFiles(paths, &IsTraceFileName);
  out->errors.insert(out->errors.end(), in.errors.begin(), in.errors.end());
  if (!ScreenTraceInputs(opts.job, &in, error)) return false;
  out->notes.insert(out->notes.end(), in.notes.begin(), in.notes.end());
  if (in.files.empty()) {
    *error = "no trace file (*.ncclwatch) among " + ListFew(paths);
    return false;
  }
  // Each file is read once: its records make its window and, as they are
  // read, the node's model, whose whole-file checks (each write's records
  // and times, sequence numbers without a gap, across files the members
  // and host clocks) are the facts each summary keeps.
  LoadOptions lo;
  lo.job = opts.job;
  ModelLoader loader(lo);
  loader.ReserveForBytes(in.data_bytes);
  bool feeding = true;  // until the loader stops (LoadModel's rule)
  std::vector<std::pair<summary::SummaryProcess, Proc>> read;  // with what the window saw
  for (const std::string& f : in.files) {
    TraceReader reader;
    std::string e;
    if (!reader.Open(f, &e)) {
      if (feeding) feeding = loader.FileError(e);
      out->errors.push_back(e);
      continue;
    }
    FuncIds names;
    FileWindow w(f, &names);
    std::vector<std::string> notes;
    feeding = w.ReadWhole(&reader, feeding ? &loader : nullptr, &notes) && feeding;
    summary::SummaryProcess sp;
    if (!SummarizeWindow(w, notes, opts, true, &sp, &e)) {
      out->errors.push_back(e);
      continue;
    }
    Proc seen;
    w.Annotate(&seen, true);
    read.emplace_back(std::move(sp), std::move(seen));
  }
  Model node;
  std::string load_error;
  loader.Finish(&node, &load_error);
  std::unordered_map<std::string, const Proc*> by_path;
  std::unordered_map<std::string, uint32_t> index_of;
  for (uint32_t pi = 0; pi < node.procs.size(); ++pi) {
    by_path[node.procs[pi].path] = &node.procs[pi];
    index_of[node.procs[pi].path] = pi;
  }
  // Every operation as stats rows; not for a file read whole beside
  // summaries (window UINT64_MAX), whose operations are all in the model.
  std::vector<ProcDigest> digests;
  std::vector<ArrivalDigest> arrivals;
  if (opts.window != UINT64_MAX) {
    MatchOps(&node);
    AlignClocks(&node);
    digests = DigestProcesses(node);
    arrivals = DigestArrivals(node);
  }
  // The communicators whose arrivals are sampled: every one of a process
  // without a whole arrival digest, on each of its members here too (so
  // that all of them have the positions the merge lines up).
  std::set<uint64_t> sampled;
  for (uint32_t pi = 0; pi < arrivals.size(); ++pi) {
    if (arrivals[pi].valid) continue;
    for (const Comm& c : node.comms)
      for (const CommMember& mem : c.members)
        if (mem.proc == pi) sampled.insert(c.hash);
  }
  // How long each kernel waited on its GPU behind other work, judged over
  // the whole file as the traces are (FindGpuHeld): the samples carry it.
  std::vector<int64_t> held;
  if (!sampled.empty()) held = GpuHeldNs(node);
  out->header.set_format(kSummaryFormat);
  out->header.set_version(kPlainSummaryVersion);
  out->header.set_window(opts.window == UINT64_MAX ? 0 : static_cast<uint32_t>(std::min<uint64_t>(opts.window, UINT32_MAX)));
  out->header.set_checkpoint_every(opts.checkpoint_every);
  out->header.set_max_kb_per_rank(static_cast<uint32_t>(std::min<uint64_t>(opts.max_bytes_per_rank >> 10, UINT32_MAX)));
  for (auto& [sp, seen] : read) {
    auto it = by_path.find(sp.path());
    // The stats rows and arrivals before FinishProcess, so that the cap
    // measures the whole record.
    auto di = index_of.find(sp.path());
    if (di != index_of.end() && di->second < digests.size()) {
      const ProcDigest& d = digests[di->second];
      SetDigests(d.rows, d.ranks, d.whole_comms, &sp);
      if (di->second < arrivals.size() && arrivals[di->second].valid) {
        const ArrivalDigest& a = arrivals[di->second];
        summary::ArrivalDigest* pa = sp.mutable_arrivals();
        pa->set_threshold_s(a.threshold_s);
        pa->set_fraction(a.fraction);
        pa->set_total(a.total);
        pa->set_late(a.late);
        pa->set_median_lag_s(a.median_lag_s);
        pa->set_max_lag_s(a.max_lag_s);
        pa->set_gpu_held(a.gpu_held);
        for (const ArrivalRow& r : a.rows) {
          summary::ArrivalRow* pr = pa->add_rows();
          pr->set_comm_hash(r.comm_hash);
          pr->set_func(r.func);
          pr->set_total(r.total);
          pr->set_late(r.late);
          pr->set_median_lag_s(r.median_lag_s);
          pr->set_max_lag_s(r.max_lag_s);
          pr->set_held_total(r.held_total);
          pr->set_held_late(r.held_late);
          pr->set_held_median_lag_s(r.held_median_lag_s);
          pr->set_held_max_lag_s(r.held_max_lag_s);
          pr->set_held_host_lag_s(r.held_host_lag_s);
        }
      }
    }
    if (di != index_of.end() && di->second < arrivals.size()) {
      auto* v = sp.mutable_samples();
      v->erase(std::remove_if(v->begin(), v->end(),
                              [&](const summary::ArrivalSamples& a) { return !sampled.count(a.comm_hash()); }),
               v->end());
      if (!v->empty()) AddHeldTimes(node, di->second, held, v);
    }
    FinishProcess(it == by_path.end() ? seen : *it->second, opts, &sp);
    out->procs.push_back(std::move(sp));
  }
  // An asked communicator none of these ranks is a member of may be
  // another node's: said, not an error.
  std::set<uint64_t> said;
  for (const CollectiveRange& a : opts.collectives) {
    if (!said.insert(a.comm_hash).second) continue;
    bool member = false;
    for (const summary::SummaryProcess& sp : out->procs)
      for (const summary::CommPrefix& p : sp.prefixes()) member |= p.comm_hash() == a.comm_hash;
    if (!member)
      out->notes.push_back("--collectives: no rank here is a member of communicator " + CommHashText(a.comm_hash) +
                           ": nothing added for it");
  }
  if (out->procs.empty()) {
    *error = "no usable trace file: " + (out->errors.empty() ? std::string("none") : out->errors[0]);
    return false;
  }
  return true;
}

}  // namespace ncclwatch::tools
