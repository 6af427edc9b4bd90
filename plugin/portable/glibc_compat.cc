#include "plugin/portable/glibc_compat.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ncclwatch::plugin {
namespace {

struct Search {
  uintptr_t pc;
  struct dl_find_object* out;
  bool found;
};

int Visit(struct dl_phdr_info* info, size_t, void* arg) {
  auto* s = static_cast<Search*>(arg);
  bool inside = false;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  const ElfW(Phdr)* eh = nullptr;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& p = info->dlpi_phdr[i];
    if (p.p_type == PT_GNU_EH_FRAME) eh = &p;
    if (p.p_type != PT_LOAD) continue;
    const uintptr_t start = info->dlpi_addr + p.p_vaddr;
    const uintptr_t end = start + p.p_memsz;
    if (start < lo) lo = start;
    if (end > hi) hi = end;
    if (s->pc >= start && s->pc < end) inside = true;
  }
  if (!inside) return 0;
  memset(s->out, 0, sizeof(*s->out));
  s->out->dlfo_map_start = reinterpret_cast<void*>(lo);
  s->out->dlfo_map_end = reinterpret_cast<void*>(hi);
  if (eh != nullptr) s->out->dlfo_eh_frame = reinterpret_cast<void*>(info->dlpi_addr + eh->p_vaddr);
#if DLFO_STRUCT_HAS_EH_DBASE
  // DW_EH_PE_datarel is relative to the GOT on the architectures that use it.
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      for (const ElfW(Dyn)* d = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
           d->d_tag != DT_NULL; ++d)
        if (d->d_tag == DT_PLTGOT) s->out->dlfo_eh_dbase = reinterpret_cast<void*>(d->d_un.d_ptr);
#endif
  s->found = true;
  return 1;
}

}  // namespace

int FindObjectByPhdr(void* pc, struct dl_find_object* out) {
  Search s{reinterpret_cast<uintptr_t>(pc), out, false};
  dl_iterate_phdr(&Visit, &s);
  return s.found ? 0 : -1;
}

int GetEntropy(void* buf, size_t len) {
  if (len > 256) {
    errno = EIO;
    return -1;
  }
  auto* p = static_cast<unsigned char*>(buf);
  size_t done = 0;
  while (done < len) {
    const long n = syscall(SYS_getrandom, p + done, len - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // ENOSYS before Linux 3.17: read /dev/urandom
    }
  }
  if (done == len) return 0;
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    errno = EIO;
    return -1;
  }
  while (done < len) {
    const ssize_t n = read(fd, p + done, len - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(fd);
  if (done == len) return 0;
  errno = EIO;
  return -1;
}

uint32_t Arc4Random() {
  uint32_t v = 0;
  if (GetEntropy(&v, sizeof(v)) != 0) return 0;
  return v;
}

}  // namespace ncclwatch::plugin
