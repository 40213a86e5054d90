// What a job used (issue 32 item 5), as the engine measures it over the fake hypervisor's
// counters: from the hand-out, by one bulk call per host, with a last sample before the VM is
// destroyed, frozen once the lease ended, kept across a restart, and summed in SQL.
#include <catch2/catch.hpp>
#include <thread>

#include "daemon/engine/lease_engine.h"
#include "tests/support/engine_harness.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kGiB = uint64_t{1} << 30;

Lease lease_now(Harness& h, const std::string& id) { return h.engine->get_lease(id).value(); }

TEST_CASE("usage: a lease counts what its VM used from the hand-out on", "[engine][usage]") {
  Harness h({ci_pool(1, 4)});
  h.start();
  REQUIRE(h.settle(1));
  // The warm VM burned CPU, wrote and talked while booting: not the lease's.
  std::string warm = h.hypervisor->domains().begin()->first;
  REQUIRE(h.hypervisor->add_usage(warm, 30s, 50'000'000, 7'000, 3'000));

  Lease l = h.lease();
  REQUIRE(l.state == LeaseState::kReady);
  REQUIRE(l.vm_name == warm);
  REQUIRE(l.usage);
  CHECK(l.usage->cpu_ns == 0);
  CHECK(l.usage->started_at == l.ready_at);
  CHECK_FALSE(l.usage->final);
  CHECK(l.usage->peak_rss_bytes == (uint64_t{256} << 19));  // the fake's rss: half the memory

  // The job: 12 s of CPU over 10 s, 1 GiB written, traffic both ways, a memory peak.
  h.clock.advance(10s);
  REQUIRE(h.hypervisor->add_usage(l.vm_name, 12s, kGiB, 1000, 500));
  REQUIRE(h.hypervisor->set_rss(l.vm_name, 200u << 20));
  h.engine->sample_usage();
  Lease sampled = lease_now(h, l.id);
  REQUIRE(sampled.usage);
  CHECK(sampled.usage->cpu_seconds() == Approx(12));
  CHECK(sampled.usage->wall_seconds() == Approx(10));
  CHECK(sampled.usage->disk_write_bytes == kGiB);
  CHECK(sampled.usage->net_rx_bytes == 1000);
  CHECK(sampled.usage->net_tx_bytes == 500);
  CHECK(sampled.usage->peak_rss_bytes == (200u << 20));
  CHECK(sampled.usage->samples == 1);
  // Saved with the lease, and counted per pool and owner.
  auto stored = h.store->find(l.id).value();
  REQUIRE(stored->usage);
  CHECK(stored->usage->cpu_ns == 12'000'000'000ULL);
  Metrics::Labels labels{{"pool", "ci"}, {"owner", "ci-token"}};
  CHECK(h.metrics.value("armhive_usage_cpu_seconds_total", labels) == Approx(12));
  CHECK(h.metrics.value("armhive_usage_wall_seconds_total", labels) == Approx(10));
  CHECK(h.metrics.value("armhive_usage_disk_write_bytes_total", labels) == Approx(kGiB));
  CHECK(h.metrics.value("armhive_usage_net_rx_bytes_total", labels) == Approx(1000));
  CHECK(h.metrics.value("armhive_usage_net_tx_bytes_total", labels) == Approx(500));
}

TEST_CASE("usage: the last sample is taken before the VM is destroyed, then it is final",
          "[engine][usage]") {
  Harness h({ci_pool(1, 4)});
  h.start();
  REQUIRE(h.settle(1));
  Lease l = h.lease();
  h.clock.advance(10s);
  REQUIRE(h.hypervisor->add_usage(l.vm_name, 5s));
  h.engine->sample_usage();
  // Burned after the last periodic sample, before the release.
  h.clock.advance(3s);
  REQUIRE(h.hypervisor->add_usage(l.vm_name, 2s, 100));
  REQUIRE(h.engine->release_lease(l.id).is_ok());
  REQUIRE(h.engine->wait_idle(5s));
  Lease ended = lease_now(h, l.id);
  CHECK(ended.state == LeaseState::kReleased);
  REQUIRE(ended.usage);
  CHECK(ended.usage->final);
  CHECK(ended.usage->cpu_seconds() == Approx(7));
  CHECK(ended.usage->disk_write_bytes == 100);
  CHECK(ended.usage->wall_seconds() == Approx(13));
  CHECK_FALSE(h.hypervisor->domains().count(l.vm_name));
  auto stored = h.store->find(l.id).value();
  REQUIRE(stored->usage);
  CHECK(stored->usage->final);
  CHECK(stored->usage->cpu_ns == 7'000'000'000ULL);
  // Later samples of the host leave it alone.
  h.clock.advance(10s);
  h.engine->sample_usage();
  CHECK(lease_now(h, l.id).usage->cpu_seconds() == Approx(7));
}

TEST_CASE("usage: one bulk call per host samples every ready lease", "[engine][usage]") {
  Harness h({ci_pool(0, 4)});
  h.start();
  Lease a = h.wait_ready(h.lease().id);
  Lease b = h.wait_ready(h.lease().id);
  REQUIRE(h.engine->wait_idle(5s));
  int before = h.hypervisor->counter_calls();
  REQUIRE(h.hypervisor->add_usage(a.vm_name, 1s));
  REQUIRE(h.hypervisor->add_usage(b.vm_name, 3s));
  h.engine->sample_usage();
  CHECK(h.hypervisor->counter_calls() == before + 1);
  auto request = h.hypervisor->counter_requests().back();
  CHECK(std::set<std::string>(request.begin(), request.end()) ==
        std::set<std::string>{a.vm_name, b.vm_name});
  CHECK(lease_now(h, a.id).usage->cpu_seconds() == Approx(1));
  CHECK(lease_now(h, b.id).usage->cpu_seconds() == Approx(3));
}

TEST_CASE("usage: a QEMU restart resets the counters and nothing is lost or negative",
          "[engine][usage]") {
  Harness h({ci_pool(1, 4)});
  h.start();
  REQUIRE(h.settle(1));
  Lease l = h.lease();
  REQUIRE(h.hypervisor->add_usage(l.vm_name, 4s, 1000));
  h.engine->sample_usage();
  REQUIRE(h.hypervisor->restart_qemu(l.vm_name));
  REQUIRE(h.hypervisor->add_usage(l.vm_name, 1s, 10));
  h.engine->sample_usage();
  Lease after = lease_now(h, l.id);
  CHECK(after.usage->cpu_seconds() == Approx(5));
  CHECK(after.usage->disk_write_bytes == 1010);
  // Counters that simply go backwards (no new run id) are a reset too.
  UsageCounters low = h.hypervisor->domains().at(l.vm_name).counters;
  low.cpu_ns = 500'000'000;
  REQUIRE(h.hypervisor->set_counters(l.vm_name, low));
  h.engine->sample_usage();
  CHECK(lease_now(h, l.id).usage->cpu_seconds() == Approx(5.5));
}

TEST_CASE("usage: measuring goes on across a restart of armhived", "[engine][usage]") {
  Harness h({ci_pool(1, 4)});
  h.start();
  REQUIRE(h.settle(1));
  Lease l = h.lease();
  REQUIRE(h.hypervisor->add_usage(l.vm_name, 5s));
  h.engine->sample_usage();
  h.make_engine();  // kill -9 and start: the VM kept running and burning
  REQUIRE(h.hypervisor->add_usage(l.vm_name, 3s));
  h.start();
  REQUIRE(h.engine->wait_idle(5s));
  h.engine->sample_usage();
  Lease after = lease_now(h, l.id);
  REQUIRE(after.usage);
  CHECK(after.usage->cpu_seconds() == Approx(8));
  CHECK(after.usage->samples == 2);
}

TEST_CASE("usage: a failing statistics call changes nothing and degrades the host",
          "[engine][usage][faults]") {
  Harness h({ci_pool(1, 4)});
  h.start();
  REQUIRE(h.settle(1));
  Lease l = h.lease();
  REQUIRE(h.hypervisor->add_usage(l.vm_name, 2s));
  h.faults.fail_method("vm_counters", FaultKind::kTransient);
  h.faults.arm();
  h.engine->sample_usage();
  CHECK(lease_now(h, l.id).usage->cpu_ns == 0);
  CHECK(h.engine->hosts().at(0).state == HostState::kDegraded);
  CHECK_THAT(h.engine->hosts().at(0).last_error, Catch::Contains("hypervisor.vm_counters"));
  h.faults.clear_method("vm_counters");
  h.faults.disarm();
  h.engine->sample_usage();
  CHECK(lease_now(h, l.id).usage->cpu_seconds() == Approx(2));
}

TEST_CASE("usage: no baseline at hand-out (counters unreadable): the first sample is one",
          "[engine][usage][faults]") {
  Harness h({ci_pool(1, 4)});
  h.start();
  REQUIRE(h.settle(1));
  std::string warm = h.hypervisor->domains().begin()->first;
  REQUIRE(h.hypervisor->add_usage(warm, 30s));
  h.faults.fail_method("vm_counters", FaultKind::kTransient);
  h.faults.arm();
  Lease l = h.lease();
  h.faults.clear_method("vm_counters");
  h.faults.disarm();
  REQUIRE(l.state == LeaseState::kReady);  // usage never holds up a hand-out
  REQUIRE(l.usage);
  h.engine->sample_usage();  // the base: the warm VM's 30 s are not the lease's
  REQUIRE(h.hypervisor->add_usage(l.vm_name, 2s));
  h.engine->sample_usage();
  CHECK(lease_now(h, l.id).usage->cpu_seconds() == Approx(2));
}

TEST_CASE("usage: the report sums ended and running leases in SQL", "[engine][usage]") {
  Harness h({ci_pool(1, 4)});
  h.start();
  REQUIRE(h.settle(1));
  Lease a = h.lease({.pool = "ci", .labels = {{"team", "arm"}}, .owner = "ci-a"});
  REQUIRE(h.settle(1));
  Lease b = h.lease({.pool = "ci", .owner = "ci-b"});
  REQUIRE(h.hypervisor->add_usage(a.vm_name, 6s, 100));
  REQUIRE(h.hypervisor->add_usage(b.vm_name, 4s, 50));
  h.clock.advance(10s);
  h.engine->sample_usage();
  REQUIRE(h.engine->release_lease(a.id).is_ok());
  REQUIRE(h.engine->wait_idle(5s));

  UsageQuery q;
  q.since = h.clock.now() - 1h;
  q.until = h.clock.now() + 1s;
  auto rows = h.engine->usage(q);
  REQUIRE(rows.is_ok());
  REQUIRE(rows->size() == 2);
  CHECK(rows->at(0).group == "ci-a");
  CHECK(rows->at(0).cpu_ns == 6'000'000'000ULL);
  CHECK(rows->at(0).wall_ms == 10'000);
  CHECK(rows->at(1).group == "ci-b");
  CHECK(rows->at(1).disk_write_bytes == 50);
  q.group_by = UsageGroupBy::kLabel;
  q.label = "team";
  rows = h.engine->usage(q);
  REQUIRE(rows.is_ok());
  REQUIRE(rows->size() == 2);
  CHECK(rows->at(0).group == "");
  CHECK(rows->at(1).group == "arm");
  CHECK(rows->at(1).leases == 1);
}

TEST_CASE("usage: the engine samples every usage_period on its own", "[engine][usage]") {
  Harness h({ci_pool(1, 4)});
  h.options.usage_period = 20ms;
  h.make_engine();
  h.start();
  REQUIRE(h.settle(1));
  Lease l = h.lease();
  REQUIRE(h.hypervisor->add_usage(l.vm_name, 9s));
  bool seen = false;
  for (int i = 0; i < 500 && !seen; ++i) {
    std::this_thread::sleep_for(10ms);
    seen = lease_now(h, l.id).usage->cpu_ns == 9'000'000'000ULL;
  }
  CHECK(seen);
}

}  // namespace
}  // namespace armhive
