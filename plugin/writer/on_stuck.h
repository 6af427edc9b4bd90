// NCCLWATCH_ON_STUCK: a command the plugin runs once per process when it
// writes its first stuck report, while the hang is still there to look at
// (`py-spy dump --pid %p`, `gdb -p %p -batch -ex "thread apply all bt"`,
// `nvidia-smi`).
//
// It runs through /bin/sh -c, with %p (the pid), %r (the launcher's rank, or
// the stuck communicator's rank when the launcher gives none, or -1), %f
// (the trace file) and %% substituted; its standard output and error go to
// the trace file's name with ".on_stuck.txt" added, its standard input is
// /dev/null. It is started with posix_spawn (no copy of the host's address
// space, which can be tens of GiB) in a process group of its own, and the
// writer thread never waits for it: each cycle it looks once (waitpid
// WNOHANG), and past the time limit it kills the group.
//
// Thread safety: the writer thread only.
#ifndef PLUGIN_WRITER_ON_STUCK_H_
#define PLUGIN_WRITER_ON_STUCK_H_

#include <stdint.h>
#include <sys/types.h>

#include <string>

namespace ncclwatch::plugin {

// The command with %p, %r, %f and %% substituted (any other %x is kept).
std::string ExpandOnStuck(const std::string& command, pid_t pid, int64_t rank, const std::string& trace_path);

class OnStuckRunner {
 public:
  // What happened, for the caller to log (once each).
  struct Event {
    enum Kind { kNone, kStarted, kFailed, kExited, kKilled } kind = kNone;
    std::string text;
  };

  // Starts the command (at most once per runner). `now_ns`: CLOCK_MONOTONIC.
  Event Start(const std::string& command, pid_t pid, int64_t rank, const std::string& trace_path,
              double timeout_sec, uint64_t now_ns);
  // Looks at the child once; kills its group past the time limit.
  Event Poll(uint64_t now_ns);

  bool started() const { return started_; }
  bool running() const { return child_ > 0; }

 private:
  bool started_ = false;
  pid_t child_ = -1;
  bool killed_ = false;
  uint64_t deadline_ns_ = 0;
  double timeout_sec_ = 0;
  std::string output_;
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_WRITER_ON_STUCK_H_
