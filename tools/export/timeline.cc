#include "tools/export/timeline.h"

#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "tools/model/semantics.h"
#include "tools/text/safe_text.h"

namespace ncclwatch::tools {
namespace {

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

// Whether a arrived before b: by start, then rank, then op id (a total
// order, so each flow has one first and one last operation).
bool Before(const Model& m, uint32_t a, uint32_t b) {
  const Op& x = m.ops[a];
  const Op& y = m.ops[b];
  if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
  if (x.rank != y.rank) return x.rank < y.rank;
  return a < b;
}

ExportArg Str(const char* key, std::string v) {
  ExportArg a;
  a.key = key;
  a.kind = ExportArg::kString;
  a.s = std::move(v);
  return a;
}
ExportArg Int(const char* key, int64_t v) {
  ExportArg a;
  a.key = key;
  a.kind = ExportArg::kInt;
  a.i = v;
  return a;
}
ExportArg Dbl(const char* key, double v) {
  ExportArg a;
  a.key = key;
  a.kind = ExportArg::kDouble;
  a.d = v;
  return a;
}

}  // namespace

std::string EventName(std::string_view name, bool nccl) {
  return CutName(name, nccl ? kMaxEventNcclNameBytes : kMaxEventNameBytes);
}

std::string ExportCommName(const Comm& c) {
  if (!c.name.empty()) return c.name;
  char buf[40];
  snprintf(buf, sizeof(buf), "comm 0x%llx", static_cast<unsigned long long>(c.hash));
  return buf;
}

int32_t RankOf(const Model& m, uint32_t proc) {
  if (proc < m.procs.size() && m.procs[proc].launcher_rank >= 0) return m.procs[proc].launcher_rank;
  // ProcName's choice, so that --ranks picks what the tracks are named.
  const std::string name = ProcName(m, proc);
  if (name.compare(0, 5, "rank ") != 0) return -1;
  return static_cast<int32_t>(strtol(name.c_str() + 5, nullptr, 10));
}

std::pair<int64_t, int64_t> JobSpan(const Model& m) {
  int64_t first = INT64_MAX, last = INT64_MIN;
  auto see = [&](int64_t t) {
    if (t == kNoTime) return;
    first = std::min(first, t);
    last = std::max(last, t);
  };
  for (const Proc& p : m.procs) {
    see(p.first_ns);
    see(p.last_ns);
  }
  for (const Op& o : m.ops) {
    see(o.start_ns);
    see(o.done_ns);
    see(o.gpu_start_ns);
    see(o.gpu_end_ns());
  }
  if (first == INT64_MAX) return {0, 0};
  return {first, last};
}

bool WindowAround(const Model& m, const std::vector<uint32_t>& ops, int64_t margin_ns, ExportOptions* opts) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (uint32_t oi : ops) {
    if (oi >= m.ops.size() || m.ops[oi].start_ns == kNoTime) continue;
    const Op& o = m.ops[oi];
    int64_t end = o.start_ns;
    if (o.done_ns != kNoTime) end = std::max(end, o.done_ns);
    else if (o.proc < m.procs.size() && m.procs[o.proc].last_ns != kNoTime) end = std::max(end, m.procs[o.proc].last_ns);
    if (o.has_gpu) end = std::max(end, o.gpu_end_ns());
    lo = std::min(lo, o.start_ns);
    hi = std::max(hi, end);
  }
  if (lo == INT64_MAX) return false;
  const int64_t origin = JobSpan(m).first;
  opts->from_ns = std::max<int64_t>(0, SaturatingAdd(lo - origin, -margin_ns));
  opts->to_ns = SaturatingAdd(hi - origin, margin_ns);
  return true;
}

namespace {

// "0-3,5": ranks as ranges.
std::string RankRanges(const std::set<int32_t>& ranks) {
  std::string s;
  for (auto it = ranks.begin(); it != ranks.end();) {
    const int32_t from = *it;
    int32_t to = from;
    for (++it; it != ranks.end() && *it == to + 1; ++it) ++to;
    s += (s.empty() ? "" : ",") + std::to_string(from) + (to > from ? "-" + std::to_string(to) : "");
  }
  return s;
}

}  // namespace

bool RanksExist(const Model& m, const std::set<int32_t>& ranks, std::string* error) {
  std::set<int32_t> have, lacking;
  for (uint32_t p = 0; p < m.procs.size(); ++p)
    if (const int32_t r = RankOf(m, p); r >= 0) have.insert(r);
  for (int32_t r : ranks)
    if (!have.count(r)) lacking.insert(r);
  if (lacking.empty()) return true;
  *error = std::string(lacking.size() == 1 ? "no rank " : "no ranks ") + RankRanges(lacking) + ": " +
           (have.empty() ? "no process of the job is named by a rank" : "the job's ranks are " + RankRanges(have));
  return false;
}

bool ParseRankList(const std::string& text, std::set<int32_t>* ranks, std::string* error) {
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string part = text.substr(pos, comma - pos);
    auto number = [&](const std::string& s, int32_t* v) {
      if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return false;
      *v = static_cast<int32_t>(strtol(s.c_str(), nullptr, 10));
      return true;
    };
    int32_t a = 0, b = 0;
    const size_t dash = part.find('-');
    const bool ok = dash == std::string::npos
                        ? number(part, &a) && (b = a, true)
                        : number(part.substr(0, dash), &a) && number(part.substr(dash + 1), &b) && a <= b;
    if (!ok) {
      *error = "'" + part + "' is not a rank or a range of ranks (e.g. 0,2-5)";
      return false;
    }
    if (static_cast<int64_t>(b) - a >= kMaxCommRanks) {
      *error = "'" + part + "' spans more ranks than a job has";
      return false;
    }
    for (int32_t r = a; r <= b; ++r) ranks->insert(r);
    pos = comma + 1;
  }
  return true;
}

Timeline::Timeline(const Model& m, const ExportOptions& opts) : m_(m), live_(JudgeLiveness(m)) {
  std::tie(origin_, end_) = JobSpan(m);
  if (opts.from_ns != kNoTime) from_ = SaturatingAdd(origin_, opts.from_ns);
  if (opts.to_ns != kNoTime) to_ = SaturatingAdd(origin_, opts.to_ns);

  proc_in_.assign(m_.procs.size(), false);
  for (uint32_t pi = 0; pi < m_.procs.size(); ++pi) {
    if (!opts.ranks.empty() && opts.ranks.count(RankOf(m_, pi)) == 0) continue;
    proc_in_[pi] = true;
    procs_.push_back(pi);
  }
  // Each match's earliest and latest drawn operation, once: not per op,
  // which would cost ranks squared per collective.
  flow_ends_.assign(m_.matches.size(), {kNone, kNone});
  for (uint32_t oi = 0; oi < m_.ops.size(); ++oi) {
    if (!Drawn(oi)) continue;
    ++ops_total_;
    const Op& o = m_.ops[oi];
    if (o.match == kNone || o.match >= flow_ends_.size()) continue;
    auto& [first, last] = flow_ends_[o.match];
    if (first == kNone || Before(m_, oi, first)) first = oi;
    if (last == kNone || Before(m_, last, oi)) last = oi;
  }
}

bool Timeline::InWindow(int64_t start, int64_t end) const { return end >= from_ && start <= to_; }

bool Timeline::Drawn(uint32_t oi) const {
  const Op& o = m_.ops[oi];
  return o.proc < proc_in_.size() && proc_in_[o.proc] && o.comm < m_.comms.size() && o.start_ns != kNoTime &&
         InWindow(o.start_ns, End(oi));
}

// Where an op's CPU span ends: its completion, the end of the job for one
// in flight (hung or not yet), else its enqueue.
int64_t Timeline::End(uint32_t oi) const {
  const Op& o = m_.ops[oi];
  if (o.state == OpState::kCompleted && o.done_ns != kNoTime) return std::max(o.done_ns, o.start_ns);
  const OpLiveness lv = live_.of_op[oi];
  if (lv == OpLiveness::kHung || lv == OpLiveness::kInFlight) return std::max(end_, o.start_ns);
  return SaturatingAdd(o.start_ns, o.enqueue_ns);
}

std::string Timeline::SliceName(uint32_t oi, bool gpu) const {
  const Op& o = m_.ops[oi];
  std::string name = m_.Str(o.func).empty() ? "(unknown)" : EventName(m_.Str(o.func));
  if (gpu || (o.state == OpState::kCompleted && o.done_ns != kNoTime)) return name;
  const OpLiveness lv = live_.of_op[oi];
  if (lv == OpLiveness::kHung) name += " (STUCK)";
  else if (lv == OpLiveness::kInFlight) name += " (in flight)";
  return name;
}

namespace {
const char* PhaseName(int8_t phase) {
  switch (phase) {
    case 0:
      return "initial sync";
    case 1:
      return "compute";
    case 2:
      return "final sync";
    default:
      return "phase";
  }
}
}  // namespace

std::string Timeline::SliceName(const SliceLayout& s) const {
  if (s.phase >= 0) return PhaseName(s.phase);
  return SliceName(s.op, s.gpu);
}

const char* Timeline::Category(const SliceLayout& s) const {
  if (s.phase >= 0) return "phase";
  return Category(s.op, s.gpu);
}

void Timeline::SliceArgs(const SliceLayout& s, std::vector<ExportArg>* args) const {
  if (s.phase < 0) OpArgs(s.op, args);
  if (s.channel >= 0) args->push_back(Int("channel", s.channel));
  if (s.phase >= 0) {
    const Op& o = m_.ops[s.op];
    args->push_back(Str("op", (m_.Str(o.func).empty() ? "(unknown)" : EventName(m_.Str(o.func))) + " #" +
                                  std::to_string(o.seq)));
  }
}

const char* Timeline::Category(uint32_t oi, bool gpu) const {
  if (gpu) return "gpu";
  return m_.ops[oi].kind == OpKind::kP2p ? "p2p" : "coll";
}

void Timeline::OpArgs(uint32_t oi, std::vector<ExportArg>* args) const {
  const Op& o = m_.ops[oi];
  const Comm& c = m_.comms[o.comm];
  char hash[24];
  snprintf(hash, sizeof(hash), "0x%llx", static_cast<unsigned long long>(c.hash));
  args->push_back(Str("comm", EventName(ExportCommName(c), false)));
  args->push_back(Str("comm_hash", hash));
  args->push_back(Int("rank", o.rank));
  args->push_back(Int("seq", static_cast<int64_t>(o.seq)));
  args->push_back(Int("count", static_cast<int64_t>(o.count)));
  args->push_back(Str("datatype", EventName(m_.Str(o.datatype))));
  args->push_back(Str("algo", EventName(m_.Str(o.algo))));
  args->push_back(Str("proto", EventName(m_.Str(o.proto))));
  args->push_back(Int("nchannels", o.nchannels));
  if (o.kind == OpKind::kP2p) args->push_back(Int("peer", o.peer_or_root));
  else if (IsRooted(o.fn)) args->push_back(Int("root", o.peer_or_root));
  args->push_back(Dbl("enqueue_us", o.enqueue_ns / 1000.0));
  if (o.has_gpu) {
    args->push_back(Dbl("gpu_us", o.gpu_duration_ns / 1000.0));
    if (o.start_ns != kNoTime)
      args->push_back(Dbl("enqueue_to_kernel_us", static_cast<double>(o.gpu_start_ns - o.start_ns) / 1000.0));
  }
  if (o.state == OpState::kCompleted && o.start_ns != kNoTime && o.done_ns != kNoTime)
    args->push_back(Dbl("cpu_us", static_cast<double>(o.done_ns - o.start_ns) / 1000.0));
  if (live_.Hung(oi)) {
    ExportArg a;
    a.key = "stuck";
    a.kind = ExportArg::kBool;
    a.b = true;
    args->push_back(a);
  }
  if (o.state == OpState::kUntracked) args->push_back(Str("completion", "not tracked"));
}

void Timeline::StuckArgs(const StuckReport& r, std::vector<ExportArg>* args) const {
  args->push_back(Dbl("threshold_sec", r.threshold_sec));
  args->push_back(Int("ops_in_flight", static_cast<int64_t>(r.ops.size())));
  for (size_t i = 0; i < r.ops.size(); ++i) {
    const StuckOp& s = r.ops[i];
    char line[256];
    snprintf(line, sizeof(line),
             " #%llu: in flight %.3f s; kernel channels %u started, %u stopped of %u; proxy ops %u started, %u stopped",
             // The op's number as the findings and merge give it: a p2p op's
             // order between the pair, not the report's NCCL counter.
             static_cast<unsigned long long>(s.op != kNone && s.op < m_.ops.size() ? m_.ops[s.op].seq : s.seq),
             static_cast<double>(s.age_ns) / 1e9, s.kernel_started,
             s.kernel_stopped, s.nchannels, s.proxy_started, s.proxy_stopped);
    std::string text = m_.Str(s.func).empty() ? "(unknown)" : m_.Str(s.func);
    if (s.comm < m_.comms.size()) text += " on " + ExportCommName(m_.comms[s.comm]);
    text += line;
    ExportArg a = Str("", std::move(text));
    a.key = "op " + std::to_string(i + 1);
    args->push_back(std::move(a));
  }
}

ProcLayout Timeline::Layout(uint32_t pi) const {
  const Proc& p = m_.procs[pi];
  ProcLayout out;
  // Named by rank as the user knows it: the launcher's, else the rank in
  // its largest communicator (ProcName), with where it ran.
  out.name = ProcName(m_, pi) + " (" + p.host + ":" + std::to_string(p.pid) + ")";
  out.sort_index = p.launcher_rank >= 0 ? p.launcher_rank : static_cast<int32_t>(pi);

  // This process's drawn ops by communicator, in program order.
  std::map<uint32_t, std::vector<uint32_t>> by_comm;
  for (uint32_t oi : p.ops)
    if (oi < m_.ops.size() && Drawn(oi)) by_comm[m_.ops[oi].comm].push_back(oi);
  auto track = [&](const std::string& name, size_t lane, bool gpu) {
    out.tracks.push_back({lane == 0 ? name : name + " [" + std::to_string(lane + 1) + "]", gpu});
    return static_cast<uint32_t>(out.tracks.size() - 1);
  };
  std::map<uint32_t, uint32_t> first_track_of_comm;
  for (auto& [ci, ops] : by_comm) {
    const std::string name = ExportCommName(m_.comms[ci]);
    // CPU spans: lanes first (a track per lane), then the slices.
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
    std::vector<uint32_t> cpu_tracks;
    for (size_t l = 0; l < cpu_lanes.size(); ++l) cpu_tracks.push_back(track(name, l, false));
    first_track_of_comm[ci] = cpu_tracks[0];
    for (size_t k = 0; k < ops.size(); ++k) {
      const uint32_t oi = ops[k];
      const Op& o = m_.ops[oi];
      SliceLayout s;
      s.op = oi;
      s.track = cpu_tracks[lane_of[k]];
      s.start_ns = o.start_ns - origin_;
      s.end_ns = end_of[k] - origin_;
      if (o.match != kNone && o.match < flow_ends_.size()) {
        const auto [first, last] = flow_ends_[o.match];
        if (first != last) s.flow = oi == first ? FlowStep::kFirst : oi == last ? FlowStep::kLast : FlowStep::kMiddle;
      }
      out.slices.push_back(s);
    }
    if (!any_gpu) continue;
    // GPU kernel spans, by start.
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
    std::vector<uint32_t> gpu_tracks;
    for (size_t l = 0; l < gpu_lanes.size(); ++l) gpu_tracks.push_back(track(name + " (GPU)", l, true));
    for (size_t k = 0; k < gpu_ops.size(); ++k) {
      const Op& o = m_.ops[gpu_ops[k]];
      SliceLayout s;
      s.op = gpu_ops[k];
      s.track = gpu_tracks[gpu_lane[k]];
      s.gpu = true;
      s.start_ns = o.gpu_start_ns - origin_;
      s.end_ns = o.gpu_end_ns() - origin_;
      out.slices.push_back(s);
    }
  }
  LayOutPhases(pi, first_track_of_comm, &out);
  for (uint32_t si = 0; si < p.stucks.size(); ++si) {
    const StuckReport& r = p.stucks[si];
    if (r.time_ns == kNoTime || !InWindow(r.time_ns, r.time_ns)) continue;
    out.instants.push_back({si, r.time_ns - origin_});
  }
  return out;
}

// Per communicator and channel, each drawn op's channel span and its
// phases nested in it. Proc::phases is by op, channel and start, each with
// both times. A channel span that would overlap the one before it on its
// track goes to another lane (Lanes), as CPU and GPU slices do.
void Timeline::LayOutPhases(uint32_t pi, const std::map<uint32_t, uint32_t>& drawn_comms, ProcLayout* out) const {
  const std::vector<KernelPhaseSpan>& phases = m_.procs[pi].phases;
  // (comm, channel) -> groups [begin, end) of `phases`, each one op's channel.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::pair<size_t, size_t>>> groups;
  for (size_t i = 0; i < phases.size();) {
    size_t j = i;
    while (j < phases.size() && phases[j].op == phases[i].op && phases[j].channel == phases[i].channel) ++j;
    const uint32_t oi = phases[i].op;
    if (oi < m_.ops.size() && Drawn(oi) && drawn_comms.count(m_.ops[oi].comm))
      groups[{m_.ops[oi].comm, phases[i].channel}].push_back({i, j});
    i = j;
  }
  for (auto& [key, list] : groups) {
    const std::string name = ExportCommName(m_.comms[key.first]) + " (GPU ch " + std::to_string(key.second) + ")";
    struct Span {
      size_t begin, end;
      int64_t start, stop;
    };
    std::vector<Span> spans;
    for (const auto& [b, e] : list) {
      Span sp{b, e, INT64_MAX, INT64_MIN};
      for (size_t k = b; k < e; ++k) {
        if (phases[k].start_ns == kNoTime || phases[k].stop_ns == kNoTime || phases[k].stop_ns < phases[k].start_ns)
          continue;
        sp.start = std::min(sp.start, phases[k].start_ns);
        sp.stop = std::max(sp.stop, phases[k].stop_ns);
      }
      if (sp.start <= sp.stop) spans.push_back(sp);
    }
    std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
    Lanes lanes;
    std::vector<uint32_t> tracks;
    for (const Span& sp : spans) {
      const size_t lane = lanes.Place(sp.start, sp.stop);
      while (tracks.size() <= lane) {
        out->tracks.push_back(
            {tracks.empty() ? name : name + " [" + std::to_string(tracks.size() + 1) + "]", true});
        tracks.push_back(static_cast<uint32_t>(out->tracks.size() - 1));
      }
      SliceLayout ch;
      ch.op = phases[sp.begin].op;
      ch.track = tracks[lane];
      ch.gpu = true;
      ch.channel = static_cast<int32_t>(key.second);
      ch.start_ns = sp.start - origin_;
      ch.end_ns = sp.stop - origin_;
      const size_t at = out->slices.size();
      out->slices.push_back(ch);
      for (size_t k = sp.begin; k < sp.end; ++k) {
        const KernelPhaseSpan& ph = phases[k];
        if (ph.start_ns == kNoTime || ph.stop_ns == kNoTime || ph.stop_ns < ph.start_ns) continue;
        SliceLayout s = ch;
        s.phase = static_cast<int8_t>(ph.phase);
        s.start_ns = ph.start_ns - origin_;
        s.end_ns = ph.stop_ns - origin_;
        out->slices.push_back(s);
        ++out->slices[at].nested;
      }
    }
  }
}

}  // namespace ncclwatch::tools
