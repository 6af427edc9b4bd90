#include "tools/model/summary_shape.h"

#include <gtest/gtest.h>

#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/unknown_field_set.h>

#include "proto/summary.pb.h"

namespace ncclwatch::tools {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

bool Plausible(const summary::SummaryRecord& r, std::string* why) {
  const std::string bytes = r.SerializeAsString();
  return PlausibleSummaryRecord(bytes.data(), bytes.size(), why);
}

// Every singular scalar and string field of `m` set, so that it is no
// smaller than summarize writes it.
void Pad(Message* m) {
  const Reflection* r = m->GetReflection();
  const Descriptor* d = m->GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) continue;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(m, f, 1); break;
      case FieldDescriptor::CPPTYPE_INT64: r->SetInt64(m, f, 1); break;
      case FieldDescriptor::CPPTYPE_UINT32: r->SetUInt32(m, f, 1); break;
      case FieldDescriptor::CPPTYPE_UINT64: r->SetUInt64(m, f, 1); break;
      case FieldDescriptor::CPPTYPE_DOUBLE: r->SetDouble(m, f, 1); break;
      case FieldDescriptor::CPPTYPE_FLOAT: r->SetFloat(m, f, 1); break;
      case FieldDescriptor::CPPTYPE_BOOL: r->SetBool(m, f, true); break;
      case FieldDescriptor::CPPTYPE_ENUM: r->SetEnumValue(m, f, 1); break;
      case FieldDescriptor::CPPTYPE_STRING: r->SetString(m, f, "x"); break;
      case FieldDescriptor::CPPTYPE_MESSAGE: break;
    }
  }
}

// For every repeated field of elements with a length (messages, strings)
// under `m` (a message inside `record`, named `at` in a refusal): three
// empty elements of it, in parents padded to their size, are refused,
// naming the field. From the schema, so that a field added without a rule
// fails here. `record` is left as it was.
void EveryRepeatedFieldOf(const summary::SummaryRecord& record, Message* m, const std::string& at, int depth,
                          int* fields) {
  ASSERT_LT(depth, 6) << at;
  const Reflection* r = m->GetReflection();
  const Descriptor* d = m->GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const bool message = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if (!message && !(f->is_repeated() && f->cpp_type() == FieldDescriptor::CPPTYPE_STRING)) continue;
    if (f->is_repeated()) {
      ++*fields;
      for (int k = 0; k < 3; ++k) {
        if (message) r->AddMessage(m, f);
        else r->AddString(m, f, "");
      }
      std::string why;
      EXPECT_FALSE(Plausible(record, &why)) << at << f->name();
      EXPECT_EQ(why.rfind(at + f->name() + "[", 0), 0u) << why;
      for (int k = 0; k < 3; ++k) r->RemoveLast(m, f);
      if (!message) continue;
      Message* child = r->AddMessage(m, f);
      Pad(child);
      EveryRepeatedFieldOf(record, child, at + f->name() + "[0].", depth + 1, fields);
      r->RemoveLast(m, f);
    } else {
      Message* child = r->MutableMessage(m, f);
      EveryRepeatedFieldOf(record, child, at + f->name() + ".", depth + 1, fields);
      r->ClearField(m, f);
    }
  }
}

TEST(SummaryShape, EveryRepeatedFieldRefusesEmptyElements) {
  summary::SummaryRecord record;
  summary::SummaryProcess* p = record.mutable_process();
  p->set_path("rank0.ncclwatch");
  std::string why;
  ASSERT_TRUE(Plausible(record, &why)) << why;
  int fields = 0;
  EveryRepeatedFieldOf(record, p, "", 0, &fields);
  // records, issues, prefixes (colls, p2p, checkpoints, asked), rows,
  // ranks, whole_comms, arrivals.rows, asked_collectives, samples
  // (functions): none forgotten.
  EXPECT_GE(fields, 14);
}

TEST(SummaryShape, WhatSummarizeWritesIsPlausible) {
  summary::SummaryRecord record;
  summary::SummaryProcess* p = record.mutable_process();
  p->set_path("rank0.ncclwatch");
  p->set_size(4096);
  summary::WindowRecord* w = p->add_records();
  w->set_record(std::string("\x2a\x00", 2));  // a trace record: an operation
  summary::CommPrefix* c = p->add_prefixes();
  c->set_comm_hash(0x5c0e71c9a3b1d2f4);
  c->add_checkpoints()->set_position(64);
  c->add_colls()->set_func("AllReduce");
  // The unhashed communicators' prefix, empty, and a function the trace
  // never named: one of each is written.
  p->add_prefixes();
  c->add_colls();
  summary::RowDigest* row = p->add_rows();
  row->set_comm("dp");
  row->set_ops(1);
  p->add_ranks()->set_comm("dp");
  p->mutable_arrivals()->add_rows()->set_comm_hash(1);
  summary::ArrivalSamples* s = p->add_samples();
  s->set_comm_hash(1);
  s->add_functions("AllReduce");
  s->add_functions("");
  std::string why;
  EXPECT_TRUE(Plausible(record, &why)) << why;
  // A newer writer's fields are skipped unread.
  p->GetReflection()->MutableUnknownFields(p)->AddLengthDelimited(99, "");
  p->GetReflection()->MutableUnknownFields(p)->AddLengthDelimited(99, "");
  EXPECT_TRUE(Plausible(record, &why)) << why;

  // A second of what summarize writes one of.
  p->add_prefixes();
  EXPECT_FALSE(Plausible(record, &why));
  EXPECT_EQ(why,
            "prefixes[2] is 0 bytes: summarize writes every one with at least 9 (its communicator's hash) but one "
            "(the unhashed communicators' prefix), and this is the 2nd smaller");
  p->mutable_prefixes()->RemoveLast();
  c->add_colls();
  EXPECT_FALSE(Plausible(record, &why));
  EXPECT_EQ(why.rfind("prefixes[0].colls[2] is 0 bytes", 0), 0u) << why;
}

TEST(SummaryShape, AProcessNamesItsFile) {
  summary::SummaryRecord record;
  record.mutable_process()->set_size(1);
  std::string why;
  EXPECT_FALSE(Plausible(record, &why));
  EXPECT_EQ(why, "it names no trace file");
  // A header record has no process to judge.
  summary::SummaryRecord header;
  header.mutable_header()->set_version(3);
  EXPECT_TRUE(Plausible(header, &why)) << why;
}

TEST(SummaryShape, BytesThatAreNoMessage) {
  summary::SummaryRecord record;
  record.mutable_process()->set_path("p");
  summary::RowDigest* row = record.mutable_process()->add_rows();
  row->set_comm("dp");
  row->set_ops(1);
  std::string bytes = record.SerializeAsString();
  std::string why;
  // Cut inside the row.
  EXPECT_FALSE(PlausibleSummaryRecord(bytes.data(), bytes.size() - 1, &why));
  EXPECT_EQ(why, "does not parse");
  // A wire type that does not exist.
  bytes.push_back(static_cast<char>(0x0f));
  EXPECT_FALSE(PlausibleSummaryRecord(bytes.data(), bytes.size(), &why));
  EXPECT_EQ(why, "does not parse");
  // A length past the end.
  bytes.back() = static_cast<char>(0x72);  // rows
  bytes.push_back(static_cast<char>(0x7f));
  EXPECT_FALSE(PlausibleSummaryRecord(bytes.data(), bytes.size(), &why));
  EXPECT_EQ(why, "does not parse");
}

}  // namespace
}  // namespace ncclwatch::tools
