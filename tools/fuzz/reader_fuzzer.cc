// libFuzzer target: the trace reader on arbitrary bytes.
//
// TraceReader::OpenBytes, every record, IssueLines(). Nothing may crash, hang
// or allocate from an unchecked length.
#include <stddef.h>
#include <stdint.h>

#include <string>

#include <google/protobuf/stubs/logging.h>

#include "proto/trace.pb.h"
#include "tools/reader/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Invalid UTF-8 in string fields is logged by libprotobuf on every parse.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  ncclwatch::tools::TraceReader reader;
  reader.OpenBytes("fuzz", std::string(reinterpret_cast<const char*>(data), size));
  ncclwatch::trace::Record record;
  uint64_t offset = 0;
  uint64_t n = 0;
  while (reader.Next(&record, &offset)) {
    ++n;
    if (offset > size) __builtin_trap();  // an offset past the input is a reader bug
  }
  if (n != reader.records_read()) __builtin_trap();
  size_t total = 0;
  for (const std::string& line : reader.IssueLines()) total += line.size();
  (void)total;
  (void)reader.cut_tail();
  return 0;
}
