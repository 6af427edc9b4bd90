// The man page and the shell completions of `ncclwatch`, written from the
// command line's own table (cli.h CommandDocs: each command, its flags and
// their help), so that neither can name a flag the parser lacks or miss
// one it has. `ncclwatch --print-man` and `--print-completion=bash|zsh`
// print them; the release installs what they print.
//
// Thread safety: pure functions.

#ifndef TOOLS_CLI_DOCS_H_
#define TOOLS_CLI_DOCS_H_

#include <string>
#include <vector>

namespace ncclwatch::tools {

struct FlagDoc {
  std::string name;  // as typed, without the dashes: "min-wait"
  std::string help;
  bool takes_value = true;  // false: a switch (--json)
  bool repeatable = false;
  bool path = false;  // its value is a file or folder
};

struct CommandDoc {
  std::string name;
  std::string summary;  // one line
  std::vector<FlagDoc> flags;
};

// A man(7) page, section 1; `version` in its header, no date (the build is
// reproducible).
std::string ManPage(const std::vector<CommandDoc>& commands, const std::string& version);
// A bash completion script (bash-completion's completions/ncclwatch).
std::string BashCompletion(const std::vector<CommandDoc>& commands);
// A zsh completion function (a file named _ncclwatch on $fpath).
std::string ZshCompletion(const std::vector<CommandDoc>& commands);

}  // namespace ncclwatch::tools

#endif  // TOOLS_CLI_DOCS_H_
