#include "tools/json.h"

#include <google/protobuf/util/json_util.h>

namespace ncclwatch::tools {

std::string ReportJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.always_print_primitive_fields = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(m, &json, o).ok()) return "{}\n";
  return json;
}

}  // namespace ncclwatch::tools
