// Reads a binary protobuf output of ncclwatch with libprotobuf and checks
// every string in it, for safe_output_test.sh: valid UTF-8 and no longer
// than a bound (a megabyte name must have been cut); in Perfetto's, whose
// strings are labels a viewer shows, also no control character (C0, DEL,
// C1). merge's report keeps the names' values, as its JSON does.
//
// Usage: proto_strings perfetto|merge FILE MAX_BYTES
// Exit 0 when every string passes, 1 naming the first field that does not
// (or a file that does not parse).

#include <stdio.h>
#include <stdlib.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "proto/order.pb.h"
#include "proto/perfetto_subset.pb.h"
#include "tools/text/safe_text.h"

namespace ncclwatch::tools {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// The problem with `s`, or "" when none.
std::string Problem(const std::string& s, size_t max_bytes, bool labels) {
  if (s.size() > max_bytes) return std::to_string(s.size()) + " bytes";
  if (SanitizeUtf8(s) != s) return "invalid UTF-8";
  if (!labels) return "";
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return "control byte " + std::to_string(c);
    if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) < 0xa0)
      return "C1 control";
  }
  return "";
}

// Every string field of `m`, nested ones too; false after naming one.
bool Check(const Message& m, size_t max_bytes, bool labels, int* checked) {
  const auto* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
    for (int i = 0; i < n; ++i) {
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
        const std::string s = f->is_repeated() ? r->GetRepeatedString(m, f, i) : r->GetString(m, f);
        ++*checked;
        const std::string why = Problem(s, max_bytes, labels);
        if (!why.empty()) {
          fprintf(stderr, "%s: %s\n", f->full_name().c_str(), why.c_str());
          return false;
        }
      } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        if (!Check(f->is_repeated() ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f), max_bytes, labels, checked))
          return false;
      }
    }
  }
  return true;
}

int Main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: proto_strings perfetto|merge FILE MAX_BYTES\n");
    return 2;
  }
  const std::string kind = argv[1];
  std::unique_ptr<Message> m;
  if (kind == "perfetto") m = std::make_unique<perfetto_subset::Trace>();
  else if (kind == "merge") m = std::make_unique<report::MergeReport>();
  else return 2;
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (!in || !m->ParseFromString(bytes.str())) {
    fprintf(stderr, "%s: does not parse as %s\n", argv[2], kind.c_str());
    return 1;
  }
  int checked = 0;
  if (!Check(*m, strtoull(argv[3], nullptr, 10), kind == "perfetto", &checked)) return 1;
  printf("%s: %d strings pass\n", argv[2], checked);
  return checked > 0 ? 0 : 1;
}

}  // namespace
}  // namespace ncclwatch::tools

int main(int argc, char** argv) { return ncclwatch::tools::Main(argc, argv); }
