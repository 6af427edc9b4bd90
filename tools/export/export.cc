#include "tools/export/export.h"

#include <stdio.h>

#include <string>
#include <vector>

#include "tools/text/safe_text.h"

namespace ncclwatch::tools {
namespace {

// Events are written one at a time, by hand, into a buffer flushed every
// megabyte: the format is flat and fixed, and printing each through
// protobuf's JSON encoder (reflection, a binary round trip) cost
// microseconds per event, and holding them all for it kilobytes per
// operation. Strings go through AppendString (escaped, UTF-8 made valid).
class JsonWriter {
 public:
  JsonWriter(const Timeline& t, std::ostream& out) : t_(t), m_(t.model()), out_(out) {}

  void Write(const ExportOptions& opts) {
    buf_ += "{\"traceEvents\":[";
    uint64_t done = 0;
    for (uint32_t pi : t_.procs()) {
      const ProcLayout l = t_.Layout(pi);
      Proc(pi, l);
      done += l.slices.size() - GpuSlices(l);
      if (buf_.size() > kFlushBytes) Flush();
      if (opts.progress) opts.progress(done, t_.ops_total());
    }
    char err[64];
    snprintf(err, sizeof(err), "%.3f", m_.alignment_error_ns / 1000.0);
    buf_ += "],\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"ncclwatch export\",\"origin_ns\":\"" +
            std::to_string(t_.origin_ns()) + "\",\"clock_alignment\":";
    AppendString(m_.alignment_method);
    buf_ += ",\"alignment_error_us\":\"" + std::string(err) + "\"}}";
    Flush();
  }

 private:
  static constexpr size_t kFlushBytes = 1 << 20;

  static size_t GpuSlices(const ProcLayout& l) {
    size_t n = 0;
    for (const SliceLayout& s : l.slices) n += s.gpu;
    return n;
  }

  void Flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }

  // JSON escapes keep the value; controls, C1 and reordering characters
  // are escaped, invalid UTF-8 becomes U+FFFD (tools/text/safe_text.h).
  void AppendString(const std::string& raw) { buf_ += JsonQuote(raw); }

  void AppendNum(double d) {
    char num[40];
    if (d == static_cast<double>(static_cast<int64_t>(d)) && d > -1e15 && d < 1e15)
      snprintf(num, sizeof(num), "%lld", static_cast<long long>(d));
    else
      snprintf(num, sizeof(num), "%.3f", d);
    buf_ += num;
  }

  // ns since the origin as microseconds, exactly to the ns.
  void AppendUs(int64_t ns) {
    char num[40];
    snprintf(num, sizeof(num), "%.3f", static_cast<double>(ns) / 1000.0);
    buf_ += num;
  }

  // Starts an event: {"name":...,"ph":..., "pid":..., "tid":...
  void Begin(const std::string& name, const char* cat, const char* ph, int32_t pid, int32_t tid) {
    buf_ += first_ ? "{\"name\":" : ",{\"name\":";
    first_ = false;
    AppendString(name);
    if (cat != nullptr) buf_ += std::string(",\"cat\":\"") + cat + "\"";
    buf_ += std::string(",\"ph\":\"") + ph + "\",\"pid\":" + std::to_string(pid);
    if (tid >= 0) buf_ += ",\"tid\":" + std::to_string(tid);
  }

  void Args(const std::vector<ExportArg>& args) {
    buf_ += ",\"args\":{";
    for (size_t i = 0; i < args.size(); ++i) {
      if (i > 0) buf_ += ',';
      AppendString(args[i].key);
      buf_ += ':';
      const ExportArg& a = args[i];
      switch (a.kind) {
        case ExportArg::kString: AppendString(a.s); break;
        case ExportArg::kInt: buf_ += std::to_string(a.i); break;
        case ExportArg::kDouble: AppendNum(a.d); break;
        case ExportArg::kBool: buf_ += a.b ? "true" : "false"; break;
      }
    }
    buf_ += '}';
  }

  void Meta(const char* name, int32_t pid, int32_t tid, const char* key, const std::string* s, int64_t n) {
    Begin(name, nullptr, "M", pid, tid);
    buf_ += ",\"args\":{\"" + std::string(key) + "\":";
    if (s != nullptr) AppendString(*s);
    else buf_ += std::to_string(n);
    buf_ += "}}";
  }

  void Proc(uint32_t pi, const ProcLayout& l) {
    const int32_t pid = static_cast<int32_t>(pi);
    Meta("process_name", pid, -1, "name", &l.name, 0);
    Meta("process_sort_index", pid, -1, "sort_index", nullptr, l.sort_index);
    // tid k + 1 for track k.
    for (size_t k = 0; k < l.tracks.size(); ++k) {
      const int32_t tid = static_cast<int32_t>(k + 1);
      Meta("thread_name", pid, tid, "name", &l.tracks[k].name, 0);
      Meta("thread_sort_index", pid, tid, "sort_index", nullptr, tid);
    }
    for (const SliceLayout& s : l.slices) {
      const int32_t tid = static_cast<int32_t>(s.track + 1);
      Begin(t_.SliceName(s), t_.Category(s), "X", pid, tid);
      buf_ += ",\"ts\":";
      AppendUs(s.start_ns);
      buf_ += ",\"dur\":";
      AppendNum(static_cast<double>(s.end_ns - s.start_ns) / 1000.0);
      args_.clear();
      t_.SliceArgs(s, &args_);
      Args(args_);
      buf_ += '}';
      if (s.flow != FlowStep::kNone) Flow(s, pid, tid);
    }
    for (const InstantLayout& in : l.instants) {
      const StuckReport& r = m_.procs[pi].stucks[in.stuck];
      Begin("stuck report", "stuck", "i", pid, 0);
      buf_ += ",\"s\":\"p\",\"ts\":";
      AppendUs(in.time_ns);
      args_.clear();
      t_.StuckArgs(r, &args_);
      Args(args_);
      buf_ += '}';
    }
  }

  // One step of the flow linking an operation across its ranks, at its
  // slice's start and bound to it: "s" on the earliest arrival, "t" on
  // the later ones, "f" on the last (Timeline orders them).
  void Flow(const SliceLayout& s, int32_t pid, int32_t tid) {
    const Op& o = m_.ops[s.op];
    const char* ph = s.flow == FlowStep::kFirst ? "s" : s.flow == FlowStep::kLast ? "f" : "t";
    Begin((m_.Str(o.func).empty() ? "(unknown)" : EventName(m_.Str(o.func))) + " #" + std::to_string(o.seq), "match",
          ph, pid, tid);
    buf_ += ",\"id\":" + std::to_string(t_.FlowId(s.op)) + ",\"bp\":\"e\",\"ts\":";
    AppendUs(s.start_ns);
    buf_ += '}';
  }

  const Timeline& t_;
  const Model& m_;
  std::ostream& out_;
  std::string buf_;
  std::vector<ExportArg> args_;
  bool first_ = true;
};

}  // namespace

ExportCounts WriteChromeTrace(const Model& m, const ExportOptions& opts, std::ostream& out) {
  const Timeline t(m, opts);
  JsonWriter(t, out).Write(opts);
  return {t.procs().size(), t.ops_total()};
}

}  // namespace ncclwatch::tools
