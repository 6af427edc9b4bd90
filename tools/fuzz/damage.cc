#include "tools/fuzz/damage.h"

#include <ctype.h>
#include <stdio.h>

#include <cstdlib>
#include <map>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "proto/trace.pb.h"
#include "tools/diagnose/diagnose.h"
#include "tools/model/model.h"
#include "tools/model/semantics.h"
#include "tools/reader/reader.h"

namespace ncclwatch::fuzz {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr int64_t kWriteSlackNs = 1'000'000'000;   // model.cc: kWriteSlackNs
constexpr int64_t kHeaderSlackNs = 2'000'000'000;  // model.cc: kHostClockSlackNs

struct Read {
  std::vector<trace::Record> records;
  std::map<uint32_t, std::string> strings;  // StringDef id -> text
  std::map<uint32_t, int32_t> nranks;       // file comm -> CommInit nranks
  size_t issues = 0;
};

Read ReadAll(const std::string& bytes) {
  tools::TraceReader r;
  r.OpenBytes("f", bytes);
  Read out;
  trace::Record rec;
  uint64_t off;
  while (r.Next(&rec, &off)) {
    // start_ns is resolved from the chain: the delta is what was written.
    if (rec.has_op()) rec.mutable_op()->clear_start_ns();
    if (rec.has_string_def()) out.strings[rec.string_def().id()] = rec.string_def().text();
    if (rec.has_comm_init()) out.nranks[rec.comm_init().comm()] = rec.comm_init().nranks();
    out.records.push_back(rec);
  }
  out.issues = r.issues().size();
  return out;
}

bool HostName(const std::string& s) {
  for (char ch : s)
    if (!isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.' && ch != '_') return false;
  return !s.empty();
}

bool IsTime(const std::string& name) {
  return name.size() > 3 && name.compare(name.size() - 3, 3, "_ns") == 0;
}

// Compares two messages of one type field by field; false at the first
// change that no real file could hold (see Plausible), or that is not a
// plain value (a field that appeared, a repeated field that grew).
class Comparer {
 public:
  explicit Comparer(const Read& damaged) : b_(damaged) {}

  bool Same(const Message& x, const Message& y, const std::string& path, const trace::Record& rec) {
    const auto* d = x.GetDescriptor();
    const Reflection* rx = x.GetReflection();
    const Reflection* ry = y.GetReflection();
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* f = d->field(i);
      const std::string name = path + f->name();
      if (f->is_repeated()) {
        if (rx->FieldSize(x, f) != ry->FieldSize(y, f)) return Fail(name + " (count)");
        for (int k = 0; k < rx->FieldSize(x, f); ++k) {
          if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
            if (!Same(rx->GetRepeatedMessage(x, f, k), ry->GetRepeatedMessage(y, f, k), name + ".", rec)) return false;
          } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
            if (rx->GetRepeatedString(x, f, k) != ry->GetRepeatedString(y, f, k)) return Fail(name);
          } else if (Int(rx, x, f, k) != Int(ry, y, f, k)) {
            return Fail(name);
          }
        }
        continue;
      }
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        if (rx->HasField(x, f) != ry->HasField(y, f)) return Fail(name + " (presence)");
        if (rx->HasField(x, f) && !Same(rx->GetMessage(x, f), ry->GetMessage(y, f), name + ".", rec)) return false;
        continue;
      }
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
        if (rx->GetString(x, f) == ry->GetString(y, f)) continue;
        // Another host's name is a real file's (gethostname(2)'s characters).
        if (name != "header.hostname" || !HostName(ry->GetString(y, f))) return Fail(name);
        changed_ += (changed_.empty() ? "" : ",") + name;
        continue;
      }
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE || f->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT) {
        if (rx->GetDouble(x, f) != ry->GetDouble(y, f)) return Fail(name);
        continue;
      }
      const int64_t old = Int(rx, x, f, -1), now = Int(ry, y, f, -1);
      if (old == now) continue;
      changed_ += (changed_.empty() ? "" : ",") + name;
      if (!PlausibleValue(name, old, now, rec)) return false;
    }
    return true;
  }
  const std::string& changed() const { return changed_; }

 private:
  static int64_t Int(const Reflection* r, const Message& m, const FieldDescriptor* f, int k) {
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: return k < 0 ? r->GetInt32(m, f) : r->GetRepeatedInt32(m, f, k);
      case FieldDescriptor::CPPTYPE_INT64: return k < 0 ? r->GetInt64(m, f) : r->GetRepeatedInt64(m, f, k);
      case FieldDescriptor::CPPTYPE_UINT32: return k < 0 ? r->GetUInt32(m, f) : r->GetRepeatedUInt32(m, f, k);
      case FieldDescriptor::CPPTYPE_UINT64:
        return static_cast<int64_t>(k < 0 ? r->GetUInt64(m, f) : r->GetRepeatedUInt64(m, f, k));
      case FieldDescriptor::CPPTYPE_BOOL: return k < 0 ? r->GetBool(m, f) : r->GetRepeatedBool(m, f, k);
      case FieldDescriptor::CPPTYPE_ENUM: return k < 0 ? r->GetEnumValue(m, f) : r->GetRepeatedEnumValue(m, f, k);
      default: return 0;
    }
  }

  bool PlausibleValue(const std::string& name, int64_t old, int64_t now, const trace::Record& rec) {
    if (name == "op.count") return rec.op().kind() == trace::OP_KIND_P2P || now != 0;
    if (name == "op.root" || name == "op.peer") {
      auto n = b_.nranks.find(rec.op().comm());
      return now >= 0 && n != b_.nranks.end() && now < n->second;
    }
    if (name == "op.datatype") {
      auto s = b_.strings.find(static_cast<uint32_t>(now));
      return s != b_.strings.end() && tools::IsNcclDatatype(s->second);
    }
    if (IsTime(name)) {
      // Wrapped as unsigned: a change by less than the slack either way.
      const uint64_t diff = static_cast<uint64_t>(now) - static_cast<uint64_t>(old);
      const uint64_t slack = name.rfind("header.", 0) == 0 ? kHeaderSlackNs : kWriteSlackNs;
      return diff < slack || -diff < slack;
    }
    return false;
  }
  bool Fail(const std::string& name) {
    changed_ += (changed_.empty() ? "" : ",") + name;
    return false;
  }

  const Read& b_;
  std::string changed_;
};

}  // namespace

std::string VerdictOf(const Files& files) {
  using namespace ncclwatch::tools;
  Model model;
  std::string error;
  if (!LoadModelFromBytes(files, LoadOptions{}, &model, &error)) return "UNUSABLE INPUT: " + error;
  MatchOps(&model);
  AlignClocks(&model);
  return Diagnose(model).verdict();
}

bool DamageShows(const std::string& intact, const std::string& damaged) {
  return damaged == intact || damaged.rfind("INCOMPLETE", 0) == 0 || damaged.rfind("UNUSABLE INPUT: ", 0) == 0;
}

bool Plausible(const std::string& intact, const std::string& damaged, std::string* why) {
  const Read a = ReadAll(intact), b = ReadAll(damaged);
  if (a.records.size() != b.records.size() || a.issues != b.issues) {
    *why = "framing: " + std::to_string(a.records.size()) + " records read, now " + std::to_string(b.records.size());
    return false;
  }
  Comparer c(b);
  bool same = true;
  for (size_t i = 0; i < a.records.size() && same; ++i) same = c.Same(a.records[i], b.records[i], "", a.records[i]);
  *why = c.changed().empty() ? "no field changed" : c.changed();
  return same;
}

Files WithByte(const Files& files, size_t file, size_t offset, uint8_t value) {
  Files out = files;
  if (file < out.size() && offset < out[file].second.size()) out[file].second[offset] = static_cast<char>(value);
  return out;
}

std::string CheckOneByte(const Files& files, const std::string& intact_verdict, size_t file, size_t offset,
                         uint8_t value) {
  const Files damaged = WithByte(files, file, offset, value);
  const std::string verdict = VerdictOf(damaged);
  if (DamageShows(intact_verdict, verdict)) return "";
  std::string why;
  if (Plausible(files[file].second, damaged[file].second, &why)) return "";
  char at[128];
  snprintf(at, sizeof(at), "%s offset %zu: %02x -> %02x", files[file].first.c_str(), offset,
           static_cast<uint8_t>(files[file].second[offset]), value);
  return std::string(at) + " [" + why + "]: " + verdict;
}

}  // namespace ncclwatch::fuzz
