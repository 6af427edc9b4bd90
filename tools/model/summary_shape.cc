#include "tools/model/summary_shape.h"

#include <stdint.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "proto/summary.pb.h"

namespace ncclwatch::tools {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

struct Shape;

// One length-delimited field of a message, as summarize writes it.
struct Rule {
  int number = 0;
  std::string name;
  bool repeated = false;
  // Each element summarize writes has at least `min_bytes` (what holds
  // them: `why`), but for at most `smaller` of them (what those are:
  // `smaller_why`).
  uint32_t min_bytes = 0;
  const char* why = "";
  uint32_t smaller = 0;
  const char* smaller_why = "";
  const Shape* shape = nullptr;  // its own fields' rules (a message), or none
};

struct Shape {
  std::vector<Rule> rules;
  // A field each message has, with at least one byte (0: none).
  int needs = 0;
  const char* needs_why = "";
};

// The number of `d`'s field `name`: from the schema, never written here.
int Number(const Descriptor* d, const char* name) {
  const google::protobuf::FieldDescriptor* f = d->FindFieldByName(name);
  return f == nullptr ? 0 : f->number();
}

Rule Repeated(const Descriptor* d, const char* name, uint32_t min_bytes, const char* why,
              const Shape* shape = nullptr, uint32_t smaller = 0, const char* smaller_why = "") {
  Rule r;
  r.number = Number(d, name);
  r.name = name;
  r.repeated = true;
  r.min_bytes = min_bytes;
  r.why = why;
  r.smaller = smaller;
  r.smaller_why = smaller_why;
  r.shape = shape;
  return r;
}

Rule Single(const Descriptor* d, const char* name, const Shape* shape) {
  Rule r;
  r.number = Number(d, name);
  r.name = name;
  r.shape = shape;
  return r;
}

// The most rules a shape has (Shapes below): a scan's counts live on the
// stack.
constexpr size_t kMaxRules = 12;

// The rules, from what summarize always sets (window_summary.cc,
// summary.cc, summary_format.cc SetDigests, tools/stats DigestProcesses,
// tools/arrivals DigestArrivals). Sizes are an element's own bytes, its
// tag and length not counted: a string field set is its tag, its length
// and one byte at least; a fixed64 nine bytes; a varint not 0, two.
struct Shapes {
  Shape record, process, prefix, samples, arrivals;
  Shapes() {
    using namespace summary;  // NOLINT: the schema's messages
    const Descriptor* cp = CommPrefix::descriptor();
    prefix.rules = {
        Repeated(cp, "colls", 3, "its function's name", nullptr, 1, "a function whose name the trace never defined"),
        Repeated(cp, "p2p", 2, "its function's name or its peer", nullptr, 1,
                 "a function whose name the trace never defined, with peer 0"),
        Repeated(cp, "checkpoints", 2, "its position, from 1"),
        Repeated(cp, "asked", 4, "its positions, from 1"),
    };
    const Descriptor* as = ArrivalSamples::descriptor();
    samples.rules = {
        Repeated(as, "functions", 1, "a function's name", nullptr, 1, "a function whose name the trace never defined"),
    };
    arrivals.rules = {
        Repeated(ArrivalDigest::descriptor(), "rows", 9, "its communicator's hash"),
    };
    const Descriptor* sp = SummaryProcess::descriptor();
    process.rules = {
        Repeated(sp, "records", 4, "its trace record, never empty"),
        Repeated(sp, "issues", 1, "a sentence"),
        Repeated(sp, "prefixes", 9, "its communicator's hash", &prefix, 1, "the unhashed communicators' prefix"),
        Repeated(sp, "rows", 5, "its communicator and its count of operations"),
        Repeated(sp, "ranks", 3, "its communicator"),
        Repeated(sp, "whole_comms", 1, "a communicator"),
        Single(sp, "arrivals", &arrivals),
        Repeated(sp, "asked_collectives", 15, "its communicator's hash, its position and its trace record"),
        Repeated(sp, "samples", 9, "its communicator's hash", &samples),
    };
    process.needs = Number(sp, "path");
    process.needs_why = "names no trace file";
    // The record is named for its process: its fields need no prefix.
    record.rules = {Single(SummaryRecord::descriptor(), "process", &process)};
    record.rules.back().name.clear();
    for (const Shape* s : {&record, &process, &prefix, &samples, &arrivals})
      if (s->rules.size() > kMaxRules) abort();  // a rule added past kMaxRules: raise it
  }
};

const Shapes& TheShapes() {
  static const Shapes* const shapes = new Shapes();
  return *shapes;
}

std::string Ordinal(uint64_t n) {
  const char* suffix = n % 100 / 10 == 1 ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  return std::to_string(n) + suffix;
}

// Where a scan is: the element of a rule, inside its parent's (null: the
// record). Named only when something is wrong: a summary may hold millions
// of elements, and scanning them must cost no string each.
struct Where {
  const Where* parent = nullptr;
  const Rule* rule = nullptr;
  uint64_t index = 0;  // of a repeated field's element
};

// "prefixes[3].colls[0]" ("" for the record).
std::string Name(const Where* w) {
  if (w == nullptr || w->rule == nullptr) return "";
  std::string parent = Name(w->parent);
  if (w->rule->name.empty()) return parent;
  return (parent.empty() ? parent : parent + ".") + w->rule->name +
         (w->rule->repeated ? "[" + std::to_string(w->index) + "]" : "");
}

// "prefixes[3]." ("" for the record): what goes before a field's name.
std::string Prefix(const Where* w) {
  const std::string n = Name(w);
  return n.empty() ? n : n + ".";
}

// Scans the message up to `in`'s limit by `shape`; `at` says where it is.
// False with `why` at the first element summarize could not have written,
// or bytes that are no message.
bool Scan(CodedInputStream* in, const Shape& shape, const Where* at, std::string* why) {
  uint64_t count[kMaxRules] = {}, small[kMaxRules] = {};
  bool has_needed = shape.needs == 0;
  for (;;) {
    const uint32_t tag = in->ReadTag();
    if (tag == 0) {
      // The end of the message, or bytes that are none.
      if (in->BytesUntilLimit() != 0) {
        *why = Prefix(at) + "does not parse";
        return false;
      }
      break;
    }
    const int number = static_cast<int>(WireFormatLite::GetTagFieldNumber(tag));
    const bool delimited = WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    size_t k = 0;
    while (k < shape.rules.size() && shape.rules[k].number != number) ++k;
    if (!delimited || (k == shape.rules.size() && number != shape.needs)) {
      if (!WireFormatLite::SkipField(in, tag)) {
        *why = Prefix(at) + "does not parse";
        return false;
      }
      continue;
    }
    uint32_t len = 0;
    if (!in->ReadVarint32(&len) || static_cast<int>(len) < 0 || static_cast<int>(len) > in->BytesUntilLimit()) {
      *why = Prefix(at) + "does not parse";
      return false;
    }
    if (k == shape.rules.size()) {  // the needed field
      has_needed |= len > 0;
      in->Skip(static_cast<int>(len));
      continue;
    }
    const Rule& r = shape.rules[k];
    const Where here{at, &r, r.repeated ? count[k] : 0};
    if (r.repeated) {
      ++count[k];
      if (len < r.min_bytes && ++small[k] > r.smaller) {
        *why = Name(&here) + " is " + std::to_string(len) + " bytes: summarize writes every one with at least " +
               std::to_string(r.min_bytes) + " (" + r.why + ")" +
               (r.smaller > 0 ? std::string(" but one (") + r.smaller_why + "), and this is the " +
                                    Ordinal(small[k]) + " smaller"
                              : std::string());
        return false;
      }
    }
    if (r.shape == nullptr) {
      in->Skip(static_cast<int>(len));
      continue;
    }
    const CodedInputStream::Limit limit = in->PushLimit(static_cast<int>(len));
    if (!Scan(in, *r.shape, &here, why)) return false;
    in->PopLimit(limit);
  }
  if (!has_needed) {
    const std::string n = Name(at);
    *why = (n.empty() ? std::string("it") : n) + " " + shape.needs_why;
    return false;
  }
  return true;
}

}  // namespace

bool PlausibleSummaryRecord(const char* data, size_t size, std::string* why) {
  const Shapes& shapes = TheShapes();
  if (size > static_cast<size_t>(INT32_MAX)) {
    *why = "longer than any record";
    return false;
  }
  CodedInputStream in(reinterpret_cast<const uint8_t*>(data), static_cast<int>(size));
  return Scan(&in, shapes.record, nullptr, why);
}

}  // namespace ncclwatch::tools
