#include "tools/summary/group.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

namespace ncclwatch::tools {

bool AddSummaries(const std::vector<std::string>& summaries, const std::vector<std::string>& listing_errors,
                  uint32_t trace_nodes, SummaryResult* out, std::string* error) {
  std::vector<SummaryResult> read;
  std::vector<std::string> read_errors;
  ReadSummaryFiles(summaries, &read, &read_errors);
  summary::SummaryHeader& h = out->header;
  if (h.format().empty()) {
    h.set_format(kSummaryFormat);
    h.set_version(kSummaryVersion);
  }
  uint64_t nodes = trace_nodes;
  for (const std::string& e : listing_errors) h.add_read_errors(e);
  std::unordered_set<std::string> paths;
  for (const summary::SummaryProcess& sp : out->procs) paths.insert(sp.path());
  for (size_t i = 0; i < summaries.size(); ++i) {
    SummaryResult& s = read[i];
    // As diagnose of the input would say it (job.cc, ReadSummariesOf).
    if (!read_errors[i].empty()) {
      const std::string e = read_errors[i] + (s.procs.empty() ? "" : " (the processes before it are read)");
      h.add_read_errors(e);
      out->errors.push_back(e);
    }
    if (s.header.format().empty()) continue;  // not read at all
    for (const std::string& e : s.header.read_errors()) h.add_read_errors(e);
    nodes += std::max<uint32_t>(1, s.header.nodes());
    h.set_window(std::max(h.window(), s.header.window()));
    h.set_max_kb_per_rank(std::max(h.max_kb_per_rank(), s.header.max_kb_per_rank()));
    if (h.checkpoint_every() == 0) h.set_checkpoint_every(s.header.checkpoint_every());
    for (summary::SummaryProcess& sp : s.procs) {
      if (!paths.insert(sp.path()).second) {
        out->notes.push_back(summaries[i] + ": process " + sp.path() +
                             " is in another input too: read once, from the first");
        continue;
      }
      // The interval its checks hold it to, which the group's header may
      // not share.
      if (sp.checkpoint_every() == 0) sp.set_checkpoint_every(s.header.checkpoint_every());
      out->procs.push_back(std::move(sp));
    }
  }
  h.set_nodes(static_cast<uint32_t>(std::min<uint64_t>(nodes, UINT32_MAX)));
  if (out->procs.empty()) {
    *error = "no usable summary or trace file: " +
             (h.read_errors_size() == 0 ? std::string("none") : h.read_errors(0));
    return false;
  }
  return true;
}

}  // namespace ncclwatch::tools
