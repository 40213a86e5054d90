#include "daemon/core/placement.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/support/topologies.h"

namespace armhive {
namespace {

CoreAllocator make_allocator(const HostTopology& t, const CpuSetsConfig& cfg = {}) {
  Result<CpuSets> sets = make_cpu_sets(t, cfg);
  REQUIRE(sets.is_ok());
  Result<CoreAllocator> a = CoreAllocator::create(t, *sets);
  REQUIRE(a.is_ok());
  return std::move(a).value();
}

PlacementRequest dedicated(const std::string& name, int vcpus,
                           PlacementStrategy s = PlacementStrategy::kPack) {
  PlacementRequest r;
  r.vm_name = name;
  r.vcpus = vcpus;
  r.strategy = s;
  return r;
}

PlacementRequest shared(const std::string& name, int vcpus, double overcommit) {
  PlacementRequest r;
  r.vm_name = name;
  r.vcpus = vcpus;
  r.policy = CpuPolicy::kShared;
  r.overcommit = overcommit;
  return r;
}

// "prefix<i>", appended rather than `"prefix" + std::to_string(i)`, which GCC 12 at -O3 reports
// as a -Wrestrict false positive.
std::string numbered(const char* prefix, int i) {
  std::string name = prefix;
  name += std::to_string(i);
  return name;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::set<int> nodes_of(const HostTopology& t, const std::vector<int>& cpus) {
  std::set<int> out;
  for (int c : cpus) out.insert(t.cpu(c)->numa_node);
  return out;
}

// Free dedicated CPUs per NUMA node and per cluster, from the allocator's own usage report.
struct FreeView {
  std::map<int, int> per_node;
  std::map<int, std::pair<int, int>> per_cluster;  // cluster -> (free, dedicated size)
  int total = 0;
};

FreeView free_view(const CoreAllocator& a) {
  FreeView v;
  for (const CpuUsage& u : a.usage()) {
    if (u.role != CpuRole::kDedicated) continue;
    const HostCpu* c = a.topology().cpu(u.cpu);
    auto& cl = v.per_cluster[c->cluster];
    cl.second += 1;
    if (u.vms.empty()) {
      v.per_node[c->numa_node] += 1;
      cl.first += 1;
      v.total += 1;
    }
  }
  return v;
}

// Invariants a user checks on the core map at any moment.
void check_invariants(const CoreAllocator& a, const std::map<std::string, Placement>& model,
                      const CpuSets& sets, double shared_ratio) {
  std::map<int, std::string> held;
  int shared_vcpus = 0;
  for (const auto& [vm, p] : model) {
    REQUIRE(a.find(vm) != nullptr);
    CHECK(a.find(vm)->vcpu_pins == p.vcpu_pins);
    for (int e : p.emulator_cpus) {
      CHECK(sets.is_housekeeping(e));  // never on a guest's core
    }
    if (p.policy == CpuPolicy::kShared) {
      shared_vcpus += static_cast<int>(p.vcpu_pins.size());
      for (int c : p.vcpu_pins) CHECK(sets.is_shared(c));
      continue;
    }
    for (int c : p.vcpu_pins) {
      CHECK(sets.is_dedicated(c));
      auto [it, inserted] = held.emplace(c, vm);
      INFO("CPU " << c << " held by " << it->second << " and " << vm);
      CHECK(inserted);  // never double-booked
    }
  }
  for (const auto& [vm, p] : model) {
    for (int e : p.emulator_cpus) CHECK_FALSE(held.contains(e));  // emulator off guest cores
  }
  for (const auto& [vm, p] : model) CHECK(a.find(vm) != nullptr);  // extras show in usage() below
  CHECK(shared_vcpus == a.shared_vcpus_in_use());
  CHECK(shared_vcpus <= static_cast<int>(shared_ratio * static_cast<double>(sets.shared.size())));
  for (const CpuUsage& u : a.usage()) {
    if (u.role != CpuRole::kDedicated) continue;
    auto it = held.find(u.cpu);
    if (it == held.end()) {
      CHECK(u.vms.empty());
    } else {
      CHECK(u.vms == std::vector<std::string>{it->second});
    }
  }
  double f = a.fragmentation();
  CHECK(f >= 0.0);
  CHECK(f <= 1.0);
}

// Random allocate/release sequences; checks the placement rules on every step.
void run_random_sequences(const HostTopology& topology, const CpuSetsConfig& cfg, int max_vcpus,
                          double shared_ratio, int sequences, uint32_t seed) {
  CpuSets sets = make_cpu_sets(topology, cfg).value();
  std::mt19937 rng(seed);
  for (int seq = 0; seq < sequences; ++seq) {
    CoreAllocator a = make_allocator(topology, cfg);
    std::map<std::string, Placement> model;
    const int steps = 40 + static_cast<int>(rng() % 40);
    for (int step = 0; step < steps; ++step) {
      INFO("sequence " << seq << " step " << step);
      const bool release = !model.empty() && rng() % 3 == 0;
      if (release) {
        auto it = model.begin();
        std::advance(it, static_cast<long>(rng() % model.size()));
        REQUIRE(a.release(it->first).is_ok());
        model.erase(it);
      } else {
        const bool want_shared = !sets.shared.empty() && rng() % 4 == 0;
        const int vcpus = 1 + static_cast<int>(rng() % static_cast<uint32_t>(max_vcpus));
        const std::string name = "vm-" + std::to_string(seq) + "-" + std::to_string(step);
        PlacementRequest req =
            want_shared
                ? shared(name, std::min<int>(vcpus, static_cast<int>(sets.shared.size())),
                         shared_ratio)
                : dedicated(name, vcpus,
                            rng() % 5 == 0 ? PlacementStrategy::kSpread : PlacementStrategy::kPack);
        const FreeView before = free_view(a);
        const int shared_before = a.shared_vcpus_in_use();
        Result<Placement> p = a.allocate(req);
        if (!p.is_ok()) {
          INFO(p.status().to_string());
          CHECK(p.status().code() == ErrorCode::kResourceExhausted);
          CHECK_FALSE(p.status().message().empty());
          if (want_shared) {
            CHECK(shared_before + req.vcpus >
                  static_cast<int>(shared_ratio * static_cast<double>(sets.shared.size())));
          } else {
            CHECK(before.total < req.vcpus);  // refused only when there really is no room
          }
        } else {
          REQUIRE(static_cast<int>(p->vcpu_pins.size()) == req.vcpus);
          if (!want_shared) {
            int most_free = 0;
            for (const auto& [node, f] : before.per_node) most_free = std::max(most_free, f);
            if (most_free >= req.vcpus) {
              // A node had room: the VM must not straddle nodes, and memory is bound to it.
              CHECK(nodes_of(topology, p->vcpu_pins).size() == 1);
              REQUIRE(p->numa_node.has_value());
              CHECK(*nodes_of(topology, p->vcpu_pins).begin() == *p->numa_node);
            } else {
              CHECK_FALSE(p->numa_node.has_value());
              CHECK(contains(p->note, "spans NUMA nodes"));
            }
            if (req.vcpus == 2 && req.strategy == PlacementStrategy::kPack) {
              bool whole_cluster_free = false;
              for (const auto& [cl, fs] : before.per_cluster) {
                if (fs.second == 2 && fs.first == 2) whole_cluster_free = true;
              }
              if (whole_cluster_free) {
                CHECK(topology.cpu(p->vcpu_pins[0])->cluster ==
                      topology.cpu(p->vcpu_pins[1])->cluster);
              }
            }
          }
          model[name] = *p;
        }
      }
      check_invariants(a, model, sets, shared_ratio);
    }
    // Every freed core is reusable: after releasing everything a full-host VM fits again.
    for (const auto& [vm, p] : model) REQUIRE(a.release(vm).is_ok());
    CHECK(a.fragmentation() == 0.0);
    CHECK(a.free_dedicated() == static_cast<int>(sets.dedicated.size()));
    Result<Placement> full = a.allocate(dedicated("full", static_cast<int>(sets.dedicated.size())));
    REQUIRE(full.is_ok());
    CHECK(full->cpus() == sets.dedicated);
    CHECK(a.free_dedicated() == 0);
  }
}

TEST_CASE("random sequences on the LX2160A keep the placement rules", "[core][placement]") {
  run_random_sequences(lx2160a_topology(), {}, 5, 1.0, 300, 20260101);
}

TEST_CASE("random sequences on the LX2160A with a shared set keep the overcommit bound",
          "[core][placement]") {
  // Initialised whole, not assigned after default construction: GCC 12 at -O2 reports a
  // -Wmaybe-uninitialized false positive on assigning to the std::optional<std::string>.
  CpuSetsConfig cfg{.shared = "12-15"};
  run_random_sequences(lx2160a_topology(), cfg, 4, 2.5, 200, 7);
}

TEST_CASE("random sequences on a 2-socket ThunderX keep VMs inside one NUMA node",
          "[core][placement]") {
  run_random_sequences(thunderx_2s_topology(), {}, 40, 1.0, 200, 424242);
}

TEST_CASE("random sequences on a 4-node host with 4-CPU clusters", "[core][placement]") {
  CpuSetsConfig cfg;
  cfg.shared = "60-63";
  run_random_sequences(make_topology(4, 4, 4), cfg, 12, 1.5, 150, 99);
}

TEST_CASE("LX2160A: a 2-vCPU VM gets both cores of one L2 cluster", "[core][placement]") {
  CoreAllocator a = make_allocator(lx2160a_topology());
  Result<Placement> p = a.allocate(dedicated("a", 2));
  REQUIRE(p.is_ok());
  CHECK(p->vcpu_pins == std::vector<int>{2, 3});
  CHECK(p->numa_node == 0);
  CHECK(p->emulator_cpus == CpuList{0});
  CHECK(contains(p->note, "L2 clusters 1"));
  CHECK(a.fragmentation() == 0.0);
}

TEST_CASE("LX2160A: odd VMs fill half-used clusters", "[core][placement]") {
  CoreAllocator a = make_allocator(lx2160a_topology());
  // CPU 1 is alone in cluster 0 (CPU 0 keeps house): a 1-vCPU VM takes it, not a whole cluster.
  CHECK(a.allocate(dedicated("one", 1))->vcpu_pins == std::vector<int>{1});
  // 3 vCPUs: one whole cluster plus one core of the next, wasting no more than one cluster.
  CHECK(a.allocate(dedicated("three", 3))->vcpu_pins == std::vector<int>{2, 3, 4});
  CHECK(a.fragmentation() == Approx(1.0 / 11));
  // The next odd VM completes the half-used cluster instead of breaking a whole one.
  CHECK(a.allocate(dedicated("single", 1))->vcpu_pins == std::vector<int>{5});
  CHECK(a.fragmentation() == 0.0);
  // After freeing "three", a 2-vCPU VM takes its whole cluster 1.
  REQUIRE(a.release("three").is_ok());
  CHECK(a.allocate(dedicated("two", 2))->vcpu_pins == std::vector<int>{2, 3});
}

TEST_CASE("LX2160A: pack prefers a half-used cluster later on over breaking a whole one",
          "[core][placement]") {
  CoreAllocator a = make_allocator(lx2160a_topology());
  REQUIRE(a.allocate(dedicated("a", 2))->vcpu_pins == std::vector<int>{2, 3});
  REQUIRE(a.allocate(dedicated("b", 2))->vcpu_pins == std::vector<int>{4, 5});
  REQUIRE(a.allocate(dedicated("one", 1))->vcpu_pins == std::vector<int>{1});
  REQUIRE(a.allocate(dedicated("c", 3))->vcpu_pins == std::vector<int>{6, 7, 8});
  REQUIRE(a.release("a").is_ok());  // cluster 1 (CPUs 2-3) whole again, cluster 4 half used
  CHECK(a.allocate(dedicated("odd", 1))->vcpu_pins == std::vector<int>{9});
  CHECK(a.allocate(dedicated("pair", 2))->vcpu_pins == std::vector<int>{2, 3});
  CHECK(a.fragmentation() == 0.0);
}

TEST_CASE("LX2160A: spread puts vCPUs on different clusters", "[core][placement]") {
  CoreAllocator a = make_allocator(lx2160a_topology());
  Result<Placement> p = a.allocate(dedicated("s", 4, PlacementStrategy::kSpread));
  REQUIRE(p.is_ok());
  std::set<int> clusters;
  for (int c : p->vcpu_pins) clusters.insert(a.topology().cpu(c)->cluster);
  CHECK(clusters.size() == 4);
  CHECK(a.fragmentation() > 0.0);
}

TEST_CASE("ThunderX: pack keeps a whole node free for a large VM, spread balances",
          "[core][placement]") {
  CoreAllocator packed = make_allocator(thunderx_2s_topology());
  CoreAllocator spread = make_allocator(thunderx_2s_topology());
  for (int i = 0; i < 10; ++i) {
    const std::string name = numbered("small-", i);
    Result<Placement> p = packed.allocate(dedicated(name, 4));
    REQUIRE(p.is_ok());
    CHECK(p->numa_node == 0);
    CHECK(p->emulator_cpus == CpuList{0});  // housekeeping CPU of its own node
    Result<Placement> s = spread.allocate(dedicated(name, 4, PlacementStrategy::kSpread));
    REQUIRE(s.is_ok());
    CHECK(s->numa_node == (i % 2 == 0 ? 0 : 1));
    CHECK(s->emulator_cpus == CpuList{s->numa_node == 0 ? 0 : 48});
  }
  Result<Placement> big = packed.allocate(dedicated("big", 47));
  REQUIRE(big.is_ok());
  CHECK(big->numa_node == 1);
  CHECK(big->cpus() == parse_cpu_list("f", "49-95").value());

  Result<Placement> big_spread = spread.allocate(dedicated("big", 47));
  REQUIRE(big_spread.is_ok());
  CHECK_FALSE(big_spread->numa_node.has_value());
  CHECK(contains(big_spread->note, "spans NUMA nodes 0,1: no single node had 47 free cores"));
}

TEST_CASE("ThunderX: a VM larger than a node spans nodes and says so", "[core][placement]") {
  CoreAllocator a = make_allocator(thunderx_2s_topology());
  Result<Placement> p = a.allocate(dedicated("huge", 60));
  REQUIRE(p.is_ok());
  CHECK_FALSE(p->numa_node.has_value());
  CHECK(contains(p->note, "spans NUMA nodes 0,1: no single node had 60 free cores"));
  CHECK(p->emulator_cpus == CpuList{0, 48});
  CHECK(nodes_of(a.topology(), p->vcpu_pins).size() == 2);
  // The rest of the host still serves node-local VMs.
  Result<Placement> rest = a.allocate(dedicated("rest", 34));
  REQUIRE(rest.is_ok());
  CHECK(rest->numa_node.has_value());
}

TEST_CASE("requests that cannot fit say why: wait versus never", "[core][placement]") {
  CoreAllocator a = make_allocator(lx2160a_topology());
  Status never = a.can_ever_fit(16, CpuPolicy::kDedicated);
  CHECK(never.code() == ErrorCode::kUnprocessable);
  CHECK(contains(never.message(), "has 15 dedicated CPUs"));
  CHECK(a.allocate(dedicated("too-big", 16)).status().code() == ErrorCode::kUnprocessable);
  CHECK(a.can_ever_fit(15, CpuPolicy::kDedicated).is_ok());
  CHECK(a.can_ever_fit(1, CpuPolicy::kShared).code() == ErrorCode::kUnprocessable);

  for (int i = 0; i < 14; ++i) REQUIRE(a.allocate(dedicated(numbered("v", i), 1)).is_ok());
  Result<Placement> wait = a.allocate(dedicated("waits", 2));
  CHECK(wait.status().code() == ErrorCode::kResourceExhausted);
  CHECK(contains(wait.status().message(), "no free dedicated cores: 14 of 15 in use, 2 needed"));
  CHECK(a.find("waits") == nullptr);  // a refused request holds nothing
  CHECK(a.free_dedicated() == 1);
  CHECK(a.allocate(dedicated("last", 1)).is_ok());
}

TEST_CASE("bad requests are rejected before placement", "[core][placement]") {
  CoreAllocator a = make_allocator(lx2160a_topology());
  CHECK(a.allocate(dedicated("", 1)).status().field() == "vm_name");
  CHECK(a.allocate(dedicated("zero", 0)).status().field() == "vcpus");
  CHECK(a.allocate(shared("s", 1, 0.0)).status().field() == "overcommit");
  REQUIRE(a.allocate(dedicated("dup", 1)).is_ok());
  CHECK(a.allocate(dedicated("dup", 1)).status().code() == ErrorCode::kConflict);
  CHECK(a.release("nobody").code() == ErrorCode::kNotFound);
  CHECK(placement_strategy_from_string("spread") == PlacementStrategy::kSpread);
  CHECK_FALSE(placement_strategy_from_string("scatter").has_value());
}

TEST_CASE("shared pools stay on the shared set within the overcommit bound", "[core][placement]") {
  // Initialised whole, not assigned after default construction: GCC 12 at -O2 reports a
  // -Wmaybe-uninitialized false positive on assigning to the std::optional<std::string>.
  CpuSetsConfig cfg{.shared = "12-15"};
  CoreAllocator a = make_allocator(lx2160a_topology(), cfg);
  CHECK(a.can_ever_fit(5, CpuPolicy::kShared, 4.0).code() == ErrorCode::kUnprocessable);
  CHECK(a.can_ever_fit(3, CpuPolicy::kShared, 0.5).code() == ErrorCode::kUnprocessable);
  std::map<int, int> load;
  for (int i = 0; i < 4; ++i) {
    Result<Placement> p = a.allocate(shared(numbered("s", i), 2, 2.0));
    REQUIRE(p.is_ok());
    CHECK(p->cpus().size() == 2);  // distinct CPUs within a VM
    for (int c : p->vcpu_pins) {
      CHECK(a.sets().is_shared(c));
      ++load[c];
    }
    CHECK(p->emulator_cpus == CpuList{0});
  }
  for (const auto& [cpu, n] : load) CHECK(n == 2);  // balanced: 8 vCPUs over 4 CPUs
  Result<Placement> full = a.allocate(shared("s4", 1, 2.0));
  CHECK(full.status().code() == ErrorCode::kResourceExhausted);
  CHECK(contains(full.status().message(), "8 of 8 vCPU slots in use"));
  // Dedicated placement never touches the shared set.
  Result<Placement> d = a.allocate(dedicated("d", 11));
  REQUIRE(d.is_ok());
  CHECK(format_cpu_list(d->vcpu_pins) == "1-11");
  std::vector<CpuUsage> u = a.usage();
  CHECK(u[13].role == CpuRole::kShared);
  CHECK(u[13].vcpus == 2);
  CHECK(to_string(u[13].role) == "shared");
  CHECK(to_string(u[0].role) == "housekeeping");
}

TEST_CASE("adopt rebuilds state from running domains", "[core][placement]") {
  CoreAllocator a = make_allocator(lx2160a_topology());
  REQUIRE(a.adopt("vm-a", {2, 3}, CpuPolicy::kDedicated).is_ok());
  REQUIRE(a.adopt("vm-b", {6, 7, 8}, CpuPolicy::kDedicated).is_ok());
  CHECK(a.find("vm-a")->numa_node == 0);
  CHECK(a.free_dedicated() == 10);
  // New VMs avoid adopted cores; a 2-vCPU VM still gets a whole cluster.
  Result<Placement> p = a.allocate(dedicated("new", 2));
  REQUIRE(p.is_ok());
  CHECK(p->vcpu_pins == std::vector<int>{4, 5});
  std::vector<CpuUsage> u = a.usage();
  CHECK(u[2].vms == std::vector<std::string>{"vm-a"});
  CHECK(u[8].vms == std::vector<std::string>{"vm-b"});
}

TEST_CASE("adopt reports double-booked and out-of-set cores", "[core][placement]") {
  // Initialised whole, not assigned after default construction: GCC 12 at -O2 reports a
  // -Wmaybe-uninitialized false positive on assigning to the std::optional<std::string>.
  CpuSetsConfig cfg{.shared = "14-15"};
  CoreAllocator a = make_allocator(lx2160a_topology(), cfg);
  REQUIRE(a.adopt("vm-a", {2, 3}, CpuPolicy::kDedicated).is_ok());

  Status s = a.adopt("vm-b", {3, 4, 0, 99, 14, 4}, CpuPolicy::kDedicated);
  CHECK(s.code() == ErrorCode::kConflict);
  CHECK(s.context() == "vm-b");
  INFO(s.to_string());
  CHECK(contains(s.message(), "vCPU 0 on CPU 3: double-booked, already held by vm-a"));
  CHECK(contains(s.message(), "vCPU 2 on CPU 0: outside the dedicated set (it is housekeeping)"));
  CHECK(contains(s.message(), "vCPU 3 on CPU 99: no such CPU"));
  CHECK(contains(s.message(), "vCPU 4 on CPU 14: outside the dedicated set (it is shared)"));
  CHECK(contains(s.message(), "vCPU 5 on CPU 4: double-booked, already held by another vCPU"));
  // What it could claim stays claimed so nothing else lands there; vm-a keeps CPU 3.
  std::vector<CpuUsage> u = a.usage();
  CHECK(u[3].vms == std::vector<std::string>{"vm-a"});
  CHECK(u[4].vms == std::vector<std::string>{"vm-b"});
  CHECK(a.adopt("vm-b", {5}, CpuPolicy::kDedicated).code() == ErrorCode::kConflict);  // known
  // Once fixed (released), its cores are reusable and vm-a's are untouched.
  REQUIRE(a.release("vm-b").is_ok());
  CHECK(a.usage()[4].vms.empty());
  CHECK(a.usage()[3].vms == std::vector<std::string>{"vm-a"});

  Status sh = a.adopt("vm-s", {14, 5}, CpuPolicy::kShared);
  CHECK(sh.code() == ErrorCode::kConflict);
  CHECK(contains(sh.message(), "vCPU 1 on CPU 5: outside the shared set (it is dedicated)"));
  CHECK(a.shared_vcpus_in_use() == 1);
  CHECK(a.adopt("", {1}, CpuPolicy::kDedicated).code() == ErrorCode::kInvalidArgument);
  CHECK(a.adopt("vm-e", {}, CpuPolicy::kDedicated).code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("recorded pins are checked against the running domain", "[core][placement]") {
  CHECK(compare_recorded_pins("vm-a", {2, 3}, {3, 2}).is_ok());
  Status s = compare_recorded_pins("vm-a", {2, 3, 4}, {2, 3, 5, 6});
  CHECK(s.code() == ErrorCode::kConflict);
  CHECK(s.context() == "vm-a");
  CHECK(contains(s.message(), "recorded CPUs 2-4 disagree with the running domain's pins 2-3,5-6"));
  CHECK(contains(s.message(), "only recorded: 4; only running: 5-6"));
  CHECK(compare_recorded_pins("vm-b", {}, {1}).code() == ErrorCode::kConflict);
}

TEST_CASE("the two-CPU development host pins one VM to CPU 1", "[core][placement]") {
  CoreAllocator a = make_allocator(two_cpu_topology());
  Result<Placement> p = a.allocate(dedicated("dev", 1));
  REQUIRE(p.is_ok());
  CHECK(p->vcpu_pins == std::vector<int>{1});
  CHECK(p->emulator_cpus == CpuList{0});
  CHECK(p->numa_node == 0);
  CHECK(a.allocate(dedicated("dev2", 1)).status().code() == ErrorCode::kResourceExhausted);
  CHECK(a.can_ever_fit(2, CpuPolicy::kDedicated).code() == ErrorCode::kUnprocessable);
}

TEST_CASE("CoreAllocator refuses sets that do not match the host", "[core][placement]") {
  CpuSets bad;
  bad.housekeeping = {0};
  bad.dedicated = {0, 1};
  CHECK(CoreAllocator::create(lx2160a_topology(), bad).status().code() ==
        ErrorCode::kInvalidArgument);
  bad.dedicated = {1, 16};
  CHECK(CoreAllocator::create(lx2160a_topology(), bad).status().code() ==
        ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace armhive
