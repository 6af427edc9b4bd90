// Runs a piece of a test in a child process whose address space is limited
// (RLIMIT_AS), so that a reader given hostile input is held to a memory
// bound: past it, its allocations fail (std::bad_alloc, SIGABRT) and the
// test sees the child die instead of the machine swapping.
//
// AddressSanitizer reserves terabytes of address space for its shadow
// memory, so under it the limit is not set (MemoryLimitApplies() is false)
// and the child runs unbounded: the test's other assertions still hold.
// The child must not start threads or rely on the parent's; it ends with
// _exit, so nothing of the parent's (gtest's state, open streams) is run
// twice.
//
// Thread safety: call from a test's main thread while no other thread runs
// (fork copies only the calling thread).
#ifndef TOOLS_TESTING_MEMORY_LIMIT_H_
#define TOOLS_TESTING_MEMORY_LIMIT_H_

#include <stdint.h>

#include <functional>
#include <string>

namespace ncclwatch::tools::testing {

// False under AddressSanitizer, where RLIMIT_AS cannot be used.
bool MemoryLimitApplies();

struct LimitedRun {
  bool exited = false;  // exited by itself (else a signal, or killed at the timeout)
  int status = -1;      // its exit status, when it exited
  std::string how;      // "exit 0", "signal 6", "killed after 60 s", for messages
};

// Runs `child` in a forked process whose address space may grow by at most
// `bytes` beyond what it holds at the fork (its code, libraries and the
// test's own data), and exits with what `child` returns (126 when it
// throws, std::bad_alloc past the limit included). Killed after
// `timeout_sec`, a bound against a hang far above any run.
LimitedRun RunWithMemoryLimit(uint64_t bytes, const std::function<int()>& child, double timeout_sec = 120);

}  // namespace ncclwatch::tools::testing

#endif  // TOOLS_TESTING_MEMORY_LIMIT_H_
