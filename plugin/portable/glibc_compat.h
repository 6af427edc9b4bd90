// What the statically linked libstdc++ and libgcc take from glibc after 2.17,
// provided inside the plugin so that it loads on glibc 2.17 (manylinux2014).
//
// The plugin .so links Debian's libstdc++.a and libgcc_eh.a (GCC 12, built
// against glibc 2.36). Everything they import has a 2.17 version except two:
//
// - `__libc_single_threaded` (glibc 2.32), read by libstdc++'s reference
//   counts to skip atomics in a single-threaded process. The plugin defines
//   its own, always 0 ("maybe threaded"): atomics always, as on a glibc
//   without it.
// - `_dl_find_object` (glibc 2.35), which libgcc's unwinder calls to find the
//   .eh_frame_hdr of the object a frame belongs to. The plugin's own walks
//   the loaded objects with dl_iterate_phdr (in every glibc), as libgcc did
//   before 2.35. Only an exception thrown inside libstdc++ unwinds, and the
//   plugin code itself never throws.
//
// Both are defined in glibc_compat_defs.cc, linked only into the release
// .so; the export map keeps them local. This header declares the tested
// part.
//
// Thread safety: any thread (dl_iterate_phdr takes the loader's lock).
// Allocates nothing.

#ifndef PLUGIN_PORTABLE_GLIBC_COMPAT_H_
#define PLUGIN_PORTABLE_GLIBC_COMPAT_H_

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

namespace ncclwatch::plugin {

// _dl_find_object's contract over dl_iterate_phdr: 0 with `out` filled when
// `pc` lies in a loaded object's PT_LOAD segment, else -1. Fills
// dlfo_map_start/end (the object's lowest and highest loaded byte),
// dlfo_eh_frame (its PT_GNU_EH_FRAME, or null) and dlfo_eh_dbase where the
// architecture has one; dlfo_link_map is null (libgcc does not read it).
int FindObjectByPhdr(void* pc, struct dl_find_object* out);

// getentropy(3): fills `len` (at most 256) random bytes; 0, or -1 with errno
// (EIO past 256 bytes or when neither getrandom(2) nor /dev/urandom serve).
int GetEntropy(void* buf, size_t len);

// arc4random(3): 32 random bits (0 if no source of entropy answers, where
// glibc would abort).
uint32_t Arc4Random();

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_PORTABLE_GLIBC_COMPAT_H_
