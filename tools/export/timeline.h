// What `ncclwatch export` draws, whatever the format: which processes and
// operations are in (the --ranks and --from/--to cut), the tracks of each
// process and the slices on them, and how each operation matched across
// ranks is linked by a flow. The writers (export.h: Chrome JSON;
// perfetto.h: Perfetto protobuf) only encode what this says, so the two
// formats cannot disagree.
//
// Layout of one process:
// - per communicator, a CPU track named after it ("world", or
//   "comm 0x1234abcd" when unnamed) with each operation from enqueue start
//   to completion as the plugin saw it, and, when any of its operations has
//   GPU timing, a GPU track ("world (GPU)") with each kernel span (first
//   channel start to last stop);
// - operations that overlap on a track (the CPU enqueues ahead of the GPU)
//   go to extra lanes of that communicator ("world [2]"), since both viewers
//   want the slices of one track to nest;
// - an operation in flight at the end of its file is drawn to the end of
//   the job, named "AllReduce (STUCK)" when diagnose would call it hung
//   (tools/model/liveness.h), else "AllReduce (in flight)"; an operation
//   whose completion the capture could not see spans its enqueue only;
// - with kernel phases (profiler API v7, kernelphase captured: Proc::phases,
//   which only completed channels have), a track per kernel channel of the
//   communicator ("world (GPU ch 0)") with each operation's channel, from
//   its first phase's start to its last phase's stop, and its phases
//   ("initial sync", "compute", "final sync") nested in it;
// - each stuck report is an instant on the process, listing what was in
//   flight.
//
// Flows run in time order: the ranks' CPU slices of one matched operation
// (a collective, or a send and its receive) are chained by start time, the
// earliest arrival first (ties by rank), so every step goes from an earlier
// slice to a later one. Perfetto's importers drop a step that goes back in
// time.
//
// Times are ns since the job's origin, the earliest record of any file (not
// of the cut): a window shows the same times as the whole job.
//
// Memory: the plan keeps two op ids per match; a process's layout is made
// when asked for and dropped after, so a writer holds one process at a time.
//
// Thread safety: read-only after construction.

#ifndef TOOLS_EXPORT_TIMELINE_H_
#define TOOLS_EXPORT_TIMELINE_H_

#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tools/model/liveness.h"
#include "tools/model/model.h"

namespace ncclwatch::tools {

struct ExportOptions {
  // The window, in ns since the job's origin (kNoTime: open). An operation
  // is in when its CPU span overlaps the window, and is drawn whole.
  int64_t from_ns = kNoTime;
  int64_t to_ns = kNoTime;
  // The ranks to draw (a process's rank as its name says: the launcher's,
  // else its rank in its largest communicator; see RankOf). Empty: all.
  std::set<int32_t> ranks;
  // Called after each process is written: operations drawn so far, of all.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

// A process's rank as its track is named ("rank 3": 3), or -1 when it is
// named by pid and host.
int32_t RankOf(const Model& m, uint32_t proc);

// The job's first and last record, aligned ns (0, 0 when it has none).
std::pair<int64_t, int64_t> JobSpan(const Model& m);

// Sets the window of `opts` to where `ops` ran (enqueue to completion, or to
// their process's last sign of life for one that never completed), widened
// by `margin_ns` each side. False when none of them has a time.
bool WindowAround(const Model& m, const std::vector<uint32_t>& ops, int64_t margin_ns, ExportOptions* opts);

// Parses "0,2-5" (ranks and inclusive ranges, comma-separated) into `ranks`;
// false with `error` naming the bad part.
bool ParseRankList(const std::string& text, std::set<int32_t>* ranks, std::string* error);

// Whether every rank of `ranks` names a process of `m` (by RankOf); false
// with `error` naming those it lacks and the ranks it has ("no rank 9: the
// job's ranks are 0-3").
bool RanksExist(const Model& m, const std::set<int32_t>& ranks, std::string* error);

// Where an operation sits in its match's flow.
enum class FlowStep : uint8_t { kNone, kFirst, kMiddle, kLast };

// One argument of a slice or instant, typed for Perfetto, printed for JSON.
struct ExportArg {
  enum Kind : uint8_t { kString, kInt, kDouble, kBool };
  std::string key;
  Kind kind = kString;
  std::string s;
  int64_t i = 0;
  double d = 0;
  bool b = false;
};

// What a writer drew: processes and operations (CPU slices).
struct ExportCounts {
  size_t procs = 0;
  uint64_t ops = 0;
};

struct TrackLayout {
  std::string name;
  bool gpu = false;
};

struct SliceLayout {
  uint32_t op = kNone;
  uint32_t track = 0;  // ProcLayout::tracks index
  bool gpu = false;
  int64_t start_ns = 0, end_ns = 0;  // since the origin
  FlowStep flow = FlowStep::kNone;   // CPU slices only
  // A kernel channel's slice (gpu too): its channel, and the number of
  // slices nested in it, which follow it (its phases, by start). A phase:
  // its KernelPhaseSpan::phase. -1: neither.
  int32_t channel = -1;
  int8_t phase = -1;
  uint32_t nested = 0;
};

struct InstantLayout {
  uint32_t stuck = 0;  // Proc::stucks index
  int64_t time_ns = 0;
};

struct ProcLayout {
  std::string name;            // "rank 0 (node0:4000)"
  int32_t sort_index = 0;      // the launcher rank, else the process index
  std::vector<TrackLayout> tracks;
  // Per communicator: its CPU slices (program order), then its GPU slices
  // (by start); each track's slices in time order and not overlapping.
  std::vector<SliceLayout> slices;
  std::vector<InstantLayout> instants;
};

class Timeline {
 public:
  Timeline(const Model& m, const ExportOptions& opts);

  const Model& model() const { return m_; }
  int64_t origin_ns() const { return origin_; }  // aligned ns of the job's earliest record
  // The processes drawn, by Model::procs index, and their operations.
  const std::vector<uint32_t>& procs() const { return procs_; }
  uint64_t ops_total() const { return ops_total_; }

  ProcLayout Layout(uint32_t proc) const;

  // A slice's name: the function, with " (STUCK)" or " (in flight)" on a
  // CPU slice that never completed.
  std::string SliceName(uint32_t op, bool gpu) const;
  const char* Category(uint32_t op, bool gpu) const;
  void OpArgs(uint32_t op, std::vector<ExportArg>* args) const;
  // The same for any slice: a channel's is its op's GPU slice's, with the
  // channel; a phase is named for what it is ("initial sync", "compute",
  // "final sync"), category "phase", with its channel and op.
  std::string SliceName(const SliceLayout& s) const;
  const char* Category(const SliceLayout& s) const;
  void SliceArgs(const SliceLayout& s, std::vector<ExportArg>* args) const;
  void StuckArgs(const StuckReport& r, std::vector<ExportArg>* args) const;
  // The flow id of an operation's match (0: none).
  uint64_t FlowId(uint32_t op) const { return m_.ops[op].match == kNone ? 0 : uint64_t{m_.ops[op].match} + 1; }

 private:
  bool InWindow(int64_t start, int64_t end) const;
  bool Drawn(uint32_t op) const;
  int64_t End(uint32_t op) const;  // aligned ns where its CPU span ends
  // The kernel channels' tracks of process `pi` and their slices, for the
  // communicators drawn (keys of `drawn_comms`).
  void LayOutPhases(uint32_t pi, const std::map<uint32_t, uint32_t>& drawn_comms, ProcLayout* out) const;

  const Model& m_;
  const Liveness live_;
  int64_t origin_ = 0, end_ = 0;            // aligned ns
  int64_t from_ = INT64_MIN, to_ = INT64_MAX;  // aligned ns
  std::vector<bool> proc_in_;
  std::vector<uint32_t> procs_;
  uint64_t ops_total_ = 0;
  // Per match: its earliest and latest drawn operation (the flow's ends).
  std::vector<std::pair<uint32_t, uint32_t>> flow_ends_;
};

// "comm 0x1234abcd" for a communicator without a name.
std::string ExportCommName(const Comm& c);

// The most bytes of a name (function, communicator, datatype, algorithm,
// protocol) that each operation's events repeat. Names come from the
// trace and are cut at 256 bytes where the tools read them, but a trace
// defines a name once and every operation's events would repeat it
// (escaped, up to six bytes a byte in JSON): an export of 20,000
// operations on a communicator named with 256 control characters was 91
// times its input, 123 with every name so. Real names are a few bytes;
// the communicator's track carries its name up to 256 bytes, once
// (docs/security.md, tools/export:bound_test).
inline constexpr size_t kMaxEventNameBytes = 64;
// NCCL's own names (function, datatype, algorithm, protocol) are at most
// 14 bytes ("ReduceScatter", "ncclFloat8e4m3", "COLLNET_DIRECT"): a
// longer one is no NCCL name, and is cut at this.
inline constexpr size_t kMaxEventNcclNameBytes = 24;
// `name` cut at kMaxEventNameBytes (a communicator's) or
// kMaxEventNcclNameBytes (`nccl`: NCCL's), with the mark CutName puts.
std::string EventName(std::string_view name, bool nccl = true);

}  // namespace ncclwatch::tools

#endif  // TOOLS_EXPORT_TIMELINE_H_
