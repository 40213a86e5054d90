#include "base/url_encode.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

TEST_CASE("url_encode: unreserved bytes pass, everything else is %XX", "[base][url]") {
  CHECK(url_encode("l-0a1B2c~_.-") == "l-0a1B2c~_.-");
  CHECK(url_encode("") == "");
  // A value never adds a path segment, a query parameter or a fragment.
  CHECK(url_encode("a/b?c=d&e#f") == "a%2Fb%3Fc%3Dd%26e%23f");
  CHECK(url_encode("a b+c%") == "a%20b%2Bc%25");
  // Bytes, not characters: UTF-8 and control bytes are encoded one by one, upper-case hex.
  CHECK(url_encode("\xc3\xa9\n") == "%C3%A9%0A");
  CHECK(url_encode(std::string_view("\0\xff", 2)) == "%00%FF");
}

}  // namespace
}  // namespace armhive
