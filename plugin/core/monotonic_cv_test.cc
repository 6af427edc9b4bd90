#include "plugin/core/monotonic_cv.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

namespace ncclwatch::plugin {
namespace {

TEST(MonotonicCondVarTest, WakesWhenThePredicateTurnsTrue) {
  std::mutex mu;
  MonotonicCondVar cv;
  bool ready = false;
  std::thread t([&] {
    std::lock_guard<std::mutex> lock(mu);
    ready = true;
    cv.NotifyAll();
  });
  std::unique_lock<std::mutex> lock(mu);
  // A bound against a hang only: the notify ends the wait.
  EXPECT_TRUE(cv.WaitFor(lock, 600ull * 1000000000ull, [&] { return ready; }));
  EXPECT_TRUE(lock.owns_lock());
  lock.unlock();
  t.join();
}

TEST(MonotonicCondVarTest, TimesOutWithThePredicateFalse) {
  std::mutex mu;
  MonotonicCondVar cv;
  int checks = 0;
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_FALSE(cv.WaitFor(lock, 1000000, [&] { return ++checks < 0; }));
  EXPECT_TRUE(lock.owns_lock());
  EXPECT_GE(checks, 2);  // before the wait and after the deadline
}

TEST(MonotonicCondVarTest, AnEndlessTimeoutDoesNotOverflow) {
  std::mutex mu;
  MonotonicCondVar cv;
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_TRUE(cv.WaitFor(lock, ~uint64_t{0}, [] { return true; }));
}

}  // namespace
}  // namespace ncclwatch::plugin
