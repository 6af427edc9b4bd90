// A thread's buffer: claimed on the thread's first event (its pages made
// resident at once, its launch slot set up), released when the thread exits
// (the writer frees it once drained). Cold: a thread claims one once.
//
// Thread safety: ClaimThread on the calling thread, for itself; ThreadExit
// on the exiting thread (a pthread key's destructor).

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "plugin/core/calling_thread.h"
#include "plugin/core/core.h"

namespace ncclwatch::plugin {
namespace {

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

// Whether the page holding the last byte of [addr, addr + len) is resident.
bool LastPageResident(void* addr, size_t len, size_t page) {
  uintptr_t last = (reinterpret_cast<uintptr_t>(addr) + len - 1) & ~(uintptr_t{page} - 1);
  unsigned char vec = 0;
  return mincore(reinterpret_cast<void*>(last), page, &vec) == 0 && (vec & 1) != 0;
}

// Makes [addr, addr + len) resident and writable without changing a byte.
// Older kernels refuse the madvise, and an emulator may accept it as a hint
// and do nothing (qemu-user does): then a word of every page gets an atomic
// add of 0 (the memory may already be read by the writer thread's scans).
void Prefault(void* addr, size_t len) {
  if (addr == nullptr || len == 0) return;
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (madvise(addr, len, MADV_POPULATE_WRITE) == 0 && LastPageResident(addr, len, page)) return;
  char* p = static_cast<char*>(addr);
  for (size_t off = 0; off < len; off += page)
    __atomic_fetch_add(reinterpret_cast<uint64_t*>(p + off), 0, __ATOMIC_RELAXED);
}

}  // namespace

void Profiler::ThreadExit(void* buf) {
  static_cast<ThreadBuf*>(buf)->owner.store(kBufOrphaned, std::memory_order_release);
}

__attribute__((cold)) ThreadBuf* Profiler::ClaimThread() {
  calling_thread::ThreadState& t = calling_thread::t_thread;
  t.gen = generation_;
  t.buf = nullptr;
  t.epoch = buffers_freed_.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < nthreads_; ++i) {
    uint32_t expected = kBufFree;
    if (threads_[i].owner.compare_exchange_strong(expected, kBufOwned, std::memory_order_acq_rel)) {
      ThreadBuf* tb = &threads_[i];
      tb->tid.store(static_cast<uint32_t>(syscall(SYS_gettid)), std::memory_order_relaxed);
      // Fault the buffer in now, once, rather than a page at a time on later
      // events: measured on GPU, those faults made a collective's start cost
      // 0.4 to 1.2 us on average for the first 4,096 operations of a thread.
      Prefault(tb->slots, size_t{tb->nslots + tb->nspare} * sizeof(Slot));
      Prefault(tb->ring.storage(), size_t{tb->ring.capacity()} * sizeof(Rec));
      if (events_) InitLaunchSlot(tb);
      if (key_ok_) pthread_setspecific(key_, tb);
      t.buf = tb;
      return tb;
    }
  }
  return nullptr;  // callers count what they drop for want of a buffer
}

// What no launch changes in the thread's launch slot (ThreadBuf::launch),
// set once per claim of the buffer: StartLaunch writes only the rest.
void Profiler::InitLaunchSlot(ThreadBuf* tb) {
  Slot* s = tb->launch;
  Claim(tb, s);
  s->kind.store(kEvKernelLaunch, std::memory_order_relaxed);
  Rec& r = s->rec;
  memset(&r, 0, sizeof(Rec));
  r.kind = kRecLaunch;
  r.etype = kEvKernelLaunch;
  r.launch.tid = tb->tid.load(std::memory_order_relaxed);
  s->state.store(kSlotDone, std::memory_order_release);
}

}  // namespace ncclwatch::plugin
