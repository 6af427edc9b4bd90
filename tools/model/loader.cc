#include "tools/model/loader.h"

#include <sys/mman.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "proto/trace.pb.h"
#include "tools/model/loader_internal.h"
#include "tools/reader/reader.h"

namespace ncclwatch::tools {

using namespace loader_internal;  // NOLINT: this library's own parts

namespace {

// Asks for transparent huge pages over a large array about to be filled:
// one fault per 2 MiB instead of per 4 KiB. A 10 M-operation model is a
// gigabyte of Op; on VMs where a page fault is expensive (PVM guests), the
// 250,000 faults of 4 KiB pages were a quarter of the load's time
// (BENCHMARKS.md). Advice only: nothing changes where THP is off.
void AdviseHugePages(void* p, size_t bytes) {
  constexpr uintptr_t kHuge = 2u << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

}  // namespace

ModelLoader::ModelLoader(const LoadOptions& opts) : opts_(opts) {}

ModelLoader::~ModelLoader() = default;

void ModelLoader::ReserveForBytes(uint64_t file_bytes) { ReserveOps(file_bytes / 44 + 16); }

void ModelLoader::ReserveOps(uint64_t ops) {
  model_.ops.reserve(model_.ops.size() + ops);
  AdviseHugePages(model_.ops.data(), model_.ops.capacity() * sizeof(Op));
}

void ModelLoader::AddError(std::string error) { model_.errors.push_back(std::move(error)); }

void ModelLoader::AddNote(std::string note) { model_.notes.push_back(std::move(note)); }

bool ModelLoader::FileError(std::string error) {
  model_.errors.push_back(std::move(error));
  if (!opts_.keep_going && stop_error_.empty()) stop_error_ = model_.errors.back();
  return stop_error_.empty();
}

void ModelLoader::BeginFile(const std::string& path) {
  pi_ = static_cast<uint32_t>(model_.procs.size());
  model_.procs.emplace_back();
  model_.procs.back().path = path;
  fs_ = std::make_unique<FileState>();
}

void ModelLoader::BeginWindow(const std::string& path) {
  BeginFile(path);
  fs_->window = true;
}
void ModelLoader::Add(const trace::Record& rec, uint64_t off) {
  FileState& fs = *fs_;
  const uint64_t records_before = fs.records++;
  if (!fs.have_header && !rec.has_header() && !rec.has_batch()) return;  // reported by the reader
  const Place at{&model_, fs_.get(), pi_, &model_.procs[pi_], off, !opts_.windows && !fs.window, opts_.kernel_phases};
  switch (rec.body_case()) {
    case trace::Record::kHeader: return AddHeader(at, rec.header());
    case trace::Record::kBatch: return AddBatch(at, rec.batch(), records_before);
    case trace::Record::kStringDef: return AddStringDef(at, rec.string_def());
    case trace::Record::kCommInit: return AddCommInit(at, rec.comm_init());
    case trace::Record::kCommFinalize: return AddCommFinalize(at, rec.comm_finalize());
    case trace::Record::kOp: return AddOp(at, rec.op());
    case trace::Record::kOpDone: return AddOpDone(at, rec.op_done());
    case trace::Record::kHeartbeat: return AddHeartbeat(at, rec.heartbeat());
    case trace::Record::kStuck: return AddStuck(at, rec.stuck());
    case trace::Record::kDrops: return AddDrops(at, rec.drops());
    case trace::Record::kMaskChange: return AddMaskChange(at, rec.mask_change());
    case trace::Record::kEventStart: return AddEventStart(at, rec.event_start());
    case trace::Record::kEventState: return AddEventState(at, rec.event_state());
    case trace::Record::kFinalize: return AddFinalize(at, rec.finalize());
    default: return;  // raw events, GPU clock: not needed by the analyses
  }
}

bool ModelLoader::EndFile(bool cut_tail, const std::vector<ReadIssue>& issues) {
  Model* m = &model_;
  const uint32_t pi = pi_;
  Proc* p = &m->procs[pi];
  const std::string path = p->path;
  p->cut_tail = cut_tail;
  for (const ReadIssue& i : issues) {
    if (i.kind != ReadIssue::kCorrupt && i.kind != ReadIssue::kUnparsable && i.kind != ReadIssue::kIoError) continue;
    if (!p->damaged || i.offset < p->damaged_at) p->damaged_at = i.offset;
    p->damaged = true;
    p->damaged_end |= i.kind != ReadIssue::kUnparsable;  // the others stop the read
  }
  // Damage that broke the framing ends the file in a "cut tail" well before
  // its real end: that is not a killed process's last write.
  if (p->damaged && p->cut_tail) p->damaged_end = true;
  for (const std::string& line : IssueLines(path, issues)) p->issues.push_back(line);
  const bool have_header = fs_->have_header;
  if (have_header) {
    CheckFileEnd(m, pi, fs_.get(), !opts_.windows && !fs_->window);
    KeepPhases(m, pi, fs_.get());
  } else {
    m->errors.push_back(path + ": no process header; not an ncclwatch trace file" +
                        (issues.empty() ? std::string() : " (" + IssueLines(path, issues)[0] + ")"));
    // Drop what this file added (its ops are the last ones).
    m->ops.resize(m->ops.size() - p->ops.size());
    for (Comm& c : m->comms)
      c.members.erase(std::remove_if(c.members.begin(), c.members.end(),
                                     [&](const CommMember& mem) { return mem.proc == pi; }),
                      c.members.end());
    m->procs.pop_back();
  }
  fs_.reset();
  pi_ = kNone;
  if (!have_header && !opts_.keep_going && stop_error_.empty()) stop_error_ = m->errors.back();
  return stop_error_.empty();
}

bool ModelLoader::Read(TraceReader* reader) {
  BeginFile(reader->path());
  trace::Record rec;
  uint64_t offset = 0;
  while (reader->Next(&rec, &offset)) Add(rec, offset);
  return EndFile(reader->cut_tail(), reader->issues());
}

bool ModelLoader::Finish(Model* model, std::string* error) {
  const bool ok = stop_error_.empty() ? FinishLoad(&model_, error) : (*error = stop_error_, false);
  *model = std::move(model_);
  model_ = Model();
  return ok;
}

}  // namespace ncclwatch::tools