#include "plugin/writer/on_stuck.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin/core/command_words.h"
#include "plugin/writer/own_file.h"
#include "plugin/writer/reaper.h"

extern char** environ;

namespace ncclwatch::plugin {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kReaperStack = 64 << 10;
constexpr size_t kCommandStack = 16 << 10;

// A descriptor numbered 3 or above, close-on-exec: the command's process
// puts its own at 0, 1 and 2 and must not overwrite one of these there (a
// host may have closed its standard descriptors).
int High(int fd) {
  if (fd < 0 || fd >= 3) return fd;
  const int h = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  close(fd);
  return h;
}

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

// Strings and pointer arrays laid out in one block that is never freed:
// the keeper shares this memory and may outlive every other use of it.
class Arena {
 public:
  Arena(char* p, size_t n) : p_(p), end_(p + n) {}
  char* Str(const std::string& s) {
    char* d = Take(s.size() + 1, 1);
    memcpy(d, s.c_str(), s.size() + 1);
    return d;
  }
  char** Ptrs(size_t n) { return reinterpret_cast<char**>(Take(n * sizeof(char*), alignof(char*))); }
  char* Take(size_t n, size_t align) {
    p_ = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(p_) + align - 1) & ~(uintptr_t{align} - 1));
    char* r = p_;
    p_ += n;
    return p_ <= end_ ? r : nullptr;
  }

 private:
  char* p_;
  char* end_;
};

std::string WaitText(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "ended by signal " + std::to_string(WTERMSIG(status));
  return "ended (status " + std::to_string(status) + ")";
}

}  // namespace

std::vector<std::string> ExecCandidates(const std::string& program, const char* path_env) {
  if (program.find('/') != std::string::npos) return {program};
  const std::string path = path_env != nullptr ? path_env : "/bin:/usr/bin";
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    const size_t colon = path.find(':', pos);
    const std::string dir = path.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    out.push_back((dir.empty() ? "." : dir) + "/" + program);
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  return out;
}

namespace {

// Whether another user could rename or replace an entry of `dir` or of a
// folder above it: one writable by group or others without the sticky bit,
// or owned by someone else than us or root (an owner may rename what a
// sticky folder holds). A folder that cannot be read for it counts as one.
bool OthersCanSwapIn(const std::string& dir) {
  char real[PATH_MAX];
  if (realpath(dir.empty() ? "." : dir.c_str(), real) == nullptr) return true;
  std::string d = real;
  const uid_t me = geteuid();
  for (;;) {
    struct stat st;
    if (StatPath(d, true, &st) != 0) return true;
    if (st.st_uid != me && st.st_uid != 0) return true;
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) return true;
    if (d == "/") return false;
    const size_t slash = d.rfind('/');
    d = slash == 0 ? "/" : d.substr(0, slash);
  }
}

bool UsesTracePath(const std::vector<std::string>& words) {
  for (const std::string& w : words)
    if (ExpandWord(w, 0, 0, std::string(1, '\0')).find('\0') != std::string::npos) return true;
  return false;
}

}  // namespace

OnStuckRunner::~OnStuckRunner() {
  CloseFd(&out_fd_);
  CloseFd(&trace_read_fd_);
  // A running keeper keeps its socket: it closes when the process exits.
  if (keeper_ <= 0) CloseFd(&sock_);
}

void OnStuckRunner::Close() { CloseFd(&out_fd_); }

bool OnStuckRunner::Prepare(std::vector<std::string> words, const std::string& output_path, uint32_t mode,
                            std::string* error, int trace_fd, const std::string& trace_path, std::string* note) {
  if (words.empty() || out_fd_ >= 0 || started_) return false;
  if (trace_fd >= 0 && UsesTracePath(words)) {
    const size_t slash = trace_path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : trace_path.substr(0, slash);
    if (OthersCanSwapIn(dir)) {
      // Opened through /proc: the inode the plugin holds, whatever its
      // name now points to; for reading only.
      const std::string self = "/proc/self/fd/" + std::to_string(trace_fd);
      const int fd = High(open(self.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
      if (fd < 0) {
        *error = "another user could swap the trace's name in '" + dir + "' for a link, and " + self +
                 " cannot be opened (" + strerror(errno) + ") to give %f as the open file";
        return false;
      }
      CloseFd(&trace_read_fd_);
      trace_read_fd_ = fd;
      if (note != nullptr)
        *note = "another user could swap names in '" + dir +
                "' (writable by others without the sticky bit, or not ours): %f is /proc/self/fd/3, the command's "
                "descriptor 3, which reads the trace file itself";
    }
  }
  bool taken = false;
  const int fd = CreateOwnFile(output_path, mode, 0, &taken, error);
  if (fd < 0) {
    *error = "its output file: " + *error;
    CloseFd(&trace_read_fd_);
    return false;
  }
  out_fd_ = High(fd);
  words_ = std::move(words);
  output_ = output_path;
  return true;
}

OnStuckRunner::Event OnStuckRunner::Start(pid_t pid, int64_t rank, const std::string& trace_path, double timeout_sec,
                                          uint64_t max_bytes) {
  Event e;
  if (started_ || out_fd_ < 0) return e;
  started_ = true;
  timeout_sec_ = timeout_sec;
  max_bytes_ = max_bytes;
  std::vector<std::string> argv;
  const std::string f = trace_read_fd_ >= 0 ? "/proc/self/fd/3" : trace_path;
  for (const std::string& w : words_) argv.push_back(ExpandWord(w, pid, rank, f));
  program_ = argv[0];
  const std::vector<std::string> paths = ExecCandidates(argv[0], getenv("PATH"));
  std::vector<std::string> env;
  for (char** v = environ; v != nullptr && *v != nullptr; ++v) env.emplace_back(*v);
  char note[160];
  const int note_len = snprintf(note, sizeof(note),
                                "\n[ncclwatch: output cut at %llu bytes (NCCLWATCH_ON_STUCK_MAX_BYTES); "
                                "the command was killed]\n",
                                static_cast<unsigned long long>(max_bytes));
  auto fail = [&](const std::string& why) {
    e.kind = Event::kFailed;
    e.text = "NCCLWATCH_ON_STUCK: cannot run " + QuoteWords({program_}) + ": " + why;
    return e;
  };

  // The block: [guard][keeper stack][guard][command stack][job, strings].
  size_t data = sizeof(ReaperJob) + 64 + static_cast<size_t>(note_len) + 1;
  const std::vector<std::string>* lists[] = {&argv, &paths, &env};
  for (const std::vector<std::string>* list : lists)
    for (const std::string& s : *list) data += s.size() + 1 + sizeof(char*) + 8;
  data += 4 * sizeof(char*);
  const size_t total = kPage + kReaperStack + kPage + kCommandStack + ((data + kPage - 1) & ~(kPage - 1));
  void* mem = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return fail(std::string("no memory for it: ") + strerror(errno));
  char* base = static_cast<char*>(mem);
  mprotect(base, kPage, PROT_NONE);
  mprotect(base + kPage + kReaperStack, kPage, PROT_NONE);
  char* reaper_top = base + kPage + kReaperStack;
  char* command_top = base + kPage + kReaperStack + kPage + kCommandStack;
  Arena a(command_top, total - (command_top - base));
  auto* job = reinterpret_cast<ReaperJob*>(a.Take(sizeof(ReaperJob), alignof(ReaperJob)));
  auto list = [&](const std::vector<std::string>& v) {
    char** p = a.Ptrs(v.size() + 1);
    for (size_t i = 0; i < v.size(); ++i) p[i] = a.Str(v[i]);
    p[v.size()] = nullptr;
    return p;
  };
  job->argv = list(argv);
  job->envp = list(env);
  job->paths = list(paths);
  job->npaths = static_cast<int>(paths.size());
  job->cut_note = a.Str(std::string(note, static_cast<size_t>(note_len)));
  job->cut_note_len = static_cast<uint32_t>(note_len);
  job->reaper_stack_top = reaper_top;
  job->command_stack_top = command_top;
  job->host_pid = getpid();
  job->timeout_ns = static_cast<int64_t>(timeout_sec * 1e9);
  job->max_bytes = max_bytes;
  job->out_fd = out_fd_;
  job->trace_fd = trace_read_fd_;

  int pipe_fds[2] = {-1, -1};
  int socks[2] = {-1, -1};
  int devnull = -1;
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return fail(std::string("no pipe: ") + strerror(errno));
  pipe_fds[0] = High(pipe_fds[0]);
  pipe_fds[1] = High(pipe_fds[1]);
  devnull = High(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const bool have_socks = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, socks) == 0;
  const int err = errno;
  socks[0] = High(socks[0]);
  socks[1] = High(socks[1]);
  auto close_all = [&] {
    CloseFd(&pipe_fds[0]);
    CloseFd(&pipe_fds[1]);
    CloseFd(&devnull);
    CloseFd(&socks[1]);
  };
  if (!have_socks || pipe_fds[0] < 0 || pipe_fds[1] < 0 || devnull < 0 || socks[0] < 0 || socks[1] < 0) {
    close_all();
    CloseFd(&socks[0]);
    return fail(std::string("no descriptors for it: ") + strerror(have_socks ? errno : err));
  }
  job->pipe_r = pipe_fds[0];
  job->pipe_w = pipe_fds[1];
  job->devnull = devnull;
  job->sock = socks[1];
  const long keeper = StartReaper(job);
  close_all();  // the keeper has its own copies
  if (keeper < 0) {
    CloseFd(&socks[0]);
    return fail("cannot start its keeper process: " + std::string(strerror(static_cast<int>(-keeper))));
  }
  keeper_ = static_cast<pid_t>(keeper);
  sock_ = socks[0];
  e.kind = Event::kStarted;
  e.text = "NCCLWATCH_ON_STUCK: started " + QuoteWords(argv) + " (keeper pid " + std::to_string(keeper_) +
           "), output in " + output_;
  return e;
}

OnStuckRunner::Event OnStuckRunner::Poll() {
  Event e;
  if (keeper_ <= 0) return e;
  if (!reaped_) {
    int status = 0;
    const pid_t r = waitpid(keeper_, &status, WNOHANG);
    // ECHILD: the host reaps its children itself (a SIGCHLD handler); the
    // socket still says when the keeper is done.
    if (r == keeper_ || (r < 0 && errno == ECHILD)) reaped_ = true;
  }
  if (!reported_) {
    // After the wait: a report sent before the keeper exited is here now.
    ReaperReport rep;
    const ssize_t n = recv(sock_, &rep, sizeof(rep), MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(sizeof(rep))) {
      reported_ = true;
      const std::string bytes = std::to_string(rep.bytes) + " bytes";
      switch (rep.kind) {
        case ReaperReport::kExited:
          e.kind = Event::kExited;
          e.text = "NCCLWATCH_ON_STUCK: " + WaitText(rep.status) + ", output in " + output_ + " (" + bytes + ")";
          break;
        case ReaperReport::kKilled: {
          char buf[64];
          snprintf(buf, sizeof(buf), "%g", timeout_sec_);
          e.kind = Event::kKilled;
          e.text = std::string("NCCLWATCH_ON_STUCK: still running after ") + buf +
                   " s (NCCLWATCH_ON_STUCK_TIMEOUT_SEC): killed its process group; output so far in " + output_ +
                   " (" + bytes + ")";
          break;
        }
        case ReaperReport::kCut:
          e.kind = Event::kCut;
          e.text = "NCCLWATCH_ON_STUCK: its output reached " + std::to_string(max_bytes_) +
                   " bytes (NCCLWATCH_ON_STUCK_MAX_BYTES): cut there, and its process group killed; output in " +
                   output_;
          break;
        default:
          e.kind = Event::kFailed;
          e.text = "NCCLWATCH_ON_STUCK: cannot run " + QuoteWords({program_}) + ": " + strerror(rep.err);
      }
    } else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      reported_ = true;
      e.kind = Event::kFailed;
      e.text = "NCCLWATCH_ON_STUCK: its keeper process ended without a report; output in " + output_;
    }
  }
  if (reported_ && reaped_) {
    keeper_ = -1;
    CloseFd(&sock_);
  }
  return e;
}

}  // namespace ncclwatch::plugin
