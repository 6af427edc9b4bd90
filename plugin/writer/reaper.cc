// Built with -fno-sanitize=all -fno-stack-protector (plugin/BUILD): the
// reaper and the command's process before its exec run this file's code on
// stacks of their own while sharing the host's memory, so nothing here may
// touch thread-local state (errno, the stack guard, a sanitizer's thread
// state) or call into libc. Only StartReaper runs on the host's thread.

#include "plugin/writer/reaper.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

// clone(2) with a function to run, without libc: ncclwatch_raw_clone(fn,
// stack, flags, arg) returns the child's pid (or -errno) in the caller; the
// child runs fn(arg) on `stack` and exits with its result. glibc's clone(3)
// would do, but sanitizers intercept it and run their own code in the child.
extern "C" long ncclwatch_raw_clone(int (*fn)(void*), void* stack, unsigned long flags, void* arg);

#if defined(__x86_64__)
// Written from the x86-64 Linux system call ABI: number in rax, arguments in
// rdi, rsi, rdx, r10, r8; `syscall` clobbers rcx and r11 and leaves every
// other register as it was, in both processes; the child returns from it
// with rax = 0 and rsp = the stack given. So fn and arg travel in r12 and
// r13 (callee-saved: pushed here and restored for our caller), and the
// child calls fn on the new stack aligned to 16 bytes, as a call expects.
__asm__(
    ".text\n"
    ".globl ncclwatch_raw_clone\n"
    ".hidden ncclwatch_raw_clone\n"
    ".type ncclwatch_raw_clone,@function\n"
    "ncclwatch_raw_clone:\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  movq %rdi, %r12\n"       // fn
    "  movq %rcx, %r13\n"       // arg
    "  movq %rdx, %rdi\n"       // clone's 1st argument: flags
    "  andq $-16, %rsi\n"       // 2nd: the child's stack, aligned
    "  xorl %edx, %edx\n"       // 3rd: parent tid pointer (none)
    "  xorl %r10d, %r10d\n"     // 4th: child tid pointer (none)
    "  xorl %r8d, %r8d\n"       // 5th: thread pointer (unchanged)
    "  movl $56, %eax\n"        // SYS_clone
    "  syscall\n"
    "  testq %rax, %rax\n"
    "  jz 1f\n"
    "  popq %r13\n"             // the caller: pid or -errno
    "  popq %r12\n"
    "  ret\n"
    "1:\n"                       // the child, on its own stack
    "  xorl %ebp, %ebp\n"       // no frame above this one
    "  movq %r13, %rdi\n"
    "  callq *%r12\n"
    "  movl %eax, %edi\n"
    "  movl $231, %eax\n"       // SYS_exit_group: this process only (no CLONE_THREAD)
    "  syscall\n"
    "  hlt\n"
    ".size ncclwatch_raw_clone, .-ncclwatch_raw_clone\n");
#elif defined(__aarch64__)
// Written from the aarch64 Linux system call ABI: number in x8, arguments
// in x0..x5, `svc #0` returns in x0 and leaves every other register as it
// was, in both processes; the child returns from it with x0 = 0 and sp =
// the stack given. So fn and arg travel in x9 and x10 (scratch registers:
// the caller expects them clobbered), and the child calls fn on the new
// stack (sp must stay 16-byte aligned) with no frame or return address
// above it.
__asm__(
    ".text\n"
    ".globl ncclwatch_raw_clone\n"
    ".hidden ncclwatch_raw_clone\n"
    ".type ncclwatch_raw_clone,%function\n"
    "ncclwatch_raw_clone:\n"
    "  mov x9, x0\n"             // fn
    "  mov x10, x3\n"            // arg
    "  and x1, x1, #-16\n"       // clone's 2nd argument: the child's stack, aligned
    "  mov x0, x2\n"             // 1st: flags
    "  mov x2, xzr\n"            // 3rd: parent tid pointer (none)
    "  mov x3, xzr\n"            // 4th: thread pointer (unchanged)
    "  mov x4, xzr\n"            // 5th: child tid pointer (none)
    "  mov x8, #220\n"           // SYS_clone
    "  svc #0\n"
    "  cbz x0, 1f\n"
    "  ret\n"                    // the caller: pid or -errno
    "1:\n"                        // the child, on its own stack
    "  mov x29, xzr\n"           // no frame above this one
    "  mov x30, xzr\n"
    "  mov x0, x10\n"
    "  blr x9\n"
    "  mov x8, #94\n"            // SYS_exit_group: this process only (no CLONE_THREAD)
    "  svc #0\n"
    "  brk #0\n"
    ".size ncclwatch_raw_clone, .-ncclwatch_raw_clone\n");
#endif

namespace ncclwatch::plugin {

#if defined(__x86_64__) || defined(__aarch64__)
namespace {

// A system call without libc: the result, or -errno.
long Sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
#if defined(__x86_64__)
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
#else
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  register long x5 __asm__("x5") = f;
  __asm__ volatile("svc #0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory");
  return x0;
#endif
}

template <typename T>
long P(T* p) {
  return reinterpret_cast<long>(p);
}

constexpr int64_t kTickNs = 50'000'000;

// The kernel's struct sigaction (x86_64 and aarch64 alike).
struct KernelSigaction {
  unsigned long handler;
  unsigned long flags;
  unsigned long restorer;
  unsigned long mask;
};

int64_t NowNs() {
  struct timespec ts;
  ts.tv_sec = 0;
  ts.tv_nsec = 0;
  Sys(SYS_clock_gettime, CLOCK_MONOTONIC, P(&ts));
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void WriteAll(int fd, const char* p, uint64_t n) {
  while (n > 0) {
    const long w = Sys(SYS_write, fd, P(p), static_cast<long>(n));
    if (w == -EINTR) continue;
    if (w <= 0) return;  // disk full, I/O error: the rest is lost, the command goes on
    p += w;
    n -= static_cast<uint64_t>(w);
  }
}

// Closes descriptors lo..hi; one by one, up to the descriptor limit, where
// close_range (Linux 5.9) is missing.
void CloseRange(unsigned lo, unsigned hi) {
  if (lo > hi) return;
  if (Sys(SYS_close_range, lo, hi, 0) == 0) return;
  struct {
    uint64_t cur, max;
  } rl = {65536, 65536};
  Sys(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, P(&rl));
  uint64_t end = rl.cur < (1u << 20) ? rl.cur : (1u << 20);
  for (uint64_t fd = lo; fd <= hi && fd < end; ++fd) Sys(SYS_close, static_cast<long>(fd));
}

// Closes every descriptor but the `n` in `keep`: the reaper holds nothing
// of the host's (a pipe end it kept open would hide EOF from a reader).
void CloseAllBut(int* keep, int n) {
  for (int i = 1; i < n; ++i)
    for (int k = i; k > 0 && keep[k - 1] > keep[k]; --k) {
      const int t = keep[k];
      keep[k] = keep[k - 1];
      keep[k - 1] = t;
    }
  unsigned lo = 0;
  for (int i = 0; i < n; ++i) {
    if (keep[i] < 0) continue;
    const unsigned k = static_cast<unsigned>(keep[i]);
    if (k > lo) CloseRange(lo, k - 1);
    if (k + 1 > lo) lo = k + 1;
  }
  CloseRange(lo, ~0u);
}

// `fd` as descriptor `target`, open across exec.
void Place(int fd, int target) {
  if (fd == target) Sys(SYS_fcntl, fd, F_SETFD, 0);
  else Sys(SYS_dup3, fd, target, 0);
}

// A process that runs fn(arg) on `stack`, sharing this one's memory
// (CLONE_VM, see reaper.h). Where the kernel refuses that (qemu-user takes
// CLONE_VM only with a thread's flags), a process with a copy of the memory,
// as fork makes it: nothing below needs the memory to be shared.
long CloneProcess(int (*fn)(void*), char* stack, void* arg) {
  const long pid = ncclwatch_raw_clone(fn, stack, CLONE_VM | SIGCHLD, arg);
  if (pid != -EINVAL) return pid;
  return ncclwatch_raw_clone(fn, stack, SIGCHLD, arg);
}

// What the command's process needs: the job, and the write end of a
// close-on-exec pipe that carries execve's errno back when no execve
// worked (an exec that works closes it: EOF).
struct CommandStart {
  const ReaperJob* job;
  int exec_err_w;
};

// The command's process, from its clone until its exec.
int CommandMain(void* arg) {
  const CommandStart* start = static_cast<const CommandStart*>(arg);
  const ReaperJob* j = start->job;
  Sys(SYS_setpgid, 0, 0);
  // The host's handlers are not the command's; ignored signals would stay
  // ignored across exec, and the writer thread blocks every signal.
  KernelSigaction dfl;
  dfl.handler = 0;  // SIG_DFL
  dfl.flags = 0;
  dfl.restorer = 0;
  dfl.mask = 0;
  for (int s = 1; s <= 64; ++s)
    if (s != SIGKILL && s != SIGSTOP) Sys(SYS_rt_sigaction, s, P(&dfl), 0, 8);
  unsigned long none = 0;
  Sys(SYS_rt_sigprocmask, SIG_SETMASK, P(&none), 0, 8);
  int exec_err_w = start->exec_err_w;
  Place(j->devnull, 0);
  Place(j->pipe_w, 1);
  Place(j->pipe_w, 2);
  if (j->trace_fd >= 0) {
    // Descriptor 3 is the trace's; the errno pipe moves out of its way.
    if (exec_err_w == 3) exec_err_w = static_cast<int>(Sys(SYS_fcntl, 3, F_DUPFD_CLOEXEC, 4));
    Place(j->trace_fd, 3);
  }
  // Every other descriptor is close-on-exec. PATH as execvp searches it:
  // on to the next candidate where this one is not there or not ours to
  // run; EACCES if one was there but could not be run.
  long err = ENOENT;
  bool denied = false;
  for (int i = 0; i < j->npaths; ++i) {
    err = -Sys(SYS_execve, P(j->paths[i]), P(j->argv), P(j->envp));
    if (err == EACCES) denied = true;
    else if (err != ENOENT && err != ENOTDIR && err != ELOOP && err != ENAMETOOLONG) break;
  }
  if (denied && (err == ENOENT || err == ENOTDIR || err == ELOOP || err == ENAMETOOLONG)) err = EACCES;
  const int e = static_cast<int>(err);
  Sys(SYS_write, exec_err_w, P(&e), sizeof(e));
  Sys(SYS_exit_group, 127);
  return 127;
}

void Send(const ReaperJob* j, ReaperReport* r) {
  Sys(SYS_sendto, j->sock, P(r), sizeof(*r), MSG_NOSIGNAL | MSG_DONTWAIT, 0, 0);
}

// The leader has exited (it stays a zombie, holding the group id).
bool LeaderExited(long child) {
  siginfo_t info;
  info.si_pid = 0;
  const long r = Sys(SYS_waitid, P_PID, child, P(&info), WEXITED | WNOHANG | WNOWAIT, 0);
  return r == -ECHILD || (r == 0 && info.si_pid == child);
}

int Reap(long child) {
  int status = 0;
  while (Sys(SYS_wait4, child, P(&status), 0, 0) == -EINTR) {
  }
  return status;
}

int ReaperMain(void* arg) {
  ReaperJob* j = static_cast<ReaperJob*>(arg);
  // No host handler may ever run here (it would run on the host's memory
  // with another thread's state): every signal blocked but SIGKILL and
  // SIGSTOP. SIGCHLD at its default, so the command stays a zombie until
  // reaped below, holding its group id (a host that ignores SIGCHLD would
  // have it reaped at once).
  unsigned long all = ~0ul;
  Sys(SYS_rt_sigprocmask, SIG_SETMASK, P(&all), 0, 8);
  KernelSigaction dfl;
  dfl.handler = 0;  // SIG_DFL
  dfl.flags = 0;
  dfl.restorer = 0;
  dfl.mask = 0;
  Sys(SYS_rt_sigaction, SIGCHLD, P(&dfl), 0, 8);
  // The exec errno pipe, above 0-2 (which the command's process replaces).
  int err_pipe[2] = {-1, -1};
  if (Sys(SYS_pipe2, P(err_pipe), O_CLOEXEC) == 0) {
    for (int& fd : err_pipe) {
      if (fd > 2) continue;
      const long moved = Sys(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 3);
      Sys(SYS_close, fd);
      fd = static_cast<int>(moved);
    }
  }
  int keep[8] = {j->sock, j->out_fd, j->pipe_r, j->pipe_w, j->devnull, err_pipe[0], err_pipe[1], j->trace_fd};
  CloseAllBut(keep, 8);
  ReaperReport rep;
  rep.kind = ReaperReport::kExited;
  rep.status = 0;
  rep.err = 0;
  rep.reserved = 0;
  rep.bytes = 0;
  CommandStart start = {j, err_pipe[1]};
  const long child = CloneProcess(&CommandMain, j->command_stack_top, &start);
  Sys(SYS_close, err_pipe[1]);
  Sys(SYS_close, j->pipe_w);
  Sys(SYS_close, j->devnull);
  if (child < 0) {
    rep.kind = ReaperReport::kFailed;
    rep.err = static_cast<int32_t>(-child);
    Send(j, &rep);
    return 0;
  }
  // Both sides set the group, so that a kill right after the clone finds it.
  Sys(SYS_setpgid, child, child);
  Sys(SYS_fcntl, j->pipe_r, F_SETFL, O_NONBLOCK);
  const int64_t deadline = NowNs() + j->timeout_ns;
  bool pipe_open = true, ended = false, timed_out = false, cut = false;
  uint64_t written = 0;
  char buf[16384];
  for (;;) {
    // The host is gone: its socket end closed (below), or the reaper has
    // another parent now (the host exited while a forked child of it
    // keeps a copy of its socket end).
    if (Sys(SYS_getppid) != j->host_pid) break;
    if (!ended && LeaderExited(child)) {
      ended = true;
      Sys(SYS_kill, -child, SIGKILL);  // what it left behind
    }
    if (ended && !pipe_open) break;
    const int64_t now = NowNs();
    if (now >= deadline) {
      if (!ended) timed_out = true;
      break;  // after the command's end: something outside the group holds its output
    }
    const int64_t wait = deadline - now < kTickNs ? deadline - now : kTickNs;
    struct pollfd fds[2];
    fds[0].fd = j->sock;
    fds[0].events = POLLIN;
    fds[0].revents = 0;
    fds[1].fd = pipe_open ? j->pipe_r : -1;
    fds[1].events = POLLIN;
    fds[1].revents = 0;
    struct timespec ts;
    ts.tv_sec = wait / 1'000'000'000;
    ts.tv_nsec = wait % 1'000'000'000;
    if (Sys(SYS_ppoll, P(fds), 2, P(&ts), 0, 8) < 0) continue;
    if (fds[0].revents != 0) {
      // The host never writes: readable means its end closed.
      char c;
      const long n = Sys(SYS_recvfrom, j->sock, P(&c), 1, MSG_DONTWAIT, 0, 0);
      if (n == 0 || (n < 0 && n != -EAGAIN && n != -EINTR)) {
        Sys(SYS_kill, -child, SIGKILL);
        Reap(child);
        return 0;
      }
    }
    if (pipe_open && fds[1].revents != 0) {
      for (;;) {
        const long n = Sys(SYS_read, j->pipe_r, P(buf), sizeof(buf));
        if (n == -EINTR) continue;
        if (n == -EAGAIN) break;
        if (n <= 0) {
          Sys(SYS_close, j->pipe_r);
          pipe_open = false;
          break;
        }
        const uint64_t room = j->max_bytes - written;
        const uint64_t take = static_cast<uint64_t>(n) < room ? static_cast<uint64_t>(n) : room;
        WriteAll(j->out_fd, buf, take);
        written += take;
        if (static_cast<uint64_t>(n) > take) {
          WriteAll(j->out_fd, j->cut_note, j->cut_note_len);
          cut = true;
          Sys(SYS_kill, -child, SIGKILL);
          Sys(SYS_close, j->pipe_r);
          pipe_open = false;
          break;
        }
      }
    }
  }
  Sys(SYS_kill, -child, SIGKILL);  // the time limit, the host's end, or leftovers: no-op after the end
  if (Sys(SYS_getppid) != j->host_pid) {
    Reap(child);
    return 0;
  }
  if (pipe_open) Sys(SYS_close, j->pipe_r);
  rep.status = Reap(child);
  rep.bytes = written;
  rep.kind = cut ? ReaperReport::kCut : timed_out ? ReaperReport::kKilled : ReaperReport::kExited;
  // The command's process has ended: its errno, if no execve worked, is in
  // the pipe (an exec'd command closed its end without writing).
  int e = 0;
  if (err_pipe[0] >= 0) {
    Sys(SYS_fcntl, err_pipe[0], F_SETFL, O_NONBLOCK);
    if (Sys(SYS_read, err_pipe[0], P(&e), sizeof(e)) != sizeof(e)) e = 0;
  }
  if (rep.kind == ReaperReport::kExited && e != 0) {
    rep.kind = ReaperReport::kFailed;
    rep.err = e;
  }
  Send(j, &rep);
  return 0;
}

}  // namespace

long StartReaper(ReaperJob* job) {
  return CloneProcess(&ReaperMain, job->reaper_stack_top, job);
}
#else
// Elsewhere the keeper is not built: NCCLWATCH_ON_STUCK says once that it
// cannot start its keeper, and nothing runs.
long StartReaper(ReaperJob*) { return -ENOSYS; }
#endif  // __x86_64__ || __aarch64__

}  // namespace ncclwatch::plugin
