// The watchdog's firing path (Fire: abort every communicator, then exit) and
// its polling loop, and the crash handler that keeps the watchdog's exit
// status if the process crashes while aborting.

#include "scenario_watchdog.h"

#include <nccl.h>
#include <signal.h>
#include <stdint.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu_common.h"
#include "scenario.h"

namespace ncclwatch::scenarios {
namespace {

constexpr int kAbortGraceSec = 10;   // reaper: max time for the aborts
constexpr int kWatchdogPollMs = 20;  // watchdog thread period

volatile sig_atomic_t g_fire_code = 0;  // status to _exit with once firing
char g_crash_msg[160];                   // prepared before use: no formatting in the handler
size_t g_crash_len = 0;

void CrashHandler(int sig) {
  if (g_fire_code != 0) {
    ssize_t unused = write(2, g_crash_msg, g_crash_len);
    (void)unused;
    _exit(g_fire_code);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void InstallCrashHandler(int rank) {
  int n = snprintf(g_crash_msg, sizeof(g_crash_msg),
                   "[rank %d] watchdog: crashed while aborting; exiting with its status\n", rank);
  g_crash_len = size_t(std::max(0, std::min(n, int(sizeof(g_crash_msg)) - 1)));
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = CrashHandler;
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
  sigaction(SIGABRT, &sa, nullptr);
}

void Watchdog::Fire(int code, const std::string& why) {
  int expected = 0;
  if (!firing_.compare_exchange_strong(expected, code)) Park();
  g_fire_code = code;
  Log("%s", why.c_str());
  std::vector<Entry> comms;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!where_.empty()) Log("watchdog: was waiting in: %s", where_.c_str());
    comms = comms_;
  }
  std::thread([code] {
    sleep(kAbortGraceSec);
    Log("watchdog: aborts did not return within %d s; exiting %d without them", kAbortGraceSec,
        code);
    _exit(code);
  }).detach();
  // All communicators at once, one thread each. Sequential aborts deadlock:
  // ncclCommAbort frees device memory, which waits for the device to go
  // idle, while a kernel of a communicator not yet aborted still spins
  // (seen on H200 with NCCL 2.28.3: aborting dp first hung while world's
  // all_reduce was stuck). NCCL raises a communicator's abort flag before
  // it frees anything, so with every abort under way every kernel exits.
  std::string names;
  for (const Entry& e : comms) names += std::string(names.empty() ? "" : ", ") + e.name;
  Log("watchdog: aborting %zu communicator(s): %s", comms.size(), names.c_str());
  std::vector<std::thread> aborts;
  for (const Entry& e : comms) {
    aborts.emplace_back([e] {
      int64_t t0 = NowNs();
      ncclResult_t r = ncclCommAbort(e.comm);
      Log("watchdog: ncclCommAbort(%s) -> %s in %.1f ms", e.name, ncclGetErrorString(r),
          SecSince(t0) * 1e3);
    });
  }
  for (std::thread& t : aborts) t.join();
  Log("watchdog: exiting with status %d", code);
  _exit(code);
}

void Watchdog::Loop() {
  while (!stop_ && !firing()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kWatchdogPollMs));
    if (stop_ || firing()) return;
    std::string why;
    int code = 0;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (const Entry& e : comms_) {
        ncclResult_t st = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(e.comm, &st);
        if (r != ncclSuccess) st = r;
        if (st != ncclSuccess && st != ncclInProgress) {
          code = kExitAsyncError;
          why = std::string("watchdog: async NCCL error on comm ") + e.name + ": " +
                ncclGetErrorString(st) + " (" + ncclGetLastError(e.comm) + "), aborting";
          break;
        }
      }
      int64_t dl = deadline_ns_.load();
      if (code == 0 && dl != 0 && NowNs() > dl) {
        char buf[256];
        snprintf(buf, sizeof(buf), "watchdog: %s timed out after %g s, aborting", phase_,
                 armed_sec_);
        code = kExitTimeout;
        why = buf;
      }
    }
    if (code != 0) Fire(code, why);
  }
}

}  // namespace ncclwatch::scenarios
