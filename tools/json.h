// The JSON every ncclwatch report is printed as: protobuf's canonical proto3
// JSON mapping (fields in lowerCamelCase, 64-bit integers as strings, enums
// by name), every field printed, default values included, indented. Readers
// (`check --baseline`) accept lowerCamelCase and the .proto's snake_case
// names alike, so baselines written before this convention still load.
// Chrome trace output (export) is not a report: it keeps that format's names.

#ifndef TOOLS_JSON_H_
#define TOOLS_JSON_H_

#include <google/protobuf/message.h>

#include <string>

namespace ncclwatch::tools {

std::string ReportJson(const google::protobuf::Message& m);

}  // namespace ncclwatch::tools

#endif  // TOOLS_JSON_H_
