// End-to-end: an MTU 9000 network run on a tiny-image guest changes the sandbox bridge, the
// VM's tap and the guest, carries 9000-byte packets unfragmented (ping -M do) and puts all
// three back. Inside the sandbox's network namespace only (its own isolated network).
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>

#include "base/process_runner.h"
#include "daemon/bench/benchmark_runner.h"
#include "daemon/bench/host_mtu.h"
#include "daemon/virt/libvirt_hypervisor.h"
#include "tests/support/e2e_guest.h"

namespace armhive {
namespace {

using nlohmann::json;
constexpr const char* kBridge = "ahjumboe2e0";

int guest_mtu(LibvirtHypervisor& hv, const std::string& vm) {
  auto r = hv.exec(
      vm, {.argv = {"cat", "/sys/class/net/eth0/mtu"}, .timeout = std::chrono::seconds(30)});
  REQUIRE(r.is_ok());
  REQUIRE(r->exit_code == 0);
  return std::atoi(r->out.c_str());
}

TEST_CASE("an MTU 9000 run changes bridge, tap and guest, verifies the path and restores them",
          "[jumbo][e2e]") {
  E2eGuest guest;
  // The NIC may carry 9000 (the domain advertises it); the path starts at 1500 everywhere.
  guest.boot({.tag = "jumbo",
              .net = {"armhive-jumbo-e2e", kBridge, "10.231.19.1/24", "10.231.19.10",
                      "10.231.19.100", 1500},
              .vcpus = 1,
              .memory_mib = 512,
              .nic_mtu = 9000});
  LibvirtHypervisor& hv = guest.hv();
  const std::string vm = guest.spec().name;
  SubprocessRunner processes;
  const auto timeout = std::chrono::seconds(30);

  auto mac = hv.exec(vm, {.argv = {"cat", "/sys/class/net/eth0/address"}, .timeout = timeout});
  REQUIRE(mac.is_ok());
  auto links = read_host_mtu_links(processes, kBridge, timeout);
  REQUIRE(links.is_ok());
  auto tap = find_tap(*links, mac->out);
  REQUIRE(tap.is_ok());
  INFO("tap " << tap->name);
  // A 1500 path on a NIC that could do 9000: tap and guest down to 1500.
  REQUIRE(apply_mtu_steps(processes, {{tap->name, tap->mtu, 1500}}, timeout).is_ok());
  auto lower = hv.exec(
      vm, {.argv = {"ip", "link", "set", "dev", "eth0", "mtu", "1500"}, .timeout = timeout});
  REQUIRE(lower.is_ok());
  REQUIRE(lower->exit_code == 0);
  auto mtu_of = [&](const std::string& name) {
    auto l = read_host_mtu_links(processes, kBridge, timeout);
    REQUIRE(l.is_ok());
    if (name == kBridge) return l->bridge.mtu;
    for (const auto& p : l->ports)
      if (p.name == name) return p.mtu;
    FAIL("no link " << name);
    return 0;
  };
  REQUIRE(mtu_of(kBridge) == 1500);
  REQUIRE(mtu_of(tap->name) == 1500);
  REQUIRE(guest_mtu(hv, vm) == 1500);

  LeaseTarget target = guest.target();
  target.mtu = 1500;
  target.nic_max_mtu = 9000;
  target.bridge = kBridge;
  SystemClock clock;
  BenchmarkRunnerOptions bopts;
  bopts.runs_dir = (guest.state() / "runs").string();
  BenchmarkRunner runner(
      hv, processes,
      [&](const std::string& lease) -> Result<LeaseTarget> {
        if (lease != "l-jumbo") return not_found("no such lease", lease);
        return target;
      },
      clock, bopts);
  REQUIRE(runner.load().is_ok());

  BenchmarkRequest req;
  req.lease_id = "l-jumbo";
  req.owner = "e2e";
  req.suites = {"network"};
  req.network.streams = 1;
  req.network.duration_s = 2;
  req.network.both_directions = false;
  req.network.mtus = {9000};
  auto started = runner.start(req);
  REQUIRE(started.is_ok());
  auto run = runner.wait(started->id, std::chrono::minutes(5));
  REQUIRE(run.is_ok());
  INFO("error: " << run->error);
  INFO("report: " << run->report.dump(1).substr(0, 3000));
  REQUIRE(run->state == BenchmarkState::kSucceeded);

  const json& change = run->report["network"]["mtu_changes"].at(0);
  CHECK(change["verified_path_mtu"] == 9000);  // 8972 bytes + headers crossed unfragmented
  CHECK(change["host"]["bridge"] == kBridge);
  CHECK(change["host"]["tap"] == tap->name);
  CHECK(change["host"]["applied"].size() == 2);
  CHECK(change["host"]["restored"].size() == 2);
  CHECK(change["guest"]["to"] == 9000);
  CHECK(run->report["network"]["runs"].at(0)["mtu"] == 9000);

  // Everything back at 1500.
  CHECK(mtu_of(kBridge) == 1500);
  CHECK(mtu_of(tap->name) == 1500);
  CHECK(guest_mtu(hv, vm) == 1500);

  // More than the NIC can carry: refused before anything changes.
  req.network.mtus = {9216};
  auto refused = runner.start(req);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().field() == "network.mtus[0]");
  CHECK(mtu_of(kBridge) == 1500);
}

}  // namespace
}  // namespace armhive
