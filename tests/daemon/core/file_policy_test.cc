// The rules of `armhive cp` in a pool: which guest paths and sizes are allowed.
#include "daemon/core/file_policy.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

TEST_CASE("file policy: paths are absolute, plain and under the prefix", "[core][files]") {
  FilePolicy p;
  p.path_prefix = "/work";
  CHECK(*check_guest_path(p, "/work") == "/work");
  CHECK(*check_guest_path(p, "/work//a/b/") == "/work/a/b");
  for (std::string_view bad : {std::string_view(""), std::string_view("work/a"),
                               std::string_view("/work/../etc"), std::string_view("/work/./a"),
                               std::string_view("/work/a\nb"), std::string_view("/work/a\0b", 9)}) {
    INFO(std::string(bad));
    auto r = check_guest_path(p, bad);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK(r.status().field() == "path");
  }
  for (const char* outside : {"/etc/passwd", "/workshop", "/"}) {
    INFO(outside);
    auto r = check_guest_path(p, outside);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kPermissionDenied);
    CHECK(r.status().field() == "path");
    CHECK_THAT(r.status().message(), Catch::Contains("files.path_prefix '/work'"));
  }
  CHECK(check_guest_path(FilePolicy{}, "/etc/passwd").is_ok());  // the default prefix is "/"
}

TEST_CASE("file policy: a transfer over max_bytes is refused naming the limit", "[core][files]") {
  FilePolicy p;
  p.max_bytes = 1000;
  CHECK(check_transfer_size(p, "ci", 1000).is_ok());
  Status s = check_transfer_size(p, "ci", 1001);
  CHECK(s.code() == ErrorCode::kPayloadTooLarge);
  CHECK(s.field() == "files.max_bytes");
  CHECK_THAT(s.message(), Catch::Contains("files.max_bytes of 1000 bytes"));
}

}  // namespace
}  // namespace armhive
