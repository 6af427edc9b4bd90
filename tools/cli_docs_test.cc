// The man page and completions against the parser and the usage texts: each
// flag they offer is one the command accepts, and each flag a command's
// --help names is offered, so that the table they are written from (cli.cc)
// cannot drift from either.

#include "tools/cli_docs.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tools/cli.h"

namespace ncclwatch::tools {
namespace {

std::string Nw(const std::vector<std::string>& argv, int* status = nullptr) {
  std::ostringstream out, err;
  const int s = RunCli(argv, out, err);
  if (status != nullptr) *status = s;
  return out.str() + err.str();
}

// command -> its flags, as the bash completion's case lines list them.
std::map<std::string, std::set<std::string>> BashFlags() {
  std::map<std::string, std::set<std::string>> flags;
  std::istringstream in(Nw({"ncclwatch", "--print-completion=bash"}));
  const std::regex line(R"re(^    ([a-z]+)\) flags="([^"]*)" ;;$)re");
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (!std::regex_match(l, m, line)) continue;
    std::istringstream words(m[2].str());
    for (std::string w; words >> w;)
      if (w != "--help") flags[m[1].str()].insert(w);
  }
  return flags;
}

const std::vector<std::string> kCommandNames = {"diagnose", "merge", "export", "stats",
                                                "check",    "dump",  "watch",  "summarize", "ras"};

TEST(CliDocs, EveryCommandIsCompletedAndDocumented) {
  const auto flags = BashFlags();
  const std::string man = Nw({"ncclwatch", "--print-man"});
  const std::string zsh = Nw({"ncclwatch", "--print-completion=zsh"});
  const std::string usage = Nw({"ncclwatch", "--help"});
  EXPECT_EQ(flags.size(), kCommandNames.size());
  for (const std::string& c : kCommandNames) {
    EXPECT_TRUE(flags.count(c)) << c;
    EXPECT_NE(man.find(".SS " + c + "\n"), std::string::npos) << c;
    EXPECT_NE(zsh.find("\n  " + c + ")\n"), std::string::npos) << c;
    EXPECT_NE(usage.find("\n  " + c + " "), std::string::npos) << c;
  }
}

// Each offered flag is accepted; each flag of a command's --help is offered.
TEST(CliDocs, TheCompletionsFlagsAreTheParsers) {
  for (const auto& [command, offered] : BashFlags()) {
    for (const std::string& flag : offered) {
      // A flag the command lacks is a usage error naming it, before any input
      // is read; one it has gets past the parser (to a missing value or input).
      const std::string said = Nw({"ncclwatch", command, flag});
      EXPECT_EQ(said.find("unknown option '" + flag + "'"), std::string::npos) << command << " " << flag;
    }
    const std::string help = Nw({"ncclwatch", command, "--help"});
    const std::regex named(R"((^|[ \[,(])--([a-z][a-z-]*))");
    for (std::sregex_iterator it(help.begin(), help.end(), named), end; it != end; ++it) {
      const std::string flag = "--" + (*it)[2].str();
      if (flag == "--help" || flag == "--version" || flag == "--flag") continue;
      // Another command's flag, named in passing: diagnose's help says what
      // summarize's --collectives takes, summarize's that diagnose
      // --refine-args prints it, ras's that diagnose --ras reads its answer.
      if ((command == "diagnose" && flag == "--collectives") || (command == "summarize" && flag == "--refine-args") ||
          (command == "ras" && flag == "--ras"))
        continue;
      EXPECT_TRUE(offered.count(flag)) << command << "'s --help names " << flag << ", the completion lacks it";
    }
  }
}

TEST(CliDocs, ManPageNamesEveryFlagWithItsHelp) {
  const std::string man = Nw({"ncclwatch", "--print-man"});
  for (const auto& [command, offered] : BashFlags()) {
    const size_t at = man.find(".SS " + command + "\n");
    ASSERT_NE(at, std::string::npos) << command;
    const size_t next = man.find(".SS ", at + 1);
    const std::string section = man.substr(at, next == std::string::npos ? std::string::npos : next - at);
    for (std::string flag : offered) {
      std::string roff;
      for (char c : flag) roff += c == '-' ? std::string("\\-") : std::string(1, c);
      EXPECT_NE(section.find(".B " + roff), std::string::npos) << command << " " << flag;
    }
  }
}

TEST(CliDocs, EscapesForRoffAndZsh) {
  CommandDoc c{"x", "a: 'b'", {{"y-z", ".dot \\ [it]: 'q'", true, false, true}}};
  const std::string man = ManPage({c}, "1.2-3");
  EXPECT_NE(man.find("\"ncclwatch 1.2\\-3\""), std::string::npos) << man;
  EXPECT_NE(man.find(".B \\-\\-y\\-z \\fIY_Z\\fR\n\\&.dot \\e [it]: 'q'\n"), std::string::npos) << man;
  const std::string zsh = ZshCompletion({c});
  EXPECT_NE(zsh.find("'x:a: '\\''b'\\'''"), std::string::npos) << zsh;
  EXPECT_NE(zsh.find("'--y-z=[.dot \\\\ \\[it\\]\\: '\\''q'\\'']:Y_Z:_files'"), std::string::npos) << zsh;
}

}  // namespace
}  // namespace ncclwatch::tools
