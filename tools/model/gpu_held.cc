#include "tools/model/gpu_held.h"

#include <algorithm>

namespace ncclwatch::tools {

std::vector<int64_t> GpuHeldNs(const Model& m) {
  std::vector<int64_t> held(m.ops.size(), kNoTime);
  for (const Proc& p : m.procs) {
    int64_t earlier_done = kNoTime;
    bool earlier_known = true;
    for (uint32_t oi : p.ops) {  // program order
      const Op& o = m.ops[oi];
      const bool done = o.state == OpState::kCompleted && o.done_ns != kNoTime;
      if (earlier_known && done && o.polled && o.start_ns != kNoTime) {
        const int64_t reached = o.done_ns - static_cast<int64_t>(o.polled_held_ns);
        held[oi] = std::max<int64_t>(0, reached - std::max(o.start_ns, earlier_done));
      }
      if (!done) earlier_known = false;
      else earlier_done = std::max(earlier_done, o.done_ns);
    }
  }
  return held;
}

bool ShowsGpuHeld(const Model& m, const Proc& p) {
  return p.event_completions || std::any_of(p.ops.begin(), p.ops.end(), [&](uint32_t oi) { return m.ops[oi].polled; });
}

}  // namespace ncclwatch::tools
