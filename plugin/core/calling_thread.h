// The calling thread's state on the Profiler's event path: its buffer
// (Profiler::CurrentThread) and the last kernel launch it made. Shared by
// the files of the event path (core.cc, child_events.cc, thread_bufs.cc)
// and by nothing else: include core.h first.
//
// C-style thread-locals (__thread): constant-initialized, so an access is
// the same in every file. A C++ thread_local declared extern would be read
// through a wrapper that asks whether it needs initializing, a call on
// every access from the files that do not define it.
//
// Thread safety: each thread reads and writes only its own.

#ifndef PLUGIN_CORE_CALLING_THREAD_H_
#define PLUGIN_CORE_CALLING_THREAD_H_

#include <stdint.h>

#include <atomic>

#include "plugin/core/core.h"
#include "plugin/core/state.h"

namespace ncclwatch::plugin {
namespace calling_thread {

// The calling thread's buffer, in one thread-local: each hot-path call
// looks up its address once (in a dlopen'ed .so every thread-local access
// is a call, BENCHMARKS.md "The launching thread's cost").
struct ThreadState {
  ThreadBuf* buf;
  uint64_t gen;    // Profiler generation buf belongs to
  uint64_t epoch;  // buffers freed when this thread last found none
};
extern __thread ThreadState t_thread;  // defined in core.cc

// Completions from CUDA events: the last kernel launch on this thread. NCCL
// starts a plan's operations right after its launch, on the same thread
// (docs/nccl_call_order.md), so they belong to it when their communicator
// is the launch's.
struct LaunchBinding {
  uint64_t gen;  // Profiler generation
  const Context* ctx;
  uint64_t id;     // the launch's event id (0: none)
  uint16_t flags;  // kFlagGraph, kFlagNoEvent
};
extern __thread LaunchBinding t_launch;  // defined in core.cc

}  // namespace calling_thread

// Inline in every file of the event path, as it was when they were one.
__attribute__((hot)) inline ThreadBuf* Profiler::CurrentThread() {
  calling_thread::ThreadState& t = calling_thread::t_thread;
  if (__builtin_expect(t.gen == generation_, 1)) {
    if (__builtin_expect(t.buf != nullptr, 1)) return t.buf;
    // None was free when this thread last looked: look again only once the
    // writer has freed one (an exited thread's).
    if (t.epoch == buffers_freed_.load(std::memory_order_acquire)) return nullptr;
  }
  return ClaimThread();
}

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CORE_CALLING_THREAD_H_
