#include "base/utf8.h"

#include <catch2/catch.hpp>

#include "base/base64.h"

namespace armhive {
namespace {

TEST_CASE("utf8: decodes valid sequences and refuses overlong, surrogate and truncated ones",
          "[base]") {
  CHECK(decode_utf8("a", 0).length == 1);
  Utf8Char e = decode_utf8("\xc3\xa9", 0);
  CHECK(e.length == 2);
  CHECK(e.code_point == U'\u00e9');
  CHECK(decode_utf8("\xf0\x9f\x98\x80", 0).code_point == U'\U0001F600');
  CHECK(decode_utf8("\xc0\xaf", 0).length == 0);          // overlong '/'
  CHECK(decode_utf8("\xed\xa0\x80", 0).length == 0);      // UTF-16 surrogate
  CHECK(decode_utf8("\xe2\x82", 0).length == 0);          // truncated
  CHECK(decode_utf8("\xf4\x90\x80\x80", 0).length == 0);  // above U+10FFFF
  CHECK(is_valid_utf8("h\xc3\xa9llo"));
  CHECK_FALSE(is_valid_utf8("h\xffllo"));
}

TEST_CASE("utf8: truncation counts code points and marks the cut", "[base]") {
  CHECK(truncate_utf8("abc", 3) == "abc");
  CHECK(truncate_utf8("abcd", 3) == "ab\xE2\x80\xA6");
  CHECK(truncate_utf8("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 3) == "\xc3\xa9\xc3\xa9\xE2\x80\xA6");
}

TEST_CASE("base64: round trip and strict decoding name the field", "[base]") {
  CHECK(base64_encode("hello") == "aGVsbG8=");
  CHECK(*base64_decode("x", "aGVsbG8=") == "hello");
  Status bad = base64_decode("out-data", "aGVsbG8").status();
  CHECK(bad.code() == ErrorCode::kInvalidArgument);
  CHECK(bad.field() == "out-data");
}

TEST_CASE("base64: every length and byte round-trips, padding only at the end", "[base]") {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t n = 0; n <= all.size(); ++n) {
    const std::string bytes = all.substr(all.size() - n);
    const std::string text = base64_encode(bytes);
    CHECK(text.size() == (n + 2) / 3 * 4);
    auto back = base64_decode("x", text);
    REQUIRE(back.is_ok());
    CHECK(*back == bytes);
  }
  CHECK(base64_encode("") == "");
  CHECK(base64_encode("f") == "Zg==");
  CHECK(base64_encode("fo") == "Zm8=");
  CHECK(base64_encode("foo") == "Zm9v");
  CHECK(base64_encode("\xff\xfe\xfd") == "//79");
  for (const char* bad : {"Zg=a", "Z===", "====", "Zg==Zm8=", "Z=g=", "Zm9v!A==", "Zm 9", "Zm8"}) {
    INFO(bad);
    CHECK_FALSE(base64_decode("x", bad).is_ok());
  }
}

TEST_CASE("utf8: escape_for_log keeps one line one line", "[utf8][hostile]") {
  CHECK(escape_for_log("GET /v1/leases 200") == "GET /v1/leases 200");
  CHECK(escape_for_log("/\nfake-line\r\t\x1b[31m\x7f") == "/\\nfake-line\\r\\t\\x1b[31m\\x7f");
  CHECK(escape_for_log("a\\nb") == "a\\\\nb");  // a literal backslash-n is not a newline
  CHECK(escape_for_log("caf\xc3\xa9 \xe2\x80\xa8 \xc2\x85") == "caf\xc3\xa9 \\u2028 \\u0085");
  CHECK(escape_for_log(std::string("\xff\xc3", 2) + std::string(1, '\0')) == "\\xff\\xc3\\x00");
}

}  // namespace
}  // namespace armhive
