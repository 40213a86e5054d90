#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace armhive {

// The one UTF-8 decoder: API bodies (exec output), XML/HTML escaping and the core map's labels
// all judge text by it. Pure; any thread.

struct Utf8Char {
  size_t length = 0;  // bytes of the sequence; 0 when the bytes at that offset are not UTF-8
  char32_t code_point = 0;
};

// Decodes the sequence at s[i]: rejects truncated sequences, overlong forms, UTF-16
// surrogates and code points above U+10FFFF.
Utf8Char decode_utf8(std::string_view s, size_t i);

bool is_valid_utf8(std::string_view s);

// At most `max` code points (max >= 1) of s, ending in an ellipsis (U+2026) when shortened.
// Counts lead bytes, so give it valid UTF-8.
std::string truncate_utf8(std::string_view s, size_t max);

// `s` made safe for one line of a log: control characters (C0, DEL, C1), the line and
// paragraph separators U+2028/U+2029 and every byte that is not UTF-8 become escapes ("\n",
// "\r", "\t", "\x0b", "\u2028"), and a backslash is doubled, so a request's path, method or
// header can neither end the line nor pass for an escape. Valid printable UTF-8 stays as it is.
std::string escape_for_log(std::string_view s);

}  // namespace armhive
