// A configuration reload's pools applied to a running engine (LeaseEngine::reload_pools):
// min_warm raised and lowered, a pool added and one removed, with leases held throughout.
#include <catch2/catch.hpp>
#include <thread>

#include "daemon/core/pool_reload.h"
#include "daemon/engine/lease_engine.h"
#include "tests/support/engine_harness.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

TEST_CASE("reload: min_warm raised boots more, lowered retires the surplus, leases stay",
          "[engine][reload]") {
  Harness h({ci_pool(1, 4)});
  h.start();
  REQUIRE(h.settle(1));
  Lease held = h.lease();
  REQUIRE(held.state == LeaseState::kReady);
  REQUIRE(h.settle(1));

  CHECK(h.engine->reload_pools(plan_pool_reload({ci_pool(1, 4)}, {ci_pool(3, 4)})).empty());
  REQUIRE(h.settle(3));
  CHECK(h.hypervisor->domains().size() == 4);  // three warm and the leased one
  CHECK(h.engine->pools()[0].config.min_warm == 3);

  CHECK(h.engine->reload_pools(plan_pool_reload({ci_pool(3, 4)}, {ci_pool(0, 4)})).empty());
  REQUIRE(h.settle(0));
  REQUIRE(eventually(*h.engine, [&] { return h.hypervisor->domains().size() == 1; }));
  // The leased VM was not the pool's to take.
  CHECK(h.hypervisor->domains().count(held.vm_name) == 1);
  CHECK(h.engine->get_lease(held.id)->state == LeaseState::kReady);
  CHECK(h.cores_held() == 2);
}

TEST_CASE("reload: a removed pool takes no lease and goes once its leases end, an added one serves",
          "[engine][reload]") {
  Harness h({ci_pool(1, 2)});
  h.start();
  REQUIRE(h.settle(1));
  Lease held = h.lease();
  REQUIRE(h.settle(1));

  PoolConfig dev = ci_pool(0, 2);
  dev.name = "dev";
  CHECK(h.engine->reload_pools(plan_pool_reload({ci_pool(1, 2)}, {dev})).empty());
  LeaseRequest on_ci;
  on_ci.pool = "ci";
  on_ci.owner = "ci-token";
  on_ci.ssh_keys = {kTestKey};
  auto refused = h.engine->create_lease(on_ci);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == ErrorCode::kNotFound);
  CHECK(refused.status().field() == "pool");
  CHECK_THAT(refused.status().message(), Catch::Contains("removed from the configuration"));
  // Its warm VM goes; its lease keeps its VM.
  REQUIRE(eventually(*h.engine, [&] { return h.hypervisor->domains().size() == 1; }));
  CHECK(h.engine->get_lease(held.id)->state == LeaseState::kReady);

  LeaseRequest on_dev = on_ci;
  on_dev.pool = "dev";
  Lease served = h.lease(on_dev);
  CHECK(h.wait_ready(served.id).state == LeaseState::kReady);

  auto pool_names = [&] {
    std::vector<std::string> out;
    for (const PoolStatus& p : h.engine->pools()) out.push_back(p.config.name);
    return out;
  };
  CHECK(pool_names() == std::vector<std::string>{"ci", "dev"});
  REQUIRE(h.engine->release_lease(held.id).is_ok());
  h.engine->schedule();
  REQUIRE(eventually(*h.engine, [&] { return pool_names() == std::vector<std::string>{"dev"}; }));
}

TEST_CASE("reload: a pool no host can hold is not added, and says why", "[engine][reload]") {
  Harness h({ci_pool(0, 2)});
  h.start();
  PoolConfig huge = ci_pool(0, 1, /*vcpus=*/256);
  huge.name = "huge";
  std::vector<std::string> refused =
      h.engine->reload_pools(plan_pool_reload({ci_pool(0, 2)}, {ci_pool(0, 2), huge}));
  REQUIRE(refused.size() == 1);
  CHECK_THAT(refused[0], Catch::StartsWith("pool huge not added: "));
  CHECK(h.engine->pools().size() == 1);
}

}  // namespace
}  // namespace armhive
