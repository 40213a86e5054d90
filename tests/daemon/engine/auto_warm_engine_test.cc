// min_warm = "auto" on a running engine: the warm VMs follow the pool's lease requests, survive a
// restart through the lease history, and go back to auto_min once the pool has been idle.
#include <catch2/catch.hpp>
#include <thread>

#include "daemon/engine/lease_engine.h"
#include "tests/support/engine_harness.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

PoolConfig auto_pool() {
  PoolConfig p = ci_pool(0, 4);
  p.auto_warm = AutoWarmConfig{.auto_min = 0, .auto_max = 3, .scale_to_zero_after = 30min};
  return p;
}

TEST_CASE("auto warm: requests warm the pool, a restart remembers them, idleness empties it",
          "[engine][auto_warm]") {
  Harness h({auto_pool()});
  h.start();
  auto status = [&] { return h.engine->pools().at(0); };
  // No request yet: auto_min, and the pool says so.
  REQUIRE(h.settle(0));
  REQUIRE(status().warm_target);
  CHECK(status().warm_target->target == 0);
  CHECK_FALSE(status().warm_target->reason.empty());
  CHECK(h.hypervisor->domains().empty());

  // Twelve jobs in a few minutes, each run and released.
  for (int i = 0; i < 12; ++i) {
    Lease l = h.lease();
    REQUIRE(h.wait_ready(l.id).state == LeaseState::kReady);
    REQUIRE(h.engine->release_lease(l.id).is_ok());
    h.clock.advance(15s);
  }
  h.engine->schedule();
  const int target = status().warm_target->target;
  INFO(status().warm_target->reason);
  CHECK(target >= 1);
  CHECK(target <= 3);  // auto_max
  CHECK(status().config.min_warm == target);
  CHECK(status().warm_target->rate_per_min > 0);
  REQUIRE(h.settle(target));

  // A restart reads the lease history: the pool is warmed again, not from zero.
  h.make_engine();
  h.start();
  REQUIRE(status().warm_target);
  INFO(status().warm_target->reason);
  CHECK(status().warm_target->target >= 1);

  // An idle afternoon: back to auto_min, its warm VMs retired.
  h.clock.advance(2h);
  h.engine->schedule();
  CHECK(status().warm_target->target == 0);
  CHECK(eventually(*h.engine, [&] { return h.hypervisor->domains().empty(); }));
  CHECK(h.cores_held() == 0);
}

}  // namespace
}  // namespace armhive
