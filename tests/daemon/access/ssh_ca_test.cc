// What the certificate endpoint accepts as a public key (pure parsing; 400 naming public_key).
#include "daemon/access/ssh_ca.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

constexpr const char* kEd25519 =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF697QrUOxct0qQ6jU2rVWpBJdmckYulnDpmKJCrIBD3";
constexpr const char* kEcdsa =
    "ecdsa-sha2-nistp256 "
    "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBIICqsa+l+"
    "y4meiederw8HBSWFgTRsPIzgZ2QzWhfha6"
    "eE2E2dGi+ESlaabObKz43N6qfwbgEON+ZSC6h/u0OkI=";

void check_refused(const std::string& text, const std::string& says) {
  auto r = parse_ssh_public_key(text);
  INFO(text);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ErrorCode::kInvalidArgument);
  CHECK(r.status().field() == "public_key");
  CHECK_THAT(r.status().message(), Catch::Contains(says));
}

TEST_CASE("a public key is taken as TYPE BASE64, its comment dropped", "[access][ssh-ca]") {
  CHECK(*parse_ssh_public_key(std::string(kEd25519) + " alice@laptop\n") == kEd25519);
  CHECK(*parse_ssh_public_key(kEcdsa) == kEcdsa);
}

TEST_CASE("malformed public keys are refused naming public_key", "[access][ssh-ca]") {
  check_refused("", "is empty");
  check_refused("\n", "is empty");
  check_refused("ssh-ed25519", "no key data");
  check_refused("ssh-ed25519 !!!notbase64", "not base64");
  // A valid ecdsa blob under the ed25519 name: the blob names its own type.
  std::string ecdsa_blob = std::string(kEcdsa).substr(std::string(kEcdsa).find(' ') + 1);
  check_refused("ssh-ed25519 " + ecdsa_blob, "does not hold a ssh-ed25519 key");
  check_refused("ssh-foo AAAA", "unknown key type");
  check_refused("ssh-dss AAAAB3NzaC1kc3M=", "DSA");
  check_refused(std::string(kEd25519) + "\nssh-ed25519 AAAA", "one line");
  check_refused("-----BEGIN OPENSSH PRIVATE KEY-----", "private key");
  check_refused("ssh-ed25519-cert-v01@openssh.com AAAA", "certificate");
  check_refused(std::string(kEd25519) + " " + std::string(17000, 'x'), "16 KiB");
}

TEST_CASE("each lease has its own principal", "[access][ssh-ca]") {
  CHECK(lease_principal("l-0123456789ab") == "lease-l-0123456789ab");
  CHECK(lease_principal("l-0123456789ab") != lease_principal("l-0123456789ac"));
}

}  // namespace
}  // namespace armhive
