#include "plugin/writer/in_flight.h"

#include <algorithm>

namespace ncclwatch::plugin {

void InFlightTable::Enqueued(uint64_t id, const Op& op, bool tracked) {
  ++counts_[static_cast<uint16_t>(op.comm)].enqueued;
  if (tracked && early_done_.erase(id) == 0) ops_[id] = op;
}

void InFlightTable::EnqueuedCompleted(uint16_t comm, uint64_t start_ns, uint64_t done_ns) {
  CommCounts& c = counts_[comm];
  ++c.enqueued;
  ++c.completed;
  NoteCompletion(comm, start_ns, done_ns);
}

void InFlightTable::Completed(uint64_t id, uint16_t comm, uint64_t done_ns) {
  ++counts_[comm].completed;
  auto it = ops_.find(id);
  if (it == ops_.end()) {
    early_done_.insert(id);
    return;
  }
  NoteCompletion(comm, it->second.start_ns, done_ns);
  ops_.erase(it);
}

void InFlightTable::CommFinalized(uint32_t comm) {
  for (auto it = ops_.begin(); it != ops_.end();) it = it->second.comm == comm ? ops_.erase(it) : std::next(it);
  counts_.erase(static_cast<uint16_t>(comm));  // the id may name another communicator next
}

void InFlightTable::NoteCompletion(uint16_t comm, uint64_t op_start_ns, uint64_t now) {
  CommCounts& c = counts_[comm];
  // Only the latest start matters once proven; keep the queue short.
  if (!c.recent.empty() && c.recent.back().second >= op_start_ns) return;
  // Completions within 10 ms share an entry (the grace is 1 s): the queue
  // stays short however many operations complete.
  if (!c.recent.empty() && c.recent.back().first + 10'000'000 > now) {
    c.recent.back().second = op_start_ns;
    return;
  }
  c.recent.emplace_back(now, op_start_ns);
}

uint64_t InFlightTable::ReclaimLost(uint64_t now, const std::function<void(uint64_t id)>& release) {
  if (now < next_reclaim_) return 0;
  next_reclaim_ = now + 100'000'000;
  bool advanced = false;
  for (auto& [comm, c] : counts_) {
    while (!c.recent.empty() && c.recent.front().first + kLostGraceNs <= now) {
      if (c.recent.front().second > c.proven_start) {
        c.proven_start = c.recent.front().second;
        advanced = true;
      }
      c.recent.pop_front();
    }
  }
  if (!advanced) return 0;
  uint64_t found = 0;
  for (auto it = ops_.begin(); it != ops_.end();) {
    auto c = counts_.find(static_cast<uint16_t>(it->second.comm));
    if (c == counts_.end() || it->second.stop_ns >= c->second.proven_start) {
      ++it;
      continue;
    }
    release(it->first);
    ++found;
    it = ops_.erase(it);
  }
  lost_completions_ += found;
  return found;
}

void InFlightTable::MarkUnsure(uint64_t from, uint64_t now) {
  for (auto& [id, f] : ops_) {
    if (f.start_ns >= from && !f.unsure) {
      f.unsure = true;
      f.unsure_at = now;
    }
  }
}

uint64_t InFlightTable::ForgetFrom(uint64_t from) {
  uint64_t n = 0;
  for (auto it = ops_.begin(); it != ops_.end();) {
    if (it->second.start_ns >= from) {
      it = ops_.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

uint64_t InFlightTable::ReleaseUnsure(uint64_t now, const std::function<bool(uint64_t id)>& release) {
  uint64_t n = 0;
  for (auto it = ops_.begin(); it != ops_.end();) {
    const Op& f = it->second;
    if (f.unsure && f.unsure_at + kLostGraceNs <= now && release(it->first)) {
      it = ops_.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

uint64_t InFlightTable::StuckTrigger(uint64_t now, uint64_t threshold_ns) const {
  uint64_t trigger = 0, trigger_start = UINT64_MAX;
  for (const auto& [id, f] : ops_) {
    if (!f.reported && !f.unsure && PastStuckThreshold(now, f.start_ns, threshold_ns) && f.start_ns < trigger_start) {
      trigger = id;
      trigger_start = f.start_ns;
    }
  }
  return trigger;
}

std::vector<std::pair<uint64_t, InFlightTable::Op*>> InFlightTable::OldestFirst(size_t max) {
  std::vector<std::pair<uint64_t, Op*>> v;
  v.reserve(ops_.size());
  for (auto& [id, f] : ops_)
    if (!f.unsure) v.push_back({id, &f});
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second->start_ns < b.second->start_ns; });
  if (v.size() > max) v.resize(max);
  return v;
}

const InFlightTable::Op* InFlightTable::Find(uint64_t id) const {
  auto it = ops_.find(id);
  return it == ops_.end() ? nullptr : &it->second;
}

}  // namespace ncclwatch::plugin
