// The `ncclwatch` command: subcommand dispatch over the tools' libraries.
#ifndef TOOLS_CLI_H_
#define TOOLS_CLI_H_

#include <ostream>

namespace ncclwatch::tools {

// Runs `ncclwatch argv[1] ...`; returns the process exit status.
int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace ncclwatch::tools

#endif  // TOOLS_CLI_H_
