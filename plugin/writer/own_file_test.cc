#include "plugin/writer/own_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

namespace ncclwatch::plugin {
namespace {

std::string Dir(const std::string& tag) {
  std::string d = ::testing::TempDir() + "/own_file_" + tag;
  mkdir(d.c_str(), 0700);
  return d;
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(OwnFile, ModeIsExactWhateverTheUmask) {
  const std::string d = Dir("mode");
  const mode_t old = umask(000);
  bool taken = true;
  std::string err;
  int fd = CreateOwnFile(d + "/a", 0600, 0, &taken, &err);
  ASSERT_GE(fd, 0) << err;
  EXPECT_FALSE(taken);
  EXPECT_EQ(ModeOf(d + "/a"), 0600u);  // not 0666
  EXPECT_NE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  close(fd);
  umask(0077);
  fd = CreateOwnFile(d + "/b", 0640, O_APPEND, &taken, &err);
  ASSERT_GE(fd, 0) << err;
  EXPECT_EQ(ModeOf(d + "/b"), 0640u);  // not narrowed to 0600
  EXPECT_NE(fcntl(fd, F_GETFL) & O_APPEND, 0);
  close(fd);
  umask(old);
}

// A link planted at the name, to a file of ours: the file stays unchanged
// (content and mode), the link stays a link.
TEST(OwnFile, APlantedLinkIsNotFollowed) {
  const std::string d = Dir("link");
  const std::string victim = d + "/victim", name = d + "/out";
  FILE* f = fopen(victim.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("secret", f);
  fclose(f);
  ASSERT_EQ(chmod(victim.c_str(), 0600), 0);
  ASSERT_EQ(symlink(victim.c_str(), name.c_str()), 0);
  bool taken = false;
  std::string err;
  EXPECT_EQ(CreateOwnFile(name, 0644, 0, &taken, &err), -1);
  EXPECT_TRUE(taken);
  EXPECT_EQ(err, "'" + name + "' exists already (a symbolic link): not opened, not followed");
  EXPECT_EQ(ModeOf(victim), 0600u);
  char buf[16] = {0};
  f = fopen(victim.c_str(), "r");
  ASSERT_NE(f, nullptr);
  ASSERT_NE(fgets(buf, sizeof(buf), f), nullptr);
  fclose(f);
  EXPECT_STREQ(buf, "secret");
  struct stat st;
  ASSERT_EQ(lstat(name.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  // A dangling link is no better a name.
  ASSERT_EQ(symlink((d + "/nowhere").c_str(), (d + "/dangling").c_str()), 0);
  EXPECT_EQ(CreateOwnFile(d + "/dangling", 0600, 0, &taken, &err), -1);
  EXPECT_TRUE(taken);
  EXPECT_NE(access((d + "/nowhere").c_str(), F_OK), 0);
}

// A FIFO with no reader would block an open for writing forever; the name is
// refused at once instead (the call returns: nothing blocks).
TEST(OwnFile, APlantedFifoDoesNotBlock) {
  const std::string d = Dir("fifo");
  ASSERT_EQ(mkfifo((d + "/out").c_str(), 0666), 0);
  bool taken = false;
  std::string err;
  EXPECT_EQ(CreateOwnFile(d + "/out", 0600, 0, &taken, &err), -1);
  EXPECT_TRUE(taken);
  EXPECT_NE(err.find("(a FIFO)"), std::string::npos) << err;
  // A plain file that is there already is refused too.
  FILE* f = fopen((d + "/plain").c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  EXPECT_EQ(CreateOwnFile(d + "/plain", 0600, 0, &taken, &err), -1);
  EXPECT_NE(err.find("(a file)"), std::string::npos) << err;
}

TEST(OwnFile, OtherFailuresAreNotTaken) {
  bool taken = true;
  std::string err;
  EXPECT_EQ(CreateOwnFile("/nonexistent-dir/x", 0600, 0, &taken, &err), -1);
  EXPECT_FALSE(taken);
  EXPECT_EQ(err, "cannot create '/nonexistent-dir/x': No such file or directory");
}

TEST(OwnFile, StatPathFollowsLinksOnlyWhenAsked) {
  const std::string d = Dir("stat");
  FILE* f = fopen((d + "/target").c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("12345", f);
  fclose(f);
  unlink((d + "/link").c_str());
  ASSERT_EQ(symlink((d + "/target").c_str(), (d + "/link").c_str()), 0);
  struct stat st;
  ASSERT_EQ(StatPath(d + "/link", true, &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_size, 5);
  ASSERT_EQ(StatPath(d + "/link", false, &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  ASSERT_EQ(StatPath(d, true, &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  errno = 0;
  EXPECT_EQ(StatPath(d + "/missing", true, &st), -1);
  EXPECT_EQ(errno, ENOENT);
}

}  // namespace
}  // namespace ncclwatch::plugin
