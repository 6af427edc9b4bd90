#include "tools/progress.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <condition_variable>
#include <iostream>
#include <mutex>
#include <sstream>

#include "tools/cli.h"

namespace ncclwatch::tools {
namespace {

TEST(ProgressTest, Formatting) {
  EXPECT_EQ(FormatProgress("ncclwatch export: writing", 900'000, 2'000'000, "operations", 12.4),
            "ncclwatch export: writing 45% (900,000 of 2,000,000 operations), 12 s");
  EXPECT_EQ(FormatProgress("reading 3 files (1.2 GB)", 0, 0, "", 3.6), "reading 3 files (1.2 GB), 4 s");
  EXPECT_EQ(FormatProgress("x", 7, 5, "ops", 0), "x 100% (7 of 5 ops), 0 s");
  EXPECT_EQ(WithThousands(1234567), "1,234,567");
  EXPECT_EQ(WithThousands(999), "999");
  EXPECT_EQ(FormatBytes(900), "900 B");
  EXPECT_EQ(FormatBytes(12'300), "12 KB");
  EXPECT_EQ(FormatBytes(469'000'000), "469 MB");
  EXPECT_EQ(FormatBytes(1'440'000'000), "1.4 GB");
}

// Not a terminal: no progress, not a byte.
TEST(ProgressTest, SilentWhenNotATerminal) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_FALSE(IsTerminal(fds[0]));
  EXPECT_FALSE(IsTerminal(fds[1]));
  close(fds[0]);
  close(fds[1]);
  const int null_fd = open("/dev/null", O_WRONLY);
  ASSERT_GE(null_fd, 0);
  EXPECT_FALSE(IsTerminal(null_fd));
  close(null_fd);
  // Any stream but std::cerr, and std::cerr when fd 2 is no terminal.
  std::ostringstream s;
  EXPECT_EQ(ProgressStream(s), nullptr);
  EXPECT_EQ(ProgressStream(std::cerr) != nullptr, IsTerminal(STDERR_FILENO));

  Progress silent(nullptr);
  silent.Wait("reading");
  silent.Count("writing", 1, 2, "operations");
  silent.Done();

  // A command run on a string stream prints its messages only.
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/p.json";
  std::ostringstream out, err;
  ASSERT_EQ(RunCli({"ncclwatch", "export", "-o", path, "testdata/gpu/skip"}, out, err), 0) << err.str();
  EXPECT_EQ(err.str().find('\r'), std::string::npos) << err.str();
  EXPECT_EQ(err.str().find("reading"), std::string::npos) << err.str();
}

// On a terminal (here a string stream standing for one): the line is
// drawn, redrawn in place, and cleared at the end.
TEST(ProgressTest, DrawsInPlaceAndClears) {
  std::ostringstream s;
  {
    Progress p(&s);
    p.Count("writing", 0, 10, "operations");
    p.Count("writing", 10, 10, "operations");  // the end is always drawn
    p.Done();
  }
  const std::string out = s.str();
  EXPECT_NE(out.find("\rwriting 0% (0 of 10 operations), 0 s"), std::string::npos) << out;
  EXPECT_NE(out.find("\rwriting 100% (10 of 10 operations)"), std::string::npos) << out;
  EXPECT_EQ(out.back(), '\r');  // cleared: the cursor back at the line's start
}

// A stream the ticker thread writes while the test waits on what it holds.
class LockedBuf : public std::stringbuf {
 public:
  // Blocks until `done(text)` holds of what was written; returns the text.
  template <typename Pred>
  std::string WaitFor(Pred done) {
    std::unique_lock<std::recursive_mutex> l(mu_);
    wrote_.wait(l, [&] { return done(str()); });
    return str();
  }
  std::string Text() {
    std::lock_guard<std::recursive_mutex> l(mu_);
    return str();
  }

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard<std::recursive_mutex> l(mu_);
    const std::streamsize put = std::stringbuf::xsputn(s, n);
    wrote_.notify_all();
    return put;
  }
  int_type overflow(int_type c) override {
    std::lock_guard<std::recursive_mutex> l(mu_);
    const int_type put = std::stringbuf::overflow(c);
    wrote_.notify_all();
    return put;
  }

 private:
  std::recursive_mutex mu_;  // xsputn calls overflow
  std::condition_variable_any wrote_;
};

size_t Draws(const std::string& text) {
  size_t draws = 0;
  for (size_t at = text.find("\rreading"); at != std::string::npos; at = text.find("\rreading", at + 1)) ++draws;
  return draws;
}

// A stage of unknown length is redrawn by the ticker with the time so far.
TEST(ProgressTest, WaitTicks) {
  LockedBuf buf;
  std::ostream s(&buf);
  Progress p(&s);
  p.Wait("reading 2 files (1 KB)");
  // Drawn at once, then by the ticker each second: wait for the redraw,
  // whatever the machine's load (a hang is ended by the test's timeout).
  const size_t draws = Draws(buf.WaitFor([](const std::string& text) { return Draws(text) >= 2; }));
  EXPECT_GE(draws, 2u);
  p.Done();
  EXPECT_NE(buf.Text().find("\rreading 2 files (1 KB), 1 s"), std::string::npos) << buf.Text();
}

}  // namespace
}  // namespace ncclwatch::tools
