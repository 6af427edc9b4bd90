#include "plugin/abi/event_kind.h"

namespace ncclwatch::plugin {

uint64_t MaskOf(EventKind k) {
  for (const auto& i : kEventKinds)
    if (i.kind == k) return i.mask;
  return 0;
}

// KindOfMask (event_kind.h) relies on bit b of NCCL's type mask being kind b + 1.
constexpr bool KindsFollowBits() {
  for (const auto& i : kEventKinds)
    if (i.mask != (uint64_t{1} << (i.kind - 1))) return false;
  return true;
}
static_assert(KindsFollowBits(), "EventKind must be NCCL's type bit index + 1");
static_assert(sizeof(kEventKinds) / sizeof(kEventKinds[0]) == kEvCount - 1, "every kind has a mask bit");

const char* EventKindName(EventKind k) {
  for (const auto& i : kEventKinds)
    if (i.kind == k) return i.name;
  return "none";
}

}  // namespace ncclwatch::plugin
