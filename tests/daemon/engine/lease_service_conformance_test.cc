// One suite, two implementations: what the HTTP API relies on from a LeaseService holds for
// the real LeaseEngine and for the FakeLeaseService the API tests use, so the fake cannot
// drift from the real thing.
#include <catch2/catch.hpp>

#include "daemon/engine/lease_engine.h"
#include "tests/daemon/http/fake_lease_service.h"
#include "tests/support/engine_harness.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

// The real engine: pool "tiny" warm (leases are ready at once), pool "slow" at max 0 (leases
// stay pending), on a fake hypervisor.
struct EngineSubject {
  EngineSubject() : h(pools()) {
    h.start();
    bool warm = false;
    for (int i = 0; i < 1000 && !warm; ++i) {
      h.engine->wait_idle(1s);
      for (const PoolStatus& p : h.engine->pools())
        warm = warm || (p.config.name == "tiny" && p.warm == 2);
      if (!warm) std::this_thread::sleep_for(5ms);
    }
    REQUIRE(warm);
  }
  static std::vector<PoolConfig> pools() {
    PoolConfig tiny = ci_pool(2, 4);
    tiny.name = "tiny";
    tiny.max_ttl = 8h;
    PoolConfig slow = ci_pool(0, 0);
    slow.name = "slow";
    slow.max_ttl = 2h;
    return {tiny, slow};
  }
  LeaseService& service() { return *h.engine; }
  Harness h;
};

struct FakeSubject {
  LeaseService& service() { return fake; }
  FakeLeaseService fake;
};

LeaseRequest request(const std::string& pool, const std::string& owner = "ci") {
  LeaseRequest r;
  r.pool = pool;
  r.owner = owner;
  r.ssh_keys = {kTestKey};
  return r;
}

TEMPLATE_TEST_CASE("lease service: a warm pool hands out a ready lease at once",
                   "[conformance][lease-service]", EngineSubject, FakeSubject) {
  TestType subject;
  LeaseService& s = subject.service();
  auto l = s.create_lease(request("tiny"));
  REQUIRE(l.is_ok());
  CHECK(l->state == LeaseState::kReady);
  CHECK(l->warm_handout);
  CHECK_FALSE(l->vm_name.empty());
  CHECK_FALSE(l->address.empty());
  CHECK_FALSE(l->cpus.empty());
  CHECK(l->expires_at - l->created_at == 3600s);
  auto again = s.get_lease(l->id);
  REQUIRE(again.is_ok());
  CHECK(again->vm_name == l->vm_name);
  CHECK(s.wait_lease(l->id, 0ms)->state == LeaseState::kReady);
  // Events: created, then ready, in increasing sequence.
  std::vector<Event> events = s.events_since(0, 0ms);
  uint64_t created = 0, ready = 0, last = 0;
  for (const Event& e : events) {
    CHECK(e.seq > last);
    last = e.seq;
    if (e.lease_id != l->id) continue;
    if (e.type == "lease.created") created = e.seq;
    if (e.type == "lease.ready") ready = e.seq;
  }
  CHECK(created > 0);
  CHECK(ready > created);
  // The cursor: after `last` come only newer events (the engine's refill behind the hand-out may
  // add some while we read), never this lease's again.
  for (const Event& e : s.events_since(last, 0ms)) {
    CHECK(e.seq > last);
    CHECK_FALSE((e.lease_id == l->id && (e.type == "lease.created" || e.type == "lease.ready")));
  }
}

TEMPLATE_TEST_CASE("lease service: refusals carry the right code", "[conformance][lease-service]",
                   EngineSubject, FakeSubject) {
  TestType subject;
  LeaseService& s = subject.service();
  CHECK(s.create_lease(request("nope")).status().code() == ErrorCode::kNotFound);
  LeaseRequest too_long = request("tiny");
  too_long.ttl = 9h;
  auto refused = s.create_lease(too_long);
  CHECK(refused.status().code() == ErrorCode::kUnprocessable);
  CHECK(refused.status().field() == "ttl");
  CHECK(s.get_lease("l-000000000999").status().code() == ErrorCode::kNotFound);
  CHECK(s.renew_lease("l-000000000999", 60s).status().code() == ErrorCode::kNotFound);
  CHECK(s.release_lease("l-000000000999").status().code() == ErrorCode::kNotFound);
  CHECK(s.wait_lease("l-000000000999", 0ms).status().code() == ErrorCode::kNotFound);
}

TEMPLATE_TEST_CASE("lease service: renew moves the deadline within max_ttl, release ends it",
                   "[conformance][lease-service]", EngineSubject, FakeSubject) {
  TestType subject;
  LeaseService& s = subject.service();
  Lease l = s.create_lease(request("tiny")).value();
  auto renewed = s.renew_lease(l.id, 7200s);
  REQUIRE(renewed.is_ok());
  CHECK(renewed->ttl == 7200s);
  CHECK(renewed->expires_at > l.expires_at);
  auto over = s.renew_lease(l.id, 9h);
  CHECK(over.status().code() == ErrorCode::kUnprocessable);
  CHECK(over.status().field() == "ttl");

  auto released = s.release_lease(l.id);
  REQUIRE(released.is_ok());
  // The engine may still be destroying the VM; either way it ends released.
  Lease ended = s.wait_lease(l.id, 5s).value();
  for (int i = 0; i < 500 && !is_terminal(ended.state); ++i) {
    std::this_thread::sleep_for(10ms);
    ended = s.get_lease(l.id).value();
  }
  CHECK(ended.state == LeaseState::kReleased);
  CHECK(ended.ended_at >= ended.created_at);
  CHECK(s.renew_lease(l.id, 60s).status().code() == ErrorCode::kConflict);
}

TEMPLATE_TEST_CASE("lease service: pending leases, the idempotency key and listing",
                   "[conformance][lease-service]", EngineSubject, FakeSubject) {
  TestType subject;
  LeaseService& s = subject.service();
  LeaseRequest keyed = request("slow");
  keyed.idempotency_key = "pipeline-1";
  Lease a = s.create_lease(keyed).value();
  CHECK(a.state == LeaseState::kPending);
  CHECK_FALSE(a.reason.empty());
  CHECK(s.create_lease(keyed)->id == a.id);
  Lease b = s.create_lease(request("slow", "other")).value();
  CHECK(b.id != a.id);
  // A pending lease ends at once on release.
  Lease c = s.create_lease(request("slow")).value();
  CHECK(s.release_lease(c.id)->state == LeaseState::kReleased);

  auto mine = s.list_leases({.owner = "ci"}).value();
  REQUIRE(mine.size() == 2);
  CHECK(mine[0].id == a.id);  // creation order
  CHECK(mine[1].id == c.id);
  CHECK(s.list_leases({.owner = "ci", .include_ended = false})->size() == 1);
  auto page = s.list_leases({.limit = 1}).value();
  REQUIRE(page.size() == 1);
  auto next = s.list_leases({.limit = 10, .after_id = page[0].id}).value();
  REQUIRE(next.size() == 2);
  CHECK(next[0].id == b.id);
}

TEMPLATE_TEST_CASE("lease service: a listing returns at most 1000 leases",
                   "[conformance][lease-service]", EngineSubject, FakeSubject) {
  TestType subject;
  LeaseService& s = subject.service();
  for (size_t i = 0; i < kMaxListLimit + 1; ++i) {
    REQUIRE(s.create_lease(request("slow")).is_ok());
  }
  CHECK(s.list_leases({.limit = 5000})->size() == kMaxListLimit);
  CHECK(s.list_leases({.limit = 0})->size() == 100);
}

TEMPLATE_TEST_CASE("lease service: a drained host hands out nothing until undrained",
                   "[conformance][lease-service][drain]", EngineSubject, FakeSubject) {
  using Admin = HostHealthTracker::Admin;
  TestType subject;
  LeaseService& s = subject.service();
  std::vector<HostView> hosts = s.hosts();
  REQUIRE(hosts.size() == 1);
  const std::string name = hosts[0].topology.hostname;
  CHECK(hosts[0].admin == Admin::kNone);

  Status unknown = s.set_host_admin("no-such-host", Admin::kDrain);
  CHECK(unknown.code() == ErrorCode::kNotFound);
  CHECK(unknown.field() == "name");

  REQUIRE(s.set_host_admin(name, Admin::kDrain).is_ok());
  REQUIRE(s.set_host_admin(name, Admin::kDrain).is_ok());  // again: no change
  CHECK(s.hosts()[0].admin == Admin::kDrain);
  auto l = s.create_lease(request("tiny"));
  REQUIRE(l.is_ok());
  CHECK(l->state == LeaseState::kPending);
  REQUIRE(l->queue.has_value());
  CHECK(l->queue->reason == QueueReason::kHostDraining);
  CHECK_THAT(l->reason, Catch::Contains("draining"));
  CHECK(s.get_lease(l->id)->queue->reason == QueueReason::kHostDraining);

  REQUIRE(s.set_host_admin(name, Admin::kNone).is_ok());
  CHECK(s.hosts()[0].admin == Admin::kNone);
  auto ready = s.wait_lease(l->id, 10s);
  REQUIRE(ready.is_ok());
  CHECK(ready->state == LeaseState::kReady);
  CHECK_FALSE(ready->queue.has_value());

  int draining = 0, undrained = 0;
  for (const Event& e : s.events_since(0, 0ms)) {
    draining += e.type == "host.draining" ? 1 : 0;
    undrained += e.type == "host.undrained" ? 1 : 0;
    if (e.type.starts_with("host.")) CHECK(e.owner.empty());  // admins only
  }
  CHECK(draining == 1);
  CHECK(undrained == 1);
}

}  // namespace
}  // namespace armhive
