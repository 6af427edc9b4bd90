// MaskWatch: what the writer knows of NCCL's event activation mask after
// init, and which operations may have lost their completion to a change.
//
// The mask is one int for the whole process (`ncclProfilerEventMask`), whose
// address NCCL hands to every init. NCCL 2.31 lets RAS set it for a whole job
// at any time (`ncclProfilerSetRasOverride`, on RAS's thread, re-applied
// after every later init) and ORs KernelCh into a mask that has KernelPhase
// (`ncclProfilerEnforceMaskDeps`). NCCL reads it once per API call
// (`ncclProfilerStartGroupApiEvent`) and keeps that value with the call's
// tasks: their kernel channels and kernel launch follow the mask as it was
// at the call, not as it is when the operation starts.
//
// The writer reads the mask once per cycle and hands each read to Read().
// When the bits completions come from (`source`: KernelCh, or KernelLaunch
// for completions from CUDA events) go away, NCCL changed the mask after the
// last read that still had them; an API call after that read may have taken
// the new mask, so every operation started from then on is *unsure*: NCCL
// may never report its completion, and its absence proves nothing. When the
// bits come back, operations keep being unsure for kReturnPadNs more: a call
// made before the change back may start its operations later (nonblocking
// communicators, CUDA graphs), and with completions from CUDA events such an
// operation would take an earlier launch's completion as its own.
//
// Allocates only when the mask changes. Thread safety: one thread (the
// writer's).

#ifndef PLUGIN_WRITER_MASK_WATCH_H_
#define PLUGIN_WRITER_MASK_WATCH_H_

#include <stddef.h>
#include <stdint.h>

#include <vector>

namespace ncclwatch::plugin {

class MaskWatch {
 public:
  static constexpr uint64_t kReturnPadNs = 1'000'000'000;
  // At most this many windows are kept; older ones are merged (which only
  // makes more operations unsure).
  static constexpr size_t kMaxWindows = 16;

  // `mask`: what the plugin handed NCCL, read at `now`; `source`: the bits
  // its completions need (0: it tracks none, nothing is ever unsure).
  MaskWatch(uint64_t mask, uint64_t source, uint64_t now) : last_(mask), last_read_ns_(now), source_(source) {}

  struct Change {
    uint64_t old_mask;
    uint64_t new_mask;
    uint64_t since_ns;  // the last read of old_mask
    bool source_lost;   // the change took away a completion bit
    bool source_back;   // the change gave every completion bit back
  };
  // A read of the mask at `now`. True, with `out` filled, when it differs
  // from the previous read.
  bool Read(uint64_t mask, uint64_t now, Change* out);

  // Whether an operation started at `start_ns` may have been enqueued under
  // a mask without the completion source.
  bool Unsure(uint64_t start_ns) const;
  uint64_t source() const { return source_; }
  uint64_t mask() const { return last_; }

 private:
  struct Window {
    uint64_t from;
    uint64_t to;  // UINT64_MAX while the source is off
  };
  uint64_t last_;
  uint64_t last_read_ns_;
  uint64_t source_;
  std::vector<Window> windows_;
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_WRITER_MASK_WATCH_H_
