#include "daemon/virt/dhcp_reservation.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <regex>

#include "daemon/virt/domain_xml.h"
#include "daemon/virt/xml.h"

namespace armhive {
namespace {

constexpr const char* kNetworkXml = R"(<network>
  <name>armhive</name>
  <bridge name='ahbr0'/>
  <ip family='ipv6' address='fd00::1' prefix='64'>
    <dhcp><range start='fd00::10' end='fd00::20'/></dhcp>
  </ip>
  <ip address='10.77.0.1' prefix='24'>
    <dhcp>
      <range start='10.77.0.10' end='10.77.0.250'/>
      <host mac='52:54:00:00:00:01' name='armhive-vm-a1' ip='10.77.0.10'/>
      <host mac='52:54:00:00:00:02' name='armhive-vm-b2' ip='10.77.0.12'/>
    </dhcp>
  </ip>
</network>)";

TEST_CASE("a network's IPv4 DHCP range and host entries are read back", "[virt][dhcp]") {
  auto dhcp = parse_network_dhcp(kNetworkXml);
  REQUIRE(dhcp.is_ok());
  CHECK(dhcp->range_start == "10.77.0.10");
  CHECK(dhcp->range_end == "10.77.0.250");
  REQUIRE(dhcp->hosts.size() == 2);
  CHECK(dhcp->hosts[1] == DhcpHost{"52:54:00:00:00:02", "armhive-vm-b2", "10.77.0.12"});
}

TEST_CASE("each address has its own MAC, so a former VM's lease never blocks the next VM",
          "[virt][dhcp]") {
  CHECK(mac_for_address("10.77.0.10") == "52:54:00:4d:00:0a");
  CHECK(mac_for_address("192.168.122.254") == "52:54:00:a8:7a:fe");
  CHECK(mac_for_address("nonsense").empty());
  // 10.77.0.10: leased by the former VM of that address (its MAC): free again. 10.77.0.11:
  // leased by someone else's MAC: taken. 10.77.0.12: a host entry: taken.
  std::vector<DhcpLease> leases = {{"10.77.0.10", "52:54:00:4D:00:0A"},
                                   {"10.77.0.11", "52:54:00:12:34:56"}};
  std::vector<DhcpHost> hosts = {{"52:54:00:4d:00:0c", "armhive-vm-x", "10.77.0.12"}};
  auto taken = addresses_in_use(leases, hosts, "");
  CHECK(std::count(taken.begin(), taken.end(), "10.77.0.10") == 0);
  CHECK(std::count(taken.begin(), taken.end(), "10.77.0.11") == 1);
  CHECK(std::count(taken.begin(), taken.end(), "10.77.0.12") == 1);
  CHECK(first_free_address("10.77.0.10", "10.77.0.250", taken) == "10.77.0.10");
  // A caller's own MAC frees only the address its own lease holds.
  auto with_mac = addresses_in_use(leases, hosts, "52:54:00:12:34:56");
  CHECK(std::count(with_mac.begin(), with_mac.end(), "10.77.0.10") == 1);
  CHECK(std::count(with_mac.begin(), with_mac.end(), "10.77.0.11") == 0);
}

TEST_CASE("a busy hour of CI never runs a /24 out of addresses", "[virt][dhcp]") {
  // 1,000 VMs one after another on a 241-address range, each leaving its lease behind as dnsmasq
  // does: every reservation finds an address (with random MACs the 242nd would not).
  std::vector<DhcpLease> leases;
  for (int vm = 0; vm < 1000; ++vm) {
    auto ip = first_free_address("10.77.0.10", "10.77.0.250", addresses_in_use(leases, {}, ""));
    REQUIRE(ip.has_value());
    std::string mac = mac_for_address(*ip);
    bool renewed = false;
    for (DhcpLease& l : leases) renewed = renewed || (l.ip == *ip && l.mac == mac);
    if (!renewed) leases.push_back({*ip, mac});
  }
  CHECK(leases.size() == 1);  // one at a time: the same address and lease every time
  // With 6 VMs alive at once (host entries), the leases stay within 7 addresses.
  leases.clear();
  std::vector<DhcpHost> alive;
  for (int vm = 0; vm < 1000; ++vm) {
    if (alive.size() == 6) alive.erase(alive.begin());
    auto ip = first_free_address("10.77.0.10", "10.77.0.250", addresses_in_use(leases, alive, ""));
    REQUIRE(ip.has_value());
    alive.push_back({mac_for_address(*ip), "armhive-vm-" + std::to_string(vm), *ip});
    bool known = false;
    for (const DhcpLease& l : leases) known = known || l.ip == *ip;
    if (!known) leases.push_back({*ip, mac_for_address(*ip)});
  }
  CHECK(leases.size() <= 7);
}

TEST_CASE("a network without DHCP has no range (no reservation possible)", "[virt][dhcp]") {
  auto dhcp = parse_network_dhcp(
      "<network><name>br</name><forward mode='bridge'/><bridge name='br0'/></network>");
  REQUIRE(dhcp.is_ok());
  CHECK(dhcp->range_start.empty());
  CHECK(dhcp->hosts.empty());
  CHECK(parse_network_dhcp("<network><ip").status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("the first free address skips reserved and leased ones", "[virt][dhcp]") {
  CHECK(first_free_address("10.77.0.10", "10.77.0.250", {}) == "10.77.0.10");
  CHECK(first_free_address("10.77.0.10", "10.77.0.250", {"10.77.0.10", "10.77.0.11"}) ==
        "10.77.0.12");
  CHECK(first_free_address("10.77.0.254", "10.77.1.2", {"10.77.0.254", "10.77.0.255"}) ==
        "10.77.1.0");
  CHECK_FALSE(first_free_address("10.77.0.10", "10.77.0.11", {"10.77.0.11", "10.77.0.10"}));
  CHECK_FALSE(first_free_address("10.77.0.20", "10.77.0.10", {}));
  CHECK_FALSE(first_free_address("nonsense", "10.77.0.10", {}));
  // Across the top of the address space without wrapping around.
  CHECK_FALSE(first_free_address("255.255.255.255", "255.255.255.255", {"255.255.255.255"}));
}

TEST_CASE("host entries are escaped XML that libvirt reads back", "[virt][dhcp]") {
  auto xml = build_dhcp_host_xml({"52:54:00:ab:cd:ef", "a'b<c", "10.77.0.9"});
  REQUIRE(xml.is_ok());
  auto doc = detail::XmlDoc::parse(*xml);
  REQUIRE(doc.is_ok());
  CHECK(doc->str("string(/host/@name)") == "a'b<c");
  CHECK(doc->str("string(/host/@mac)") == "52:54:00:ab:cd:ef");
  CHECK(doc->str("string(/host/@ip)") == "10.77.0.9");
}

TEST_CASE("random MACs are QEMU-prefixed and valid for a domain", "[virt][dhcp]") {
  const std::regex form("52:54:00:[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}");
  std::string first = random_mac();
  bool differs = false;
  for (int i = 0; i < 20; ++i) {
    std::string mac = random_mac();
    CHECK(std::regex_match(mac, form));
    differs = differs || mac != first;
  }
  CHECK(differs);
}

TEST_CASE("a domain's MAC is validated, written and parsed back", "[virt][dhcp]") {
  VmSpec spec;
  spec.name = "armhive-vm-a1";
  spec.vm_id = "vm-a1";
  spec.pool = "ci";
  spec.base_disk = "/var/lib/armhive/images/tiny/disk.qcow2";
  spec.kernel = "/var/lib/armhive/images/tiny/vmlinuz";
  spec.network = "armhive";
  DomainPaths paths;
  paths.overlay = "/var/lib/armhive/vms/overlays/armhive-vm-a1.qcow2";
  paths.console_log = "/var/lib/armhive/vms/domains/armhive-vm-a1/console.log";

  for (const char* bad : {"52:54:00:AB:CD:EF", "53:54:00:ab:cd:ef", "52:54:00:ab:cd",
                          "52-54-00-ab-cd-ef", "52:54:00:ab:cd:e'"}) {
    spec.mac = bad;
    CHECK(validate_vm_spec(spec).field() == "mac");
  }
  spec.mac = "52:54:00:ab:cd:ef";
  auto xml = build_domain_xml(spec, paths, Accel::kTcg);
  REQUIRE(xml.is_ok());
  auto desc = parse_domain_xml(*xml);
  REQUIRE(desc.is_ok());
  CHECK(desc->mac == "52:54:00:ab:cd:ef");
  CHECK(desc->network == "armhive");

  spec.mac.clear();
  auto plain = build_domain_xml(spec, paths, Accel::kTcg);
  REQUIRE(plain.is_ok());
  CHECK(parse_domain_xml(*plain)->mac.empty());
}

}  // namespace
}  // namespace armhive
