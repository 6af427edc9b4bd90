#include "plugin/core/launch_events.h"

#include <dlfcn.h>
#include <stdlib.h>

namespace ncclwatch::plugin {
namespace {

// Leaked on purpose: the writer thread may hold it while the process exits.
std::mutex* const g_cuda_mu = new std::mutex;
bool g_cuda_off = false;  // guarded by g_cuda_mu

void CudaOffAtExit() {
  std::lock_guard<std::mutex> lock(*g_cuda_mu);
  g_cuda_off = true;
}

}  // namespace

std::mutex& CudaCallMutex() { return *g_cuda_mu; }
bool CudaCallsAllowed() { return !g_cuda_off; }

void StopCudaCallsAtExit() {
  static const bool registered = atexit(&CudaOffAtExit) == 0;
  (void)registered;
}

bool ResolveCudaDriver(CudaDriver* d, std::string* why) {
  // Never dlclosed: the reference keeps libcuda mapped while our writer
  // thread may still query an event.
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) {
    *why = "libcuda.so.1 is not loaded in this process";
    return false;
  }
  struct Sym {
    const char* name;
    void** fn;
  } syms[] = {
      {"cuCtxGetCurrent", reinterpret_cast<void**>(&d->ctx_get_current)},
      {"cuEventCreate", reinterpret_cast<void**>(&d->event_create)},
      {"cuEventRecord", reinterpret_cast<void**>(&d->event_record)},
      {"cuEventQuery", reinterpret_cast<void**>(&d->event_query)},
      {"cuStreamIsCapturing", reinterpret_cast<void**>(&d->stream_is_capturing)},
  };
  for (const Sym& s : syms) {
    *s.fn = dlsym(h, s.name);
    if (*s.fn == nullptr) {
      *why = std::string("libcuda.so.1 has no ") + s.name;
      *d = CudaDriver();
      return false;
    }
  }
  d->thread_exchange_capture_mode =
      reinterpret_cast<int (*)(int*)>(dlsym(h, "cuThreadExchangeStreamCaptureMode"));
  return true;
}

bool StreamEvents::Create() {
  for (uint32_t i = 0; i < kRing; ++i) {
    if (cuda_->event_create(&before_[i], kCudaEventDisableTiming) != kCudaSuccess || before_[i] == nullptr)
      return false;
    if (cuda_->event_create(&after_[i], kCudaEventDisableTiming) != kCudaSuccess || after_[i] == nullptr)
      return false;
  }
  return true;
}

namespace {

// The last stream the calling thread launched on, and its ring.
struct StreamCache {
  const StreamTable* owner;
  void* stream;
  StreamEvents* events;
};
thread_local StreamCache t_stream_cache{nullptr, nullptr, nullptr};

}  // namespace

__attribute__((hot)) StreamEvents* StreamTable::For(void* stream) {
  StreamCache& cache = t_stream_cache;
  // A dead ring (its context destroyed: a destroyed context's or stream's
  // address may come back for a new one) is never handed out again.
  if (cache.owner == this && cache.stream == stream && !cache.events->dead()) return cache.events;
  return Lookup(stream);
}

// Not cold: a thread that launches for several communicators on their own
// streams in turn (tensor and data parallel groups from one thread) comes
// here on every launch.
StreamEvents* StreamTable::Lookup(void* stream) {
  void* cu_ctx = nullptr;
  if (cuda_->ctx_get_current(&cu_ctx) != kCudaSuccess || cu_ctx == nullptr) return nullptr;
  auto find = [&](size_t n) -> StreamEvents* {
    for (size_t i = 0; i < n; ++i) {
      StreamEvents* e = streams_[i].get();
      if (e->stream() == stream && e->cu_ctx() == cu_ctx && !e->dead()) return e;
    }
    return nullptr;
  };
  StreamEvents* events = find(n_.load(std::memory_order_acquire));
  if (events == nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t m = n_.load(std::memory_order_relaxed);
    events = find(m);
    if (events == nullptr) {
      if (m == kMaxStreams) return nullptr;
      std::unique_ptr<StreamEvents> made(new StreamEvents(cuda_, cu_ctx, stream));
      // Once per stream, on NCCL's launching thread, in the context that is
      // current for the launch.
      if (!made->Create()) return nullptr;  // the events made so far are kept by the driver's context
      streams_[m] = std::move(made);
      events = streams_[m].get();
      n_.store(m + 1, std::memory_order_release);
    }
  }
  t_stream_cache = {this, stream, events};
  return events;
}

__attribute__((cold)) StreamEvents* StreamTable::Again(void* stream) {
  t_stream_cache = {nullptr, nullptr, nullptr};
  return Lookup(stream);
}

}  // namespace ncclwatch::plugin
