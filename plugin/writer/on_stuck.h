// NCCLWATCH_ON_STUCK: a command the plugin runs once per process when it
// writes its first stuck report, while the hang is still there to look at
// (`py-spy dump --pid %p`, `gdb -p %p -batch -ex "thread apply all bt"`,
// `nvidia-smi`).
//
// No shell: the configuration split the command into words once
// (command_words.h); at run time %p (the pid), %r (the launcher's rank, or
// the stuck communicator's rank when the launcher gives none, or -1), %f
// (the trace file) and %% are substituted inside each word, and each word is
// one argument of execve, whatever the trace path holds. The program is
// looked up on PATH as execvp does (a word with a slash is a path), except
// that a file that is not a binary is not run through /bin/sh.
//
// Its output file, the trace's name + ".on_stuck.txt", is created when the
// trace is (Prepare: own_file.h, so a planted link or FIFO is refused, and
// the command is then off), never later; the command writes into it through
// its keeper (reaper.h), which caps it at NCCLWATCH_ON_STUCK_MAX_BYTES,
// kills its process group at NCCLWATCH_ON_STUCK_TIMEOUT_SEC, when it ends,
// or when the host exits. Starting it costs the writer thread a clone
// (nothing of the host is copied, no exec is waited for); each cycle the
// writer looks once, without blocking, for the keeper's report. Finalize
// never waits for the command: it runs on under its keeper (whose exit
// nobody waits for then: a zombie until the host exits).
//
// Thread safety: the writer thread only.
#ifndef PLUGIN_WRITER_ON_STUCK_H_
#define PLUGIN_WRITER_ON_STUCK_H_

#include <stdint.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace ncclwatch::plugin {

// The candidates execve tries for `program`, as execvp would: the program
// itself when it holds a slash, else each PATH folder in turn (an empty
// one is the current folder; PATH unset is "/bin:/usr/bin").
std::vector<std::string> ExecCandidates(const std::string& program, const char* path_env);

class OnStuckRunner {
 public:
  // What happened, for the caller to log (once each).
  struct Event {
    enum Kind { kNone, kStarted, kFailed, kExited, kKilled, kCut } kind = kNone;
    std::string text;
  };

  OnStuckRunner() = default;
  // Closes what it holds, except the socket of a keeper still running: the
  // keeper must see the host's exit, not this object's end.
  ~OnStuckRunner();
  OnStuckRunner(const OnStuckRunner&) = delete;
  OnStuckRunner& operator=(const OnStuckRunner&) = delete;

  // At start-up: keeps the command's words and creates its output file
  // with mode `mode`. False with `error` when the file cannot be made (the
  // command is then off).
  //
  // `trace_fd` (the trace file, open; -1: none) is for %f. Where a folder
  // on the trace's path can be changed by another user (writable by group
  // or others without the sticky bit, or owned by another user than us or
  // root), its name could be swapped for a link to a file that user cannot
  // read, which the command would then copy into its output: there %f
  // becomes /proc/self/fd/3, the command's descriptor 3, open for reading
  // on the very file the plugin writes, and `note` says so. Where /proc
  // cannot give that descriptor, the command is off (false).
  bool Prepare(std::vector<std::string> words, const std::string& output_path, uint32_t mode, std::string* error,
               int trace_fd = -1, const std::string& trace_path = "", std::string* note = nullptr);
  // Starts the command (once per runner, only after Prepare). Never waits.
  Event Start(pid_t pid, int64_t rank, const std::string& trace_path, double timeout_sec, uint64_t max_bytes);
  // Looks once, without blocking, for the keeper's report.
  Event Poll();
  // At finalize: the output file is closed; a running command goes on
  // under its keeper.
  void Close();

  bool prepared() const { return out_fd_ >= 0 && !started_; }
  bool started() const { return started_; }
  bool running() const { return keeper_ > 0; }
  // Readable (poll(2)) when Poll may have news: the keeper's report, then
  // its end; -1 when no keeper runs. For a caller that waits for the
  // command rather than looking once a cycle, as the writer does. Not to be
  // read: Poll reads it.
  int wait_fd() const { return keeper_ > 0 ? sock_ : -1; }
  const std::string& output_path() const { return output_; }

 private:
  std::vector<std::string> words_;
  std::string output_;
  std::string program_;
  int out_fd_ = -1;
  int trace_read_fd_ = -1;  // the trace, for %f by descriptor; -1: %f is the path
  int sock_ = -1;
  bool started_ = false;
  pid_t keeper_ = -1;
  bool reported_ = false;  // the keeper's report (or its end) was read
  bool reaped_ = false;    // the keeper was waited for (or the host reaps its children itself)
  double timeout_sec_ = 0;
  uint64_t max_bytes_ = 0;
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_WRITER_ON_STUCK_H_
