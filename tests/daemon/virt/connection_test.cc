#include "daemon/virt/connection.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

TEST_CASE("a URI with a host part names a remote host", "[virt][connection]") {
  CHECK_FALSE(is_remote_uri("qemu:///system"));
  CHECK_FALSE(is_remote_uri("qemu+unix:///system"));
  CHECK_FALSE(is_remote_uri("test:///default"));
  CHECK_FALSE(is_remote_uri("qemu"));
  CHECK(is_remote_uri("qemu+tcp://10.79.1.2/system"));
  CHECK(is_remote_uri("qemu+ssh://armhive@hc1/system"));
  CHECK(is_remote_uri("qemu+tls://tx1.lab:16514/system"));
  CHECK(is_remote_uri("qemu://tx1/system"));
}

}  // namespace
}  // namespace armhive
