// Files the plugin creates, in folders that others may be able to write to
// (a shared /tmp, a job folder), from processes that often run as root.
//
// A file is created fresh or not at all: O_CREAT|O_EXCL|O_NOFOLLOW|
// O_CLOEXEC, so a name that exists already (a file, a symbolic link to a
// file of root's, a FIFO that would block the open, a device) is never
// opened or followed; the caller says so once and does not use the name.
// The mode is set with fchmod after the open, so the umask neither widens
// it (umask 000 would give 0666) nor narrows it.
//
// Thread safety: a pure function of the file system; any thread.

#ifndef PLUGIN_WRITER_OWN_FILE_H_
#define PLUGIN_WRITER_OWN_FILE_H_

#include <stdint.h>
#include <sys/stat.h>

#include <string>

namespace ncclwatch::plugin {

// Creates `path` write-only (plus `extra_flags`, e.g. O_APPEND) with mode
// `mode`. Returns the descriptor, or -1 with `error` set; `taken` says
// whether the name was there already (`error` then says what it is).
int CreateOwnFile(const std::string& path, uint32_t mode, int extra_flags, bool* taken, std::string* error);

// stat(2) (`follow_links`) or lstat(2), as the system call: glibc 2.33 made
// stat and lstat exported functions (stat@GLIBC_2.33; before, inline
// wrappers of __xstat), which a plugin that loads on glibc 2.17 cannot use.
// Returns 0, or -1 with errno set.
int StatPath(const std::string& path, bool follow_links, struct stat* st);

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_WRITER_OWN_FILE_H_
