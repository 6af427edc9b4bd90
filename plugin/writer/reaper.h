// The keeper of the NCCLWATCH_ON_STUCK command: a small process that starts
// the command, enforces its time limit and output cap, and kills its whole
// process group when it ends, when the limit or the cap is reached, or when
// the host process exits, however it exits (SIGKILL included).
//
// Why a process of its own: the host's writer thread cannot enforce a limit
// after the host is gone, and PR_SET_PDEATHSIG fires when the parent
// *thread* exits (the writer thread ends at finalize), not the process.
// Why not fork(): the host can hold tens of GiB; fork copies its page
// tables and makes every page it writes afterwards a copy-on-write fault,
// and runs the host's atfork handlers (ours take a lock the finalizing
// thread may hold). Why not exec a helper program: the plugin is one .so
// with no program beside it.
//
// So the reaper is made with clone(CLONE_VM): it shares the host's memory
// (nothing is copied) but has its own descriptor table, signal handlers and
// process id, and the host's exit does not end it. (Where the kernel refuses
// CLONE_VM without a thread's flags, as qemu-user does, it gets a copy of
// the memory instead: nothing it does needs the memory shared.) It runs only the code in
// reaper.cc, which calls the kernel directly (no libc: it has no thread of
// its own for libc's thread-local state), on a stack and a ReaperJob the
// caller allocated and never frees. It makes the command's process the same
// way; that process sets itself up (a process group of its own, stdin from
// /dev/null, stdout and stderr into a pipe the reaper reads, default signal
// dispositions and an empty signal mask, no other descriptor) and execs, so
// neither the host nor the reaper waits for the exec.
//
// What the reaper does, in a loop woken by the pipe, the host socket or a
// 50 ms tick:
//   - copies the command's output into the output file, up to max_bytes;
//     at the cap it writes cut_note and kills the group;
//   - when the command's first process exits, kills what is left of its
//     group (so an `&` child of a shell ends with it), drains the pipe and
//     reports; at the time limit it kills the group and reports;
//   - when the host is gone (its socket end closes, or the reaper's parent
//     is no longer the host: a forked child of the host may hold a copy of
//     the socket), kills the group and exits without a report.
// The group is killed while its leader is an unreaped zombie, so the group
// id cannot have been reused by then.
//
// What escapes: a process that leaves the group (setsid, setpgid) is not
// killed; the reaper stops reading its output at the time limit. If the
// reaper itself is killed (SIGKILL, or the OOM killer ending the host: it
// shares the host's memory), nothing enforces the limit any more.
//
// Thread safety: StartReaper is called by one thread (the writer's); the
// job must not change after it.

#ifndef PLUGIN_WRITER_REAPER_H_
#define PLUGIN_WRITER_REAPER_H_

#include <stdint.h>

namespace ncclwatch::plugin {

struct ReaperJob {
  char* const* argv;         // the command, substituted
  char* const* envp;         // its environment
  const char* const* paths;  // execve'd in turn until one runs (execvp's PATH search, done ahead)
  int npaths;
  int sock;     // the reaper's end of a socketpair: its report goes back on it; EOF: the host is gone
  int out_fd;   // the output file, open for writing
  int pipe_r;   // the command's stdout and stderr, read by the reaper
  int pipe_w;   //   ... written by the command
  int devnull;  // the command's stdin
  int trace_fd;  // the trace, open for reading: the command's descriptor 3 (-1: none)
  int host_pid;
  int64_t timeout_ns;
  uint64_t max_bytes;
  const char* cut_note;  // written after max_bytes of output
  uint32_t cut_note_len;
  char* reaper_stack_top;   // 16-byte aligned, room below for 64 KiB
  char* command_stack_top;  //   ... 16 KiB
};

// What the reaper says when the command is over, on its socket.
struct ReaperReport {
  enum Kind : uint32_t { kExited = 1, kKilled = 2, kCut = 3, kFailed = 4 };
  uint32_t kind;
  int32_t status;  // the command's wait status (kExited, kKilled, kCut)
  int32_t err;     // kFailed: why it did not start (errno)
  uint32_t reserved;
  uint64_t bytes;  // output bytes written to the file (not counting cut_note)
};

// Starts the reaper, which starts the command. Returns the reaper's pid (a
// child of the calling process), or -errno. Never waits.
long StartReaper(ReaperJob* job);

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_WRITER_REAPER_H_
