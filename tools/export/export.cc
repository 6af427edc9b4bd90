#include "tools/export/export.h"

#include <stdio.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "tools/model/liveness.h"
#include "tools/model/semantics.h"
#include "tools/stats/text.h"

namespace ncclwatch::tools {
namespace {

// Events are written one at a time, by hand: the format is flat and fixed,
// and printing each through protobuf's JSON encoder (reflection, a binary
// round trip) cost microseconds per event, and holding them all for it
// kilobytes per operation. Strings go through JsonString (escaped, UTF-8
// made valid).
std::string JsonString(const std::string& raw) {
  const std::string s = SanitizeUtf8(raw);
  std::string out = "\"";
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string Num(double d) {
  char buf[40];
  if (d == static_cast<double>(static_cast<int64_t>(d)) && d > -1e15 && d < 1e15)
    snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(d));
  else
    snprintf(buf, sizeof(buf), "%.3f", d);
  return buf;
}

std::string CommName(const Comm& c) {
  if (!c.name.empty()) return c.name;
  char buf[40];
  snprintf(buf, sizeof(buf), "comm 0x%llx", static_cast<unsigned long long>(c.hash));
  return buf;
}

// Assigns non-overlapping lanes, first fit.
class Lanes {
 public:
  size_t Place(int64_t start, int64_t end) {
    for (size_t i = 0; i < ends_.size(); ++i)
      if (ends_[i] <= start) {
        ends_[i] = end;
        return i;
      }
    ends_.push_back(end);
    return ends_.size() - 1;
  }
  size_t size() const { return ends_.size(); }

 private:
  std::vector<int64_t> ends_;
};

// One event's JSON object, built field by field.
class Event {
 public:
  Event& Str(const char* key, const std::string& v) { return Raw(key, JsonString(v)); }
  Event& Num(const char* key, double v) { return Raw(key, tools::Num(v)); }
  Event& Arg(const std::string& key, const std::string& json) {
    args_ += (args_.empty() ? "" : ",") + JsonString(key) + ":" + json;
    return *this;
  }
  Event& Raw(const char* key, const std::string& json) {
    body_ += (body_.empty() ? "" : ",") + std::string("\"") + key + "\":" + json;
    return *this;
  }
  std::string Json() const { return "{" + body_ + (args_.empty() ? "" : ",\"args\":{" + args_ + "}") + "}"; }

 private:
  std::string body_, args_;
};

class Exporter {
 public:
  Exporter(const Model& m, std::ostream& out) : m_(m), live_(JudgeLiveness(m)), out_(out) {}

  void Write() {
    origin_ = INT64_MAX;
    end_ = INT64_MIN;
    auto see = [&](int64_t t) {
      if (t == kNoTime) return;
      origin_ = std::min(origin_, t);
      end_ = std::max(end_, t);
    };
    for (const Proc& p : m_.procs) {
      see(p.first_ns);
      see(p.last_ns);
    }
    for (const Op& o : m_.ops) {
      see(o.start_ns);
      see(o.done_ns);
      see(o.gpu_start_ns);
      see(o.gpu_end_ns());
    }
    if (origin_ == INT64_MAX) origin_ = end_ = 0;
    // Each match's lowest and highest rank's op, once (a flow's ends): not
    // per op, which would cost ranks squared per collective.
    ends_.assign(m_.matches.size(), {kNone, kNone});
    for (uint32_t oi = 0; oi < m_.ops.size(); ++oi) {
      const Op& o = m_.ops[oi];
      if (o.match == kNone || o.start_ns == kNoTime) continue;
      auto& [lo, hi] = ends_[o.match];
      if (lo == kNone || o.rank < m_.ops[lo].rank) lo = oi;
      if (hi == kNone || o.rank > m_.ops[hi].rank) hi = oi;
    }
    char err[64];
    snprintf(err, sizeof(err), "%.3f", m_.alignment_error_ns / 1000.0);
    out_ << "{\"traceEvents\":[";
    for (uint32_t pi = 0; pi < m_.procs.size(); ++pi) ProcEvents(pi);
    out_ << "],\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"ncclwatch export\",\"origin_ns\":\"" << origin_
         << "\",\"clock_alignment\":" << JsonString(m_.alignment_method) << ",\"alignment_error_us\":\"" << err
         << "\"}}";
  }

 private:
  std::string Ts(int64_t ns) const {
    char buf[40];
    snprintf(buf, sizeof(buf), "%.3f", static_cast<double>(ns - origin_) / 1000.0);
    return buf;
  }

  void Emit(const Event& e) {
    out_ << (first_ ? "" : ",") << e.Json();
    first_ = false;
  }

  void Meta(const char* name, int32_t pid, int32_t tid, const char* key, const std::string& json) {
    Event e;
    e.Str("name", name).Str("ph", "M").Num("pid", pid);
    if (tid >= 0) e.Num("tid", tid);
    e.Arg(key, json);
    Emit(e);
  }

  void OpArgs(uint32_t oi, Event* e) const {
    const Op& o = m_.ops[oi];
    const Comm& c = m_.comms[o.comm];
    char hash[24];
    snprintf(hash, sizeof(hash), "0x%llx", static_cast<unsigned long long>(c.hash));
    e->Arg("comm", JsonString(CommName(c))).Arg("comm_hash", JsonString(hash));
    e->Arg("rank", tools::Num(o.rank)).Arg("seq", tools::Num(static_cast<double>(o.seq)));
    e->Arg("count", tools::Num(static_cast<double>(o.count))).Arg("datatype", JsonString(m_.Str(o.datatype)));
    e->Arg("algo", JsonString(m_.Str(o.algo))).Arg("proto", JsonString(m_.Str(o.proto)));
    e->Arg("nchannels", tools::Num(o.nchannels));
    if (o.kind == OpKind::kP2p) e->Arg("peer", tools::Num(o.peer_or_root));
    else if (IsRooted(o.fn)) e->Arg("root", tools::Num(o.peer_or_root));
    e->Arg("enqueue_us", tools::Num(o.enqueue_ns / 1000.0));
    if (o.has_gpu) {
      e->Arg("gpu_us", tools::Num(o.gpu_duration_ns / 1000.0));
      if (o.start_ns != kNoTime) e->Arg("enqueue_to_kernel_us", tools::Num((o.gpu_start_ns - o.start_ns) / 1000.0));
    }
    if (o.state == OpState::kCompleted && o.start_ns != kNoTime && o.done_ns != kNoTime)
      e->Arg("cpu_us", tools::Num((o.done_ns - o.start_ns) / 1000.0));
    if (live_.Hung(oi)) e->Arg("stuck", "true");
    if (o.state == OpState::kUntracked) e->Arg("completion", JsonString("not tracked"));
  }

  // The flow linking one operation across its ranks: "s" on the lowest
  // rank's span, "t" on the ones between, "f" on the highest, each bound to
  // the span it sits on (bp "e"). Perfetto draws the arrows between ranks.
  void Flow(uint32_t oi, int32_t pid, int32_t tid, int64_t ts) {
    const Op& o = m_.ops[oi];
    if (o.match == kNone) return;
    const auto [lo, hi] = ends_[o.match];
    if (lo == hi) return;  // on one rank only: nothing to link
    const char* ph = oi == lo ? "s" : oi == hi ? "f" : "t";
    Event e;
    e.Str("name", (m_.Str(o.func).empty() ? "(unknown)" : m_.Str(o.func)) + " #" + std::to_string(o.seq))
        .Str("cat", "match")
        .Str("ph", ph)
        .Raw("id", tools::Num(o.match + 1))
        .Str("bp", "e")
        .Raw("ts", Ts(ts))
        .Num("pid", pid)
        .Num("tid", tid);
    Emit(e);
  }

  void ProcEvents(uint32_t pi) {
    const Proc& p = m_.procs[pi];
    const int32_t pid = static_cast<int32_t>(pi);
    // Named by rank as the user knows it: the launcher's, else the rank in
    // its largest communicator (ProcName), with where it ran.
    Meta("process_name", pid, -1, "name", JsonString(ProcName(m_, pi) + " (" + p.host + ":" + std::to_string(p.pid) + ")"));
    Meta("process_sort_index", pid, -1, "sort_index",
         tools::Num(p.launcher_rank >= 0 ? p.launcher_rank : static_cast<double>(pi)));

    // This process's ops by communicator, in program order.
    std::map<uint32_t, std::vector<uint32_t>> by_comm;
    for (uint32_t oi : p.ops) {
      const Op& o = m_.ops[oi];
      if (o.comm < m_.comms.size() && o.start_ns != kNoTime) by_comm[o.comm].push_back(oi);
    }
    int32_t next_tid = 1;
    auto track = [&](const std::string& name, size_t lane) {
      const int32_t tid = next_tid++;
      const std::string n = lane == 0 ? name : name + " [" + std::to_string(lane + 1) + "]";
      Meta("thread_name", pid, tid, "name", JsonString(n));
      Meta("thread_sort_index", pid, tid, "sort_index", tools::Num(tid));
      return tid;
    };
    std::map<uint32_t, int32_t> first_tid_of_comm;
    for (auto& [ci, ops] : by_comm) {
      const std::string name = CommName(m_.comms[ci]);
      // CPU spans: lanes first (a track per lane), then the spans.
      Lanes cpu_lanes;
      std::vector<uint32_t> lane_of(ops.size());
      std::vector<int64_t> end_of(ops.size());
      bool any_gpu = false;
      for (size_t k = 0; k < ops.size(); ++k) {
        const Op& o = m_.ops[ops[k]];
        any_gpu |= o.has_gpu;
        end_of[k] = End(ops[k]);
        lane_of[k] = static_cast<uint32_t>(cpu_lanes.Place(o.start_ns, end_of[k]));
      }
      std::vector<int32_t> cpu_tids;
      for (size_t l = 0; l < cpu_lanes.size(); ++l) cpu_tids.push_back(track(name, l));
      first_tid_of_comm[ci] = cpu_tids.empty() ? 0 : cpu_tids[0];
      for (size_t k = 0; k < ops.size(); ++k) {
        const uint32_t oi = ops[k];
        const Op& o = m_.ops[oi];
        std::string ename = m_.Str(o.func).empty() ? "(unknown)" : m_.Str(o.func);
        const OpLiveness lv = live_.of_op[oi];
        if (!(o.state == OpState::kCompleted && o.done_ns != kNoTime)) {
          if (lv == OpLiveness::kHung) ename += " (STUCK)";
          else if (lv == OpLiveness::kInFlight) ename += " (in flight)";
        }
        Event e;
        e.Str("name", ename)
            .Str("cat", o.kind == OpKind::kP2p ? "p2p" : "coll")
            .Str("ph", "X")
            .Raw("ts", Ts(o.start_ns))
            .Raw("dur", tools::Num(static_cast<double>(end_of[k] - o.start_ns) / 1000.0))
            .Num("pid", pid)
            .Num("tid", cpu_tids[lane_of[k]]);
        OpArgs(oi, &e);
        Emit(e);
        Flow(oi, pid, cpu_tids[lane_of[k]], o.start_ns);
      }
      if (!any_gpu) continue;
      // GPU kernel spans.
      std::vector<uint32_t> gpu_ops;
      for (uint32_t oi : ops)
        if (m_.ops[oi].has_gpu) gpu_ops.push_back(oi);
      std::stable_sort(gpu_ops.begin(), gpu_ops.end(),
                       [&](uint32_t a, uint32_t b) { return m_.ops[a].gpu_start_ns < m_.ops[b].gpu_start_ns; });
      Lanes gpu_lanes;
      std::vector<uint32_t> gpu_lane(gpu_ops.size());
      for (size_t k = 0; k < gpu_ops.size(); ++k)
        gpu_lane[k] = static_cast<uint32_t>(
            gpu_lanes.Place(m_.ops[gpu_ops[k]].gpu_start_ns, m_.ops[gpu_ops[k]].gpu_end_ns()));
      std::vector<int32_t> gpu_tids;
      for (size_t l = 0; l < gpu_lanes.size(); ++l) gpu_tids.push_back(track(name + " (GPU)", l));
      for (size_t k = 0; k < gpu_ops.size(); ++k) {
        const uint32_t oi = gpu_ops[k];
        const Op& o = m_.ops[oi];
        Event e;
        e.Str("name", m_.Str(o.func).empty() ? "(unknown)" : m_.Str(o.func))
            .Str("cat", "gpu")
            .Str("ph", "X")
            .Raw("ts", Ts(o.gpu_start_ns))
            .Raw("dur", tools::Num(o.gpu_duration_ns / 1000.0))
            .Num("pid", pid)
            .Num("tid", gpu_tids[gpu_lane[k]]);
        OpArgs(oi, &e);
        Emit(e);
      }
    }

    // Stuck reports.
    for (const StuckReport& r : p.stucks) {
      if (r.time_ns == kNoTime) continue;
      int32_t tid = 0;
      if (!r.ops.empty()) {
        auto it = first_tid_of_comm.find(r.ops[0].comm);
        if (it != first_tid_of_comm.end()) tid = it->second;
      }
      Event e;
      e.Str("name", "stuck report").Str("cat", "stuck").Str("ph", "i").Str("s", "p").Raw("ts", Ts(r.time_ns));
      e.Num("pid", pid).Num("tid", tid);
      e.Arg("threshold_sec", tools::Num(r.threshold_sec)).Arg("ops_in_flight", tools::Num(static_cast<double>(r.ops.size())));
      for (size_t i = 0; i < r.ops.size(); ++i) {
        const StuckOp& s = r.ops[i];
        char line[256];
        snprintf(line, sizeof(line), " #%llu: in flight %.3f s; kernel channels %u started, %u stopped of %u; proxy ops %u started, %u stopped",
                 static_cast<unsigned long long>(s.seq), static_cast<double>(s.age_ns) / 1e9, s.kernel_started,
                 s.kernel_stopped, s.nchannels, s.proxy_started, s.proxy_stopped);
        std::string text = (m_.Str(s.func).empty() ? "(unknown)" : m_.Str(s.func));
        if (s.comm < m_.comms.size()) text += " on " + CommName(m_.comms[s.comm]);
        text += line;
        e.Arg("op " + std::to_string(i + 1), JsonString(text));
      }
      Emit(e);
    }
  }

  // Where an op's CPU span ends: its completion, the end of the trace for
  // one in flight (hung or not yet), else its enqueue.
  int64_t End(uint32_t oi) const {
    const Op& o = m_.ops[oi];
    if (o.state == OpState::kCompleted && o.done_ns != kNoTime) return std::max(o.done_ns, o.start_ns);
    const OpLiveness lv = live_.of_op[oi];
    if (lv == OpLiveness::kHung || lv == OpLiveness::kInFlight) return std::max(end_, o.start_ns);
    return o.start_ns + o.enqueue_ns;
  }

  const Model& m_;
  const Liveness live_;  // the judgement diagnose gives too (tools/model/liveness.h)
  std::ostream& out_;
  std::vector<std::pair<uint32_t, uint32_t>> ends_;  // per match: its lowest and highest rank's op
  bool first_ = true;
  int64_t origin_ = 0, end_ = 0;
};

}  // namespace

void WriteChromeTrace(const Model& m, std::ostream& out) { Exporter(m, out).Write(); }

}  // namespace ncclwatch::tools
