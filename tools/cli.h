// The `ncclwatch` command: one flag parser (Abseil flags, one set for every
// subcommand, each accepting its own) over the subcommands in commands.h.
// Conventions for every subcommand: --flag=VALUE and --flag VALUE, -o for
// --out, --help, -- before inputs that begin with '-'. Exit status 2 for a
// usage error.
//
// Thread safety: one call at a time (the flags are process-wide; a call
// sets them to their defaults first).

#ifndef TOOLS_CLI_H_
#define TOOLS_CLI_H_

#include <ostream>
#include <string>
#include <vector>

namespace ncclwatch::tools {

// Runs `ncclwatch argv[1] ...`; returns the process exit status.
int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err);
// The same with argv as strings ({"ncclwatch", "diagnose", "--format=json", DIR}).
int RunCli(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err);

}  // namespace ncclwatch::tools

#endif  // TOOLS_CLI_H_
