#include "base/utf8.h"

namespace armhive {

Utf8Char decode_utf8(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  char32_t cp = 0;
  if (c < 0x80) return {1, c};
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return {};
  }
  if (i + n > s.size()) return {};
  for (size_t k = 1; k < n; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return {};
    cp = (cp << 6) | (cc & 0x3F);
  }
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
      cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return {};
  }
  return {n, cp};
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = decode_utf8(s, i).length;
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string truncate_utf8(std::string_view s, size_t max) {
  auto is_lead = [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; };
  size_t count = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!is_lead(s[i])) continue;
    if (count == max - 1) {
      // Does more than one code point remain?
      size_t rest = 0;
      for (size_t j = i; j < s.size(); ++j) rest += is_lead(s[j]) ? 1 : 0;
      if (rest > 1) return std::string(s.substr(0, i)) + "\xE2\x80\xA6";
      return std::string(s);
    }
    ++count;
  }
  return std::string(s);
}

std::string escape_for_log(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  auto hex_byte = [&out](unsigned char c) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          if (c < 0x20 || c == 0x7f) {
            hex_byte(c);
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    const Utf8Char u = decode_utf8(s, i);
    if (u.length == 0) {
      hex_byte(c);
      ++i;
      continue;
    }
    if ((u.code_point >= 0x80 && u.code_point <= 0x9f) || u.code_point == 0x2028 ||
        u.code_point == 0x2029) {
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(u.code_point >> shift) & 15];
    } else {
      out.append(s.substr(i, u.length));
    }
    i += u.length;
  }
  return out;
}

}  // namespace armhive
