// For the tests of live readers (watch, FileWindow): a trace file's records framed again without its
// process header, as a live trace truncated while the plugin appends looks
// (the reader resolves start_delta_ns, so the operations keep their times).

#ifndef TOOLS_TESTING_HEADERLESS_H_
#define TOOLS_TESTING_HEADERLESS_H_

#include <stdint.h>

#include <string>

#include "proto/trace.pb.h"
#include "tools/reader/reader.h"

namespace ncclwatch::tools {

inline std::string Headerless(const std::string& bytes) {
  TraceReader r;
  r.OpenBytes("f", bytes);
  trace::Record rec;
  uint64_t off = 0;
  std::string out;
  while (r.Next(&rec, &off)) {
    if (rec.has_header()) continue;
    const std::string body = rec.SerializeAsString();
    uint64_t n = body.size();  // a varint length prefix, as the plugin frames records
    while (n >= 0x80) {
      out.push_back(static_cast<char>((n & 0x7f) | 0x80));
      n >>= 7;
    }
    out.push_back(static_cast<char>(n));
    out += body;
  }
  return out;
}

}  // namespace ncclwatch::tools

#endif  // TOOLS_TESTING_HEADERLESS_H_
