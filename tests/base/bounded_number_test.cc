#include "base/bounded_number.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

namespace armhive {
namespace {

TEST_CASE("bounded numbers: plain decimals within range parse", "[base][hostile]") {
  CHECK(*parse_bounded_uint("8388608", 1, 1 << 30, "size") == 8388608);
  CHECK(*parse_bounded_int("-3", -5, 5, "level") == -3);
  CHECK(*parse_bounded_double("903.03", 0, 1e7, "speed") == Approx(903.03));
  CHECK(*parse_bounded_double("1e3", 0, 1e7, "speed") == Approx(1000));
}

TEST_CASE("bounded numbers: garbage, NaN, inf, huge, negative and empty are errors",
          "[base][hostile]") {
  for (const char* bad : {"", ".", "-", "1.2.3", "nan", "NaN", "inf", "-inf", "0x10", " 1", "1 ",
                          "1e", "e5", "\xff"}) {
    INFO(bad);
    auto d = parse_bounded_double(bad, -1e9, 1e9, "speed");
    REQUIRE_FALSE(d.is_ok());
    CHECK(d.status().code() == ErrorCode::kInvalidArgument);
    CHECK(d.status().field() == "speed");
  }
  CHECK_THAT(parse_bounded_double("1e999", 0, 1e9, "speed").status().message(),
             Catch::Contains("out of range"));
  CHECK_THAT(parse_bounded_double("-1", 0, 1e9, "speed").status().message(),
             Catch::Contains("outside the plausible range"));
  CHECK_THAT(
      parse_bounded_uint("99999999999999999999999", 0, UINT64_MAX, "bytes").status().message(),
      Catch::Contains("too large"));
  CHECK_FALSE(parse_bounded_uint("-1", 0, 10, "bytes").is_ok());
  CHECK_FALSE(parse_bounded_uint("+1", 0, 10, "bytes").is_ok());
  CHECK_FALSE(parse_bounded_uint("11", 0, 10, "bytes").is_ok());
  CHECK_FALSE(parse_bounded_int("9223372036854775808", INT64_MIN, INT64_MAX, "n").is_ok());
  CHECK_FALSE(check_bounded(std::numeric_limits<double>::quiet_NaN(), 0, 1, "x").is_ok());
  CHECK_FALSE(check_bounded(std::numeric_limits<double>::infinity(), 0, 1e308, "x").is_ok());
  CHECK(check_bounded(0.5, 0, 1, "x").is_ok());
}

TEST_CASE("bounded numbers: a quoted culprit is short and printable", "[base][hostile]") {
  std::string long_garbage(1000, '\x01');
  auto r = parse_bounded_uint(long_garbage, 0, 10, "bytes");
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().size() < 120);
  CHECK(r.status().message().find('\x01') == std::string::npos);
}

}  // namespace
}  // namespace armhive
