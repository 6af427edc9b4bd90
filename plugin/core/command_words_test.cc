#include "plugin/core/command_words.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ncclwatch::plugin {
namespace {

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> w;
  std::string err;
  EXPECT_TRUE(SplitCommand(text, &w, &err)) << text << ": " << err;
  return w;
}

std::string SplitError(const std::string& text) {
  std::vector<std::string> w;
  std::string err;
  EXPECT_FALSE(SplitCommand(text, &w, &err)) << text;
  return err;
}

using V = std::vector<std::string>;

TEST(CommandWords, WhitespaceSeparates) {
  EXPECT_EQ(Split("py-spy dump --pid %p"), (V{"py-spy", "dump", "--pid", "%p"}));
  EXPECT_EQ(Split("  a\t\tb \n c  "), (V{"a", "b", "c"}));
}

TEST(CommandWords, QuotesGroupAndJoin) {
  EXPECT_EQ(Split("sh -c 'echo \"$1\"; ls | wc' sh %f"), (V{"sh", "-c", "echo \"$1\"; ls | wc", "sh", "%f"}));
  EXPECT_EQ(Split("--x='a b'c\"d e\""), (V{"--x=a bcd e"}));
  EXPECT_EQ(Split("a '' \"\" b"), (V{"a", "", "", "b"}));
  // No escapes inside single quotes.
  EXPECT_EQ(Split("a 'x\\y'"), (V{"a", "x\\y"}));
  // Inside double quotes only \" and \\ are escapes.
  EXPECT_EQ(Split("a \"q\\\"q \\\\ \\n $x\""), (V{"a", "q\"q \\ \\n $x"}));
}

TEST(CommandWords, BackslashEscapesOutsideQuotes) {
  EXPECT_EQ(Split("a\\ b \\'c \\\\ \\\"d"), (V{"a b", "'c", "\\", "\"d"}));
  EXPECT_EQ(Split("a \\\nb"), (V{"a", "\nb"}));
}

TEST(CommandWords, ShellCharactersAreOrdinary) {
  EXPECT_EQ(Split("echo a;b|c&d>e<f $(g) `h` * ~ #i"),
            (V{"echo", "a;b|c&d>e<f", "$(g)", "`h`", "*", "~", "#i"}));
}

TEST(CommandWords, BadTextSaysWhereAndWhat) {
  EXPECT_EQ(SplitError("echo 'abc"), "the single quote at byte 5 is never closed");
  EXPECT_EQ(SplitError("echo \"ab\\\""), "the double quote at byte 5 is never closed");
  EXPECT_EQ(SplitError("echo a\\"), "a backslash ends it (byte 6): it escapes nothing");
  EXPECT_EQ(SplitError(""), "it holds no word");
  EXPECT_EQ(SplitError(" \t\n "), "it holds no word");
  EXPECT_EQ(SplitError("'' x"), "its first word, the program, is empty");
}

TEST(CommandWords, ExpandsInsideOneWord) {
  EXPECT_EQ(ExpandWord("--pid=%p", 1234, 3, "/t/a"), "--pid=1234");
  EXPECT_EQ(ExpandWord("%f.%r.txt", 1, 7, "/t/a b;c"), "/t/a b;c.7.txt");
  EXPECT_EQ(ExpandWord("100%% %x %s %", 1, -1, "f"), "100% %x %s %");
  EXPECT_EQ(ExpandWord("%r", 1, -1, "f"), "-1");
  EXPECT_EQ(ExpandWord("%%p", 9, 0, "f"), "%p");
}

TEST(CommandWords, QuotedForALogLine) {
  EXPECT_EQ(QuoteWords({"sh", "-c", "it's", ""}), "'sh' '-c' 'it'\\''s' ''");
}

}  // namespace
}  // namespace ncclwatch::plugin
