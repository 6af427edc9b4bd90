// A CUDA driver whose calls do nothing, for the launch benchmark
// (plugin/core/launch_benchmark.cc): built as a shared library whose soname
// is libcuda.so.1, loaded before the plugin, so that what the benchmark
// times is the plugin's own work beyond the driver's calls. Unlike the fake
// driver (fake_cuda.cc), it keeps no state and takes no lock: every event
// query says complete, no stream is ever capturing, and the one context is
// always current.
//
// Not for tests of behaviour: nothing it answers depends on what was asked.
// Thread safety: stateless but for two atomic counters.

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <atomic>

namespace {

std::atomic<uintptr_t> next_event{0x10000};
// Records so far: a relaxed load and store, no locked instruction (the
// benchmark launches from one thread), so every configuration pays alike.
std::atomic<uint64_t> records{0};
std::atomic<uint64_t> capture_checks{0};  // likewise

}  // namespace

extern "C" {

int cuCtxGetCurrent(void** ctx) {
  *ctx = reinterpret_cast<void*>(uintptr_t{0xC0});
  return 0;
}

int cuEventCreate(void** ev, unsigned) {
  *ev = reinterpret_cast<void*>(next_event.fetch_add(64));
  return 0;
}

int cuEventRecord(void*, void*) {
  records.store(records.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return 0;
}

// The benchmark's count of event records (sampled configurations).
uint64_t nullcuda_records() { return records.load(std::memory_order_relaxed); }

int cuEventQuery(void*) { return 0; }

int cuStreamIsCapturing(void*, int* status) {
  capture_checks.store(capture_checks.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  *status = 0;
  return 0;
}

// The benchmark's count of capture checks (spared where NCCL's API events answered).
uint64_t nullcuda_capture_checks() { return capture_checks.load(std::memory_order_relaxed); }

int cuThreadExchangeStreamCaptureMode(int* mode) {
  *mode = 0;
  return 0;
}

// What NCCL's cuLaunchKernelEx is in the benchmark's plan: a call that does
// nothing, kept out of line so that every configuration pays the same.
// With NULLCUDA_LAUNCH_TOUCH_KB=N it writes one byte in each cache line of
// N KiB of its own, as a real driver's launch walks its own state: the
// lines the plugin touched before it may then be gone (BENCHMARKS.md, "The
// launching thread's own path"). With NULLCUDA_LAUNCH_CODE_KB=N it also
// runs code in each cache line of N KiB of its own (a jump to the next
// line, then a return), as a real driver's launch runs far more code than
// the first-level instruction cache holds: the plugin's own code may then
// be gone too.
static size_t EnvKiB(const char* name) {
  const char* v = getenv(name);
  return v != nullptr ? static_cast<size_t>(strtoul(v, nullptr, 10)) * 1024 : size_t{0};
}

__attribute__((noinline)) void nullcuda_launch(void* stream) {
  static const size_t touch = EnvKiB("NULLCUDA_LAUNCH_TOUCH_KB");
  static char* const buf = touch > 0 ? static_cast<char*>(calloc(touch, 1)) : nullptr;
  if (buf != nullptr)
    for (size_t off = 0; off < touch; off += 64) buf[off] = static_cast<char>(buf[off] + 1);
  static void (*const code)() = [] {
    const size_t n = EnvKiB("NULLCUDA_LAUNCH_CODE_KB");
    if (n == 0) return static_cast<void (*)()>(nullptr);
    void* m = mmap(nullptr, n + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return static_cast<void (*)()>(nullptr);
    auto* bytes = static_cast<unsigned char*>(m);
    memset(bytes, 0x90, n);  // nop
    for (size_t off = 0; off + 64 <= n; off += 64) {
      bytes[off] = 0xeb;  // jmp rel8: to the next line
      bytes[off + 1] = 62;
    }
    bytes[n] = 0xc3;  // ret
    if (mprotect(m, n + 1, PROT_READ | PROT_EXEC) != 0) return static_cast<void (*)()>(nullptr);
    return reinterpret_cast<void (*)()>(m);
  }();
  if (code != nullptr) code();
  __asm__ volatile("" : : "r"(stream) : "memory");
}

}  // extern "C"
