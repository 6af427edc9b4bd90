// The four glibc symbols that libstdc++.a and libgcc_eh.a need past 2.17,
// defined in the release .so (glibc_compat.h says why). Never link this into
// an executable: it would take the names from glibc for the whole process.

#include "plugin/portable/glibc_compat.h"

extern "C" {

// 0: the process may be threaded, so libstdc++ always uses atomics.
char __libc_single_threaded = 0;

int _dl_find_object(void* pc, struct dl_find_object* out) noexcept {
  return ncclwatch::plugin::FindObjectByPhdr(pc, out);
}

int getentropy(void* buf, size_t len) { return ncclwatch::plugin::GetEntropy(buf, len); }

uint32_t arc4random() noexcept { return ncclwatch::plugin::Arc4Random(); }

}  // extern "C"
