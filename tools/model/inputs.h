// The paths a user named, turned into the trace files to read, each checked
// before a byte of it is read: folders are searched recursively for
// *.ncclwatch files (and *.ncclsummary ones), only regular files are taken (a FIFO would block, a
// device never end), and a file named twice (the same folder given twice, a
// link to a file already listed) is read once.
//
// Thread safety: a pure function of the file system.

#ifndef TOOLS_MODEL_INPUTS_H_
#define TOOLS_MODEL_INPUTS_H_

#include <stdint.h>

#include <string>
#include <utility>
#include <vector>

#include "proto/trace.pb.h"

namespace ncclwatch::tools {

struct TraceInputs {
  std::vector<std::string> files;   // in the order named; a folder's files sorted
  uint64_t data_bytes = 0;          // bytes the files hold on disk (a sparse file's holes not counted)
  std::vector<std::string> errors;  // paths that cannot be used, with why
  std::vector<std::string> notes;   // "X is Y again: read once"
};

// Folders deeper than this below a named one are not searched.
inline constexpr int kMaxFolderDepth = 32;

TraceInputs ListTraceInputs(const std::vector<std::string>& paths);

// Whether a folder's search takes a file of this name: a trace file,
// "*.ncclwatch", or a per-node summary, "*.ncclsummary" (tools/summary/;
// told from a trace by its bytes, whatever its name).
bool IsTraceFileName(const std::string& name);
bool IsSummaryFileName(const std::string& name);
bool IsInputFileName(const std::string& name);

// The same search for other files: those whose name `accept` takes (files
// named directly are taken whatever their name), without the error for a
// folder that holds none.
TraceInputs ListFiles(const std::vector<std::string>& paths, bool (*accept)(const std::string& name));

// "a, b, c and 4 more": a list of files for a message.
std::string ListFew(const std::vector<std::string>& files);

// Reads each file's header (its first records) and keeps one file per
// process and the files of one job:
//  - files holding the same process (host, pid, and the plugin's start
//    time: copies, or a copy taken while it was still written) are read
//    once, the longest kept, with a note;
//  - files of several jobs (their headers' job ids differ) are refused,
//    naming each job, unless `job` names the one to read; the others are
//    then skipped with a note.
// False with `error` when the files hold several jobs and none was chosen,
// or the chosen one is not among them.
bool ScreenTraceInputs(const std::string& job, TraceInputs* in, std::string* error);
// The same on in-memory files, {name, bytes} each (tests, fuzzing).
bool ScreenTraceBytes(const std::string& job, std::vector<std::pair<std::string, std::string>>* files,
                      std::vector<std::string>* notes, std::string* error);

// What the screening reads of a file's process header.
struct TraceHeaderFacts {
  bool found = false;  // the file has a header
  std::string host;
  int64_t pid = 0;
  uint64_t mono_base_ns = 0;
  uint64_t realtime_base_ns = 0;
  std::string job_id;
  uint64_t size = 0;  // the file's bytes: of two copies, the longer is kept
};
TraceHeaderFacts HeaderFactsOf(const trace::ProcessHeader& header, uint64_t size);
// The same screening on files whose headers were read already (ncclwatch
// watch, which holds them): `facts[i]` of the file `names[i]`; `keep[i]`
// says whether to read it.
bool ScreenTraceHeaders(const std::string& job, const std::vector<TraceHeaderFacts>& facts,
                        const std::vector<std::string>& names, std::vector<bool>* keep,
                        std::vector<std::string>* notes, std::string* error);

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_INPUTS_H_
