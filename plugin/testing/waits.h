// Waiting in tests for a state itself, never for a fixed time: a file or a
// folder that changes (inotify), a process that ends (a pidfd), or any
// descriptor that becomes readable. A wait has no deadline of its own: a
// state that never comes is a hang, which Bazel's test timeout ends.
//
// Thread safety: a DirWatch belongs to one thread; the functions may be
// called from any.

#ifndef PLUGIN_TESTING_WAITS_H_
#define PLUGIN_TESTING_WAITS_H_

#include <sys/types.h>

#include <functional>
#include <initializer_list>
#include <string>

namespace ncclwatch::testing {

// The changes in one folder: files created, written, closed or moved in.
class DirWatch {
 public:
  explicit DirWatch(const std::string& dir);
  ~DirWatch();
  DirWatch(const DirWatch&) = delete;
  DirWatch& operator=(const DirWatch&) = delete;
  // Readable once something changed since it was last read (WaitUntil
  // reads it).
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// Returns once `done()` holds, checking it again whenever one of `fds` is
// readable (what was readable is read off first). `recheck_ms` >= 0 checks
// it also that often, for a state that nothing signals (a child reaped by
// the kernel); the default waits on the descriptors alone.
void WaitUntil(const std::function<bool()>& done, std::initializer_list<int> fds, int recheck_ms = -1);

// Waits until process `pid` has ended, reaping it if it is a child of this
// process (or became one: a subreaper's orphans). Also true at once for a
// process that no longer exists.
bool WaitGone(pid_t pid);

// Makes this process the reaper of its descendants' orphans, so that a
// killed command's remains come back to it rather than to init. Best
// effort: qemu-user 7.2 refuses the prctl, and WaitGone sees an orphan
// end (through a pidfd) whoever reaps it.
void AdoptOrphans();

// Reads `path` until `done` holds for its text (it may not exist yet);
// returns that text.
std::string WaitForFile(const std::string& path, const std::function<bool(const std::string&)>& done);

}  // namespace ncclwatch::testing

#endif  // PLUGIN_TESTING_WAITS_H_
