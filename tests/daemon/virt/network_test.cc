#include "daemon/virt/network.h"

#include <catch2/catch.hpp>

#include "daemon/virt/xml.h"

namespace armhive {
namespace {

NetworkSpec spec() {
  return {"armhive-net", "ahbr0", "10.77.0.1/24", "10.77.0.10", "10.77.0.250", 9000};
}

TEST_CASE("isolated network XML: bridge, MTU, DHCP range and no forwarding", "[virt][network]") {
  auto xml = build_network_xml(spec());
  REQUIRE(xml.is_ok());
  auto doc = detail::XmlDoc::parse(*xml);
  REQUIRE(doc.is_ok());
  CHECK(doc->str("string(/network/name)") == "armhive-net");
  CHECK(doc->str("string(/network/bridge/@name)") == "ahbr0");
  CHECK(doc->str("string(/network/mtu/@size)") == "9000");
  CHECK(doc->str("string(/network/ip/@address)") == "10.77.0.1");
  CHECK(doc->str("string(/network/ip/@prefix)") == "24");
  CHECK(doc->str("string(/network/ip/dhcp/range/@start)") == "10.77.0.10");
  CHECK(doc->str("string(/network/ip/dhcp/range/@end)") == "10.77.0.250");
  CHECK(doc->node("/network/forward") == nullptr);
}

TEST_CASE("network specs are validated field by field", "[virt][network]") {
  auto field = [](const NetworkSpec& s) { return build_network_xml(s).status().field(); };
  NetworkSpec s = spec();
  s.name = "net'><forward mode='nat'/>";
  CHECK(field(s) == "name");
  s = spec();
  s.bridge = "a-bridge-name-too-long";
  CHECK(field(s) == "bridge");
  s = spec();
  s.ipv4_cidr = "10.77.0.1";
  CHECK(field(s) == "ipv4_cidr");
  s = spec();
  s.ipv4_cidr = "10.77.0.1/33";
  CHECK(field(s) == "ipv4_cidr");
  s = spec();
  s.dhcp_start = "10.78.0.10";
  CHECK(field(s) == "dhcp_start");
  s = spec();
  s.dhcp_start = "10.77.0.1";  // the host's own address
  CHECK(field(s) == "dhcp_start");
  s = spec();
  s.dhcp_end = "not-an-ip";
  CHECK(field(s) == "dhcp_end");
  s = spec();
  s.mtu = 0;
  CHECK(field(s) == "mtu");
}

TEST_CASE("nat network XML forwards with NAT, bridge mode attaches to the host's bridge",
          "[virt][network]") {
  NetworkSpec s = spec();
  s.mode = NetworkMode::kNat;
  auto xml = build_network_xml(s);
  REQUIRE(xml.is_ok());
  auto doc = detail::XmlDoc::parse(*xml);
  REQUIRE(doc.is_ok());
  CHECK(doc->str("string(/network/forward/@mode)") == "nat");
  CHECK(doc->str("string(/network/ip/dhcp/range/@start)") == "10.77.0.10");

  s = spec();
  s.mode = NetworkMode::kBridge;
  s.bridge = "br-lacp0";
  s.ipv4_cidr = s.dhcp_start = s.dhcp_end = "";  // the site's DHCP serves bridged guests
  xml = build_network_xml(s);
  REQUIRE(xml.is_ok());
  doc = detail::XmlDoc::parse(*xml);
  REQUIRE(doc.is_ok());
  CHECK(doc->str("string(/network/forward/@mode)") == "bridge");
  CHECK(doc->str("string(/network/bridge/@name)") == "br-lacp0");
  CHECK(doc->node("/network/ip") == nullptr);
}

TEST_CASE("egress allow-lists are for nat networks and are validated", "[virt][network]") {
  auto field = [](const NetworkSpec& s) { return validate_network_spec(s).field(); };
  NetworkSpec s = spec();
  s.egress = {{"192.0.2.0/24", {443}}};
  CHECK(field(s) == "egress");  // isolated
  s.mode = NetworkMode::kNat;
  CHECK(validate_network_spec(s).is_ok());
  s.egress = {{"192.0.2.0/24", {443}}, {"192.0.2.300", {}}};
  CHECK(field(s) == "egress[1].cidr");
  s.egress = {{"192.0.2.0/24", {443, 0}}};
  CHECK(field(s) == "egress[0].ports[1]");
}

}  // namespace
}  // namespace armhive
