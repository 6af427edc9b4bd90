#include "plugin/writer/mask_watch.h"

namespace ncclwatch::plugin {

bool MaskWatch::Read(uint64_t mask, uint64_t now, Change* out) {
  const uint64_t prev_read = last_read_ns_;
  last_read_ns_ = now;
  if (mask == last_) return false;
  const bool had = source_ != 0 && (last_ & source_) == source_;
  const bool has = source_ != 0 && (mask & source_) == source_;
  *out = {last_, mask, prev_read, had && !has, !had && has && source_ != 0};
  last_ = mask;
  if (out->source_lost) {
    if (windows_.size() == kMaxWindows) {
      windows_[1].from = windows_[0].from;
      windows_.erase(windows_.begin());
    }
    windows_.push_back({prev_read, UINT64_MAX});
  } else if (out->source_back && !windows_.empty() && windows_.back().to == UINT64_MAX) {
    windows_.back().to = now + kReturnPadNs;
  }
  return true;
}

bool MaskWatch::Unsure(uint64_t start_ns) const {
  for (const Window& w : windows_)
    if (start_ns >= w.from && start_ns < w.to) return true;
  return false;
}

}  // namespace ncclwatch::plugin
