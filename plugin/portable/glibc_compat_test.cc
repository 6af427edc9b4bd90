#include "plugin/portable/glibc_compat.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace ncclwatch::plugin {
namespace {

void* Here() { return reinterpret_cast<void*>(&Here); }

// glibc 2.35 and later answer the same question themselves: ours must find
// the same object and the same unwind table.
void ExpectAsGlibc(void* pc, const char* what) {
  struct dl_find_object ours, theirs;
  ASSERT_EQ(_dl_find_object(pc, &theirs), 0) << what;
  ASSERT_EQ(FindObjectByPhdr(pc, &ours), 0) << what;
  EXPECT_NE(ours.dlfo_eh_frame, nullptr) << what;
  EXPECT_EQ(ours.dlfo_eh_frame, theirs.dlfo_eh_frame) << what;
  EXPECT_LE(ours.dlfo_map_start, pc) << what;
  EXPECT_GT(ours.dlfo_map_end, pc) << what;
}

TEST(GlibcCompatTest, FindsTheObjectOfACodeAddressAsGlibcDoes) {
  ExpectAsGlibc(Here(), "this test");
  ExpectAsGlibc(reinterpret_cast<void*>(&write), "libc's write");
  ExpectAsGlibc(reinterpret_cast<void*>(&dl_iterate_phdr), "dl_iterate_phdr");
}

TEST(GlibcCompatTest, AnAddressInNoObjectIsNotFound) {
  struct dl_find_object out;
  EXPECT_EQ(FindObjectByPhdr(nullptr, &out), -1);
  EXPECT_EQ(FindObjectByPhdr(reinterpret_cast<void*>(uintptr_t{16}), &out), -1);
  // A heap address lies in no loaded segment either.
  int* heap = new int(1);
  struct dl_find_object theirs;
  EXPECT_EQ(FindObjectByPhdr(heap, &out), _dl_find_object(heap, &theirs));
  delete heap;
}

TEST(GlibcCompatTest, GetEntropyFillsUpTo256Bytes) {
  unsigned char a[256] = {}, b[256] = {};
  ASSERT_EQ(GetEntropy(a, sizeof(a)), 0);
  ASSERT_EQ(GetEntropy(b, sizeof(b)), 0);
  // Two draws of 2048 random bits agree with probability 2^-2048.
  EXPECT_NE(memcmp(a, b, sizeof(a)), 0);
  unsigned char big[257];
  errno = 0;
  EXPECT_EQ(GetEntropy(big, sizeof(big)), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(GetEntropy(nullptr, 0), 0);
}

TEST(GlibcCompatTest, Arc4RandomDraws) {
  const uint32_t first = Arc4Random();
  bool differs = false;
  for (int i = 0; i < 8 && !differs; ++i) differs = Arc4Random() != first;
  EXPECT_TRUE(differs);  // nine equal 32-bit draws: probability 2^-256
}

}  // namespace
}  // namespace ncclwatch::plugin
