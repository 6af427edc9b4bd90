// NCCLWATCH_ON_STUCK as an argument vector. The text is split into words
// once, when the configuration is read, by the rules below and never by a
// shell; at run time %p, %r, %f and %% are substituted inside each word, and
// a word stays one argument whatever the substitution put in it (a trace
// folder named `a;rm -rf ~` is one argument, not two commands).
//
// Splitting rules (docs/plugin.md, "Environment variables", says the same):
//   - words are separated by unquoted spaces, tabs and newlines;
//   - '...' keeps everything up to the next ' as it is (no escapes inside);
//   - "..." keeps everything up to the next unescaped "; inside it a
//     backslash before " or before a backslash stands for that character,
//     and any other backslash is kept as it is;
//   - outside quotes a backslash makes the next character ordinary
//     (`a\ b` is the one word "a b", `\'` a quote);
//   - quoted and unquoted parts that touch make one word (`--x='a b'` is
//     "--x=a b"), and '' or "" alone is an empty word;
//   - nothing else is special: ; | & < > $ ` ( ) * ~ # are ordinary
//     characters, so there are no pipes, redirections, variables or globs.
//     A command that wants them runs a shell itself: sh -c '...' sh %f.
//
// Thread safety: pure functions; call them from any thread.

#ifndef PLUGIN_CORE_COMMAND_WORDS_H_
#define PLUGIN_CORE_COMMAND_WORDS_H_

#include <stdint.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace ncclwatch::plugin {

// Splits `text` by the rules above. False with `error` set (what is wrong
// and where, as a byte offset) for an unterminated quote, a trailing
// backslash, no word at all, or an empty first word (the program).
bool SplitCommand(const std::string& text, std::vector<std::string>* words, std::string* error);

// `word` with %p (the pid), %r (the rank), %f (the trace file) and %% (a
// percent sign) substituted; any other % is kept as it is.
std::string ExpandWord(const std::string& word, pid_t pid, int64_t rank, const std::string& trace_path);

// The words quoted for a log line: each in single quotes, a quote inside
// written '\'' (so the line can be pasted into a shell).
std::string QuoteWords(const std::vector<std::string>& words);

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CORE_COMMAND_WORDS_H_
