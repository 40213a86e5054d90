#include "daemon/virt/host_discovery.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

namespace armhive {
namespace {

const std::string kFixturesDir = std::string(ARMHIVE_FIXTURES_DIR) + "/capabilities/";

std::string fixture(const std::string& name) {
  std::ifstream in(kFixturesDir + name);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_CASE("LX2160A: 16 Cortex-A72 CPUs in one NUMA cell, 8 two-core L2 clusters from sysfs",
          "[virt][topology]") {
  DiscoveryOptions o;
  o.sysfs_root = kFixturesDir + "lx2160a-sysfs";
  o.kvm_usable = true;
  auto t = parse_capabilities(fixture("lx2160a.xml"), o);
  REQUIRE(t.is_ok());
  CHECK(t->arch == "aarch64");
  CHECK(t->cpu_model == "cortex-a72");
  CHECK(t->accel == Accel::kKvm);
  REQUIRE(t->cpus.size() == 16);
  REQUIRE(t->cells.size() == 1);
  CHECK(t->cells[0].cpus.size() == 16);
  CHECK(t->cells[0].memory_kib == 32 * 1024 * 1024 - 1228800);
  CHECK(t->memory_kib == t->cells[0].memory_kib);
  for (int i = 0; i < 16; ++i) {
    const HostCpu* c = t->cpu(i);
    REQUIRE(c != nullptr);
    CHECK(c->socket == 0);
    CHECK(c->core == i);
    CHECK(c->numa_node == 0);
    CHECK(c->siblings == std::vector<int>{i});
  }
  auto clusters = t->clusters();
  REQUIRE(clusters.size() == 8);
  for (const auto& [id, cpus] : clusters) {
    REQUIRE(cpus.size() == 2);
    CHECK(cpus[1] == cpus[0] + 1);
    CHECK(cpus[0] % 2 == 0);
  }
  CHECK(t->cpu(4)->cluster == t->cpu(5)->cluster);
  CHECK(t->cpu(5)->cluster != t->cpu(6)->cluster);
  // 2 MiB and 1 GiB hugepages, 4 KiB base pages are not hugepages.
  REQUIRE(t->cells[0].hugepages.size() == 2);
  CHECK(t->cells[0].hugepages[0].size_kib == 2048);
  CHECK(t->cells[0].hugepages[0].total == 512);
  CHECK(t->cells[0].hugepages[0].free == 512);
}

TEST_CASE("a remote host's KVM is what its own capabilities offer, not this machine's /dev/kvm",
          "[virt][topology]") {
  DiscoveryOptions o;
  o.sysfs_root.clear();
  o.kvm_from_capabilities = true;
  o.kvm_device = "/nonexistent/kvm";  // this machine's answer must not matter
  auto kvm = parse_capabilities(fixture("lx2160a.xml"), o);
  REQUIRE(kvm.is_ok());
  CHECK(kvm->accel == Accel::kKvm);
  // The same board whose libvirtd offers no kvm domain (no usable /dev/kvm there).
  std::string caps = fixture("lx2160a.xml");
  const std::string line = "<domain type='kvm'/>";
  REQUIRE(caps.find(line) != std::string::npos);
  caps.erase(caps.find(line), line.size());
  auto tcg = parse_capabilities(caps, o);
  REQUIRE(tcg.is_ok());
  CHECK(tcg->accel == Accel::kTcg);
  // An x86 host offers kvm for x86_64 guests only: aarch64 guests are emulated there.
  auto x86 = parse_capabilities(fixture("x86-64-tcg-host.xml"), o);
  REQUIRE(x86.is_ok());
  CHECK(x86->accel == Accel::kTcg);
}

TEST_CASE("LX2160A without /dev/kvm falls back to TCG, clusters can be given for a remote host",
          "[virt][topology]") {
  DiscoveryOptions o;
  o.kvm_usable = false;
  o.clusters =
      std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}};
  auto t = parse_capabilities(fixture("lx2160a.xml"), o);
  REQUIRE(t.is_ok());
  CHECK(t->accel == Accel::kTcg);
  CHECK(t->clusters().size() == 4);
  CHECK(t->cpu(15)->cluster == 3);
}

TEST_CASE("ThunderX CN8890: 96 CPUs, 2 sockets, 2 NUMA cells of 48", "[virt][topology]") {
  DiscoveryOptions o;
  o.sysfs_root.clear();
  o.kvm_usable = true;
  o.free_hugepages = {{{1048576, 3}}, {{2048, 1000}}};
  auto t = parse_capabilities(fixture("thunderx-cn8890.xml"), o);
  REQUIRE(t.is_ok());
  CHECK(t->arch == "aarch64");
  CHECK(t->accel == Accel::kKvm);
  REQUIRE(t->cpus.size() == 96);
  REQUIRE(t->cells.size() == 2);
  for (int cell = 0; cell < 2; ++cell) {
    CHECK(t->cells[cell].id == cell);
    REQUIRE(t->cells[cell].cpus.size() == 48);
    CHECK(t->cells[cell].cpus.front() == cell * 48);
    CHECK(t->cells[cell].cpus.back() == cell * 48 + 47);
  }
  CHECK(t->cpu(47)->numa_node == 0);
  CHECK(t->cpu(48)->numa_node == 1);
  CHECK(t->cpu(48)->socket == 1);
  CHECK(t->cpu(95)->socket == 1);
  CHECK(t->cpu(0)->cluster == -1);  // no cluster information
  CHECK(t->memory_kib == 2 * (64ull * 1024 * 1024 - 524288));
  // Cell 0: 4 x 1 GiB (3 free), cell 1: 1024 x 2 MiB (1000 free).
  auto pages = [&](int cell, uint64_t size) -> const HugePages* {
    for (const auto& h : t->cells[cell].hugepages) {
      if (h.size_kib == size) return &h;
    }
    return nullptr;
  };
  REQUIRE(pages(0, 1048576) != nullptr);
  CHECK(pages(0, 1048576)->total == 4);
  CHECK(pages(0, 1048576)->free == 3);
  REQUIRE(pages(1, 2048) != nullptr);
  CHECK(pages(1, 2048)->total == 1024);
  CHECK(pages(1, 2048)->free == 1000);
}

TEST_CASE("this machine's captured capabilities: an x86_64 host runs aarch64 guests under TCG",
          "[virt][topology]") {
  DiscoveryOptions o;
  o.sysfs_root.clear();
  o.kvm_usable = true;  // even with /dev/kvm, an x86 host cannot run aarch64 guests with KVM
  auto t = parse_capabilities(fixture("x86-64-tcg-host.xml"), o);
  REQUIRE(t.is_ok());
  CHECK(t->arch == "x86_64");
  CHECK(t->accel == Accel::kTcg);
  CHECK_FALSE(t->cpus.empty());
  CHECK(t->cells.size() == 1);
  CHECK(t->cells[0].cpus.size() == t->cpus.size());
}

TEST_CASE("malformed capabilities are invalid arguments", "[virt][topology]") {
  DiscoveryOptions o;
  o.sysfs_root.clear();
  o.kvm_usable = false;
  CHECK(parse_capabilities("<capabilities><host>", o).status().code() ==
        ErrorCode::kInvalidArgument);
  CHECK(parse_capabilities("<capabilities/>", o).status().code() == ErrorCode::kInvalidArgument);
  CHECK(parse_capabilities("<!DOCTYPE x [<!ENTITY e SYSTEM 'file:///etc/passwd'>]><capabilities>"
                           "<host><cpu><arch>&e;</arch></cpu></host></capabilities>",
                           o)
            .value_or(HostTopology{})
            .arch.find("root:") == std::string::npos);
}

TEST_CASE("sysfs clusters are listed once each, by first CPU", "[virt][topology]") {
  auto c = read_sysfs_clusters(kFixturesDir + "lx2160a-sysfs");
  REQUIRE(c.size() == 8);
  CHECK(c.front() == std::vector<int>{0, 1});
  CHECK(c.back() == std::vector<int>{14, 15});
  CHECK(read_sysfs_clusters(kFixturesDir + "does-not-exist").empty());
}

}  // namespace
}  // namespace armhive
