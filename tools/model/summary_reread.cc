#include "tools/model/summary_reread.h"

#include <utility>

#include "proto/trace.pb.h"
#include "tools/model/summary_merge_internal.h"

namespace ncclwatch::tools {

using merge_internal::Release;  // this library's own

uint64_t LightenProcess(summary::SummaryProcess* sp) {
  const uint64_t n = static_cast<uint64_t>(sp->records_size());
  // The screening reads the first record that is a header (the merge's
  // FactsOf): that one stays.
  trace::Record r;
  google::protobuf::RepeatedPtrField<summary::WindowRecord> kept;
  for (summary::WindowRecord& w : *sp->mutable_records())
    if (r.ParseFromString(w.record()) && r.has_header()) {
      kept.Add()->Swap(&w);
      break;
    }
  sp->mutable_records()->Swap(&kept);
  for (summary::CommPrefix& p : *sp->mutable_prefixes()) Release(p.mutable_checkpoints());
  Release(sp->mutable_rows());
  Release(sp->mutable_ranks());
  Release(sp->mutable_asked_collectives());
  Release(sp->mutable_whole_comms());
  sp->clear_arrivals();
  return n;
}

void RefillProcess(summary::SummaryProcess* whole, summary::SummaryProcess* light) {
  light->mutable_records()->Swap(whole->mutable_records());
  // The prefixes whole, checkpoints and all: the rest of them is what the
  // light ones kept.
  light->mutable_prefixes()->Swap(whole->mutable_prefixes());
  light->mutable_rows()->Swap(whole->mutable_rows());
  light->mutable_ranks()->Swap(whole->mutable_ranks());
  light->mutable_asked_collectives()->Swap(whole->mutable_asked_collectives());
  light->mutable_whole_comms()->Swap(whole->mutable_whole_comms());
  if (whole->has_arrivals())
    light->mutable_arrivals()->Swap(whole->mutable_arrivals());
  else
    light->clear_arrivals();
}

void ReadLightSummaries(const std::vector<std::string>& files, std::vector<SummaryPiece>* pieces,
                        std::vector<std::string>* errors, std::unordered_map<std::string, uint32_t>* crcs) {
  std::vector<SummaryResult> read;
  std::vector<std::string> read_errors;
  std::vector<std::vector<uint64_t>> records(files.size());  // per file and process: window records
  ReadSummaryFiles(files, &read, &read_errors, [&](size_t i, SummaryResult* s) {
    for (summary::SummaryProcess& sp : s->procs) records[i].push_back(LightenProcess(&sp));
  });
  // Reserved: grown by doubling, the pieces would briefly take three times
  // their room.
  size_t n = pieces->size();
  for (const SummaryResult& s : read) n += s.procs.size();
  pieces->reserve(n);
  for (size_t i = 0; i < files.size(); ++i) {
    SummaryResult& s = read[i];
    if (!read_errors[i].empty())
      errors->push_back(read_errors[i] + (s.procs.empty() ? "" : " (the processes before it are read)"));
    // A group's: what reading the summaries it gathered could not give.
    for (const std::string& e : s.header.read_errors()) errors->push_back(e);
    if (!s.procs.empty()) (*crcs)[files[i]] = s.bytes_crc;
    for (size_t k = 0; k < s.procs.size(); ++k) {
      pieces->emplace_back();
      SummaryPiece& p = pieces->back();
      p.sp = std::move(s.procs[k]);
      p.source = files[i];
      p.record = k < s.records.size() ? s.records[k] : k + 1;
      p.light = true;
      p.records = records[i][k];
    }
  }
}

SummaryRereader::SummaryRereader(std::unordered_map<std::string, uint32_t> crcs)
    : crcs_(std::move(crcs)) {}

void SummaryRereader::Take(const std::string& source) {
  source_ = source;
  result_ = SummaryResult();
  // Its errors were said by the first reading, and the same bytes read
  // alike: they are not kept. Read on this thread, not ahead on another:
  // glibc gives each thread its own heap, and freeing here what another
  // thread parsed took the 16k merge from 8.3 to 13 s (BENCHMARKS.md).
  std::string e;
  ReadSummaryFile(source, &result_, &e);
  Index();
}

void SummaryRereader::Index() {
  index_.clear();
  why_.clear();
  said_ = false;
  auto crc = crcs_.find(source_);
  if (crc == crcs_.end() || crc->second != result_.bytes_crc) {
    why_ = source_ +
           ": changed or could not be read after it was first read, so its processes' windows, stats rows and "
           "checkpoints are not used";
    result_ = SummaryResult();
    return;
  }
  for (size_t k = 0; k < result_.procs.size(); ++k)
    index_.emplace(k < result_.records.size() ? result_.records[k] : k + 1, k);
}

bool SummaryRereader::Refill(size_t i, std::vector<SummaryPiece>* pieces, std::string* error) {
  SummaryPiece& p = (*pieces)[i];
  if (p.source != source_) Take(p.source);
  if (!why_.empty()) {
    if (!said_) *error = why_;
    said_ = true;
    return false;
  }
  auto it = index_.find(p.record);
  if (it == index_.end() || result_.procs[it->second].path() != p.sp.path()) {
    *error = p.source + ": record " + std::to_string(p.record) + " (" + p.sp.path() +
             ") is not where the first reading found it";
    return false;
  }
  RefillProcess(&result_.procs[it->second], &p.sp);
  return true;
}

}  // namespace ncclwatch::tools
