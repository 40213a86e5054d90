#include "daemon/core/host_health.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

const TimePoint kT0 = from_unix_ms(1'800'000'000'000);
using Admin = HostHealthTracker::Admin;

TEST_CASE("host health: calls move a host between up, degraded and unreachable", "[host_health]") {
  HostHealthTracker h(kT0);
  CHECK(h.health() == HostHealth::kUp);
  CHECK(h.last_error().empty());

  h.call_failed(kT0 + Seconds(1), "virDomainCreateXML: no space left on device");
  CHECK(h.health() == HostHealth::kDegraded);
  CHECK(h.changed_at() == kT0 + Seconds(1));
  CHECK_FALSE(h.unreachable_since().has_value());

  h.unreachable(kT0 + Seconds(5), "keepalive timed out");
  CHECK(h.health() == HostHealth::kUnreachable);
  CHECK(h.unreachable_since() == kT0 + Seconds(5));
  CHECK(h.last_error() == "keepalive timed out");
  // Further reports while unreachable do not restart the grace period.
  h.unreachable(kT0 + Seconds(30), "virConnectOpen: connection refused");
  CHECK(h.unreachable_since() == kT0 + Seconds(5));
  CHECK(h.changed_at() == kT0 + Seconds(5));
  CHECK_FALSE(h.past_grace(kT0 + Seconds(65), Seconds(60)));
  CHECK(h.past_grace(kT0 + Seconds(66), Seconds(60)));

  h.call_succeeded(kT0 + Seconds(70));
  CHECK(h.health() == HostHealth::kUp);
  CHECK_FALSE(h.unreachable_since().has_value());
  CHECK_FALSE(h.past_grace(kT0 + Seconds(500), Seconds(60)));
  // The last failure stays shown: it says what went wrong.
  CHECK(h.last_error() == "virConnectOpen: connection refused");
  CHECK(h.last_error_at() == kT0 + Seconds(30));

  // A failing call that answers means the host is reachable again, but degraded.
  h.unreachable(kT0 + Seconds(80), "call missed its deadline");
  h.call_failed(kT0 + Seconds(81), "virDomainDestroy: domain is locked");
  CHECK(h.health() == HostHealth::kDegraded);
  CHECK_FALSE(h.unreachable_since().has_value());
}

TEST_CASE("host health: the admin's drain and maintenance fold in", "[host_health]") {
  HostHealthTracker h(kT0);
  h.set_admin(kT0 + Seconds(1), Admin::kDrain);
  CHECK(h.health() == HostHealth::kDraining);
  CHECK_FALSE(takes_new_vms(h.health()));
  // Degraded calls while draining: still draining (no new VMs either way).
  h.call_failed(kT0 + Seconds(2), "virDomainCreateXML: failed");
  CHECK(h.health() == HostHealth::kDraining);
  // Unreachable while draining: its leases must show it, and the grace period runs.
  h.unreachable(kT0 + Seconds(3), "keepalive timed out");
  CHECK(h.health() == HostHealth::kUnreachable);
  CHECK(h.unreachable_since() == kT0 + Seconds(3));
  h.call_succeeded(kT0 + Seconds(4));
  CHECK(h.health() == HostHealth::kDraining);

  // Maintenance wins over everything: the admin took the host out.
  h.set_admin(kT0 + Seconds(5), Admin::kMaintenance);
  h.unreachable(kT0 + Seconds(6), "libvirtd stopped");
  CHECK(h.health() == HostHealth::kMaintenance);
  CHECK(h.changed_at() == kT0 + Seconds(5));

  h.set_admin(kT0 + Seconds(7), Admin::kNone);
  CHECK(h.health() == HostHealth::kUnreachable);
  h.call_succeeded(kT0 + Seconds(8));
  CHECK(h.health() == HostHealth::kUp);
  CHECK(takes_new_vms(h.health()));
  CHECK(h.admin() == Admin::kNone);
}

TEST_CASE("host health: names round-trip", "[host_health]") {
  for (HostHealth h : {HostHealth::kUp, HostHealth::kDegraded, HostHealth::kUnreachable,
                       HostHealth::kDraining, HostHealth::kMaintenance}) {
    CHECK(host_health_from_string(to_string(h)) == h);
  }
  CHECK(!host_health_from_string("sideways").has_value());
  CHECK(!takes_new_vms(HostHealth::kUnreachable));
  CHECK(!takes_new_vms(HostHealth::kMaintenance));
  CHECK(takes_new_vms(HostHealth::kDegraded));
}

}  // namespace
}  // namespace armhive
