// Reads an answer of NCCL's RAS service (its STATUS or VERBOSE STATUS query)
// into a report::RasView: which processes RAS cannot reach, and per
// communicator its status, missing ranks, errors and launch counts.
//
// RAS answers in text (NCCL 2.24 and later) or, after `SET FORMAT json`,
// in JSON (2.28.7 and later). The text is for people and changes between
// releases; the parser reads the lines of 2.24 to 2.30 (the formats of
// src/ras/client_support.cc), keeps the Errors and Warnings sections
// verbatim, and notes a line it does not know (`unparsed`) instead of
// refusing a newer release's answer. What is not RAS at all, or a known
// line whose numbers are damaged, is refused with the line number (text)
// or the JSON path, and what was wrong. The JSON is read by protobuf's
// JSON parser (google.protobuf.Struct), then walked field by field.
//
// Pure functions; any thread. Bounded: at most kMaxRasAnswerBytes are
// read, 65,536 communicators and 1,048,576 ranks kept.

#ifndef TOOLS_RAS_PARSE_H_
#define TOOLS_RAS_PARSE_H_

#include <stddef.h>

#include <string>
#include <string_view>

#include "proto/report.pb.h"

namespace ncclwatch::tools {

inline constexpr size_t kMaxRasAnswerBytes = 64u << 20;

// JSON when its first character that is not white space is '{', else text.
// False with `error` ("line 12: ...", "JSON communicators[0].size: ...").
bool ParseRasAnswer(std::string_view answer, report::RasView* view, std::string* error);
bool ParseRasText(std::string_view answer, report::RasView* view, std::string* error);
bool ParseRasJson(std::string_view answer, report::RasView* view, std::string* error);

// NCCL's ncclResult_t as RAS names it ("Internal error"; "error 42" for
// one it does not know).
std::string RasErrorName(int64_t code);

}  // namespace ncclwatch::tools

#endif  // TOOLS_RAS_PARSE_H_
