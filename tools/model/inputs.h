// The paths a user named, turned into the trace files to read, each checked
// before a byte of it is read: folders are searched recursively for
// *.ncclwatch files, only regular files are taken (a FIFO would block, a
// device never end), and a file named twice (the same folder given twice, a
// link to a file already listed) is read once.
//
// Thread safety: a pure function of the file system.

#ifndef TOOLS_MODEL_INPUTS_H_
#define TOOLS_MODEL_INPUTS_H_

#include <stdint.h>

#include <string>
#include <vector>

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

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_INPUTS_H_
