#include "tools/export/perfetto.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <stdint.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "proto/perfetto_subset.pb.h"
#include "tools/text/safe_text.h"

namespace ncclwatch::tools {
namespace {

namespace pb = ::ncclwatch::perfetto_subset;

constexpr uint32_t kSequence = 1;

// Interned strings of one kind (event names, categories, argument names):
// each gets an iid the first time, added to the packet that first uses it.
class Interner {
 public:
  // The iid of `s`; true in *fresh when the packet must carry it.
  uint64_t Iid(const std::string& s, bool* fresh) {
    auto [it, added] = iids_.emplace(s, iids_.size() + 1);
    *fresh = added;
    return it->second;
  }

 private:
  std::unordered_map<std::string, uint64_t> iids_;
};

class PerfettoWriter {
 public:
  PerfettoWriter(const Timeline& t, std::ostream& out) : t_(t), m_(t.model()), out_(out) {}

  void Write(const ExportOptions& opts) {
    uint64_t done = 0;
    for (uint32_t pi : t_.procs()) {
      const ProcLayout l = t_.Layout(pi);
      Proc(pi, l);
      for (const SliceLayout& s : l.slices) done += !s.gpu;
      if (opts.progress) opts.progress(done, t_.ops_total());
    }
    Flush();
  }

 private:
  static constexpr size_t kFlushBytes = 1 << 20;

  // Appends `p` as one Trace.packet (field 1, length-delimited), on our
  // sequence; the first packet of the sequence says its state starts there.
  void Emit(pb::TracePacket* p) {
    p->set_trusted_packet_sequence_id(kSequence);
    if (first_) {
      p->set_sequence_flags(pb::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
      first_ = false;
    } else if (p->has_track_event()) {
      p->set_sequence_flags(pb::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
    }
    scratch_.clear();
    p->AppendToString(&scratch_);
    // The packet's key and length, by libprotobuf's own encoder: what a
    // Trace message with this one packet would start with.
    namespace io = google::protobuf::io;
    using WireFormatLite = google::protobuf::internal::WireFormatLite;
    uint8_t head[5 + 10];  // a tag's varint32 and a length's varint64, at their longest
    uint8_t* end = io::CodedOutputStream::WriteTagToArray(
        WireFormatLite::MakeTag(pb::Trace::kPacketFieldNumber, WireFormatLite::WIRETYPE_LENGTH_DELIMITED), head);
    end = io::CodedOutputStream::WriteVarint64ToArray(scratch_.size(), end);
    buf_.append(reinterpret_cast<const char*>(head), static_cast<size_t>(end - head));
    buf_ += scratch_;
    if (buf_.size() > kFlushBytes) Flush();
  }

  void Flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }

  void Name(const std::string& name, pb::TracePacket* p) {
    bool fresh = false;
    const uint64_t iid = names_.Iid(name, &fresh);
    if (fresh) {
      pb::EventName* n = p->mutable_interned_data()->add_event_names();
      n->set_iid(iid);
      n->set_name(Printable(name));
    }
    p->mutable_track_event()->set_name_iid(iid);
  }

  void Category(const char* cat, pb::TracePacket* p) {
    bool fresh = false;
    const uint64_t iid = categories_.Iid(cat, &fresh);
    if (fresh) {
      pb::EventCategory* c = p->mutable_interned_data()->add_event_categories();
      c->set_iid(iid);
      c->set_name(cat);
    }
    p->mutable_track_event()->add_category_iids(iid);
  }

  void Args(const std::vector<ExportArg>& args, pb::TracePacket* p) {
    for (const ExportArg& a : args) {
      bool fresh = false;
      const uint64_t iid = arg_names_.Iid(a.key, &fresh);
      if (fresh) {
        pb::DebugAnnotationName* n = p->mutable_interned_data()->add_debug_annotation_names();
        n->set_iid(iid);
        n->set_name(Printable(a.key));
      }
      pb::DebugAnnotation* d = p->mutable_track_event()->add_debug_annotations();
      d->set_name_iid(iid);
      switch (a.kind) {
        case ExportArg::kString: d->set_string_value(Printable(a.s)); break;
        case ExportArg::kInt: d->set_int_value(a.i); break;
        case ExportArg::kDouble: d->set_double_value(a.d); break;
        case ExportArg::kBool: d->set_bool_value(a.b); break;
      }
    }
  }

  uint64_t Track(const std::string& name, uint64_t parent, int32_t pid) {
    const uint64_t uuid = next_uuid_++;
    packet_.Clear();
    pb::TrackDescriptor* d = packet_.mutable_track_descriptor();
    d->set_uuid(uuid);
    if (parent != 0) {
      d->set_parent_uuid(parent);
      d->set_name(Printable(name));
    } else {
      d->mutable_process()->set_pid(pid);
      d->mutable_process()->set_process_name(Printable(name));
    }
    Emit(&packet_);
    return uuid;
  }

  void Begin(const SliceLayout& s, uint64_t track) {
    packet_.Clear();
    packet_.set_timestamp(static_cast<uint64_t>(s.start_ns));
    pb::TrackEvent* e = packet_.mutable_track_event();
    e->set_type(pb::TrackEvent::TYPE_SLICE_BEGIN);
    e->set_track_uuid(track);
    Name(t_.SliceName(s), &packet_);
    Category(t_.Category(s), &packet_);
    if (s.flow == FlowStep::kLast) e->add_terminating_flow_ids(t_.FlowId(s.op));
    else if (s.flow != FlowStep::kNone) e->add_flow_ids(t_.FlowId(s.op));
    args_.clear();
    t_.SliceArgs(s, &args_);
    Args(args_, &packet_);
    Emit(&packet_);
  }

  void End(const SliceLayout& s, uint64_t track) {
    packet_.Clear();
    packet_.set_timestamp(static_cast<uint64_t>(s.end_ns));
    packet_.mutable_track_event()->set_type(pb::TrackEvent::TYPE_SLICE_END);
    packet_.mutable_track_event()->set_track_uuid(track);
    Emit(&packet_);
  }

  void Proc(uint32_t pi, const ProcLayout& l) {
    const uint64_t proc_uuid = Track(l.name, 0, static_cast<int32_t>(pi) + 1);
    std::vector<uint64_t> uuids;
    for (const TrackLayout& k : l.tracks) uuids.push_back(Track(k.name, proc_uuid, 0));
    // A slice's nested ones (a channel's phases) go between its begin and
    // its end: a slice end closes the latest open slice of its track.
    for (size_t i = 0; i < l.slices.size(); ++i) {
      const SliceLayout& s = l.slices[i];
      Begin(s, uuids[s.track]);
      for (uint32_t k = 0; k < s.nested && i + 1 < l.slices.size(); ++k) {
        const SliceLayout& n = l.slices[++i];
        Begin(n, uuids[n.track]);
        End(n, uuids[n.track]);
      }
      End(s, uuids[s.track]);
    }
    for (const InstantLayout& in : l.instants) {
      packet_.Clear();
      packet_.set_timestamp(static_cast<uint64_t>(in.time_ns));
      pb::TrackEvent* e = packet_.mutable_track_event();
      e->set_type(pb::TrackEvent::TYPE_INSTANT);
      e->set_track_uuid(proc_uuid);
      Name("stuck report", &packet_);
      Category("stuck", &packet_);
      args_.clear();
      t_.StuckArgs(m_.procs[pi].stucks[in.stuck], &args_);
      Args(args_, &packet_);
      Emit(&packet_);
    }
  }

  const Timeline& t_;
  const Model& m_;
  std::ostream& out_;
  std::string buf_, scratch_;
  pb::TracePacket packet_;  // reused: Clear() keeps its allocations
  std::vector<ExportArg> args_;
  Interner names_, categories_, arg_names_;
  uint64_t next_uuid_ = 1;
  bool first_ = true;
};

}  // namespace

ExportCounts WritePerfettoTrace(const Model& m, const ExportOptions& opts, std::ostream& out) {
  const Timeline t(m, opts);
  PerfettoWriter(t, out).Write(opts);
  return {t.procs().size(), t.ops_total()};
}

}  // namespace ncclwatch::tools
