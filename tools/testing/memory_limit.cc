#include "tools/testing/memory_limit.h"

#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <fstream>
#include <thread>

#if defined(__SANITIZE_ADDRESS__)
#define NCCLWATCH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NCCLWATCH_ASAN 1
#endif
#endif
#ifndef NCCLWATCH_ASAN
#define NCCLWATCH_ASAN 0
#endif

namespace ncclwatch::tools::testing {
namespace {

// The process's address space now (VmSize), in bytes; 0 if unknown.
uint64_t AddressSpace() {
  std::ifstream in("/proc/self/statm");
  uint64_t pages = 0;
  in >> pages;
  return pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

bool MemoryLimitApplies() { return !NCCLWATCH_ASAN; }

LimitedRun RunWithMemoryLimit(uint64_t bytes, const std::function<int()>& child, double timeout_sec) {
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (MemoryLimitApplies()) {
      const rlimit lim{AddressSpace() + bytes, AddressSpace() + bytes};
      if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(125);
    }
    // Nothing may leave the child but its exit: an exception (std::bad_alloc
    // past the limit) would unwind into the parent's copy of the test.
    int rc = 126;
    try {
      rc = child();
    } catch (const std::exception& e) {
      fprintf(stderr, "the child threw: %s\n", e.what());
    } catch (...) {
      fprintf(stderr, "the child threw\n");
    }
    fflush(stdout);
    fflush(stderr);
    _exit(rc);
  }
  LimitedRun r;
  if (pid < 0) {
    r.how = "fork failed";
    return r;
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_sec);
  int status = 0;
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() >= until) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      r.how = "killed after " + std::to_string(static_cast<int>(timeout_sec)) + " s";
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) {
    r.exited = true;
    r.status = WEXITSTATUS(status);
    r.how = "exit " + std::to_string(r.status);
  } else if (WIFSIGNALED(status)) {
    r.how = "signal " + std::to_string(WTERMSIG(status));
  }
  return r;
}

}  // namespace ncclwatch::tools::testing
