#include "daemon/core/fleet.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/support/topologies.h"

namespace armhive {
namespace {

const TimePoint kT0 = from_unix_ms(1'800'000'000'000);

CoreAllocator allocator_for(const HostTopology& t, const CpuSetsConfig& cfg = {}) {
  Result<CpuSets> sets = make_cpu_sets(t, cfg);
  REQUIRE(sets.is_ok());
  Result<CoreAllocator> a = CoreAllocator::create(t, *sets);
  REQUIRE(a.is_ok());
  return std::move(a).value();
}

std::string numbered(const char* prefix, int i) {
  std::string name = prefix;
  name += std::to_string(i);
  return name;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// HoneyComb hc1, hc2 and ThunderX tx1, all up, each holding the "tiny" image.
Fleet honeycomb_thunderx_lab() {
  Fleet f;
  REQUIRE(f.add_host({"hc1", {{"board", "honeycomb"}}}, allocator_for(lx2160a_topology()), kT0)
              .is_ok());
  REQUIRE(f.add_host({"hc2", {{"board", "honeycomb"}}}, allocator_for(lx2160a_topology()), kT0)
              .is_ok());
  REQUIRE(f.add_host({"tx1", {{"board", "thunderx"}}}, allocator_for(thunderx_2s_topology()), kT0)
              .is_ok());
  for (const char* h : {"hc1", "hc2", "tx1"}) REQUIRE(f.set_image(h, "tiny", true).is_ok());
  return f;
}

// Brings a host into `health` the way the engine would: through its calls and the admin.
void set_health(Fleet& f, const std::string& host, HostHealth health, TimePoint now,
                const std::string& error = "call failed") {
  HostHealthTracker* t = f.health(host);
  REQUIRE(t != nullptr);
  using Admin = HostHealthTracker::Admin;
  switch (health) {
    case HostHealth::kUp:
      t->set_admin(now, Admin::kNone);
      t->call_succeeded(now);
      break;
    case HostHealth::kDegraded:
      t->set_admin(now, Admin::kNone);
      t->call_failed(now, error);
      break;
    case HostHealth::kUnreachable:
      t->set_admin(now, Admin::kNone);
      t->unreachable(now, error);
      break;
    case HostHealth::kDraining:
      t->call_succeeded(now);
      t->set_admin(now, Admin::kDrain);
      break;
    case HostHealth::kMaintenance:
      t->set_admin(now, Admin::kMaintenance);
      break;
  }
  REQUIRE(t->health() == health);
}

FleetRequest vm_of(const std::string& pool, int i, int vcpus = 2) {
  FleetRequest r;
  r.vm_name = pool + "-vm" + std::to_string(i);
  r.pool = pool;
  r.image = "tiny";
  r.vcpus = vcpus;
  return r;
}

TEST_CASE("fleet: a pool's VMs spread over its hosts, so losing one loses at most its share",
          "[fleet]") {
  Fleet f = honeycomb_thunderx_lab();
  for (int i = 0; i < 7; ++i) REQUIRE(f.place(vm_of("ci", i)).is_ok());
  std::map<std::string, int> counts = f.pool_counts("ci");
  REQUIRE(counts.size() == 3);
  for (const auto& [host, n] : counts) {
    INFO(host);
    CHECK(n <= 3);  // ceil(7 / 3)
    CHECK(n >= 2);
  }
}

TEST_CASE("fleet: each host places cores with its own topology", "[fleet]") {
  Fleet f = honeycomb_thunderx_lab();
  FleetRequest r = vm_of("hc", 0);
  r.host_labels = {{"board", "honeycomb"}};
  auto hc = f.place(r);
  REQUIRE(hc.is_ok());
  CHECK(hc->host.rfind("hc", 0) == 0);
  // LX2160A: a 2-vCPU VM gets both CPUs of one L2 pair.
  REQUIRE(hc->placement.vcpu_pins.size() == 2);
  CHECK(hc->placement.vcpu_pins[0] / 2 == hc->placement.vcpu_pins[1] / 2);

  FleetRequest t = vm_of("tx", 0, 40);
  t.host_labels = {{"board", "thunderx"}};
  auto tx = f.place(t);
  REQUIRE(tx.is_ok());
  CHECK(tx->host == "tx1");
  // ThunderX: 40 vCPUs fit in one socket's NUMA node.
  CHECK(tx->placement.numa_node.has_value());
}

TEST_CASE("fleet: labels select hosts, no match can never be satisfied", "[fleet]") {
  Fleet f = honeycomb_thunderx_lab();
  CHECK(f.hosts_matching({{"board", "honeycomb"}}) == std::vector<std::string>{"hc1", "hc2"});
  CHECK(f.hosts_matching({}).size() == 3);
  CHECK(f.hosts_matching({{"board", "altra"}}).empty());
  CHECK(f.hosts_matching({}, "x86_64").empty());

  FleetRequest r = vm_of("altra", 0);
  r.host_labels = {{"board", "altra"}};
  auto placed = f.place(r);
  REQUIRE(!placed.is_ok());
  CHECK(placed.status().code() == ErrorCode::kUnprocessable);
  CHECK(contains(placed.status().message(), "hc1: labels do not match board=altra"));

  FleetRequest huge = vm_of("ci", 1, 200);  // more vCPUs than any host has
  auto too_big = f.place(huge);
  REQUIRE(!too_big.is_ok());
  CHECK(too_big.status().code() == ErrorCode::kUnprocessable);
}

TEST_CASE("fleet: only up and degraded hosts take VMs, up ones first", "[fleet]") {
  Fleet f = honeycomb_thunderx_lab();
  set_health(f, "hc1", HostHealth::kDraining, kT0);
  set_health(f, "tx1", HostHealth::kUnreachable, kT0, "keepalive timed out");
  CHECK(f.host("tx1")->health.last_error() == "keepalive timed out");
  set_health(f, "hc2", HostHealth::kDegraded, kT0, "virDomainCreateXML failed");
  // hc2 is the only host taking VMs: degraded hosts are used when no up host is left.
  for (int i = 0; i < 3; ++i) {
    auto p = f.place(vm_of("ci", i));
    REQUIRE(p.is_ok());
    CHECK(p->host == "hc2");
  }
  // Up before degraded, even when the up host holds more of the pool.
  set_health(f, "hc1", HostHealth::kDegraded, kT0);
  set_health(f, "hc2", HostHealth::kUp, kT0);
  auto p = f.place(vm_of("ci", 3));
  REQUIRE(p.is_ok());
  CHECK(p->host == "hc2");

  set_health(f, "hc1", HostHealth::kMaintenance, kT0);
  set_health(f, "hc2", HostHealth::kDraining, kT0);
  auto none = f.place(vm_of("ci", 4));
  REQUIRE(!none.is_ok());
  CHECK(none.status().code() == ErrorCode::kResourceExhausted);
  CHECK(contains(none.status().message(), "hc1: host is maintenance"));
  CHECK(contains(none.status().message(), "hc2: host is draining"));
  CHECK(contains(none.status().message(), "tx1: host is unreachable"));
}

TEST_CASE("fleet: a host lacking the pool's image is not offered until it has it", "[fleet]") {
  Fleet f;
  REQUIRE(f.add_host({"hc1", {}}, allocator_for(lx2160a_topology()), kT0).is_ok());
  auto waiting = f.place(vm_of("ci", 0));
  REQUIRE(!waiting.is_ok());
  CHECK(waiting.status().code() == ErrorCode::kResourceExhausted);
  CHECK(contains(waiting.status().message(), "image tiny not on the host yet"));
  REQUIRE(f.set_image("hc1", "tiny", true).is_ok());
  CHECK(f.place(vm_of("ci", 0)).is_ok());
  REQUIRE(f.set_image("hc1", "tiny", false).is_ok());
  CHECK(!f.place(vm_of("ci", 1)).is_ok());
  CHECK(f.set_image("nope", "tiny", true).code() == ErrorCode::kNotFound);
}

TEST_CASE("fleet: a host the caller holds takes nothing, with the caller's reason", "[fleet]") {
  Fleet f = honeycomb_thunderx_lab();
  FleetRequest r = vm_of("ci", 0);
  r.held_hosts = {{"hc1", "its domains are not listed yet"}, {"hc2", "boots backing off"}};
  auto placed = f.place(r);
  REQUIRE(placed.is_ok());
  CHECK(placed->host == "tx1");
  r = vm_of("ci", 1);
  r.held_hosts = {{"hc1", "its domains are not listed yet"},
                  {"hc2", "boots backing off"},
                  {"tx1", "at max_starting"}};
  auto waiting = f.place(r);
  REQUIRE(!waiting.is_ok());
  CHECK(waiting.status().code() == ErrorCode::kResourceExhausted);
  CHECK(contains(waiting.status().message(), "hc1: its domains are not listed yet"));
  CHECK(contains(waiting.status().message(), "tx1: at max_starting"));
}

TEST_CASE("fleet: removing a host with VMs says drain first", "[fleet]") {
  Fleet f = honeycomb_thunderx_lab();
  FleetRequest r = vm_of("tx", 0);
  r.host_labels = {{"board", "thunderx"}};
  REQUIRE(f.place(r).is_ok());
  Status busy = f.remove_host("tx1");
  CHECK(busy.code() == ErrorCode::kConflict);
  CHECK(contains(busy.message(), "drain first"));
  REQUIRE(f.release(r.vm_name).is_ok());
  CHECK(f.remove_host("tx1").is_ok());
  CHECK(f.remove_host("tx1").code() == ErrorCode::kNotFound);
  CHECK(f.host_names() == std::vector<std::string>{"hc1", "hc2"});
  CHECK(f.add_host({"hc1", {}}, allocator_for(lx2160a_topology()), kT0).code() ==
        ErrorCode::kConflict);
  CHECK(f.add_host({"bad name!", {}}, allocator_for(lx2160a_topology()), kT0).code() ==
        ErrorCode::kInvalidArgument);
}

TEST_CASE("fleet: unreachable hosts pass their grace period by the clock", "[fleet]") {
  Fleet f = honeycomb_thunderx_lab();
  set_health(f, "hc1", HostHealth::kUnreachable, kT0 + Seconds(10));
  // A repeated report does not restart the grace period.
  set_health(f, "hc1", HostHealth::kUnreachable, kT0 + Seconds(50));
  CHECK(f.unreachable_past_grace(kT0 + Seconds(60), Seconds(60)).empty());
  CHECK(f.unreachable_past_grace(kT0 + Seconds(71), Seconds(60)) ==
        std::vector<std::string>{"hc1"});
  set_health(f, "hc1", HostHealth::kUp, kT0 + Seconds(72));
  CHECK(f.unreachable_past_grace(kT0 + Seconds(500), Seconds(60)).empty());
}

TEST_CASE("fleet: adopt records running VMs on their host", "[fleet]") {
  Fleet f = honeycomb_thunderx_lab();
  REQUIRE(f.adopt("hc2", "ci-old", "ci", {4, 5}, CpuPolicy::kDedicated).is_ok());
  REQUIRE(f.host_of("ci-old") != nullptr);
  CHECK(*f.host_of("ci-old") == "hc2");
  CHECK(f.pool_counts("ci") == std::map<std::string, int>{{"hc2", 1}});
  // Double-booked CPUs are reported, and the VM still holds what it could claim.
  CHECK(f.adopt("hc2", "ci-dup", "ci", {5, 6}, CpuPolicy::kDedicated).code() ==
        ErrorCode::kConflict);
  CHECK(f.host_of("ci-dup") != nullptr);
  CHECK(f.adopt("nope", "x", "ci", {1}, CpuPolicy::kDedicated).code() == ErrorCode::kNotFound);
  CHECK(f.adopt("hc1", "ci-old", "ci", {2}, CpuPolicy::kDedicated).code() == ErrorCode::kConflict);
  // The next VM of the pool goes elsewhere (hc2 already has two).
  auto next = f.place(vm_of("ci", 0));
  REQUIRE(next.is_ok());
  CHECK(next->host != "hc2");
}

// Property test: random fleets and pools, random operations. After every step:
// - a placed VM's host took new VMs, had the image, matched the labels and the architecture;
// - it held no more VMs of the pool than any other host of the same health that could have
//   taken the VM (the spread bound), and up hosts were preferred to degraded ones;
// - a refused placement had no usable host;
// - no dedicated CPU is held by two VMs, shared CPUs stay within the overcommit, and the fleet's
//   record of VMs matches the model's.
TEST_CASE("fleet: property: random fleets never over-commit and keep the spread bound",
          "[fleet][property]") {
  const std::vector<std::string> images = {"tiny", "debian"};
  const std::vector<std::string> boards = {"honeycomb", "thunderx", "altra"};
  for (uint32_t seed = 1; seed <= 150; ++seed) {
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
    Fleet f;
    int host_count = 1 + pick(4);
    std::map<std::string, int> shared_capacity;  // host -> |shared set|
    for (int h = 0; h < host_count; ++h) {
      HostTopology t;
      switch (pick(3)) {
        case 0:
          t = lx2160a_topology();
          break;
        case 1:
          t = thunderx_2s_topology();
          break;
        default:
          t = make_topology(1 + pick(2), 1 + pick(3), 2 + pick(2));
          t.arch = "aarch64";
      }
      CpuSetsConfig cfg;
      int cpus = static_cast<int>(t.cpus.size());
      if (cpus >= 4 && pick(2) == 0) {  // half of the bigger hosts get a shared set...
        cfg.shared = std::to_string(cpus - 2) + "-" + std::to_string(cpus - 1);
        cfg.shared_pools = true;
        // ...unless it takes a node's housekeeping CPU or its last dedicated one.
        if (!make_cpu_sets(t, cfg).is_ok()) cfg = {};
      }
      CoreAllocator cores = allocator_for(t, cfg);
      std::string name = numbered("h", h);
      shared_capacity[name] = static_cast<int>(cores.sets().shared.size());
      REQUIRE(f.add_host({name, {{"board", boards[pick(3)]}}}, std::move(cores), kT0).is_ok());
      for (const std::string& img : images) {
        if (pick(3) != 0) REQUIRE(f.set_image(name, img, true).is_ok());
      }
    }
    struct Pool {
      std::string name;
      std::map<std::string, std::string> labels;
      std::string image;
      int vcpus;
      CpuPolicy policy;
      double overcommit;
    };
    std::vector<Pool> pools;
    for (int p = 0, n = 1 + pick(3); p < n; ++p) {
      Pool pool{numbered("p", p), {}, images[pick(2)], 1 + pick(4), CpuPolicy::kDedicated, 1.0};
      if (pick(3) == 0) pool.labels = {{"board", boards[pick(3)]}};
      if (pick(4) == 0) {
        pool.policy = CpuPolicy::kShared;
        pool.overcommit = 1.0 + pick(3);
      }
      pools.push_back(pool);
    }
    double max_overcommit = 1.0;
    for (const Pool& p : pools) max_overcommit = std::max(max_overcommit, p.overcommit);

    std::map<std::string, std::string> placed;  // VM -> host, the model
    int next_vm = 0;
    for (int step = 0; step < 120; ++step) {
      int op = pick(10);
      if (op < 6) {
        const Pool& pool = pools[pick(static_cast<int>(pools.size()))];
        FleetRequest r;
        r.vm_name = numbered("vm", next_vm++);
        r.pool = pool.name;
        r.image = pool.image;
        r.host_labels = pool.labels;
        r.vcpus = pool.vcpus;
        r.policy = pool.policy;
        r.overcommit = pool.overcommit;
        r.strategy = pick(2) ? PlacementStrategy::kPack : PlacementStrategy::kSpread;
        std::map<std::string, bool> usable;
        for (const HostVerdict& v : f.verdicts(r)) usable[v.host] = v.status.is_ok();
        std::map<std::string, int> before = f.pool_counts(pool.name);
        auto result = f.place(r);
        if (!result.is_ok()) {
          for (const auto& [h, ok] : usable) CHECK_FALSE(ok);
          continue;
        }
        const std::string& chosen = result->host;
        REQUIRE(usable[chosen]);
        const FleetHostState* hs = f.host(chosen);
        CHECK(takes_new_vms(hs->health.health()));
        CHECK(hs->images.count(pool.image) == 1);
        CHECK(labels_match(pool.labels, hs->labels));
        for (const auto& [h, ok] : usable) {
          if (!ok || h == chosen) continue;
          HostHealth other = f.host(h)->health.health();
          if (hs->health.health() == HostHealth::kDegraded) CHECK(other != HostHealth::kUp);
          if (other == hs->health.health()) CHECK(before[chosen] <= before[h]);
        }
        placed[r.vm_name] = chosen;
      } else if (op < 8 && !placed.empty()) {
        auto it = placed.begin();
        std::advance(it, pick(static_cast<int>(placed.size())));
        REQUIRE(f.release(it->first).is_ok());
        placed.erase(it);
      } else if (op == 8) {
        std::string h = numbered("h", pick(host_count));
        auto health = static_cast<HostHealth>(pick(5));
        set_health(f, h, health, kT0 + Seconds(step));
      } else {
        std::string h = numbered("h", pick(host_count));
        REQUIRE(f.set_image(h, images[pick(2)], pick(2) == 0).is_ok());
      }

      // Invariants over the whole fleet.
      size_t recorded = 0;
      for (const std::string& h : f.host_names()) {
        int shared_vcpus = 0;
        for (const CpuUsage& u : f.cores(h)->usage()) {
          if (u.role == CpuRole::kDedicated) CHECK(u.vms.size() <= 1);
          if (u.role == CpuRole::kShared) shared_vcpus += u.vcpus;
          if (u.role == CpuRole::kHousekeeping || u.role == CpuRole::kUnassigned) {
            CHECK(u.vms.empty());
          }
        }
        CHECK(shared_vcpus <= static_cast<int>(std::floor(max_overcommit * shared_capacity[h])));
        recorded += f.host(h)->vm_pool.size();
      }
      CHECK(recorded == placed.size());
      for (const auto& [vm, h] : placed) {
        REQUIRE(f.host_of(vm) != nullptr);
        CHECK(*f.host_of(vm) == h);
        CHECK(f.cores(h)->find(vm) != nullptr);
      }
    }
  }
}

// With room everywhere, the counts of a pool on any two usable hosts differ by at most one.
TEST_CASE("fleet: property: with room everywhere a pool is balanced to within one VM",
          "[fleet][property]") {
  for (uint32_t seed = 1; seed <= 50; ++seed) {
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    Fleet f;
    int hosts = 2 + static_cast<int>(rng() % 4);
    for (int h = 0; h < hosts; ++h) {
      HostTopology t = (rng() % 2) ? lx2160a_topology() : thunderx_2s_topology();
      std::string name = numbered("h", h);
      REQUIRE(f.add_host({name, {}}, allocator_for(t), kT0).is_ok());
      REQUIRE(f.set_image(name, "tiny", true).is_ok());
    }
    int vms = 1 + static_cast<int>(rng() % 12);  // 12 x 1 vCPU fits on any of these hosts
    for (int i = 0; i < vms; ++i) REQUIRE(f.place(vm_of("ci", i, 1)).is_ok());
    std::vector<int> counts;
    for (const std::string& h : f.host_names()) counts.push_back(f.pool_counts("ci")[h]);
    auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
    CHECK(*hi - *lo <= 1);
    CHECK(*hi <= (vms + hosts - 1) / hosts);  // losing a host loses at most its share
  }
}

TEST_CASE("fleet: a pool's configuration gives its VMs' requests", "[fleet]") {
  PoolConfig pool;
  pool.name = "tx";
  pool.image = "debian";
  pool.vcpus = 4;
  pool.cpu_policy = CpuPolicy::kShared;
  pool.overcommit = 2.0;
  pool.host_labels = {{"board", "thunderx"}};
  FleetRequest r = fleet_request_for(pool, "tx-1", PlacementStrategy::kSpread);
  CHECK(r.vm_name == "tx-1");
  CHECK(r.pool == "tx");
  CHECK(r.image == "debian");
  CHECK(r.vcpus == 4);
  CHECK(r.policy == CpuPolicy::kShared);
  CHECK(r.overcommit == 2.0);
  CHECK(r.strategy == PlacementStrategy::kSpread);
  CHECK(r.host_labels == pool.host_labels);
}

}  // namespace
}  // namespace armhive
