// What the writer thread sees of the Profiler: its thread buffers and slots
// to drain and scan, its communicators, its settings, its logger and the
// counters it keeps.
//
// The writer never includes core.h: the Profiler's hot path and the writer
// thread build as separate libraries (plugin/BUILD's :core and :writer), and
// a change to either recompiles only its own side and what wires them
// (:profiler, profiler.cc, which implements this class over the Profiler).
// The shared memory itself is state.h's.
//
// An abstract class, called only on the writer thread's side (each cycle, a
// few calls per thread buffer), never on NCCL's threads: the hot path reads
// the Profiler directly, with no call through this class.
//
// Allocation: ContextsSnapshot returns a new vector; nothing else allocates.
//
// Thread safety: each function may be called from the writer thread while
// NCCL's threads run the hot path; the accessors of settings (config() to
// clock_probe()) return what was fixed at the Profiler's init.

#ifndef PLUGIN_CORE_CORE_VIEW_H_
#define PLUGIN_CORE_CORE_VIEW_H_

#include <stdarg.h>
#include <stdint.h>

#include <string>
#include <vector>

#include "plugin/abi/profiler_common.h"
#include "plugin/core/clock.h"
#include "plugin/core/config.h"
#include "plugin/core/launch_events.h"
#include "plugin/core/shared_lane.h"
#include "plugin/core/state.h"

namespace ncclwatch::plugin {

class CoreView {
 public:
  virtual ~CoreView() = default;

  // Settings, fixed at init.
  virtual const Config& config() const = 0;
  virtual int api_version() const = 0;
  virtual const ClockProbe& clock_probe() const = 0;
  // Completions come from CUDA events at kernel launches (launch_events.h).
  virtual bool events() const = 0;
  virtual const CudaDriver& cuda() const = 0;
  // What the header says of the completions: "channels", "events" or
  // "channels (why)".
  virtual const std::string& completions() const = 0;

  // The thread buffers, each with its ring and region of slots.
  virtual uint32_t thread_count() const = 0;
  virtual ThreadBuf* thread_buf(uint32_t i) = 0;
  // The writer freed an exited thread's buffer: threads without one look again.
  virtual void BufferFreed() = 0;
  // Records of threads without a buffer.
  virtual SharedLane& lane() = 0;
  // Every slot of every region, for stuck reports.
  virtual const Slot* slots_begin() const = 0;
  virtual const Slot* slots_end() const = 0;
  // Events dropped for want of a buffer.
  virtual uint64_t no_thread_slot() const = 0;

  // The communicators' contexts made so far (finalized ones included).
  virtual std::vector<Context*> ContextsSnapshot() = 0;
  // A communicator's CommFinalize is written: its context may serve a new one.
  virtual void RecycleContext(Context* ctx) = 0;
  // NCCLWATCH_EVENT_INTERVAL_US in ticks, once the writer knows the tick
  // rate (until then every launch records its events).
  virtual void SetEventIntervalTicks(uint64_t ticks) = 0;
  // NCCL's event mask (the latest address an init gave), or null.
  virtual int* nccl_mask_address() const = 0;

  // Through NCCL's logger (or stderr without one).
  virtual void VLog(nccl::LogLevel level, const char* fmt, va_list ap) = 0;
  void Log(nccl::LogLevel level, const char* fmt, ...) __attribute__((format(printf, 3, 4))) {
    va_list ap;
    va_start(ap, fmt);
    VLog(level, fmt, ap);
    va_end(ap);
  }
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CORE_CORE_VIEW_H_
