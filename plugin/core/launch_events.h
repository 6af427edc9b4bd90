// CUDA events at NCCL's kernel launches (NCCLWATCH_COMPLETIONS=events):
// the driver API, resolved at run time, and one pool of events per CUDA
// context.
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
// Thread safety: CudaDriver is immutable once resolved. An EventPool's Take
// and Give may be called from any thread; Grow from one thread at a time.

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
  int (*ctx_set_current)(void* ctx) = nullptr;
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

// One CUDA context's events, created with timing disabled (the cheapest to
// record). Slots are never freed while the process lives: a late query by
// the writer on a returned event is harmless.
class EventPool {
 public:
  // Events a context may hold: launches in flight on all of its streams.
  // NCCL's host can run ~4,000 small operations ahead of the GPU (measured
  // on H200s), each launch taking two events.
  static constexpr uint32_t kMaxEvents = 16384;
  // Created on the first launch in a context (on NCCL's launching thread,
  // once), then by the writer thread as the free ones run low. The first
  // ones must last until the writer's next cycle (10 ms): a loop of small
  // operations launches one every few microseconds.
  static constexpr uint32_t kFirstEvents = 2048;
  static constexpr uint32_t kGrowEvents = 2048;

  EventPool(const CudaDriver* cuda, void* cu_ctx) : cuda_(cuda), cu_ctx_(cu_ctx) {}

  // Creates up to `n` more events in the pool's context, which must be
  // current on the calling thread. Returns how many were created.
  uint32_t Grow(uint32_t n);
  // An event index, or -1 when none is free. Lock-free.
  int32_t Take();
  void Give(int32_t i);
  void* event(int32_t i) const { return events_[i]; }
  void* cu_ctx() const { return cu_ctx_; }
  uint32_t created() const { return created_.load(std::memory_order_acquire); }
  uint32_t in_use() const { return in_use_.load(std::memory_order_relaxed); }
  // The context was destroyed (a query failed): nothing in it is called again.
  bool dead() const { return dead_.load(std::memory_order_relaxed); }
  void MarkDead() { dead_.store(true, std::memory_order_relaxed); }
  const CudaDriver* cuda() const { return cuda_; }

 private:
  const CudaDriver* cuda_;
  void* cu_ctx_;
  void* events_[kMaxEvents] = {};
  std::atomic<uint8_t> used_[kMaxEvents] = {};
  std::atomic<uint32_t> created_{0};
  std::atomic<uint32_t> cursor_{0};
  std::atomic<uint32_t> in_use_{0};
  std::atomic<bool> dead_{false};
};

// The pools of a process, one per CUDA context, found without a lock on the
// launching thread (a thread-local cache of the last context it used).
class EventPools {
 public:
  // At most this many CUDA contexts get events (GPUs a process drives).
  static constexpr size_t kMaxPools = 64;

  explicit EventPools(const CudaDriver* cuda) : cuda_(cuda) {}
  // The pool of the calling thread's current context, made (with its first
  // events) on first use; null with no current context, or past kMaxPools.
  EventPool* ForCurrentContext();
  // The writer: pools in creation order (stable pointers).
  size_t size() const { return n_.load(std::memory_order_acquire); }
  EventPool* at(size_t i) const { return pools_[i].get(); }

 private:
  const CudaDriver* cuda_;
  std::mutex mu_;  // making a pool (once per context)
  std::unique_ptr<EventPool> pools_[kMaxPools];
  std::atomic<size_t> n_{0};
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CORE_LAUNCH_EVENTS_H_
