// A rank's watchdog (see the top of nccl_scenarios.cc): a thread that holds
// the deadline of the current phase and polls every communicator for
// asynchronous errors, and on either aborts all communicators and exits the
// process; plus the crash handler that keeps that exit status if the aborts
// crash the process.

#ifndef GPU_SCENARIO_WATCHDOG_H_
#define GPU_SCENARIO_WATCHDOG_H_

#include <nccl.h>
#include <stdint.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpu_common.h"
#include "scenario.h"

namespace ncclwatch::scenarios {

// First thing in a forked rank, before any CUDA or NCCL: once the watchdog
// fires, SIGSEGV/SIGBUS/SIGABRT exit with the watchdog's status.
void InstallCrashHandler(int rank);

class Watchdog {
 public:
  void Start() { thread_ = std::thread([this] { Loop(); }); }

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  void Register(CommId id, ncclComm_t comm) {
    std::lock_guard<std::mutex> l(mu_);
    comms_.push_back({kCommNames[id], comm});
  }

  // From here on the main thread destroys the comms; the watchdog no longer
  // touches them (a late deadline then exits without aborting).
  void ReleaseComms() {
    std::lock_guard<std::mutex> l(mu_);
    comms_.clear();
  }

  void Arm(const char* phase, double sec) {
    std::lock_guard<std::mutex> l(mu_);
    phase_ = phase;
    armed_sec_ = sec;
    deadline_ns_ = NowNs() + int64_t(sec * 1e9);
  }

  void Disarm() { deadline_ns_ = 0; }

  void SetWhere(std::string where) {
    std::lock_guard<std::mutex> l(mu_);
    where_ = std::move(where);
  }

  bool firing() const { return firing_.load() != 0; }

  // Callable from any thread; a second caller parks while the first exits.
  [[noreturn]] void Fire(int code, const std::string& why);

 private:
  struct Entry {
    const char* name;
    ncclComm_t comm;
  };

  void Loop();

  std::mutex mu_;
  std::vector<Entry> comms_;     // guarded by mu_
  std::string where_;            // guarded by mu_
  const char* phase_ = "";       // guarded by mu_
  double armed_sec_ = 0;         // guarded by mu_
  std::atomic<int64_t> deadline_ns_{0};
  std::atomic<int> firing_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ncclwatch::scenarios

#endif  // GPU_SCENARIO_WATCHDOG_H_
