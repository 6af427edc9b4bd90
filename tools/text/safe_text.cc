#include "tools/text/safe_text.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>

namespace ncclwatch::tools {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence at s[i] and its code point; 0 if invalid.
size_t Utf8At(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  size_t n;
  uint32_t v;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    n = 2, v = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, v = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, v = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(i + k) & 0x3F);
  }
  // Overlong forms, surrogates, beyond U+10FFFF.
  if ((n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return n;
}

// How a code point is shown.
enum class Show {
  kAsIs,
  kByte,     // \xNN: C0 controls (but \n \t \r), DEL
  kUnicode,  // \u{NNNN}: C1, non-characters, reordering characters
};

Show ShowOf(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7F) return Show::kByte;
  if (cp >= 0x80 && cp < 0xA0) return Show::kUnicode;
  // Non-characters: U+FDD0..U+FDEF and the last two of every plane.
  if ((cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE) return Show::kUnicode;
  // Characters that reorder or break what is shown around them (the
  // "Trojan Source" ones): bidirectional marks, embeddings, overrides and
  // isolates; the line and paragraph separators.
  if (cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
      (cp >= 0x2066 && cp <= 0x2069) || cp == 0x2028 || cp == 0x2029)
    return Show::kUnicode;
  return Show::kAsIs;
}

void AppendByte(unsigned c, std::string* out) {
  char buf[8];
  snprintf(buf, sizeof(buf), "\\x%02x", c);
  *out += buf;
}

void AppendUnicode(uint32_t cp, std::string* out) {
  char buf[16];
  snprintf(buf, sizeof(buf), "\\u{%x}", static_cast<unsigned>(cp));
  *out += buf;
}

// \uXXXX, as a surrogate pair beyond the BMP.
void AppendJsonUnit(uint32_t cp, std::string* out) {
  char buf[16];
  if (cp >= 0x10000) {
    const uint32_t v = cp - 0x10000;
    snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
             static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
  } else {
    snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
  }
  *out += buf;
}

struct Style {
  bool keep_newline_tab;  // TerminalSafe: the text's own lines and columns
  bool double_backslash;  // a single value: escapes cannot be forged
};

void AppendVisible(std::string_view s, Style style, std::string* out) {
  out->reserve(out->size() + s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    const size_t n = Utf8At(s, i, &cp);
    if (n == 0) {
      AppendByte(static_cast<uint8_t>(s[i]), out);
      ++i;
      continue;
    }
    if (cp == '\\') {
      *out += style.double_backslash ? "\\\\" : "\\";
    } else if ((cp == '\n' || cp == '\t') && style.keep_newline_tab) {
      *out += static_cast<char>(cp);
    } else if (cp == '\n') {
      *out += "\\n";
    } else if (cp == '\t') {
      *out += "\\t";
    } else if (cp == '\r') {
      *out += "\\r";
    } else {
      switch (ShowOf(cp)) {
        case Show::kByte: AppendByte(cp, out); break;
        case Show::kUnicode: AppendUnicode(cp, out); break;
        case Show::kAsIs: out->append(s.substr(i, n)); break;
      }
    }
    i += n;
  }
}

}  // namespace

std::string CutName(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  // Back off to the start of a UTF-8 character (at most 3 bytes).
  size_t n = max;
  for (int k = 0; k < 3 && n > 0 && (static_cast<uint8_t>(s[n]) & 0xC0) == 0x80; ++k) --n;
  return std::string(s.substr(0, n)) + "...[cut: " + std::to_string(s.size()) + " bytes]";
}

std::string SanitizeUtf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    size_t n = Utf8At(s, i, &cp);
    if (n == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

std::string Printable(std::string_view s) {
  std::string out;
  AppendVisible(s, {/*keep_newline_tab=*/false, /*double_backslash=*/true}, &out);
  return out;
}

std::string TerminalSafe(std::string_view s) {
  std::string out;
  AppendVisible(s, {/*keep_newline_tab=*/true, /*double_backslash=*/false}, &out);
  return out;
}

size_t DisplayWidth(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++w;
  return w;
}

std::string XmlEscape(std::string_view s) {
  // The visible escapes first: what is left is XML 1.0 Char (#x9 | #xA |
  // #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]) but for
  // the markup; newline and tab as references, which attribute values
  // keep (a raw one is normalized to a space).
  std::string v;
  AppendVisible(s, {/*keep_newline_tab=*/true, /*double_backslash=*/true}, &v);
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\n': out += "&#10;"; break;
      case '\t': out += "&#9;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string OpenMetricsLabel(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    size_t n = Utf8At(s, i, &cp);
    if (n == 0) n = 1;
    // The format's own escapes keep the value; what a terminal would act
    // on is shown, its backslash escaped for the format.
    if (n == 1 && cp == '\\') {
      out += "\\\\";
    } else if (n == 1 && cp == '"') {
      out += "\\\"";
    } else if (n == 1 && cp == '\n') {
      out += "\\n";
    } else {
      for (char c : Printable(s.substr(i, n))) {
        if (c == '\\') out += "\\\\";
        else out += c;
      }
    }
    i += n;
  }
  return out;
}

std::string JsonQuote(std::string_view raw) {
  const std::string s = SanitizeUtf8(std::string(raw));
  std::string out = "\"";
  out.reserve(s.size() + 2);
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    const size_t n = Utf8At(s, i, &cp);  // valid: sanitized
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (ShowOf(cp) != Show::kAsIs) AppendJsonUnit(cp, &out);
        else out.append(s, i, n);
    }
    i += n;
  }
  return out + "\"";
}

std::string JsonEscapeRaw(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size();) {
    uint32_t cp;
    const size_t n = Utf8At(json, i, &cp);
    if (n == 0) {
      // Not an encoder's output: no raw byte may pass still.
      out += kReplacement;
      ++i;
      continue;
    }
    // Raw C0 controls cannot be in JSON text but as whitespace outside
    // strings (newline, tab, carriage return): kept.
    if (cp >= 0x20 && ShowOf(cp) != Show::kAsIs) AppendJsonUnit(cp, &out);
    else if (cp < 0x20 && cp != '\n' && cp != '\t' && cp != '\r') AppendJsonUnit(cp, &out);
    else out.append(json.substr(i, n));
    i += n;
  }
  return out;
}

SafeTextStream::SafeTextStream(std::ostream& to) : std::ostream(nullptr), buf_(to) { rdbuf(&buf_); }

SafeTextStream::~SafeTextStream() { buf_.Drain(/*all=*/true); }

void SafeTextStream::Buf::Drain(bool all) {
  size_t end = pending_.size();
  if (!all) {
    // Keep a UTF-8 character whose last bytes are still to come.
    for (size_t k = 1; k <= std::min<size_t>(3, pending_.size()); ++k) {
      const uint8_t c = static_cast<uint8_t>(pending_[pending_.size() - k]);
      if ((c & 0xC0) == 0x80) continue;
      const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      if (need > k) end = pending_.size() - k;
      break;
    }
  }
  to_ << TerminalSafe(std::string_view(pending_).substr(0, end));
  pending_.erase(0, end);
}

SafeTextStream::Buf::int_type SafeTextStream::Buf::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  pending_ += traits_type::to_char_type(c);
  if (pending_.size() >= (64 << 10) || c == '\n') Drain(false);
  return c;
}

std::streamsize SafeTextStream::Buf::xsputn(const char* s, std::streamsize n) {
  pending_.append(s, static_cast<size_t>(n));
  // Line by line, as a reader of a running command (watch) expects.
  if (pending_.size() >= (64 << 10) || memchr(s, '\n', static_cast<size_t>(n)) != nullptr) Drain(false);
  return n;
}

int SafeTextStream::Buf::sync() {
  Drain(false);
  to_.flush();
  return to_ ? 0 : -1;
}

}  // namespace ncclwatch::tools
