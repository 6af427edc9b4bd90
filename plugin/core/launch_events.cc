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
      {"cuCtxSetCurrent", reinterpret_cast<void**>(&d->ctx_set_current)},
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

uint32_t EventPool::Grow(uint32_t n) {
  uint32_t have = created_.load(std::memory_order_relaxed);
  uint32_t made = 0;
  while (made < n && have < kMaxEvents) {
    void* ev = nullptr;
    if (cuda_->event_create(&ev, kCudaEventDisableTiming) != kCudaSuccess || ev == nullptr) break;
    events_[have] = ev;
    ++have;
    ++made;
    // Published one by one: Take reads only indices below created_.
    created_.store(have, std::memory_order_release);
  }
  return made;
}

int32_t EventPool::Take() {
  const uint32_t n = created_.load(std::memory_order_acquire);
  if (n == 0) return -1;
  // A few tries from a shared cursor: threads launching at once start at
  // different slots, and a pool with free events nearly always has one there
  // (events come back in launch order).
  for (int tries = 0; tries < 8; ++tries) {
    const uint32_t i = cursor_.fetch_add(1, std::memory_order_relaxed) % n;
    uint8_t expected = 0;
    if (used_[i].load(std::memory_order_relaxed) == 0 &&
        used_[i].compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
      in_use_.fetch_add(1, std::memory_order_relaxed);
      return static_cast<int32_t>(i);
    }
  }
  return -1;
}

void EventPool::Give(int32_t i) {
  if (i < 0 || static_cast<uint32_t>(i) >= kMaxEvents) return;
  in_use_.fetch_sub(1, std::memory_order_relaxed);
  used_[i].store(0, std::memory_order_release);
}

EventPool* EventPools::ForCurrentContext() {
  struct Cache {
    const EventPools* owner;
    void* cu_ctx;
    EventPool* pool;
  };
  thread_local Cache cache{nullptr, nullptr, nullptr};
  void* cu_ctx = nullptr;
  if (cuda_->ctx_get_current(&cu_ctx) != kCudaSuccess || cu_ctx == nullptr) return nullptr;
  // A destroyed context's address may come back for a new one: a dead
  // pool is never handed out again.
  if (cache.owner == this && cache.cu_ctx == cu_ctx && !cache.pool->dead()) return cache.pool;
  EventPool* pool = nullptr;
  const size_t n = n_.load(std::memory_order_acquire);
  for (size_t i = 0; i < n && pool == nullptr; ++i)
    if (pools_[i]->cu_ctx() == cu_ctx && !pools_[i]->dead()) pool = pools_[i].get();
  if (pool == nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t m = n_.load(std::memory_order_relaxed);
    for (size_t i = 0; i < m && pool == nullptr; ++i)
      if (pools_[i]->cu_ctx() == cu_ctx && !pools_[i]->dead()) pool = pools_[i].get();
    if (pool == nullptr) {
      if (m == kMaxPools) return nullptr;
      pools_[m].reset(new EventPool(cuda_, cu_ctx));
      pool = pools_[m].get();
      // The first events here, in the context that is current: the writer
      // makes more later, off NCCL's thread.
      pool->Grow(EventPool::kFirstEvents);
      n_.store(m + 1, std::memory_order_release);
    }
  }
  cache = {this, cu_ctx, pool};
  return pool;
}

}  // namespace ncclwatch::plugin
