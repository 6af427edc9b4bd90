// The usage text of `ncclwatch` (its head and tail around the list of
// commands, which cli.cc writes from its table) and of each subcommand, as
// `--help` prints them. The defaults they state come from the structs that
// hold them, so that a default is written once.
//
// Covered by cli_test (each command's --help) and docs_test (every flag a
// --help names has its row in docs/commands.md).
//
// Pure functions; any thread.

#ifndef TOOLS_CLI_USAGE_H_
#define TOOLS_CLI_USAGE_H_

#include <string>

namespace ncclwatch::tools {

std::string UsageHead();
std::string UsageTail();
std::string DiagnoseUsage();
std::string MergeUsage();
std::string ExportUsage();
std::string StatsUsage();
std::string CheckUsage();
std::string DumpUsage();
std::string WatchUsage();
std::string SummarizeUsage();
std::string RasUsage();

}  // namespace ncclwatch::tools

#endif  // TOOLS_CLI_USAGE_H_
