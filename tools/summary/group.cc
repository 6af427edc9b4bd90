#include "tools/summary/group.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "tools/model/window_summary.h"

namespace ncclwatch::tools {
namespace {

// Inputs read at once: two, one a thread (ReadSummaryFiles), each cut to
// the group's window before the next are read, so that the group's memory
// follows its own windows, not its inputs'.
constexpr size_t kReadAtOnce = 2;

// `sp`, kept at `from` operations (its summary's header), cut to the
// group's `window` where that is smaller; `every`: its summary's
// checkpoint interval. Where it cannot be cut by the rule, it stays whole.
// So does a process its node let go nothing of: its window is then its
// whole file, and the verdict rests on that: every rank's arrivals are
// judged from the windows (diagnose's ArrivalsUnjudged: a job whose
// summaries let nothing go), and no rank's operation is settled through
// another's prefix. Cut, a short job's straggler or hang turns INCOMPLETE
// at any window under its length (testdata_test); such a process is at
// most the node's window anyway.
void Rewindow(uint64_t window, uint32_t from, uint32_t every, summary::SummaryProcess* sp) {
  if (from == 0 || from <= window || sp->let_go_ops() == 0) return;
  std::string why;
  RewindowProcess(window, every, sp, &why);
}

}  // namespace

bool AddSummaries(const std::vector<std::string>& summaries, const std::vector<std::string>& listing_errors,
                  uint32_t trace_nodes, uint64_t window, SummaryResult* out, std::string* error) {
  summary::SummaryHeader& h = out->header;
  // The trace files' processes (a node's summary made here) cut alike.
  for (summary::SummaryProcess& sp : out->procs) Rewindow(window, h.window(), h.checkpoint_every(), &sp);
  if (h.window() > window) h.set_window(static_cast<uint32_t>(window));
  if (h.format().empty()) {
    h.set_format(kSummaryFormat);
    h.set_version(kPlainSummaryVersion);
  }
  uint64_t nodes = trace_nodes;
  for (const std::string& e : listing_errors) h.add_read_errors(e);
  std::unordered_set<std::string> paths;
  for (const summary::SummaryProcess& sp : out->procs) paths.insert(sp.path());
  std::vector<SummaryResult> read;
  std::vector<std::string> read_errors;
  for (size_t i = 0; i < summaries.size(); ++i) {
    const size_t slot = i % kReadAtOnce;
    if (slot == 0) {
      const size_t n = std::min(kReadAtOnce, summaries.size() - i);
      ReadSummaryFiles({summaries.begin() + static_cast<ptrdiff_t>(i),
                        summaries.begin() + static_cast<ptrdiff_t>(i + n)},
                       &read, &read_errors);
    }
    SummaryResult& s = read[slot];
    // As diagnose of the input would say it (job.cc, ReadSummariesOf).
    if (!read_errors[slot].empty()) {
      const std::string e = read_errors[slot] + (s.procs.empty() ? "" : " (the processes before it are read)");
      h.add_read_errors(e);
      out->errors.push_back(e);
    }
    if (s.header.format().empty()) continue;  // not read at all
    for (const std::string& e : s.header.read_errors()) h.add_read_errors(e);
    nodes += std::max<uint32_t>(1, s.header.nodes());
    h.set_window(std::max<uint32_t>(h.window(), static_cast<uint32_t>(std::min<uint64_t>(s.header.window(), window))));
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
      Rewindow(window, s.header.window(), s.header.checkpoint_every(), &sp);
      out->procs.push_back(std::move(sp));
    }
    s = SummaryResult();  // its records go before the next are read
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
