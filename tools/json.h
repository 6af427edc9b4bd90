// The JSON every ncclwatch report is printed as: protobuf's canonical proto3
// JSON mapping (fields in lowerCamelCase, 64-bit integers as strings, enums
// by name), every field printed, default values included, indented. Readers
// (`check --baseline`) accept lowerCamelCase and the .proto's snake_case
// names alike, so baselines written before this convention still load.
// Strings are made valid UTF-8 (invalid bytes become U+FFFD) and every
// control, C1, non-character or reordering character is written \uXXXX
// (tools/text/safe_text.h).
// Chrome trace output (export) is not a report: it keeps that format's names.

#ifndef TOOLS_JSON_H_
#define TOOLS_JSON_H_

#include <google/protobuf/message.h>

#include <string>

namespace ncclwatch::tools {

std::string ReportJson(const google::protobuf::Message& m);

// Every string field of `m`, nested ones too, made valid UTF-8 (invalid
// bytes become U+FFFD): protobuf's JSON printer refuses a message holding
// one that is not, and a reader of its binary form refuses it too. Names
// come from the traced program as they are.
void MakeValidUtf8(google::protobuf::Message* m);

}  // namespace ncclwatch::tools

#endif  // TOOLS_JSON_H_
