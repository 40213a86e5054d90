#include "daemon/bench/mtu_plan.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

TEST_CASE("MTU plan: bridge then tap up, restored in reverse, refused beyond a link's maximum",
          "[bench]") {
  // Shapes of `ip -d -j link show dev ...` on Debian 12 (iproute2 6.1).
  auto bridge = parse_ip_link_json(
      R"([{"ifindex":5,"ifname":"ahbrb0","mtu":1500,"min_mtu":68,"max_mtu":65535}])");
  auto tap = parse_ip_link_json(
      R"([{"ifindex":9,"ifname":"vnet3","mtu":1500,"min_mtu":68,"max_mtu":65521}])");
  REQUIRE(bridge.is_ok());
  REQUIRE(tap.is_ok());
  CHECK(bridge->max_mtu == 65535);
  auto plan = plan_host_mtu(9000, {*bridge, *tap});
  REQUIRE(plan.is_ok());
  REQUIRE(plan->apply.size() == 2);
  CHECK(plan->apply[0].link == "ahbrb0");
  CHECK(plan->apply[1].link == "vnet3");
  CHECK(plan->apply[1].to == 9000);
  REQUIRE(plan->restore.size() == 2);
  CHECK(plan->restore[0].link == "vnet3");
  CHECK(plan->restore[0].to == 1500);
  CHECK(plan->restore[1].link == "ahbrb0");

  HostLinkMtu nic{"eth0", 1500, 68, 1500};  // a NIC without jumbo support under the bridge
  auto refused = plan_host_mtu(9000, {*bridge, nic});
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().field() == "network.mtus");
  CHECK(refused.status().message() == "MTU 9000: the host's eth0 carries at most 1500");
  CHECK_FALSE(plan_host_mtu(40, {*bridge}).is_ok());
  CHECK(plan_host_mtu(1500, {*bridge, *tap})->apply.empty());  // nothing to change

  CHECK_FALSE(parse_ip_link_json("Device \"nope\" does not exist.").is_ok());
  CHECK_FALSE(parse_ip_link_json(R"([{"ifname":"x","mtu":-1}])").is_ok());
  CHECK_FALSE(parse_ip_link_json(R"([{"ifname":"x","mtu":"1500"}])").is_ok());
  CHECK_FALSE(parse_ip_link_json(R"([])").is_ok());
}

}  // namespace
}  // namespace armhive
