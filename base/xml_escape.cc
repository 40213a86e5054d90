#include "base/xml_escape.h"

#include "base/utf8.h"

namespace armhive {
namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";

// Length of the UTF-8 sequence at s[i] if it is an XML 1.0 character's, else 0 (control
// characters are handled by the caller).
size_t xml_char_len(std::string_view s, size_t i) {
  const Utf8Char c = decode_utf8(s, i);
  if (c.code_point == 0xFFFE || c.code_point == 0xFFFF) return 0;  // not XML characters
  return c.length;
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  for (size_t i = 0; i < text.size();) {
    size_t n = xml_char_len(text, i);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    char c = text[i++];
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '\t':
      case '\n':
        out += c;
        break;
      case '\r':
        out += ' ';
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
          out += kReplacement;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string xml_text_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const Utf8Char c = decode_utf8(text, i);
    const char32_t cp = c.code_point;
    const bool allowed = cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
                         (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
    if (c.length == 0 || !allowed) {
      out += kReplacement;
      ++i;
      continue;
    }
    out.append(text.substr(i, c.length));
    i += c.length;
  }
  return out;
}

}  // namespace armhive
