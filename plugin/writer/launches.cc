#include "plugin/writer/launches.h"

namespace ncclwatch::plugin {

void LaunchTable::Launched(uint64_t id, StreamEvents* events, uint64_t n, uint32_t tid, bool start_event,
                           bool own_events) {
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
  if (events == nullptr) return;  // nothing to watch: its ops say why
  ++stats_.launches;
  if (!own_events) ++stats_.without_events;
  Launch& l = launches_[id];
  l.events = events;
  l.n = n;
  l.tid = tid;
  l.start_event = start_event && own_events;
  l.own = own_events;
  l.key = own_events ? 2 * n + 1 : 2 * n;
  // In stream order (the launch number); threads sharing a stream may be
  // drained out of order, so the few late ones are placed by number.
  std::deque<uint64_t>& q = streams_[events];
  auto pos = q.end();
  while (pos != q.begin() && launches_[*(pos - 1)].key > l.key) --pos;
  q.insert(pos, id);
  ++pending_;
}

LaunchTable::Bound LaunchTable::Bind(uint64_t launch_id, uint64_t op_id, uint64_t* done_ns, uint64_t* started_ns,
                                     bool* without_event) {
  auto it = launches_.find(launch_id);
  if (it == launches_.end()) return Bound::kUnknown;
  Launch& l = it->second;
  if (without_event != nullptr) *without_event = !l.own;
  if (l.done) {
    *done_ns = l.done_ns;
    if (started_ns != nullptr) *started_ns = l.started_ns;
    return Bound::kDone;
  }
  l.ops.push_back(op_id);
  op_launch_[op_id] = launch_id;
  return Bound::kWatched;
}

int LaunchTable::Query(StreamEvents* s, void* event) {
  ++stats_.queries;
  return s->cuda()->event_query(event);
}

void LaunchTable::Finish(uint64_t id, Launch* l) {
  l->done = true;
  for (uint64_t op : l->ops) op_launch_.erase(op);
  l->ops.clear();
  l->ops.shrink_to_fit();
  --pending_;
  ++stats_.done;
  MaybeErase(id);
}

void LaunchTable::MaybeErase(uint64_t id) {
  auto it = launches_.find(id);
  if (it != launches_.end() && it->second.done && it->second.sealed) launches_.erase(it);
}

void LaunchTable::FinishFront(std::deque<uint64_t>* q, size_t count, uint64_t now, const DoneFn& done) {
  for (size_t i = 0; i < count; ++i) {
    const uint64_t id = q->front();
    q->pop_front();
    Launch& l = launches_[id];
    for (uint64_t op : l.ops) done(op, now, l.started_ns, !l.own);
    l.done_ns = now;
    Finish(id, &l);
  }
}

void LaunchTable::Poll(const std::function<uint64_t()>& clock, const DoneFn& done,
                       const std::function<void(uint64_t)>& gone) {
  std::vector<size_t> with;  // positions in the queue of launches with events
  for (auto s = streams_.begin(); s != streams_.end();) {
    StreamEvents* ev = s->first;
    std::deque<uint64_t>& q = s->second;
    bool dead = ev->dead();
    auto index = [&] {
      with.clear();
      for (size_t i = 0; i < q.size(); ++i)
        if (launches_[q[i]].own) with.push_back(i);
    };
    index();
    // Whether launch q[with[k]]'s event (after or before) is known complete:
    // 1 yes, 0 not yet or unknown, -1 the context is gone.
    auto known = [&](size_t k, bool after) {
      const Launch& l = launches_[q[with[k]]];
      const int r = Query(ev, after ? ev->after(l.n) : ev->before(l.n));
      if (r == kCudaSuccess) return 1;  // this record or a later one on the stream: either proves it
      return r == kCudaNotReady ? 0 : -1;
    };
    // How many launches, from the front, are done: the newest with events
    // first, then a binary search for the boundary (lo done, hi not known
    // done). Launches without events before a done one are done with it.
    size_t ndone = 0;
    if (!with.empty() && !dead) {
      const int r = known(with.size() - 1, true);
      if (r == 1) {
        ndone = with.back() + 1;
      } else if (r == 0) {
        long lo = -1, hi = static_cast<long>(with.size()) - 1;
        while (hi - lo > 1 && !dead) {
          const long mid = lo + (hi - lo) / 2;
          const int m = known(static_cast<size_t>(mid), true);
          if (m == 1) lo = mid;
          else if (m == 0) hi = mid;
          else dead = true;
        }
        ndone = lo >= 0 ? with[static_cast<size_t>(lo)] + 1 : 0;
      } else {
        dead = true;
      }
    }
    if (dead) {
      // The context was destroyed (or the driver refuses its events): no
      // call goes into it again, and its launches' completions are unknown.
      ev->MarkDead();
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
    if (ndone > 0) FinishFront(&q, ndone, clock(), done);
    index();
    // Started: launches start in order too. Find the first with events not
    // known to have started, then the newest that has.
    size_t first = 0;
    while (first < with.size() && launches_[q[with[first]]].started) ++first;
    if (first < with.size() && launches_[q[with.back()]].start_event) {
      long lo = static_cast<long>(first) - 1, hi = static_cast<long>(with.size());
      const int r = known(with.size() - 1, false);
      if (r == 1) {
        lo = static_cast<long>(with.size()) - 1;
      } else if (r == 0) {
        hi = static_cast<long>(with.size()) - 1;
        while (hi - lo > 1) {
          const long mid = lo + (hi - lo) / 2;
          const int m = known(static_cast<size_t>(mid), false);
          if (m == 1) lo = mid;
          else if (m == 0) hi = mid;
          else break;  // the next cycle's done query sees the context gone
        }
      }
      const uint64_t seen = lo >= static_cast<long>(first) ? clock() : 0;
      for (long k = static_cast<long>(first); k <= lo; ++k) {
        Launch& l = launches_[q[with[static_cast<size_t>(k)]]];
        l.started = true;
        l.started_ns = seen;
      }
    }
    // A stream reaches a launch only once every earlier one finished: the
    // launches before the newest started one are done (with sampled events,
    // the launches without events before it).
    size_t newest_started = 0;
    bool any_started = false;
    for (size_t k = with.size(); k-- > 0;)
      if (launches_[q[with[k]]].started) {
        newest_started = with[k];
        any_started = true;
        break;
      }
    if (any_started && newest_started > 0) FinishFront(&q, newest_started, clock(), done);
    if (q.empty()) {
      s = streams_.erase(s);
      continue;
    }
    ++s;
  }
}

GpuProgress LaunchTable::ProgressOf(uint64_t op_id) const {
  auto o = op_launch_.find(op_id);
  if (o == op_launch_.end()) return GpuProgress::kUnknown;
  auto l = launches_.find(o->second);
  if (l == launches_.end()) return GpuProgress::kUnknown;
  if (!l->second.own) return GpuProgress::kInWindow;
  if (l->second.started) return GpuProgress::kStarted;
  if (!l->second.start_event) return GpuProgress::kUnknown;
  // "Not started" only from its own event: a later launch's record on its
  // pair says nothing about it.
  return TakenOver(l->second) ? GpuProgress::kUnknown : GpuProgress::kNotStarted;
}

bool LaunchTable::WindowOf(uint64_t op_id, uint64_t* first_op, uint64_t* last_op) const {
  auto o = op_launch_.find(op_id);
  if (o == op_launch_.end()) return false;
  auto l = launches_.find(o->second);
  if (l == launches_.end() || l->second.own) return false;
  auto s = streams_.find(l->second.events);
  if (s == streams_.end()) return false;
  const std::deque<uint64_t>& q = s->second;
  size_t at = 0;
  while (at < q.size() && q[at] != o->second) ++at;
  if (at == q.size()) return false;
  // From the stream's first launch not proven done (every earlier one is)
  // to the end of the run of launches without events that holds this one:
  // the next launch with events was not reached (or the GPU may be past).
  size_t e = at;
  while (e + 1 < q.size() && !launches_.at(q[e + 1]).own) ++e;
  *first_op = 0;
  *last_op = 0;
  for (size_t i = 0; i <= e && *first_op == 0; ++i) {
    const std::vector<uint64_t>& ops = launches_.at(q[i]).ops;
    if (!ops.empty()) *first_op = ops.front();
  }
  for (size_t i = e + 1; i-- > 0 && *last_op == 0;) {
    const std::vector<uint64_t>& ops = launches_.at(q[i]).ops;
    if (!ops.empty()) *last_op = ops.back();
  }
  return true;
}

}  // namespace ncclwatch::plugin
