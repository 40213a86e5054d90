#include "base/status.h"

#include <catch2/catch.hpp>
#include <string>

#include "base/result.h"

namespace armhive {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("ttl", "must be positive");
  return v;
}

Result<int> doubled(int v) {
  ARMHIVE_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return x * 2;
}

TEST_CASE("status codes map one-to-one to HTTP statuses", "[base]") {
  for (ErrorCode c : {ErrorCode::kOk, ErrorCode::kInvalidArgument, ErrorCode::kUnauthenticated,
                      ErrorCode::kPermissionDenied, ErrorCode::kNotFound, ErrorCode::kConflict,
                      ErrorCode::kRequestTimeout, ErrorCode::kPayloadTooLarge,
                      ErrorCode::kUnprocessable, ErrorCode::kResourceExhausted,
                      ErrorCode::kInternal, ErrorCode::kUnavailable, ErrorCode::kTimeout}) {
    CHECK(code_from_http(http_status(c)) == c);
  }
  CHECK(http_status(ErrorCode::kConflict) == 409);
  CHECK(http_status(ErrorCode::kRequestTimeout) == 408);
  CHECK(code_name(ErrorCode::kRequestTimeout) == "request-timeout");
}

TEST_CASE("result carries a value or the failure that replaced it", "[base]") {
  Result<int> ok = doubled(21);
  REQUIRE(ok.is_ok());
  CHECK(*ok == 42);

  Result<int> bad = doubled(-1);
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == ErrorCode::kInvalidArgument);
  CHECK(bad.status().field() == "ttl");
  CHECK(bad.status().annotate("creating lease").message() == "creating lease: must be positive");
  CHECK(bad.status().to_string() == "invalid-argument: must be positive (field ttl)");
}

}  // namespace
}  // namespace armhive
