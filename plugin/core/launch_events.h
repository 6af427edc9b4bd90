// CUDA events at NCCL's kernel launches (NCCLWATCH_COMPLETIONS=events):
// the driver API, resolved at run time, and a ring of events per stream.
//
// Why events: NCCL's kernel-channel events cost NCCL's proxy thread the same
// whatever the plugin does with them (BENCHMARKS.md: +22% to +232% on small
// collectives). A CUDA event recorded on the launch stream after the kernel,
// and queried by our writer thread, costs the launching thread a fraction of
// a microsecond. A stream runs in order, so once its newest event is
// complete every earlier one is: the writer queries only a few per stream
// and cycle (plugin/writer/launches.h).
//
// The driver API comes from the libcuda.so.1 the process has already loaded
// (RTLD_NOLOAD): the plugin keeps no link-time CUDA dependency, and a
// process without CUDA simply gets no events.
//
// Thread safety: CudaDriver is immutable once resolved; StreamTable::For,
// StreamTable::Again and StreamEvents::Next may be called from any thread.

#ifndef PLUGIN_CORE_LAUNCH_EVENTS_H_
#define PLUGIN_CORE_LAUNCH_EVENTS_H_

#include <stdint.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ncclwatch::plugin {

// CUresult values the plugin tells apart (cuda.h).
inline constexpr int kCudaSuccess = 0;
inline constexpr int kCudaNotReady = 600;
inline constexpr unsigned kCudaEventDisableTiming = 0x2;  // CU_EVENT_DISABLE_TIMING
inline constexpr int kCudaCaptureModeRelaxed = 2;           // CU_STREAM_CAPTURE_MODE_RELAXED

struct CudaDriver {
  int (*ctx_get_current)(void** ctx) = nullptr;
  int (*event_create)(void** event, unsigned flags) = nullptr;
  int (*event_record)(void* event, void* stream) = nullptr;
  int (*event_query)(void* event) = nullptr;
  int (*stream_is_capturing)(void* stream, int* status) = nullptr;  // status != 0: capturing
  int (*thread_exchange_capture_mode)(int* mode) = nullptr;         // optional
  bool ok() const { return event_record != nullptr; }
};

// Calls into the driver from the writer thread hold this lock and first ask
// CudaCallsAllowed(): at exit (an atexit hook registered after CUDA's own,
// so it runs before CUDA tears down) they stop for good.
std::mutex& CudaCallMutex();
bool CudaCallsAllowed();
void StopCudaCallsAtExit();  // registers the hook once

// The driver API of the libcuda.so.1 already loaded in this process, or
// false with `why` ("libcuda.so.1 is not loaded", "libcuda.so.1 lacks X").
bool ResolveCudaDriver(CudaDriver* d, std::string* why);

// One stream's events: a ring of kRing pairs (one recorded before a
// launch's kernel, one after), created with timing disabled (the cheapest
// to record) on the first launch on the stream, in its context, and reused
// in turn: launch n records pair n % kRing.
//
// Why a ring per stream and not a pool: events came back to a shared pool
// only when the writer saw them complete (every few ms), so a loop of small
// launches (one a microsecond) needed thousands in use, and the pool's
// growth and scan cost the launching thread more than the records
// themselves (measured on H100, BENCHMARKS.md). Recording an event again
// is allowed while its previous record is pending; a query then answers for
// the newest record. A stream runs in order, so "complete" still proves
// every earlier launch complete; only "not ready" on a pair that a later
// launch took over says nothing about the earlier one (LaunchTable).
//
// Sampled (NCCLWATCH_EVENT_INTERVAL_US=N): a launch records its pair only
// when Due, N us (in ticks) after the stream's last recorded one; the others
// record nothing and take no number: they are proven complete by the next
// recorded event on the stream. The tail of a burst, with no recording launch
// after it, stays unproven until the stream's next launch: nothing else may
// record on a stream the plugin does not own (NCCL destroys its streams
// before the plugin's finalize, and a stream may be captured at any time).
class StreamEvents {
 public:
  static constexpr uint32_t kRing = 128;

  StreamEvents(const CudaDriver* cuda, void* cu_ctx, void* stream) : cuda_(cuda), cu_ctx_(cu_ctx), stream_(stream) {}
  // Creates the ring's events in the current context; false if the driver
  // refused one (the stream then gets no events).
  bool Create();
  // The next launch's number (launches on this stream, from 0).
  uint64_t Next() { return next_.fetch_add(1, std::memory_order_relaxed); }
  // Launches numbered so far: pair n % kRing serves launch n until launch
  // n + kRing takes it.
  uint64_t issued() const { return next_.load(std::memory_order_relaxed); }
  void* before(uint64_t n) const { return before_[n % kRing]; }
  void* after(uint64_t n) const { return after_[n % kRing]; }
  // Whether a launch at `now` (ticks) records events: `interval` ticks have
  // passed since the last launch that did; if so it is now that one. Two
  // threads sharing a stream may both record: harmless. Hot path: relaxed
  // loads and stores only.
  bool Due(uint64_t now, uint64_t interval) {
    if (now - last_recorded_.load(std::memory_order_relaxed) < interval) return false;
    last_recorded_.store(now, std::memory_order_relaxed);
    return true;
  }
  void* cu_ctx() const { return cu_ctx_; }
  void* stream() const { return stream_; }
  // The context was destroyed (a query failed): nothing in it is called again.
  bool dead() const { return dead_.load(std::memory_order_relaxed); }
  void MarkDead() { dead_.store(true, std::memory_order_relaxed); }
  const CudaDriver* cuda() const { return cuda_; }

 private:
  const CudaDriver* cuda_;
  void* cu_ctx_;
  void* stream_;
  void* before_[kRing] = {};
  void* after_[kRing] = {};
  std::atomic<uint64_t> next_{0};
  std::atomic<uint64_t> last_recorded_{0};  // ticks of the last Due launch
  std::atomic<bool> dead_{false};
};

// Every stream NCCL launched on, found without a lock on the launching
// thread (a thread-local cache of the last stream it used). Never freed
// while the process lives: a late query by the writer is harmless.
class StreamTable {
 public:
  // Streams that get events (a process's NCCL streams: a few per GPU).
  static constexpr size_t kMaxStreams = 1024;

  explicit StreamTable(const CudaDriver* cuda) : cuda_(cuda) {}
  // The events of `stream`, made on first use in the calling thread's
  // current context; null with no current context, past kMaxStreams, or
  // when the driver refuses events. The thread's last stream is answered
  // from a thread-local cache without asking the driver for the current
  // context (a call on NCCL's launching thread per launch): a stream's
  // handle names one stream of one context while it lives. A handle that
  // came back for a stream of another context (the old one destroyed) is
  // caught where it matters: recording the ring's event on it fails, and
  // the caller asks Again.
  StreamEvents* For(void* stream);
  // After a record on For's ring failed: the calling thread's cache is
  // dropped and `stream` looked up in its current context.
  StreamEvents* Again(void* stream);

 private:
  StreamEvents* Lookup(void* stream);

  const CudaDriver* cuda_;
  std::mutex mu_;  // making a stream's ring (once per stream)
  std::unique_ptr<StreamEvents> streams_[kMaxStreams];
  std::atomic<size_t> n_{0};
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CORE_LAUNCH_EVENTS_H_
