#include "daemon/config/access_reload.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

using namespace std::chrono_literals;

AccessConfig running_table() {
  AccessConfig a;
  a.enabled = true;
  a.listen = "10.78.0.1";
  return a;
}

TEST_CASE("access reload plan: caps and timeouts apply live", "[config][reload]") {
  CHECK(plan_access_reload(running_table(), running_table()).applied.empty());
  CHECK_FALSE(plan_access_reload(running_table(), running_table()).limits);
  CHECK(plan_access_reload(AccessConfig{}, AccessConfig{}).restart_needed.empty());

  AccessConfig next = running_table();
  next.max_sessions = 8;
  next.max_sessions_per_forward = 2;
  next.forward_idle_timeout = 5min;
  next.max_extra_ports = 1;
  AccessReload plan = plan_access_reload(running_table(), next);
  CHECK(plan.limits);
  CHECK(plan.restart_needed.empty());
  CHECK(plan.config.max_sessions == 8);
  CHECK(plan.config.max_extra_ports == 1);
  CHECK(plan.applied == std::vector<std::string>{
                            "access: max_sessions 1024 -> 8 (at once; sessions over it run on)",
                            "access: max_sessions_per_forward 64 -> 2 (forwards opened from now "
                            "on)",
                            "access: forward_idle_timeout 15m -> 5m (forwards opened from now on)",
                            "access: max_extra_ports 4 -> 1 (leases asking from now on)"});
}

TEST_CASE("access reload plan: sockets ports and the CA need a restart and are kept",
          "[config][reload]") {
  AccessConfig next = running_table();
  next.listen = "0.0.0.0";
  next.port_max = 22100;
  next.advertise = "armhive.example.com";
  next.ssh_ca_key = "/etc/armhive/ca";
  next.max_sessions = 8;
  AccessReload plan = plan_access_reload(running_table(), next);
  REQUIRE(plan.restart_needed.size() == 4);
  CHECK_THAT(plan.restart_needed[0],
             Catch::StartsWith("[access] listen: '10.78.0.1' -> '0.0.0.0' needs a restart"));
  CHECK_THAT(plan.restart_needed[1],
             Catch::StartsWith("[access] port_max: 22999 -> 22100 needs a restart"));
  CHECK_THAT(plan.restart_needed[2], Catch::StartsWith("[access] advertise: "));
  CHECK_THAT(plan.restart_needed[3], Catch::StartsWith("[access] ssh_ca_key: "));
  CHECK(plan.config.listen == "10.78.0.1");
  CHECK(plan.config.port_max == 22999);
  CHECK(plan.config.max_sessions == 8);  // the live part applies

  AccessReload removed = plan_access_reload(running_table(), AccessConfig{});
  REQUIRE(removed.restart_needed.size() == 1);
  CHECK_THAT(removed.restart_needed[0], Catch::StartsWith("[access] removed: "));
  CHECK_FALSE(removed.limits);
  AccessReload added = plan_access_reload(AccessConfig{}, running_table());
  REQUIRE(added.restart_needed.size() == 1);
  CHECK_THAT(added.restart_needed[0], Catch::StartsWith("[access] added: "));
}

}  // namespace
}  // namespace armhive
