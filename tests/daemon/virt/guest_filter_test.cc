#include "daemon/virt/guest_filter.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "daemon/virt/xml.h"

namespace armhive {
namespace {

using detail::XmlDoc;

// The verdict of the first rule that `frame` matches, as libvirt walks a root chain (lowest
// priority first): a small model of the rules' meaning, so that the test reads as what a guest
// may send rather than as the XML's shape.
struct Frame {
  std::string direction;  // "out" (from the guest) or "in"
  std::string protocol;   // "ipv4", "arp" or "ipv6"
  std::string src_mac;
  std::string src_ip;  // IPv4 source, or ARP sender address
};

std::string verdict(const XmlDoc& d, const Frame& f, const std::string& mac,
                    const std::string& ip) {
  auto text = [&](const std::string& xpath) { return d.str(xpath.c_str()); };
  auto nodes = [&](const std::string& xpath) { return d.nodes(xpath.c_str()); };
  const size_t n = nodes("/filter/rule").size();
  std::vector<std::pair<long, size_t>> order;
  for (size_t i = 1; i <= n; ++i) {
    order.emplace_back(std::stol(text("string(/filter/rule[" + std::to_string(i) + "]/@priority)")),
                       i);
  }
  std::sort(order.begin(), order.end());
  auto value = [&](const std::string& v) { return v == "$MAC" ? mac : v == "$IP" ? ip : v; };
  for (const auto& [priority, i] : order) {
    const std::string r = "/filter/rule[" + std::to_string(i) + "]";
    const std::string dir = text("string(" + r + "/@direction)");
    if (dir != "inout" && dir != f.direction) continue;
    bool matches = true;
    if (!nodes(r + "/mac").empty()) {
      const bool negate = text("string(" + r + "/mac/@match)") == "no";
      const std::string src = text("string(" + r + "/mac/@srcmacaddr)");
      const std::string proto = text("string(" + r + "/mac/@protocolid)");
      bool m = (src.empty() || value(src) == f.src_mac) && (proto.empty() || proto == f.protocol);
      matches = negate ? !m : m;
    } else if (!nodes(r + "/ip").empty()) {
      if (f.protocol != "ipv4") continue;
      const bool negate = text("string(" + r + "/ip/@match)") == "no";
      const std::string src = text("string(" + r + "/ip/@srcipaddr)");
      // The DHCP rule also names UDP 68 -> 67; the model's frames from 0.0.0.0 are DHCP.
      bool m = src.empty() || value(src) == f.src_ip;
      matches = negate ? !m : m;
    } else if (!nodes(r + "/arp").empty()) {
      if (f.protocol != "arp") continue;
      const bool negate = text("string(" + r + "/arp/@match)") == "no";
      const std::string mac_attr = text("string(" + r + "/arp/@arpsrcmacaddr)");
      const std::string ip_attr = text("string(" + r + "/arp/@arpsrcipaddr)");
      bool m = (mac_attr.empty() || value(mac_attr) == f.src_mac) &&
               (ip_attr.empty() || value(ip_attr) == f.src_ip);
      matches = negate ? !m : m;
    }
    if (matches) return text("string(" + r + "/@action)");
  }
  return "accept";  // libvirt's default at the end of the root chain
}

TEST_CASE("the guest filter lets a guest speak only as itself: its MAC, its address, IPv4 and ARP",
          "[virt][guest_filter]") {
  auto xml = build_guest_filter_xml("");
  REQUIRE(xml.is_ok());
  auto parsed = XmlDoc::parse(*xml);
  REQUIRE(parsed.is_ok());
  XmlDoc d = std::move(parsed).value();
  CHECK(d.str("string(/filter/@name)") == "armhive-guest");
  CHECK(d.str("string(/filter/@chain)") == "root");
  CHECK(d.nodes("/filter/uuid").empty());

  const std::string mac = "52:54:00:aa:00:01";
  const std::string ip = "10.77.0.11";
  auto v = [&](Frame f) { return verdict(d, f, mac, ip); };
  CHECK(v({"out", "ipv4", mac, ip}) == "accept");
  CHECK(v({"out", "ipv4", mac, "0.0.0.0"}) == "accept");  // DHCP
  CHECK(v({"out", "arp", mac, ip}) == "accept");
  CHECK(v({"out", "arp", mac, "0.0.0.0"}) == "accept");          // ARP probe
  CHECK(v({"out", "ipv4", "52:54:00:0b:ad:01", ip}) == "drop");  // another MAC
  CHECK(v({"out", "ipv4", mac, "10.77.0.12"}) == "drop");        // a neighbour's address
  CHECK(v({"out", "arp", mac, "10.77.0.12"}) == "drop");         // ARP for a neighbour
  CHECK(v({"out", "arp", "52:54:00:0b:ad:01", ip}) == "drop");
  CHECK(v({"out", "ipv6", mac, ""}) == "drop");
  CHECK(v({"in", "ipv4", "52:54:00:00:00:99", "10.77.0.1"}) == "accept");
  CHECK(v({"in", "arp", "52:54:00:00:00:99", "10.77.0.1"}) == "accept");
  CHECK(v({"in", "ipv6", "52:54:00:00:00:99", ""}) == "drop");
}

TEST_CASE("the guest filter keeps the UUID it is redefined with", "[virt][guest_filter]") {
  auto xml = build_guest_filter_xml("6c3f2f5e-3c4b-4a43-9d0c-7c1d0e5b9a01");
  REQUIRE(xml.is_ok());
  auto parsed = XmlDoc::parse(*xml);
  REQUIRE(parsed.is_ok());
  XmlDoc d = std::move(parsed).value();
  CHECK(d.str("string(/filter/uuid)") == "6c3f2f5e-3c4b-4a43-9d0c-7c1d0e5b9a01");
}

}  // namespace
}  // namespace armhive
