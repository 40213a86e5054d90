#include "daemon/core/pool_reload.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

PoolConfig pool(const std::string& name, int min_warm = 1) {
  PoolConfig p;
  p.name = name;
  p.image = "tiny";
  p.vcpus = 2;
  p.min_warm = min_warm;
  p.max = 4;
  return p;
}

TEST_CASE("reload: sizes, TTLs and limits change in place", "[core][reload]") {
  PoolConfig next = pool("ci", 3);
  next.max = 8;
  next.max_ttl = Seconds(3600);
  next.ssh_permissions = {"pty", "port-forwarding"};
  PoolReload plan = plan_pool_reload({pool("ci")}, {next});
  CHECK(plan.restart_needed.empty());
  REQUIRE(plan.changes.size() == 1);
  const PoolChange& c = plan.changes[0];
  CHECK(c.kind == PoolChange::Kind::kUpdate);
  CHECK(c.config.min_warm == 3);
  CHECK(c.config.max == 8);
  CHECK(c.config.max_ttl == Seconds(3600));
  CHECK(c.config.ssh_permissions == next.ssh_permissions);
  CHECK(c.changed == std::vector<std::string>{"min_warm", "max", "max_ttl", "ssh_permissions"});
}

TEST_CASE("reload: the running VMs' shape is kept and its change named", "[core][reload]") {
  PoolConfig next = pool("ci", 2);
  next.vcpus = 4;
  next.image = "ci";
  PoolReload plan = plan_pool_reload({pool("ci")}, {next});
  REQUIRE(plan.restart_needed.size() == 2);
  CHECK(plan.restart_needed[0] ==
        "pool ci: image 'tiny' -> 'ci' needs a restart (the running "
        "VMs have the old one; VMs keep running across it)");
  CHECK_THAT(plan.restart_needed[1], Catch::StartsWith("pool ci: vcpus 2 -> 4 needs a restart"));
  // What changes in place still does, on the running shape.
  REQUIRE(plan.changes.size() == 1);
  CHECK(plan.changes[0].config.min_warm == 2);
  CHECK(plan.changes[0].config.vcpus == 2);
  CHECK(plan.changes[0].config.image == "tiny");
}

TEST_CASE("reload: pools come and go, an unchanged file changes nothing", "[core][reload]") {
  PoolReload plan = plan_pool_reload({pool("ci"), pool("old")}, {pool("ci"), pool("dev", 0)});
  CHECK(plan.restart_needed.empty());
  REQUIRE(plan.changes.size() == 2);
  CHECK(plan.changes[0].kind == PoolChange::Kind::kRemove);
  CHECK(plan.changes[0].config.name == "old");
  CHECK(plan.changes[1].kind == PoolChange::Kind::kAdd);
  CHECK(plan.changes[1].config.name == "dev");

  PoolReload none = plan_pool_reload({pool("ci"), pool("dev")}, {pool("dev"), pool("ci")});
  CHECK(none.changes.empty());
  CHECK(none.restart_needed.empty());
}

}  // namespace
}  // namespace armhive
