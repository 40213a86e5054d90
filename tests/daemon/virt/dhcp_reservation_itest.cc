// DHCP host reservations against libvirt's test:///default driver, whose network "default"
// serves DHCP on 192.168.122.2-254.
#include <catch2/catch.hpp>

#include "daemon/virt/connection.h"
#include "daemon/virt/dhcp_reservation.h"

namespace armhive {
namespace {

TEST_CASE("addresses are reserved per domain, distinct, found again and released",
          "[virt][dhcp][integration]") {
  auto conn = Connection::open("test:///default");
  REQUIRE(conn.is_ok());
  auto a = reserve_dhcp_host(*conn, "default", "armhive-vm-a1", "");
  INFO(a.status().to_string());
  REQUIRE(a.is_ok());
  REQUIRE(a->has_value());
  auto b = reserve_dhcp_host(*conn, "default", "armhive-vm-b2", "52:54:00:00:00:b2");
  REQUIRE(b.is_ok());
  REQUIRE(b->has_value());
  CHECK((*a)->ip == "192.168.122.2");
  CHECK((*b)->ip == "192.168.122.3");
  CHECK((*b)->mac == "52:54:00:00:00:b2");
  // Reserving again (a retried create) returns the same entry.
  auto again = reserve_dhcp_host(*conn, "default", "armhive-vm-a1", "");
  REQUIRE(again.is_ok());
  CHECK(**again == **a);

  auto found = find_dhcp_host(*conn, "default", "armhive-vm-b2");
  REQUIRE(found.is_ok());
  CHECK(*found == *b);
  CHECK(*list_dhcp_host_names(*conn, "armhive-") ==
        std::vector<std::string>{"armhive-vm-a1", "armhive-vm-b2"});
  CHECK(list_dhcp_host_names(*conn, "other-")->empty());

  REQUIRE(release_dhcp_host(*conn, "armhive-vm-a1").is_ok());
  REQUIRE(release_dhcp_host(*conn, "armhive-vm-a1").is_ok());  // idempotent
  CHECK_FALSE(find_dhcp_host(*conn, "default", "armhive-vm-a1")->has_value());
  // The freed address is the next one handed out.
  auto c = reserve_dhcp_host(*conn, "default", "armhive-vm-c3", "");
  REQUIRE(c.is_ok());
  CHECK((*c)->ip == "192.168.122.2");
  CHECK(reserve_dhcp_host(*conn, "missing", "armhive-vm-d4", "").status().code() ==
        ErrorCode::kNotFound);
  CHECK(reserve_dhcp_host(*conn, "default", "Bad Name", "").status().code() ==
        ErrorCode::kInvalidArgument);
  REQUIRE(release_dhcp_host(*conn, "armhive-vm-b2").is_ok());
  REQUIRE(release_dhcp_host(*conn, "armhive-vm-c3").is_ok());
  CHECK(list_dhcp_host_names(*conn, "armhive-")->empty());
}

}  // namespace
}  // namespace armhive
