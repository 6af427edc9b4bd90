// A fake CUDA driver for the CPU tests, built as a shared library whose
// soname is libcuda.so.1: a test loads it first (fake_cuda_host.h), and the
// plugin's dlopen("libcuda.so.1", RTLD_NOLOAD) finds it as it would find
// the real one in a process that uses CUDA.
//
// It models what the plugin relies on: a stream runs its items in order;
// an event recorded on a stream completes when the stream has run past it;
// a stream may be capturing; a context may be destroyed, after which its
// events fail. The "GPU" moves only when the test says (fakecuda_run).
//
// Thread safety: every entry point takes one mutex.

#include <stdint.h>

#include <map>
#include <mutex>

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;
constexpr int kInvalidContext = 201;
constexpr int kInvalidHandle = 400;
constexpr int kNotReady = 600;
constexpr int kContextIsDestroyed = 709;

struct Stream {
  uint64_t queued = 0;  // items queued: kernels and event records
  uint64_t ran = 0;     // items the GPU has finished
  bool capturing = false;
  bool blocked = false;  // a host function holds the stream at `block_at`
  uint64_t block_at = 0;
};
struct Event {
  uintptr_t ctx = 0;
  void* stream = nullptr;  // null: never recorded (complete, as in CUDA)
  uint64_t position = 0;
};

std::mutex mu;
std::map<void*, Stream> streams;
std::map<void*, Event> events;
std::map<uintptr_t, bool> destroyed;
thread_local uintptr_t current = 0;
uintptr_t next_event = 0x10000;
uint64_t records = 0, queries = 0, creates = 0, capture_checks = 0;

}  // namespace

extern "C" {

// ---- the driver API the plugin resolves

int cuCtxGetCurrent(void** ctx) {
  std::lock_guard<std::mutex> lock(mu);
  *ctx = reinterpret_cast<void*>(current);
  return kSuccess;
}

int cuCtxSetCurrent(void* ctx) {
  std::lock_guard<std::mutex> lock(mu);
  const uintptr_t c = reinterpret_cast<uintptr_t>(ctx);
  if (destroyed[c]) return kContextIsDestroyed;
  current = c;
  return kSuccess;
}

int cuEventCreate(void** ev, unsigned) {
  std::lock_guard<std::mutex> lock(mu);
  if (current == 0) return kInvalidContext;
  if (destroyed[current]) return kContextIsDestroyed;
  void* e = reinterpret_cast<void*>(next_event += 64);
  events[e] = Event{current, nullptr, 0};
  ++creates;
  *ev = e;
  return kSuccess;
}

int cuEventRecord(void* ev, void* stream) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = events.find(ev);
  if (it == events.end()) return kInvalidHandle;
  if (destroyed[it->second.ctx]) return kContextIsDestroyed;
  Stream& s = streams[stream];
  if (s.capturing) return 900;  // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: the plugin must not get here
  it->second.stream = stream;
  it->second.position = ++s.queued;
  ++records;
  return kSuccess;
}

int cuEventQuery(void* ev) {
  std::lock_guard<std::mutex> lock(mu);
  ++queries;
  auto it = events.find(ev);
  if (it == events.end()) return kInvalidHandle;
  if (destroyed[it->second.ctx]) return kContextIsDestroyed;
  if (it->second.stream == nullptr) return kSuccess;
  return streams[it->second.stream].ran >= it->second.position ? kSuccess : kNotReady;
}

int cuStreamIsCapturing(void* stream, int* status) {
  std::lock_guard<std::mutex> lock(mu);
  if (status == nullptr) return kInvalidValue;
  ++capture_checks;
  *status = streams[stream].capturing ? 1 : 0;
  return kSuccess;
}

int cuThreadExchangeStreamCaptureMode(int* mode) {
  if (mode == nullptr) return kInvalidValue;
  *mode = 0;
  return kSuccess;
}

// ---- control, for the tests

void fakecuda_make_current(uintptr_t ctx) {
  std::lock_guard<std::mutex> lock(mu);
  destroyed[ctx] = false;
  current = ctx;
}

// A kernel queued on the stream (what NCCL's cuLaunchKernelEx does).
void fakecuda_launch(void* stream) {
  std::lock_guard<std::mutex> lock(mu);
  ++streams[stream].queued;
}

// The GPU finishes everything queued on the stream so far, unless blocked.
void fakecuda_run(void* stream) {
  std::lock_guard<std::mutex> lock(mu);
  Stream& s = streams[stream];
  s.ran = s.blocked ? s.block_at - 1 : s.queued;
}

// The GPU finishes the next `n` items on the stream.
void fakecuda_run_some(void* stream, uint64_t n) {
  std::lock_guard<std::mutex> lock(mu);
  Stream& s = streams[stream];
  const uint64_t end = s.blocked ? s.block_at - 1 : s.queued;
  s.ran = s.ran + n > end ? end : s.ran + n;
}

// A host function queued on the stream that does not return: nothing after
// it runs until fakecuda_unblock.
void fakecuda_block(void* stream) {
  std::lock_guard<std::mutex> lock(mu);
  Stream& s = streams[stream];
  s.block_at = ++s.queued;
  s.blocked = true;
}

void fakecuda_unblock(void* stream) {
  std::lock_guard<std::mutex> lock(mu);
  streams[stream].blocked = false;
}

void fakecuda_set_capturing(void* stream, int on) {
  std::lock_guard<std::mutex> lock(mu);
  streams[stream].capturing = on != 0;
}

// What NCCL asks the runtime at an API call; not counted as the plugin's.
int fakecuda_is_capturing(void* stream) {
  std::lock_guard<std::mutex> lock(mu);
  return streams[stream].capturing ? 1 : 0;
}

// The plugin's cuStreamIsCapturing calls so far.
uint64_t fakecuda_capture_checks() {
  std::lock_guard<std::mutex> lock(mu);
  return capture_checks;
}

void fakecuda_destroy_context(uintptr_t ctx) {
  std::lock_guard<std::mutex> lock(mu);
  destroyed[ctx] = true;
  if (current == ctx) current = 0;
}

// Counters: event records, queries and creations so far.
void fakecuda_counts(uint64_t* rec, uint64_t* query, uint64_t* create) {
  std::lock_guard<std::mutex> lock(mu);
  *rec = records;
  *query = queries;
  *create = creates;
}

}  // extern "C"
