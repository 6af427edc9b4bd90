// The generated field numbers agree with libprotobuf's descriptors of
// trace.proto, field for field, and none is missing.

#include "proto/trace_fields.h"

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "proto/trace.pb.h"

namespace ncclwatch {
namespace {

TEST(TraceFields, EveryConstantIsTheSchemasNumber) {
  const google::protobuf::FileDescriptor* file = trace::Record::descriptor()->file();
  std::set<std::string> seen;
  for (const trace_fields::FieldEntry& e : trace_fields::kAllFields) {
    const google::protobuf::Descriptor* m = file->FindMessageTypeByName(e.message);
    ASSERT_NE(m, nullptr) << e.message;
    const google::protobuf::FieldDescriptor* f = m->FindFieldByName(e.field);
    ASSERT_NE(f, nullptr) << e.message << "." << e.field;
    EXPECT_EQ(static_cast<uint32_t>(f->number()), e.number) << e.message << "." << e.field;
    seen.insert(std::string(e.message) + "." + e.field);
  }
  // And every field of every message has its constant.
  for (int i = 0; i < file->message_type_count(); ++i) {
    const google::protobuf::Descriptor* m = file->message_type(i);
    for (int j = 0; j < m->field_count(); ++j)
      EXPECT_EQ(seen.count(m->name() + "." + m->field(j)->name()), 1u) << m->name() << "." << m->field(j)->name();
  }
  // Spot checks of the generated names.
  EXPECT_EQ(trace_fields::Op::kStartDeltaNs, 26u);
  EXPECT_EQ(trace_fields::Record::kBatch, 15u);
}

}  // namespace
}  // namespace ncclwatch
