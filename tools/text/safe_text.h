// How the tools show a string that came from a file.
//
// Communicator names, datatypes, host names, command lines, Flight
// Recorder's process groups and Python frames, file paths: the traced
// program chooses them, and a name holding ESC, CR or a newline could
// rewrite what an engineer reads on a terminal, break a JUnit file or a
// metrics scrape, or (a megabyte long) make one output line of a
// megabyte. Every output escapes them for its format, with one convention
// (docs/security.md, "How names are shown"):
//
//   - In terminal text, a character that is not safe to print is written as
//     a visible escape: \n, \t and \r; \xNN for the other C0 controls, DEL
//     and each byte of invalid UTF-8 (\xff); \u{NNNN} for C1 controls,
//     non-characters (U+FFFE, U+FDD0...) and the characters that reorder or
//     hide text (bidirectional overrides, U+2028/U+2029). A backslash is
//     doubled, so the escapes cannot be forged.
//   - JUnit XML: the same escapes for what XML 1.0 cannot hold or a viewer
//     would act on; & < > " ' as entities, newline and tab as character
//     references (a report's text keeps its lines).
//   - OpenMetrics / Prometheus label values: the format's own escapes
//     (\\, \" and \n), which keep the name; anything else a terminal would
//     act on as the visible escapes above: a label is one line of valid
//     UTF-8.
//   - JSON: valid UTF-8 (invalid bytes become U+FFFD), and every control,
//     C1, non-character and reordering character as \uXXXX, which keeps
//     the string's value.
//   - A name longer than kMaxNameBytes is cut (CutName) where the tools
//     read it, with a mark saying how long it was.
//
// All functions are pure; safe from any thread.

#ifndef TOOLS_TEXT_SAFE_TEXT_H_
#define TOOLS_TEXT_SAFE_TEXT_H_

#include <stddef.h>

#include <ostream>
#include <streambuf>
#include <string>
#include <string_view>

namespace ncclwatch::tools {

// The longest name shown whole: the plugin's own cap on the names it
// records (a real trace never holds a longer one).
inline constexpr size_t kMaxNameBytes = 256;

// `s` when at most `max` bytes long; else its first `max` bytes (not
// splitting a UTF-8 character) and "...[cut: N bytes]", N its length.
std::string CutName(std::string_view s, size_t max = kMaxNameBytes);

// `s` with every byte sequence that is not valid UTF-8 replaced by U+FFFD,
// so protobuf's JSON encoder (which drops invalid strings) keeps the rest.
std::string SanitizeUtf8(const std::string& s);

// One value for a terminal: the escapes above, backslashes doubled. Its
// result holds no byte below 0x20, no DEL, and only valid UTF-8.
std::string Printable(std::string_view s);

// A whole text already formatted (its names through Printable): the
// escapes above for anything not safe to print, but newline and tab kept
// and backslashes left alone. What SafeTextStream applies to its output.
std::string TerminalSafe(std::string_view s);

// Terminal columns taken by valid UTF-8 `s` (one per code point).
size_t DisplayWidth(const std::string& s);

// XML 1.0 character data and attribute values: & < > " ' escaped, newline
// and tab as character references; what XML cannot hold, and what a viewer
// would act on, as visible escapes (\r, \x1b, \u{fffe}).
std::string XmlEscape(std::string_view s);

// A label value as OpenMetrics and Prometheus' text format want it: \\,
// \" and \n; the other escapes above (with their backslash escaped) for
// what a terminal would act on or is no UTF-8. Callers name an empty
// value rather than print one.
std::string OpenMetricsLabel(std::string_view s);

// A JSON string literal, quotes included, of `s`: valid UTF-8, controls,
// C1, non-characters and reordering characters as \uXXXX.
std::string JsonQuote(std::string_view s);

// JSON text (an encoder's output, valid UTF-8) with every raw DEL, C1,
// non-character or reordering character written as \uXXXX: in JSON they
// can only stand inside strings, whose values stay the same.
std::string JsonEscapeRaw(std::string_view json);

// An ostream that writes TerminalSafe of everything written to it to
// another stream; a UTF-8 character split between two writes is kept
// whole. For the text outputs of the commands: whatever a formatter missed
// reaches no terminal raw. Not for binary output.
//
// Thread safety: like any ostream, one writer at a time.
class SafeTextStream : public std::ostream {
 public:
  explicit SafeTextStream(std::ostream& to);
  ~SafeTextStream() override;

 private:
  class Buf : public std::streambuf {
   public:
    explicit Buf(std::ostream& to) : to_(to) {}
    // Writes what is complete; with `all`, also a cut-off tail.
    void Drain(bool all);

   protected:
    int_type overflow(int_type c) override;
    std::streamsize xsputn(const char* s, std::streamsize n) override;
    int sync() override;

   private:
    std::ostream& to_;
    std::string pending_;
  };
  Buf buf_;
};

}  // namespace ncclwatch::tools

#endif  // TOOLS_TEXT_SAFE_TEXT_H_
