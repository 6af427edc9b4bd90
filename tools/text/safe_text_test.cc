#include "tools/text/safe_text.h"

#include <gtest/gtest.h>

#include <sstream>

namespace ncclwatch::tools {
namespace {

// Every character a name must not show raw, with what a terminal shows.
std::string AllControls() {
  std::string s;
  for (int c = 0; c < 0x20; ++c) s += static_cast<char>(c);
  s += '\x7f';
  for (int c = 0x80; c < 0xa0; ++c) s += std::string("\xc2") + static_cast<char>(c);
  return s;
}

// No byte below 0x20 but the ones allowed, no DEL, only valid UTF-8.
void ExpectSafe(const std::string& s, const std::string& allowed) {
  for (unsigned char c : s) {
    EXPECT_FALSE((c < 0x20 && allowed.find(static_cast<char>(c)) == std::string::npos) || c == 0x7f)
        << "byte " << static_cast<int>(c) << " in " << s;
  }
  EXPECT_EQ(SanitizeUtf8(s), s);
  EXPECT_EQ(s.find("\xc2\x9b"), std::string::npos);  // CSI
}

TEST(SafeText, SanitizeUtf8KeepsValidAndReplacesInvalid) {
  EXPECT_EQ(SanitizeUtf8("plain"), "plain");
  EXPECT_EQ(SanitizeUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  EXPECT_EQ(SanitizeUtf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(SanitizeUtf8("cut \xE2\x82"), "cut \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(SanitizeUtf8(std::string("nul\0in", 6)), std::string("nul\0in", 6));
}

TEST(SafeText, PrintableWritesEveryControlAsAVisibleEscape) {
  EXPECT_EQ(Printable("a\nb\tc\\d\x01" "e\x7F\r"), "a\\nb\\tc\\\\d\\x01e\\x7f\\r");
  EXPECT_EQ(Printable(std::string("\0\x1b[2J", 5)), "\\x00\\x1b[2J");
  EXPECT_EQ(Printable("\xc2\x9b" "31m"), "\\u{9b}31m");                 // C1 CSI
  EXPECT_EQ(Printable("\xef\xbf\xbe\xef\xbf\xbf"), "\\u{fffe}\\u{ffff}");  // non-characters
  EXPECT_EQ(Printable("\xf0\x9f\xbf\xbe"), "\\u{1fffe}");
  EXPECT_EQ(Printable("\xe2\x80\xae" "evil"), "\\u{202e}evil");          // right-to-left override
  EXPECT_EQ(Printable("a\xff\xc0\xaf" "b"), "a\\xff\\xc0\\xafb");        // invalid UTF-8, byte by byte
  EXPECT_EQ(Printable("caf\xC3\xA9 \xE2\x82\xAC"), "caf\xC3\xA9 \xE2\x82\xAC");
  EXPECT_EQ(DisplayWidth("caf\xC3\xA9"), 4u);
  ExpectSafe(Printable(AllControls() + "\xff\xfe\xed\xa0\x80"), "");
}

TEST(SafeText, AnEscapeInTheNameCannotPassForOne) {
  // The four characters \x1b and the byte ESC are shown apart.
  EXPECT_NE(Printable("\\x1b"), Printable("\x1b"));
  EXPECT_EQ(Printable("\\x1b"), "\\\\x1b");
}

TEST(SafeText, TerminalSafeKeepsTheTextsLines) {
  EXPECT_EQ(TerminalSafe("line\n\tnext \\ \x1b[2J\r"), "line\n\tnext \\ \\x1b[2J\\r");
  ExpectSafe(TerminalSafe(AllControls() + "\xff"), "\n\t");
}

TEST(SafeText, CutNameBoundsAndMarksALongName) {
  EXPECT_EQ(CutName("world"), "world");
  EXPECT_EQ(CutName(std::string(kMaxNameBytes, 'a')), std::string(kMaxNameBytes, 'a'));
  const std::string cut = CutName(std::string(1 << 20, 'M'));
  EXPECT_EQ(cut, std::string(kMaxNameBytes, 'M') + "...[cut: 1048576 bytes]");
  // A character across the cut is left out whole, not split.
  const std::string euros = std::string(kMaxNameBytes - 1, 'a') + "\xE2\x82\xAC" + "tail";
  EXPECT_EQ(CutName(euros), std::string(kMaxNameBytes - 1, 'a') + "...[cut: 262 bytes]");
}

TEST(SafeText, XmlEscapeLeavesOnlyXmlCharacters) {
  EXPECT_EQ(XmlEscape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&apos;&amp;&apos;&lt;/a&gt;");
  EXPECT_EQ(XmlEscape("]]>"), "]]&gt;");
  EXPECT_EQ(XmlEscape("line\nnext\ttab\rcr"), "line&#10;next&#9;tab\\rcr");
  EXPECT_EQ(XmlEscape(std::string("\0\x01\x1B", 3)), "\\x00\\x01\\x1b");
  EXPECT_EQ(XmlEscape("\xEF\xBF\xBE"), "\\u{fffe}");
  EXPECT_EQ(XmlEscape("\xFF"), "\\xff");
  EXPECT_EQ(XmlEscape("\xC3\xA9\xF0\x9F\x98\x80"), "\xC3\xA9\xF0\x9F\x98\x80");
  ExpectSafe(XmlEscape(AllControls() + "\xff"), "");
}

TEST(SafeText, OpenMetricsLabelIsOneLineOfValidUtf8) {
  // The format's own escapes: the value reads back as the name.
  EXPECT_EQ(OpenMetricsLabel("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  // The rest shown, its backslash escaped for the format.
  EXPECT_EQ(OpenMetricsLabel("\x1b\t\xff\xc2\x9b"), "\\\\x1b\\\\t\\\\xff\\\\u{9b}");
  ExpectSafe(OpenMetricsLabel(AllControls() + "\xff"), "");
}

TEST(SafeText, JsonQuoteKeepsTheValueAndEscapesControls) {
  EXPECT_EQ(JsonQuote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
  EXPECT_EQ(JsonQuote(std::string("\0\x1b\x7f", 3)), "\"\\u0000\\u001b\\u007f\"");
  EXPECT_EQ(JsonQuote("\xc2\x9b\xef\xbf\xbe\xe2\x80\xae"), "\"\\u009b\\ufffe\\u202e\"");
  EXPECT_EQ(JsonQuote("\xf0\x9f\xbf\xbe"), "\"\\ud83f\\udffe\"");  // U+1FFFE as a surrogate pair
  EXPECT_EQ(JsonQuote("\xff"), "\"\xEF\xBF\xBD\"");
  ExpectSafe(JsonQuote(AllControls() + "\xff"), "");
}

TEST(SafeText, JsonEscapeRawLeavesStructureAndEscapesStrings) {
  EXPECT_EQ(JsonEscapeRaw("{\n  \"a\": \"x\x7f\xc2\x85\"\n}\n"), "{\n  \"a\": \"x\\u007f\\u0085\"\n}\n");
  EXPECT_EQ(JsonEscapeRaw("\"\xef\xbf\xbf\""), "\"\\uffff\"");
}

TEST(SafeText, SafeTextStreamFiltersWhatIsWrittenAndKeepsCharactersWhole) {
  std::ostringstream to;
  {
    SafeTextStream s(to);
    s << "ok \x1b[2J\n" << "caf\xC3";
    s.flush();  // a character cut between two writes is held back
    EXPECT_EQ(to.str(), "ok \\x1b[2J\ncaf");
    s << "\xA9 \xff\n";
  }
  EXPECT_EQ(to.str(), "ok \\x1b[2J\ncaf\xC3\xA9 \\xff\n");
  std::ostringstream cut;
  { SafeTextStream(cut) << "end \xE2\x82"; }  // a cut-off tail at the end is shown
  EXPECT_EQ(cut.str(), "end \\xe2\\x82");
}

}  // namespace
}  // namespace ncclwatch::tools
