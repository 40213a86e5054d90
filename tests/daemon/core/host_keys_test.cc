#include "daemon/core/host_keys.h"

#include <catch2/catch.hpp>

#include "base/base64.h"

namespace armhive {
namespace {

const std::string kEd =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL4VKYqD6zyeGmUdw5PnHb2hHd3HpM6d3ODBC8iXrGrg";
const std::string kEcdsa =
    "ecdsa-sha2-nistp256 "
    "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBFd6dHCyNMjRDFb+98FU3L3d6Y3sqOltp1/"
    "cVVnsnQRrX3p8Q1O/WMAc6WrRGwiqrUV0lNb3zAsOd9UXaBnTYuw=";

// A well-formed blob of `type` (the RFC 4253 type string, then `n` bytes).
std::string blob_of(const std::string& type, size_t n) {
  std::string b = {'\0', '\0', '\0', static_cast<char>(type.size())};
  b += type + std::string(n, 'x');
  return base64_encode(b);
}

TEST_CASE("host keys: OpenSSH .pub lines and dropbearkey output, comments and noise dropped",
          "[host_keys]") {
  const std::string out = kEd + " root@vm\n" + "Public key portion is:\n" + kEcdsa +
                          " root@vm\r\n" + "Fingerprint: sha1!! 00:11\n" + kEd +
                          " root@vm\n" +  // twice
                          "ssh-dss AAAAB3NzaC1kc3MAAACBAP not;ours\n";
  auto keys = parse_host_keys(out);
  REQUIRE(keys.is_ok());
  REQUIRE(keys->size() == 2);
  CHECK((*keys)[0] == kEd);
  CHECK((*keys)[1] == kEcdsa);
  CHECK(is_host_key(kEd));
  CHECK(is_host_key(kEcdsa));
  CHECK(known_hosts_lines("armhive-lease-l-1", *keys) ==
        "armhive-lease-l-1 " + kEd + "\narmhive-lease-l-1 " + kEcdsa + "\n");
}

TEST_CASE("host keys: nothing yet is an empty list, not an error", "[host_keys]") {
  auto none = parse_host_keys("");
  REQUIRE(none.is_ok());
  CHECK(none->empty());
  auto noise = parse_host_keys("sh: dropbearkey: not found\n");
  REQUIRE(noise.is_ok());
  CHECK(noise->empty());
}

TEST_CASE("host keys: a malformed key line from the guest is an error naming the line",
          "[host_keys]") {
  auto not_base64 = parse_host_keys(kEd + "\nssh-rsa not;base64 root@vm\n");
  REQUIRE_FALSE(not_base64.is_ok());
  CHECK(not_base64.status().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(not_base64.status().message(), Catch::Contains("line 2 (ssh-rsa)"));
  CHECK_THAT(not_base64.status().message(), Catch::Contains("not base64"));

  // Valid base64, but the blob says it is another type than its line.
  auto mismatch = parse_host_keys("ssh-rsa " + blob_of("ssh-ed25519", 32) + "\n");
  REQUIRE_FALSE(mismatch.is_ok());
  CHECK_THAT(mismatch.status().message(), Catch::Contains("not of type ssh-rsa"));

  auto missing = parse_host_keys("ssh-ed25519\n");
  REQUIRE_FALSE(missing.is_ok());
  CHECK_THAT(missing.status().message(), Catch::Contains("no key after the type"));

  auto unpadded = parse_host_keys("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOb\n");
  CHECK_FALSE(unpadded.is_ok());
}

TEST_CASE("host keys: the guest's output is bounded in size, count and key length", "[host_keys]") {
  std::string many;
  for (size_t i = 0; i <= kMaxHostKeys; ++i) {
    many += "ssh-ed25519 " + blob_of("ssh-ed25519", 32 + i) + "\n";
  }
  auto too_many = parse_host_keys(many);
  REQUIRE_FALSE(too_many.is_ok());
  CHECK_THAT(too_many.status().message(), Catch::Contains("more than 8 host keys"));

  auto huge_key = parse_host_keys("ssh-rsa " + blob_of("ssh-rsa", kMaxHostKeyBlob) + "\n");
  REQUIRE_FALSE(huge_key.is_ok());
  CHECK_THAT(huge_key.status().message(), Catch::Contains("at most 4096"));

  auto flood = parse_host_keys(std::string(kMaxHostKeysOutput + 1, 'a'));
  REQUIRE_FALSE(flood.is_ok());
  CHECK_THAT(flood.status().message(), Catch::Contains("at most 65536"));

  CHECK_FALSE(is_host_key(kEd + " root@vm"));  // stored keys carry no comment
  CHECK_FALSE(is_host_key("ssh-ed25519\t" + kEd.substr(12)));
  CHECK_FALSE(is_host_key("ssh-dss " + blob_of("ssh-dss", 32)));
}

}  // namespace
}  // namespace armhive
