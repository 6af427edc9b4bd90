#include "plugin/writer/own_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ncclwatch::plugin {
namespace {

const char* WhatIsThere(const std::string& path) {
  struct stat st;
  if (StatPath(path, false, &st) != 0) return "something that went away again";
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISDIR(st.st_mode)) return "a directory";
  return "a file";
}

}  // namespace

int StatPath(const std::string& path, bool follow_links, struct stat* st) {
  // The kernel's struct stat is glibc's on x86_64 and aarch64.
  return static_cast<int>(
      syscall(SYS_newfstatat, AT_FDCWD, path.c_str(), st, follow_links ? 0 : AT_SYMLINK_NOFOLLOW));
}

int CreateOwnFile(const std::string& path, uint32_t mode, int extra_flags, bool* taken, std::string* error) {
  *taken = false;
  // 0600 at creation: the file is never readable by others before fchmod.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | extra_flags, 0600);
  if (fd < 0) {
    const int err = errno;
    if (err == EEXIST) {
      *taken = true;
      *error = "'" + path + "' exists already (" + WhatIsThere(path) + "): not opened, not followed";
    } else {
      *error = "cannot create '" + path + "': " + strerror(err);
    }
    return -1;
  }
  if (fchmod(fd, mode) != 0) {
    *error = "cannot set the mode of '" + path + "': " + strerror(errno);
    close(fd);
    unlink(path.c_str());
    return -1;
  }
  return fd;
}

}  // namespace ncclwatch::plugin
