// TraceEncoder: trace.proto records from plain values, the one encoder of
// the trace format. The plugin's writer thread drives it with what NCCL
// reported; the tools' test trace builder (tools/testing/trace_builder.h)
// drives it with a synthetic timeline, so tests read the bytes the plugin
// writes.
//
// It owns the encoding rules a reader depends on:
//  - strings are written once, as StringDef records, and named by id;
//  - GPU times are deltas against the file's GpuClock, which is (re)defined
//    before the record that needs it, on the tightest (GPU time, CPU time
//    seen) pair so far;
//  - Op start times form a delta chain that restarts at each batch's time.
// What to write, and when (folding, batches, the stuck trigger), is the
// caller's.
//
// Every time it takes is file time: CLOCK_MONOTONIC ns relative to the
// header's mono_base_ns. GPU times are the GPU's globaltimer ns.
//
// Each record goes to the Wire that RecordSink::NextRecord() returns, which
// may write the previous ones out first. Field numbers come from the schema
// (proto/trace_fields.h). Nothing here links libprotobuf; it allocates only
// for its string table.
//
// Thread safety: none; one encoder per file, used by one thread.

#ifndef PLUGIN_WRITER_ENCODER_H_
#define PLUGIN_WRITER_ENCODER_H_

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "plugin/core/record.h"
#include "plugin/writer/wire.h"

namespace ncclwatch::plugin {

// Where records go.
class RecordSink {
 public:
  // The Wire the next record is appended to, with room for one record.
  // Called once per record, before it begins.
  virtual Wire* NextRecord() = 0;

 protected:
  ~RecordSink() = default;
};

struct HeaderFields {
  std::string_view plugin_version;
  uint32_t profiler_api_version = 0;
  std::string_view hostname;
  int64_t pid = 0;
  uint64_t mono_base_ns = 0;
  uint64_t realtime_base_ns = 0;
  uint64_t clock_pair_error_ns = 0;
  int32_t launcher_rank = -1;
  int32_t launcher_world_size = -1;
  int32_t launcher_local_rank = -1;
  std::string_view launcher_rank_source;
  int32_t cuda_device = -1;
  std::string_view cuda_visible_devices;
  std::string_view gpu_pci_bus_id;
  std::string_view gpu_uuid;
  uint64_t event_mask = 0;
  std::string_view events_config;
  uint64_t flush_ms = 0;
  uint64_t heartbeat_ms = 0;
  double stuck_sec = 0;
  uint64_t buffer_bytes = 0;
  std::string_view job_id;
  const std::vector<std::string>* argv = nullptr;
  std::string_view clock_source;
  uint32_t tick_clock = 0;  // trace.proto TickClock; 0: not recorded
  std::string_view kernel_clocksource;
  double clock_gettime_ns = 0;
  std::string_view nccl_version;
  int32_t cuda_driver_version = 0;
  std::string completions;
  uint32_t completion_source = 0;  // trace.proto CompletionSource
  uint32_t event_interval_us = 0;  // NCCLWATCH_EVENT_INTERVAL_US (events only)
};

struct CommInitFields {
  uint32_t comm = 0;  // file-local index
  uint64_t comm_hash = 0;
  bool from_event = false;  // only the hash is known (API v1..v3): no name, sizes or rank
  std::string_view name;
  int32_t nranks = 0;
  int32_t nnodes = 0;
  int32_t rank = 0;
  uint64_t time_ns = 0;
  bool nccl_impossible = false;  // NCCL gave nranks and rank as no communicator has them
};

// A collective or point-to-point operation as enqueued. String fields are
// ids from Intern().
struct OpFields {
  uint64_t event_id = 0;  // 0: not written (a folded op nothing names)
  uint32_t comm = 0;
  bool p2p = false;
  uint64_t seq = 0;
  uint32_t func = 0;
  uint64_t count = 0;
  uint32_t datatype = 0;
  int64_t root = 0;  // collectives
  int64_t peer = 0;  // p2p
  uint32_t algo = 0;
  uint32_t proto = 0;
  uint32_t nchannels = 0;
  uint32_t nwarps = 0;
  uint64_t start_ns = 0;
  uint64_t enqueue_ns = 0;  // from start to enqueued
  uint64_t parent_id = 0;
  uint64_t send_buff = 0;
  uint64_t recv_buff = 0;
  uint64_t traffic_bytes = 0;
  uint64_t op = 0;
  bool collnet = false;
  bool nvls = false;
  uint64_t p2p_seq = 0;
  uint64_t user_tag = 0;          // v7
  bool is_sym_coll = false;       // v7
  uint32_t kernel_variant = 0;    // v7: string id
  bool completion_tracked = false;  // not folded: an OpDone will follow
  uint32_t no_completion = 0;       // trace::NoCompletion, when none will
  bool launch_without_event = false;  // sampled: its launch recorded no event of its own
  bool graph = false;                 // captured into a CUDA graph (kFlagGraph)
};

// An operation's completion.
struct DoneFields {
  uint64_t event_id = 0;  // OpDone only
  uint64_t done_ns = 0;   // when the plugin learned of it
  bool has_gpu = false;
  uint64_t gpu_start = 0;  // globaltimer ns
  uint64_t gpu_stop = 0;
  uint32_t kernel_channels = 0;
  uint64_t proxy_ops = 0;
  uint64_t proxy_bytes = 0;
  bool from_event = false;  // seen on a CUDA event after its kernel launch
  uint64_t started_ns = 0;  // from_event: when the stream was seen to reach the kernel (0: not seen)
  bool from_later_event = false;  // its launch had no event of its own: a later one's proved it
};

struct HeartbeatFields {
  uint64_t time_ns = 0;
  uint64_t ops_in_flight = 0;
  uint64_t events_recorded = 0;
  uint64_t events_dropped = 0;
  uint64_t bytes_written = 0;
};

struct DropFields {
  uint64_t time_ns = 0;
  uint64_t ring_full = 0;
  uint64_t pool_exhausted = 0;
  uint64_t no_thread_slot = 0;
  uint64_t write_failed = 0;
  uint64_t foreign_parent = 0;
  uint64_t bad_parent = 0;
  std::string_view last_write_error;
  uint64_t completion_untracked = 0;
  uint64_t completions_lost = 0;
  // The plugin counts every completion it lost; false only where a test
  // builds an older plugin's file.
  bool completions_counted = true;
};

struct ProxyProgressFields {
  uint32_t channel = 0;
  int64_t peer = 0;
  bool is_send = false;
  int32_t nsteps = 0;
  int32_t last_step = 0;
  uint64_t last_state = 0;
  uint64_t last_update_ns = 0;
  bool stopped = false;
};

struct InFlightFields {
  uint64_t event_id = 0;
  uint32_t comm = 0;
  bool p2p = false;
  uint64_t seq = 0;
  uint32_t func = 0;  // Intern() id
  uint64_t count = 0;
  int64_t peer = 0;
  uint64_t start_ns = 0;
  uint64_t age_ns = 0;
  bool enqueued = true;
  uint32_t nchannels = 0;
  bool has_progress = false;  // the four counts below are known
  uint64_t kernel_channels_started = 0;
  uint64_t kernel_channels_stopped = 0;
  uint64_t proxy_ops_started = 0;
  uint64_t proxy_ops_stopped = 0;
  uint32_t gpu = 0;  // trace::GpuProgress
  // GPU_IN_WINDOW: the first and last operation of its window (0: none yet).
  uint64_t window_first_event_id = 0;
  uint64_t window_last_event_id = 0;
  std::vector<ProxyProgressFields> proxy;
};

struct StuckFields {
  uint64_t time_ns = 0;
  double threshold_sec = 0;
  uint64_t trigger_event_id = 0;
  std::vector<InFlightFields> ops;
};

// NCCL's activation mask differed from the last one read (trace.proto
// MaskChange).
struct MaskChangeFields {
  uint64_t time_ns = 0;
  uint64_t old_mask = 0;
  uint64_t new_mask = 0;
  uint64_t since_ns = 0;
  uint64_t completion_source = 0;
};

// String ids of a raw event's start (Intern()).
struct EvStartStrings {
  uint32_t func = 0;
  uint32_t datatype = 0;
  uint32_t sync_strategy = 0;
};

// The earliest and latest of a write's record times that a reader checks
// against the write holding them (trace.proto, Batch.time_range).
struct TimeRange {
  bool set = false;
  uint64_t oldest = 0;
  uint64_t newest = 0;
  void Note(uint64_t t) {
    if (!set || t < oldest) oldest = t;
    if (!set || t > newest) newest = t;
    set = true;
  }
};

class TraceEncoder {
 public:
  // `start_chain` false writes plain Op.start_ns instead of the delta chain
  // (readers accept both); only tests of readers want that.
  explicit TraceEncoder(RecordSink* sink, bool start_chain = true) : sink_(sink), start_chain_(start_chain) {}

  // A new batch begins at `time_ns`: the Op start chain restarts there, and
  // batch_times() starts empty.
  void StartBatch(uint64_t time_ns) {
    prev_op_start_ = time_ns;
    batch_times_ = TimeRange();
  }
  // The checked times of the records encoded since StartBatch: what the
  // batch's Batch record declares (Batch.oldest_ns, newest_ns).
  const TimeRange& batch_times() const { return batch_times_; }
  // Definitions written so far were lost (a failed write): strings and the
  // GPU clock are written again before their next use. String ids are never
  // reused.
  void ForgetDefinitions();

  // The id of `text`, writing its StringDef the first time. "" is 0.
  uint32_t Intern(std::string_view text);
  // Defines the file's GPU clock relation, or re-anchors it on a tighter
  // pair (the GPU moment seen sooner by the CPU). Writes a GpuClock record:
  // call it between records, before the record holding GPU deltas.
  void DefineGpuClock(uint64_t gpu_ns, uint64_t cpu_ns);
  // A GPU time relative to a reference file time of the same message.
  int64_t GpuDelta(uint64_t gpu_ns, uint64_t ref_ns) const {
    return static_cast<int64_t>(gpu_ns - (ref_ns + gpu_offset_));
  }

  void Header(const HeaderFields& h);
  void CommInit(const CommInitFields& c);
  void CommFinalize(uint32_t comm, uint64_t time_ns, uint64_t ops_enqueued, uint64_t ops_completed);
  // An Op record; with `folded`, its completion inside it.
  void Op(const OpFields& op, const DoneFields* folded);
  void OpDone(const DoneFields& d);
  // Raw events, from the plugin's staged record at file time `time_ns`.
  void EvStart(const Rec& r, uint64_t time_ns, const EvStartStrings& s);
  void EvStop(const Rec& r, uint64_t time_ns);
  void EvState(const Rec& r, uint64_t time_ns);
  void Heartbeat(const HeartbeatFields& h) {
    Wire* w = sink_->NextRecord();
    batch_times_.Note(h.time_ns);
    Heartbeat(w, h);
  }
  void Drops(const DropFields& d) {
    Wire* w = sink_->NextRecord();
    batch_times_.Note(d.time_ns);
    Drops(w, d);
  }
  void Stuck(const StuckFields& s);
  void Finalize(uint64_t time_ns, bool clean);
  void MaskChange(const MaskChangeFields& m);

  // Records that need no definitions, into a given Wire (a batch's opening,
  // or the loss notice written apart from the batches).
  // `times`: the batch's declared range of record times (null: none).
  static void Batch(Wire* w, uint64_t seq, uint64_t time_ns, uint64_t records_before,
                    const TimeRange* times = nullptr);
  static void Heartbeat(Wire* w, const HeartbeatFields& h);
  static void Drops(Wire* w, const DropFields& d);

 private:
  void DoneBody(Wire* w, const DoneFields& d, const OpFields* op);

  RecordSink* sink_;
  const bool start_chain_;
  uint64_t prev_op_start_ = 0;
  TimeRange batch_times_;
  uint32_t last_string_id_ = 0;
  std::unordered_map<std::string, uint32_t> string_ids_;
  bool gpu_set_ = false;
  uint64_t gpu_offset_ = 0;  // GPU time minus file time, at the anchor
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_WRITER_ENCODER_H_
