#include "tools/text/safe_text.h"

#include <gtest/gtest.h>

namespace ncclwatch::tools {
namespace {

TEST(TextTest, SanitizeUtf8KeepsValidAndReplacesInvalid) {
  EXPECT_EQ(SanitizeUtf8("plain"), "plain");
  EXPECT_EQ(SanitizeUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  EXPECT_EQ(SanitizeUtf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(SanitizeUtf8("cut \xE2\x82"), "cut \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(SanitizeUtf8(std::string("nul\0in", 6)), std::string("nul\0in", 6));
}

TEST(TextTest, PrintableEscapesControls) {
  EXPECT_EQ(Printable("a\nb\tc\\d\x01" "e\x7F"), "a\\nb\\tc\\\\d\\x01e\\x7f");
  EXPECT_EQ(Printable("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(DisplayWidth("caf\xC3\xA9"), 4u);
}

TEST(TextTest, XmlEscapeHandlesHostileText) {
  EXPECT_EQ(XmlEscape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&apos;&amp;&apos;&lt;/a&gt;");
  EXPECT_EQ(XmlEscape("]]>"), "]]&gt;");
  EXPECT_EQ(XmlEscape("line\nnext\ttab\rcr"), "line&#10;next&#9;tab&#13;cr");
  // Characters XML 1.0 cannot carry at all.
  EXPECT_EQ(XmlEscape(std::string("\0\x01\x1B", 3)), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(XmlEscape("\xEF\xBF\xBE"), "\xEF\xBF\xBD");  // U+FFFE
  EXPECT_EQ(XmlEscape("\xFF"), "\xEF\xBF\xBD");
  EXPECT_EQ(XmlEscape("\xC3\xA9\xF0\x9F\x98\x80"), "\xC3\xA9\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace ncclwatch::tools
