#include "plugin/writer/launches.h"

namespace ncclwatch::plugin {

void LaunchTable::Launched(uint64_t id, EventPool* pool, int32_t before, int32_t after, uint64_t stream,
                           uint32_t tid, uint64_t stop_ns) {
  // A thread's records arrive in order: its previous launch gets no more
  // operations.
  auto prev = last_of_thread_.find(tid);
  if (prev != last_of_thread_.end()) {
    auto it = launches_.find(prev->second);
    if (it != launches_.end()) {
      it->second.sealed = true;
      MaybeErase(prev->second);
    }
  }
  last_of_thread_[tid] = id;
  if (pool == nullptr || before < 0 || after < 0) return;  // nothing to watch: its ops say why
  Launch& l = launches_[id];
  l.pool = pool;
  l.before = before;
  l.after = after;
  l.stream = stream;
  l.tid = tid;
  l.stop_ns = stop_ns;
  // In launch order per stream; threads sharing a stream may be drained out
  // of order, so the few late ones are placed by their stop time.
  std::deque<uint64_t>& q = streams_[{pool, stream}];
  auto pos = q.end();
  while (pos != q.begin() && launches_[*(pos - 1)].stop_ns > stop_ns) --pos;
  q.insert(pos, id);
  ++pending_;
}

LaunchTable::Bound LaunchTable::Bind(uint64_t launch_id, uint64_t op_id, uint64_t* done_ns) {
  auto it = launches_.find(launch_id);
  if (it == launches_.end()) return Bound::kUnknown;
  Launch& l = it->second;
  if (l.done) {
    *done_ns = l.done_ns;
    return Bound::kDone;
  }
  l.ops.push_back(op_id);
  op_launch_[op_id] = launch_id;
  return Bound::kWatched;
}

int LaunchTable::Query(EventPool* pool, int32_t ev) {
  ++stats_.queries;
  return pool->cuda()->event_query(pool->event(ev));
}

void LaunchTable::Finish(uint64_t id, Launch* l) {
  l->done = true;
  for (uint64_t op : l->ops) op_launch_.erase(op);
  l->ops.clear();
  l->ops.shrink_to_fit();
  l->pool->Give(l->before);
  l->pool->Give(l->after);
  --pending_;
  ++stats_.done;
  MaybeErase(id);
}

void LaunchTable::MaybeErase(uint64_t id) {
  auto it = launches_.find(id);
  if (it != launches_.end() && it->second.done && it->second.sealed) launches_.erase(it);
}

void LaunchTable::Poll(uint64_t now, const std::function<void(uint64_t, uint64_t)>& done,
                       const std::function<void(uint64_t)>& gone) {
  for (auto s = streams_.begin(); s != streams_.end();) {
    std::deque<uint64_t>& q = s->second;
    EventPool* pool = q.empty() ? nullptr : launches_[q.front()].pool;
    bool dead = pool != nullptr && pool->dead();
    // How many launches, from the front, are done: the newest first, then
    // a binary search for the boundary (lo done, hi not done).
    size_t ndone = 0;
    if (!q.empty() && !dead) {
      const int r = Query(pool, launches_[q.back()].after);
      if (r == kCudaSuccess) {
        ndone = q.size();
      } else if (r == kCudaNotReady) {
        long lo = -1, hi = static_cast<long>(q.size()) - 1;
        while (hi - lo > 1 && !dead) {
          const long mid = lo + (hi - lo) / 2;
          const int m = Query(pool, launches_[q[mid]].after);
          if (m == kCudaSuccess) lo = mid;
          else if (m == kCudaNotReady) hi = mid;
          else dead = true;
        }
        ndone = static_cast<size_t>(lo + 1);
      } else {
        dead = true;
      }
    }
    if (dead) {
      // The context was destroyed (or the driver refuses its events): no
      // call goes into it again, and its launches' completions are unknown.
      if (pool != nullptr) pool->MarkDead();
      for (uint64_t id : q) {
        Launch& l = launches_[id];
        for (uint64_t op : l.ops) {
          op_launch_.erase(op);
          gone(op);
        }
        ++stats_.context_gone;
        --pending_;
        launches_.erase(id);
      }
      s = streams_.erase(s);
      continue;
    }
    for (size_t i = 0; i < ndone; ++i) {
      const uint64_t id = q.front();
      q.pop_front();
      Launch& l = launches_[id];
      for (uint64_t op : l.ops) done(op, now);
      l.done_ns = now;
      Finish(id, &l);
    }
    if (q.empty()) {
      s = streams_.erase(s);
      continue;
    }
    // Started: launches start in order too. Find the first not known to
    // have started, then the newest that has.
    size_t first = 0;
    while (first < q.size() && launches_[q[first]].started) ++first;
    if (first < q.size()) {
      long lo = static_cast<long>(first) - 1, hi = static_cast<long>(q.size());
      const int r = Query(pool, launches_[q.back()].before);
      if (r == kCudaSuccess) {
        lo = static_cast<long>(q.size()) - 1;
      } else if (r == kCudaNotReady) {
        hi = static_cast<long>(q.size()) - 1;
        while (hi - lo > 1) {
          const long mid = lo + (hi - lo) / 2;
          const int m = Query(pool, launches_[q[mid]].before);
          if (m == kCudaSuccess) lo = mid;
          else if (m == kCudaNotReady) hi = mid;
          else break;  // the next cycle's done query sees the context gone
        }
      }
      for (long i = static_cast<long>(first); i <= lo; ++i) launches_[q[i]].started = true;
    }
    ++s;
  }
}

GpuProgress LaunchTable::ProgressOf(uint64_t op_id) const {
  auto o = op_launch_.find(op_id);
  if (o == op_launch_.end()) return GpuProgress::kUnknown;
  auto l = launches_.find(o->second);
  if (l == launches_.end()) return GpuProgress::kUnknown;
  return l->second.started ? GpuProgress::kStarted : GpuProgress::kNotStarted;
}

}  // namespace ncclwatch::plugin
