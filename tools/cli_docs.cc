#include "tools/cli_docs.h"

#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_replace.h"

namespace ncclwatch::tools {
namespace {

// roff: a backslash is \e, a dash \- (else it may hyphenate or become a
// Unicode hyphen, and a pasted flag fails), a line may not start with a
// control character.
std::string Roff(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\e";
    else if (c == '-') out += "\\-";
    else out += c;
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out = "\\&" + out;
  return out;
}

// Inside zsh's _arguments '--flag[HELP]' in single quotes: no quote, and
// brackets and colons escaped.
std::string ZshHelp(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else if (c == '[' || c == ']' || c == ':' || c == '\\') out += std::string("\\") + c;
    else out += c;
  }
  return out;
}

// Inside single quotes in zsh: only the quote itself.
std::string ZshQuote(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out;
}

// A flag's value as the synopsis names it: --window-ops WINDOW_OPS.
std::string Value(const FlagDoc& f) { return absl::AsciiStrToUpper(absl::StrReplaceAll(f.name, {{"-", "_"}})); }

}  // namespace

std::string ManPage(const std::vector<CommandDoc>& commands, const std::string& version) {
  std::ostringstream m;
  m << ".TH NCCLWATCH 1 \"\" \"ncclwatch " << Roff(version) << "\" \"User Commands\"\n"
    << ".SH NAME\n"
    << "ncclwatch \\- diagnose hangs and slowdowns of NCCL jobs from every rank's trace\n"
    << ".SH SYNOPSIS\n"
    << ".B ncclwatch\n.I command\n[\\fIoptions\\fR] \\fIFILE\\fR|\\fIDIR\\fR...\n"
    << ".br\n.B ncclwatch \\-\\-version\n"
    << ".SH DESCRIPTION\n"
    << "The NCCL profiler plugin libnccl\\-profiler\\-ncclwatch.so (NCCL_PROFILER_PLUGIN=ncclwatch) writes one\n"
    << "trace file per process into NCCLWATCH_DIR.\n"
    << ".B ncclwatch\n"
    << "reads the files of all ranks (files, or folders searched recursively for *.ncclwatch and\n"
    << "*.ncclsummary) and says which rank, which operation and what went wrong.\n"
    << "Every command takes \\-\\-flag=VALUE and \\-\\-flag VALUE alike, \\-o for \\-\\-out, \\-\\-help, and\n"
    << "\\-\\- before file names that begin with a dash.\n"
    << ".SH COMMANDS\n";
  for (const CommandDoc& c : commands) {
    m << ".SS " << Roff(c.name) << "\n" << Roff(c.summary) << "\n";
    for (const FlagDoc& f : c.flags) {
      m << ".TP\n.B \\-\\-" << Roff(f.name);
      if (f.takes_value) m << " \\fI" << Roff(Value(f)) << "\\fR";
      m << "\n" << Roff(f.help) << (f.repeatable ? " (repeatable)" : "") << "\n";
    }
  }
  m << ".SH EXIT STATUS\n"
    << "diagnose, watch: 0 healthy, 1 a problem found, 2 unusable input, 3 the evidence is incomplete or\n"
    << "damaged. check: 0 pass, 1 fail, 2 unusable input. Every command: 2 for a usage error.\n"
    << "Each command's \\-\\-help says its own.\n"
    << ".SH SEE ALSO\n"
    << "/usr/share/doc/ncclwatch/README.md, /usr/share/doc/ncclwatch/docs/, and the job scripts in\n"
    << "/usr/share/doc/ncclwatch/examples/.\n";
  return m.str();
}

std::string BashCompletion(const std::vector<CommandDoc>& commands) {
  std::ostringstream b;
  b << "# bash completion for ncclwatch; written by `ncclwatch --print-completion=bash`.\n"
    << "_ncclwatch() {\n"
    << "  local cur=${COMP_WORDS[COMP_CWORD]}\n"
    << "  if ((COMP_CWORD == 1)); then\n"
    << "    COMPREPLY=($(compgen -W \"";
  for (const CommandDoc& c : commands) b << c.name << " ";
  b << "--help --version\" -- \"$cur\"))\n"
    << "    return\n"
    << "  fi\n"
    << "  [[ $cur == -* ]] || return  # file names: complete's -o default\n"
    << "  local flags\n"
    << "  case ${COMP_WORDS[1]} in\n";
  for (const CommandDoc& c : commands) {
    b << "    " << c.name << ") flags=\"";
    for (const FlagDoc& f : c.flags) b << "--" << f.name << " ";
    b << "--help\" ;;\n";
  }
  b << "    *) return ;;\n"
    << "  esac\n"
    << "  COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n"
    << "}\n"
    << "complete -o default -F _ncclwatch ncclwatch\n";
  return b.str();
}

std::string ZshCompletion(const std::vector<CommandDoc>& commands) {
  std::ostringstream z;
  z << "#compdef ncclwatch\n"
    << "# zsh completion for ncclwatch; written by `ncclwatch --print-completion=zsh`.\n"
    << "local -a commands\n"
    << "commands=(\n";
  for (const CommandDoc& c : commands) z << "  '" << c.name << ":" << ZshQuote(c.summary) << "'\n";
  z << ")\n"
    << "if (( CURRENT == 2 )); then\n"
    << "  _describe -t commands 'ncclwatch command' commands\n"
    << "  return\n"
    << "fi\n"
    << "case $words[2] in\n";
  for (const CommandDoc& c : commands) {
    z << "  " << c.name << ")\n    _arguments \\\n";
    for (const FlagDoc& f : c.flags) {
      z << "      '" << (f.repeatable ? "*" : "") << "--" << f.name << (f.takes_value ? "=" : "") << "["
        << ZshHelp(f.help) << "]" << (f.takes_value ? ":" + Value(f) + ":" + (f.path ? "_files" : " ") : "")
        << "' \\\n";
    }
    z << "      '--help[the command'\\''s options]' \\\n"
      << "      '*:trace file or folder:_files'\n"
      << "    ;;\n";
  }
  z << "esac\n";
  return z.str();
}

}  // namespace ncclwatch::tools
