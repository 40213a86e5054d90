#include "daemon/virt/image_shipper.h"

#include <catch2/catch.hpp>
#include <string>

namespace armhive {
namespace {

const std::string kSha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

TEST_CASE("a shipped volume is named by its content and the file's base name", "[virt][ship]") {
  auto name = shipped_volume_name("/var/lib/armhive/images/tiny/disk.qcow2", kSha);
  REQUIRE(name.is_ok());
  CHECK(*name == "armhive-img-0123456789abcdef-disk.qcow2");
  CHECK(name->rfind(kShippedVolumePrefix, 0) == 0);
  // The same bytes under another directory find the same volume.
  CHECK(shipped_volume_name("disk.qcow2", kSha).value() == *name);
  // Other bytes, another volume.
  std::string other = kSha;
  other[15] = '0';
  CHECK(shipped_volume_name("disk.qcow2", other).value() != *name);
}

TEST_CASE("an uppercase sha256 names the same volume as its lowercase form", "[virt][ship]") {
  std::string upper = "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF";
  CHECK(shipped_volume_name("vmlinuz", upper).value() ==
        shipped_volume_name("vmlinuz", kSha).value());
}

TEST_CASE("a sha256 that is not 64 hex digits is refused, naming the field", "[virt][ship]") {
  for (const std::string& bad :
       {std::string(), kSha.substr(0, 63), kSha + "0", "g" + kSha.substr(1),
        kSha.substr(0, 16) + "/../" + kSha.substr(20), std::string(64, ' ')}) {
    auto name = shipped_volume_name("disk.qcow2", bad);
    REQUIRE_FALSE(name.is_ok());
    CHECK(name.status().code() == ErrorCode::kInvalidArgument);
    CHECK(name.status().field() == "sha256");
  }
}

TEST_CASE("the base name is sanitised: no separators, quotes, spaces or leading dots",
          "[virt][ship]") {
  const std::string prefix = "armhive-img-0123456789abcdef-";
  CHECK(shipped_volume_name("/x/my disk <'\"&>.img", kSha).value() == prefix + "my_disk______.img");
  CHECK(shipped_volume_name("/x/..hidden", kSha).value() == prefix + "hidden");
  CHECK(shipped_volume_name("/x/..", kSha).value() == prefix + "file");
  CHECK(shipped_volume_name("/x/dir/", kSha).value() == prefix + "file");
  CHECK(shipped_volume_name("", kSha).value() == prefix + "file");
  CHECK(shipped_volume_name("initrd.\xc3\xa9.gz", kSha).value() == prefix + "initrd.__.gz");
}

TEST_CASE("the base name is cut to 64 bytes so names stay bounded", "[virt][ship]") {
  auto name = shipped_volume_name("/x/" + std::string(300, 'a'), kSha);
  REQUIRE(name.is_ok());
  CHECK(*name == "armhive-img-0123456789abcdef-" + std::string(64, 'a'));
}

}  // namespace
}  // namespace armhive
