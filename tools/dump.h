// `ncclwatch dump`: prints what trace files hold, one line per record, then a
// summary per file (operations enqueued and completed, GPU timing, drops,
// read issues). The plain view of a file, before any analysis.

#ifndef TOOLS_DUMP_H_
#define TOOLS_DUMP_H_

#include <ostream>
#include <string>
#include <vector>

namespace ncclwatch::tools {

struct DumpOptions {
  bool records = true;   // one line per record (else only the summary)
};

// Returns the exit status: 0 all files read, 2 a file could not be read.
int Dump(const std::vector<std::string>& files, const DumpOptions& opts, std::ostream& out, std::ostream& err);

}  // namespace ncclwatch::tools

#endif  // TOOLS_DUMP_H_
