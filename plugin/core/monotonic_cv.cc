#include "plugin/core/monotonic_cv.h"

#include <errno.h>
#include <time.h>

namespace ncclwatch::plugin {
namespace {

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

MonotonicCondVar::MonotonicCondVar() {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&cond_, &attr);
  pthread_condattr_destroy(&attr);
}

MonotonicCondVar::~MonotonicCondVar() { pthread_cond_destroy(&cond_); }

uint64_t MonotonicCondVar::Deadline(uint64_t timeout_ns) {
  const uint64_t now = MonotonicNs();
  return timeout_ns > ~uint64_t{0} - now ? ~uint64_t{0} : now + timeout_ns;
}

bool MonotonicCondVar::WaitUntil(std::unique_lock<std::mutex>& lock, uint64_t deadline_ns) {
  if (MonotonicNs() >= deadline_ns) return false;
  timespec ts;
  ts.tv_sec = static_cast<time_t>(deadline_ns / 1000000000ull);
  ts.tv_nsec = static_cast<long>(deadline_ns % 1000000000ull);
  // A spurious wake-up returns true: the caller checks its predicate again.
  return pthread_cond_timedwait(&cond_, lock.mutex()->native_handle(), &ts) != ETIMEDOUT;
}

}  // namespace ncclwatch::plugin
