// `ncclwatch dump`: prints what trace files hold, one line per record, then a
// summary per file (operations enqueued and completed, GPU timing, drops,
// read issues, each change of NCCL's event mask with its bits named). The
// plain view of a file, before any analysis.

#ifndef TOOLS_DUMP_H_
#define TOOLS_DUMP_H_

#include <ostream>
#include <string>
#include <vector>

namespace ncclwatch::tools {

struct DumpOptions {
  bool records = true;   // one line per record (else only the summary)
};

// `paths`: files, or folders searched recursively (inputs.h). Returns the
// exit status: 0 every file read (a cut tail included: a killed process's
// file ends so), 1 a file is damaged (corrupt or unparsable records, no
// header), 2 a path could not be read or is not a regular file.
int Dump(const std::vector<std::string>& paths, const DumpOptions& opts, std::ostream& out, std::ostream& err);

}  // namespace ncclwatch::tools

#endif  // TOOLS_DUMP_H_
