#include "plugin/testing/waits.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

namespace ncclwatch::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

void AdoptOrphans() { (void)prctl(PR_SET_CHILD_SUBREAPER, 1); }

DirWatch::DirWatch(const std::string& dir) {
  fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  EXPECT_GE(fd_, 0) << "inotify_init1: " << strerror(errno);
  if (fd_ >= 0 && inotify_add_watch(fd_, dir.c_str(), IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO) < 0)
    ADD_FAILURE() << "inotify_add_watch " << dir << ": " << strerror(errno);
}

DirWatch::~DirWatch() {
  if (fd_ >= 0) close(fd_);
}

void WaitUntil(const std::function<bool()>& done, std::initializer_list<int> fds, int recheck_ms) {
  std::vector<pollfd> p;
  for (int fd : fds) p.push_back({fd, POLLIN, 0});
  char buf[4096] __attribute__((aligned(8)));
  while (!done()) {
    if (poll(p.data(), p.size(), recheck_ms) < 0 && errno != EINTR) {
      ADD_FAILURE() << "poll: " << strerror(errno);
      return;
    }
    // What woke us is read off, so that the next poll waits for news. The
    // descriptors are non-blocking: an inotify queue or an eventfd.
    for (const pollfd& q : p)
      if (q.revents & POLLIN)
        while (read(q.fd, buf, sizeof(buf)) > 0) {
        }
  }
}

bool WaitGone(pid_t pid) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return errno == ESRCH;  // gone (and reaped) already
  // Readable once the process has ended (a zombie, if it is ours).
  pollfd p{pidfd, POLLIN, 0};
  while (poll(&p, 1, -1) < 0 && errno == EINTR) {
  }
  close(pidfd);
  int status;
  waitpid(pid, &status, WNOHANG);  // ours (a subreaper's orphan too): reaped
  return true;
}

std::string WaitForFile(const std::string& path, const std::function<bool(const std::string&)>& done) {
  DirWatch w(path.substr(0, path.rfind('/')));
  std::string text;
  WaitUntil([&] { return done(text = ReadFile(path)); }, {w.fd()});
  return text;
}

}  // namespace ncclwatch::testing
