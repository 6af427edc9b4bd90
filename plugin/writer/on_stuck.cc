#include "plugin/writer/on_stuck.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

extern char** environ;

namespace ncclwatch::plugin {

std::string ExpandOnStuck(const std::string& command, pid_t pid, int64_t rank, const std::string& trace_path) {
  std::string out;
  for (size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (c != '%' || i + 1 == command.size()) {
      out += c;
      continue;
    }
    const char n = command[++i];
    if (n == 'p') out += std::to_string(pid);
    else if (n == 'r') out += std::to_string(rank);
    else if (n == 'f') out += trace_path;
    else if (n == '%') out += '%';
    else (out += '%') += n;
  }
  return out;
}

OnStuckRunner::Event OnStuckRunner::Start(const std::string& command, pid_t pid, int64_t rank,
                                          const std::string& trace_path, double timeout_sec, uint64_t now_ns) {
  Event e;
  if (started_ || command.empty()) return e;
  started_ = true;
  timeout_sec_ = timeout_sec;
  output_ = trace_path + ".on_stuck.txt";
  const std::string cmd = ExpandOnStuck(command, pid, rank, trace_path);

  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, output_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  // Its own process group (so that the time limit kills what it started),
  // no signal blocked (the writer thread blocks some), default handlers.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  char sh[] = "sh";
  char dash_c[] = "-c";
  char* argv[] = {sh, dash_c, const_cast<char*>(cmd.c_str()), nullptr};
  pid_t child = -1;
  const int rc = posix_spawn(&child, "/bin/sh", &fa, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    e.kind = Event::kFailed;
    e.text = "NCCLWATCH_ON_STUCK: cannot start /bin/sh: " + std::string(strerror(rc));
    return e;
  }
  child_ = child;
  deadline_ns_ = now_ns + static_cast<uint64_t>(timeout_sec * 1e9);
  e.kind = Event::kStarted;
  e.text = "NCCLWATCH_ON_STUCK: started '" + cmd + "' (pid " + std::to_string(child) + "), output in " + output_;
  return e;
}

OnStuckRunner::Event OnStuckRunner::Poll(uint64_t now_ns) {
  Event e;
  if (child_ <= 0) return e;
  int status = 0;
  const pid_t r = waitpid(child_, &status, WNOHANG);
  if (r == child_ || (r < 0 && errno == ECHILD)) {
    // ECHILD: the host reaps children itself (a SIGCHLD handler); it ended.
    child_ = -1;
    if (killed_) return e;  // said when it was killed
    e.kind = Event::kExited;
    if (r < 0) e.text = "NCCLWATCH_ON_STUCK: ended (status taken by the host), output in " + output_;
    else if (WIFEXITED(status))
      e.text = "NCCLWATCH_ON_STUCK: exited with status " + std::to_string(WEXITSTATUS(status)) + ", output in " + output_;
    else
      e.text = "NCCLWATCH_ON_STUCK: ended by signal " + std::to_string(WTERMSIG(status)) + ", output in " + output_;
    return e;
  }
  if (r == 0 && !killed_ && now_ns >= deadline_ns_) {
    kill(-child_, SIGKILL);
    killed_ = true;
    e.kind = Event::kKilled;
    char buf[64];
    snprintf(buf, sizeof(buf), "%.0f", timeout_sec_);
    e.text = std::string("NCCLWATCH_ON_STUCK: still running after ") + buf +
             " s (NCCLWATCH_ON_STUCK_TIMEOUT_SEC): killed its process group; output so far in " + output_;
  }
  return e;
}

}  // namespace ncclwatch::plugin
