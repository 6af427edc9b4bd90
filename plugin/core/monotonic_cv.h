// A condition variable whose timed waits run on CLOCK_MONOTONIC, through
// pthread_cond_timedwait on a condition created with that clock.
//
// std::condition_variable::wait_for does the same with
// pthread_cond_clockwait, which glibc added in 2.30 (exported at 2.34): a
// plugin built with it does not load on RHEL 8 (glibc 2.28) or Ubuntu 20.04
// (2.31). pthread_condattr_setclock and pthread_cond_timedwait are in every
// glibc we support (2.17 on), and a monotonic deadline is immune to the
// wall clock being set, as steady_clock is.
//
// Use it with a std::mutex (its native handle is a pthread mutex). Not for
// waits that must follow the wall clock.
//
// Thread safety: as std::condition_variable: NotifyAll from any thread,
// WaitFor with the mutex held. Allocates nothing.

#ifndef PLUGIN_CORE_MONOTONIC_CV_H_
#define PLUGIN_CORE_MONOTONIC_CV_H_

#include <pthread.h>
#include <stdint.h>

#include <mutex>

namespace ncclwatch::plugin {

class MonotonicCondVar {
 public:
  MonotonicCondVar();
  ~MonotonicCondVar();
  MonotonicCondVar(const MonotonicCondVar&) = delete;
  MonotonicCondVar& operator=(const MonotonicCondVar&) = delete;

  void NotifyAll() { pthread_cond_broadcast(&cond_); }

  // Waits until `pred()` holds or `timeout_ns` passed; returns `pred()`.
  // `lock` holds the mutex on entry and on return.
  template <typename Pred>
  bool WaitFor(std::unique_lock<std::mutex>& lock, uint64_t timeout_ns, Pred pred) {
    const uint64_t deadline = Deadline(timeout_ns);
    while (!pred())
      if (!WaitUntil(lock, deadline)) return pred();
    return true;
  }

 private:
  static uint64_t Deadline(uint64_t timeout_ns);
  // One wait; false once `deadline_ns` (CLOCK_MONOTONIC) has passed.
  bool WaitUntil(std::unique_lock<std::mutex>& lock, uint64_t deadline_ns);

  pthread_cond_t cond_;
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_CORE_MONOTONIC_CV_H_
