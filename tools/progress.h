// Progress of a long command on standard error, for a person watching: one
// line rewritten in place ("\r") on a terminal, redrawn at most every
// 200 ms, cleared when the work ends; and nothing at all when standard error
// is not a terminal (a pipe, a file, CI, a test), so that logs and scripts
// see only the command's messages. Stages whose end is unknown (reading the
// files: the loader reports no count) show the time so far, redrawn by a
// thread of its own each second until the next stage.
//
// Not for messages that must be seen: those go to `err` as they are.
//
// Thread safety: one caller thread; the ticker thread is internal and
// synchronised with it (mutex_).

#ifndef TOOLS_PROGRESS_H_
#define TOOLS_PROGRESS_H_

#include <stdint.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

namespace ncclwatch::tools {

// Whether `fd` is a terminal.
bool IsTerminal(int fd);

// `&err` when it is std::cerr and standard error is a terminal, else null:
// where a command draws its progress (null: nowhere).
std::ostream* ProgressStream(std::ostream& err);

// "reading 4 files (1.2 GB), 3 s" (total 0: the count is unknown) or
// "writing 45% (900,000 of 2,000,000 operations), 12 s".
std::string FormatProgress(const std::string& what, uint64_t done, uint64_t total, const char* unit,
                           double elapsed_sec);

// "1,234,567".
std::string WithThousands(uint64_t n);
// "469 MB", "1.2 GB", "12 KB", "900 B".
std::string FormatBytes(uint64_t n);

class Progress {
 public:
  // `out` null: silent (no thread, no output).
  explicit Progress(std::ostream* out);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // A stage of unknown length: "what, N s", redrawn each second.
  void Wait(const std::string& what);
  // A stage with a count: redrawn at most every 200 ms, and at the end.
  void Count(const std::string& what, uint64_t done, uint64_t total, const char* unit);
  // Clears the line; the next stage starts a new one.
  void Done();

 private:
  using Clock = std::chrono::steady_clock;
  void Draw(const std::string& line);  // with mutex_ held
  void StopTicker();

  std::ostream* const out_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread ticker_;
  bool stop_ = false;           // guarded by mutex_
  std::string waiting_;         // guarded by mutex_: the Wait stage, "" none
  Clock::time_point stage_start_;  // guarded by mutex_
  Clock::time_point last_draw_;
  size_t drawn_ = 0;            // guarded by mutex_: length of the line on screen
};

}  // namespace ncclwatch::tools

#endif  // TOOLS_PROGRESS_H_
