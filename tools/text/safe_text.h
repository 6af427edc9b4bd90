// Small text helpers for what the tools print: names come from the traced
// program (communicator names are user-assigned) and may hold anything.

#ifndef TOOLS_TEXT_SAFE_TEXT_H_
#define TOOLS_TEXT_SAFE_TEXT_H_

#include <string>

namespace ncclwatch::tools {

// `s` with every byte sequence that is not valid UTF-8 replaced by U+FFFD,
// so protobuf's JSON encoder (which drops invalid strings) keeps the rest.
std::string SanitizeUtf8(const std::string& s);

// For a terminal table: valid UTF-8, control characters written as \n, \t,
// \xNN, and backslashes doubled.
std::string Printable(const std::string& s);

// Terminal columns taken by valid UTF-8 `s` (one per code point).
size_t DisplayWidth(const std::string& s);

// XML 1.0 character data and attribute values: & < > " ' escaped; characters
// XML 1.0 cannot hold at all (controls other than tab, newline, carriage
// return; invalid UTF-8) replaced by U+FFFD.
std::string XmlEscape(const std::string& s);

}  // namespace ncclwatch::tools

#endif  // TOOLS_TEXT_SAFE_TEXT_H_
