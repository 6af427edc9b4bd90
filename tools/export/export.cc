#include "tools/export/export.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <stdio.h>

#include <algorithm>
#include <map>

#include "tools/model/liveness.h"
#include "tools/model/semantics.h"
#include "tools/stats/text.h"

namespace ncclwatch::tools {
namespace {

using google::protobuf::Value;

Value Str(const std::string& s) {
  Value v;
  v.set_string_value(SanitizeUtf8(s));
  return v;
}
Value Num(double d) {
  Value v;
  v.set_number_value(d);
  return v;
}
Value Bool(bool b) {
  Value v;
  v.set_bool_value(b);
  return v;
}

std::string CommName(const Comm& c) {
  if (!c.name.empty()) return c.name;
  char buf[40];
  snprintf(buf, sizeof(buf), "comm 0x%llx", static_cast<unsigned long long>(c.hash));
  return buf;
}

std::string ProcessName(const Proc& p) {
  std::string hp = p.host + ":" + std::to_string(p.pid);
  if (p.launcher_rank >= 0) return "rank " + std::to_string(p.launcher_rank) + " (" + hp + ")";
  return hp;
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

class Builder {
 public:
  explicit Builder(const Model& m) : m_(m), live_(JudgeLiveness(m)) {}

  stats::ChromeTrace Build() {
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

    stats::ChromeTrace t;
    t.set_displaytimeunit("ns");
    auto& other = *t.mutable_otherdata();
    other["generator"] = "ncclwatch export";
    other["origin_ns"] = std::to_string(origin_);
    other["clock_alignment"] = SanitizeUtf8(m_.alignment_method);
    char buf[64];
    snprintf(buf, sizeof(buf), "%.3f", m_.alignment_error_ns / 1000.0);
    other["alignment_error_us"] = buf;

    std::vector<stats::ChromeEvent> meta, events;
    for (uint32_t pi = 0; pi < m_.procs.size(); ++pi) ProcEvents(pi, &meta, &events);
    std::stable_sort(events.begin(), events.end(), [](const stats::ChromeEvent& a, const stats::ChromeEvent& b) {
      if (a.ts() != b.ts()) return a.ts() < b.ts();
      return a.dur() > b.dur();  // an enclosing span first
    });
    for (auto& e : meta) *t.add_traceevents() = std::move(e);
    for (auto& e : events) *t.add_traceevents() = std::move(e);
    return t;
  }

 private:
  double Ts(int64_t ns) const { return static_cast<double>(ns - origin_) / 1000.0; }

  stats::ChromeEvent Meta(const char* name, int32_t pid, int32_t tid, const char* key, Value v) const {
    stats::ChromeEvent e;
    e.set_name(name);
    e.set_ph("M");
    e.set_pid(pid);
    if (tid >= 0) e.set_tid(tid);
    (*e.mutable_args())[key] = std::move(v);
    return e;
  }

  void OpArgs(uint32_t oi, stats::ChromeEvent* e) const {
    const Op& o = m_.ops[oi];
    auto& a = *e->mutable_args();
    const Comm& c = m_.comms[o.comm];
    a["comm"] = Str(CommName(c));
    a["comm_hash"] = Str([&] {
      char buf[24];
      snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(c.hash));
      return std::string(buf);
    }());
    a["rank"] = Num(o.rank);
    a["seq"] = Num(static_cast<double>(o.seq));
    a["count"] = Num(static_cast<double>(o.count));
    a["datatype"] = Str(m_.Str(o.datatype));
    a["algo"] = Str(m_.Str(o.algo));
    a["proto"] = Str(m_.Str(o.proto));
    a["nchannels"] = Num(o.nchannels);
    if (o.kind == OpKind::kP2p) a["peer"] = Num(o.peer_or_root);
    else if (IsRooted(o.fn)) a["root"] = Num(o.peer_or_root);
    a["enqueue_us"] = Num(o.enqueue_ns / 1000.0);
    if (o.has_gpu) {
      a["gpu_us"] = Num(o.gpu_duration_ns / 1000.0);
      if (o.start_ns != kNoTime) a["enqueue_to_kernel_us"] = Num((o.gpu_start_ns - o.start_ns) / 1000.0);
    }
    if (o.state == OpState::kCompleted && o.start_ns != kNoTime && o.done_ns != kNoTime)
      a["cpu_us"] = Num((o.done_ns - o.start_ns) / 1000.0);
    if (live_.Hung(oi)) a["stuck"] = Bool(true);
    if (o.state == OpState::kUntracked) a["completion"] = Str("not tracked");
  }

  void ProcEvents(uint32_t pi, std::vector<stats::ChromeEvent>* meta, std::vector<stats::ChromeEvent>* events) {
    const Proc& p = m_.procs[pi];
    const int32_t pid = static_cast<int32_t>(pi);
    meta->push_back(Meta("process_name", pid, -1, "name", Str(ProcessName(p))));
    meta->push_back(Meta("process_sort_index", pid, -1, "sort_index",
                         Num(p.launcher_rank >= 0 ? p.launcher_rank : static_cast<double>(pi))));

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
      meta->push_back(Meta("thread_name", pid, tid, "name", Str(n)));
      meta->push_back(Meta("thread_sort_index", pid, tid, "sort_index", Num(tid)));
      return tid;
    };
    std::map<uint32_t, int32_t> first_tid_of_comm;
    for (auto& [ci, ops] : by_comm) {
      const std::string name = CommName(m_.comms[ci]);
      // CPU spans.
      Lanes cpu_lanes;
      std::vector<std::pair<size_t, stats::ChromeEvent>> cpu;
      bool any_gpu = false;
      for (uint32_t oi : ops) {
        const Op& o = m_.ops[oi];
        any_gpu |= o.has_gpu;
        int64_t end;
        std::string ename = m_.Str(o.func).empty() ? "(unknown)" : m_.Str(o.func);
        const OpLiveness lv = live_.of_op[oi];
        if (o.state == OpState::kCompleted && o.done_ns != kNoTime) {
          end = std::max(o.done_ns, o.start_ns);
        } else if (lv == OpLiveness::kHung) {
          end = std::max(end_, o.start_ns);
          ename += " (STUCK)";
        } else if (lv == OpLiveness::kInFlight) {
          end = std::max(end_, o.start_ns);
          ename += " (in flight)";
        } else {
          end = o.start_ns + o.enqueue_ns;
        }
        stats::ChromeEvent e;
        e.set_name(SanitizeUtf8(ename));
        e.set_cat(o.kind == OpKind::kP2p ? "p2p" : "coll");
        e.set_ph("X");
        e.set_ts(Ts(o.start_ns));
        e.set_dur(static_cast<double>(end - o.start_ns) / 1000.0);
        e.set_pid(pid);
        OpArgs(oi, &e);
        cpu.emplace_back(cpu_lanes.Place(o.start_ns, end), std::move(e));
      }
      std::vector<int32_t> cpu_tids;
      for (size_t l = 0; l < cpu_lanes.size(); ++l) cpu_tids.push_back(track(name, l));
      first_tid_of_comm[ci] = cpu_tids.empty() ? 0 : cpu_tids[0];
      for (auto& [lane, e] : cpu) {
        e.set_tid(cpu_tids[lane]);
        events->push_back(std::move(e));
      }
      if (!any_gpu) continue;
      // GPU kernel spans.
      std::vector<uint32_t> gpu_ops;
      for (uint32_t oi : ops)
        if (m_.ops[oi].has_gpu) gpu_ops.push_back(oi);
      std::stable_sort(gpu_ops.begin(), gpu_ops.end(),
                       [&](uint32_t a, uint32_t b) { return m_.ops[a].gpu_start_ns < m_.ops[b].gpu_start_ns; });
      Lanes gpu_lanes;
      std::vector<std::pair<size_t, stats::ChromeEvent>> gpu;
      for (uint32_t oi : gpu_ops) {
        const Op& o = m_.ops[oi];
        stats::ChromeEvent e;
        e.set_name(SanitizeUtf8(m_.Str(o.func).empty() ? "(unknown)" : m_.Str(o.func)));
        e.set_cat("gpu");
        e.set_ph("X");
        e.set_ts(Ts(o.gpu_start_ns));
        e.set_dur(o.gpu_duration_ns / 1000.0);
        e.set_pid(pid);
        OpArgs(oi, &e);
        gpu.emplace_back(gpu_lanes.Place(o.gpu_start_ns, o.gpu_end_ns()), std::move(e));
      }
      std::vector<int32_t> gpu_tids;
      for (size_t l = 0; l < gpu_lanes.size(); ++l) gpu_tids.push_back(track(name + " (GPU)", l));
      for (auto& [lane, e] : gpu) {
        e.set_tid(gpu_tids[lane]);
        events->push_back(std::move(e));
      }
    }

    // Stuck reports.
    for (const StuckReport& r : p.stucks) {
      if (r.time_ns == kNoTime) continue;
      stats::ChromeEvent e;
      e.set_name("stuck report");
      e.set_cat("stuck");
      e.set_ph("i");
      e.set_s("p");
      e.set_ts(Ts(r.time_ns));
      e.set_pid(pid);
      int32_t tid = 0;
      if (!r.ops.empty()) {
        auto it = first_tid_of_comm.find(r.ops[0].comm);
        if (it != first_tid_of_comm.end()) tid = it->second;
      }
      e.set_tid(tid);
      auto& a = *e.mutable_args();
      a["threshold_sec"] = Num(r.threshold_sec);
      a["ops_in_flight"] = Num(static_cast<double>(r.ops.size()));
      for (size_t i = 0; i < r.ops.size(); ++i) {
        const StuckOp& s = r.ops[i];
        char line[256];
        snprintf(line, sizeof(line), " #%llu: in flight %.3f s; kernel channels %u started, %u stopped of %u; proxy ops %u started, %u stopped",
                 static_cast<unsigned long long>(s.seq), static_cast<double>(s.age_ns) / 1e9, s.kernel_started,
                 s.kernel_stopped, s.nchannels, s.proxy_started, s.proxy_stopped);
        std::string text = (m_.Str(s.func).empty() ? "(unknown)" : m_.Str(s.func));
        if (s.comm < m_.comms.size()) text += " on " + CommName(m_.comms[s.comm]);
        text += line;
        char key[32];
        snprintf(key, sizeof(key), "op %zu", i + 1);
        a[key] = Str(text);
      }
      events->push_back(std::move(e));
    }
  }

  const Model& m_;
  const Liveness live_;  // the judgement diagnose gives too (tools/liveness.h)
  int64_t origin_ = 0, end_ = 0;
};

}  // namespace

stats::ChromeTrace BuildChromeTrace(const Model& m) { return Builder(m).Build(); }

std::string ChromeTraceJson(const stats::ChromeTrace& t) {
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(t, &json, o);
  return json;
}

}  // namespace ncclwatch::tools
