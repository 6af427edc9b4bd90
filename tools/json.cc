#include "tools/json.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include <memory>

#include "tools/text/safe_text.h"

namespace ncclwatch::tools {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

}  // namespace

void MakeValidUtf8(Message* m) {
  const Reflection* r = m->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*m, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->type() == FieldDescriptor::TYPE_STRING) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*m, f); ++i) {
          const std::string s = r->GetRepeatedString(*m, f, i);
          const std::string v = SanitizeUtf8(s);
          if (v != s) r->SetRepeatedString(m, f, i, v);
        }
      } else {
        const std::string s = r->GetString(*m, f);
        const std::string v = SanitizeUtf8(s);
        if (v != s) r->SetString(m, f, v);
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*m, f); ++i) MakeValidUtf8(r->MutableRepeatedMessage(m, f, i));
      } else {
        MakeValidUtf8(r->MutableMessage(m, f));
      }
    }
  }
}

std::string ReportJson(const google::protobuf::Message& m) {
  std::unique_ptr<Message> valid(m.New());
  valid->CopyFrom(m);
  MakeValidUtf8(valid.get());
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.always_print_primitive_fields = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(*valid, &json, o).ok()) return "{}\n";
  // The printer escapes C0 controls; DEL, C1 and the characters that
  // reorder text it writes raw.
  return JsonEscapeRaw(json);
}

}  // namespace ncclwatch::tools
