// Runs after every other end-to-end test (a ctest cleanup fixture): no test's armhived may
// leave guests behind in the sandbox's libvirtd, where they would load every later test.

#include <libvirt/libvirt.h>

#include <catch2/catch.hpp>

#include "tests/support/instance_domains.h"

namespace armhive {
namespace {

TEST_CASE("no end-to-end test leaves its armhived's guests running", "[leftovers]") {
  virConnectPtr conn = virConnectOpen("qemu:///system");
  REQUIRE(conn != nullptr);  // an unreachable libvirtd would make the check below vacuous
  virConnectClose(conn);
  const std::vector<std::string> left = instance_domains("armhive-e2e-");
  INFO("domains left: " << left.size());
  for (const std::string& d : left) UNSCOPED_INFO(d);
  CHECK(left.empty());
}

}  // namespace
}  // namespace armhive
