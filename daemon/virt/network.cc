#include "daemon/virt/network.h"

#include <arpa/inet.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <algorithm>
#include <cctype>

#include "daemon/virt/error.h"
#include "daemon/virt/handles.h"
#include "daemon/virt/xml.h"

namespace armhive {

namespace {

bool valid_name(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  }
  return true;
}

bool ipv4(const std::string& s, uint32_t& out) {
  in_addr a{};
  if (inet_pton(AF_INET, s.c_str(), &a) != 1) return false;
  out = ntohl(a.s_addr);
  return true;
}

}  // namespace

std::string_view to_string(NetworkMode mode) {
  switch (mode) {
    case NetworkMode::kIsolated:
      return "isolated";
    case NetworkMode::kNat:
      return "nat";
    case NetworkMode::kBridge:
      return "bridge";
  }
  return "isolated";
}

std::optional<NetworkMode> network_mode_from_string(std::string_view s) {
  if (s == "isolated") return NetworkMode::kIsolated;
  if (s == "nat") return NetworkMode::kNat;
  if (s == "bridge") return NetworkMode::kBridge;
  return std::nullopt;
}

Result<Ipv4Prefix> parse_ipv4_prefix(const std::string& field, const std::string& text,
                                     bool allow_bare_address) {
  size_t slash = text.find('/');
  std::string addr = text.substr(0, slash);
  Ipv4Prefix out;
  if (!ipv4(addr, out.address)) return invalid_argument(field, "not an IPv4 address: " + addr);
  if (slash == std::string::npos) {
    if (!allow_bare_address) return invalid_argument(field, "expected ADDRESS/PREFIX");
    out.length = 32;
    return out;
  }
  std::string prefix_s = text.substr(slash + 1);
  if (prefix_s.empty() || prefix_s.size() > 2 ||
      !std::all_of(prefix_s.begin(), prefix_s.end(),
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    return invalid_argument(field, "bad prefix length");
  }
  out.length = (prefix_s[0] - '0') * (prefix_s.size() == 2 ? 10 : 1) +
               (prefix_s.size() == 2 ? prefix_s[1] - '0' : 0);
  if (out.length > 32) return invalid_argument(field, "prefix must be 0-32");
  return out;
}

std::string Ipv4Prefix::network_address() const {
  uint32_t mask = length == 0 ? 0 : ~uint32_t{0} << (32 - length);
  in_addr a{};
  a.s_addr = htonl(address & mask);
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

Status validate_network_spec(const NetworkSpec& spec) {
  if (!valid_name(spec.name, 63)) {
    return invalid_argument("name", "network name must be 1-63 characters of [A-Za-z0-9_.-]");
  }
  if (!valid_name(spec.bridge, 15)) {
    return invalid_argument("bridge", "bridge name must be 1-15 characters of [A-Za-z0-9_.-]");
  }
  if (spec.mode != NetworkMode::kNat && !spec.egress.empty()) {
    return invalid_argument("egress",
                            "an egress allow-list needs mode \"nat\" (isolated guests have no "
                            "egress; bridged guests are the site network's business)");
  }
  for (size_t i = 0; i < spec.egress.size(); ++i) {
    const std::string field = "egress[" + std::to_string(i) + "]";
    auto prefix = parse_ipv4_prefix(field + ".cidr", spec.egress[i].cidr, true);
    if (!prefix.is_ok()) return prefix.status();
    for (size_t j = 0; j < spec.egress[i].ports.size(); ++j) {
      int port = spec.egress[i].ports[j];
      if (port < 1 || port > 65535) {
        return invalid_argument(field + ".ports[" + std::to_string(j) + "]", "must be 1-65535");
      }
    }
  }
  if (spec.mode == NetworkMode::kBridge) return Status::ok();  // the site's DHCP serves it

  auto host = parse_ipv4_prefix("ipv4_cidr", spec.ipv4_cidr, false);
  if (!host.is_ok()) return host.status();
  if (host->length < 8 || host->length > 30)
    return invalid_argument("ipv4_cidr", "prefix must be 8-30");
  uint32_t lo = 0;
  uint32_t hi = 0;
  if (!ipv4(spec.dhcp_start, lo)) return invalid_argument("dhcp_start", "not an IPv4 address");
  if (!ipv4(spec.dhcp_end, hi)) return invalid_argument("dhcp_end", "not an IPv4 address");
  uint32_t a = host->address;
  uint32_t mask = ~uint32_t{0} << (32 - host->length);
  if ((lo & mask) != (a & mask) || (hi & mask) != (a & mask) || lo > hi) {
    return invalid_argument("dhcp_start", "DHCP range must lie inside the network, start <= end");
  }
  if (a >= lo && a <= hi)
    return invalid_argument("dhcp_start", "DHCP range must not contain the host address");
  if (spec.mtu < 68 || spec.mtu > 65535) return invalid_argument("mtu", "must be 68-65535");
  return Status::ok();
}

Result<std::string> build_network_xml(const NetworkSpec& spec) {
  ARMHIVE_RETURN_IF_ERROR(validate_network_spec(spec));
  detail::XmlWriter w;
  w.start("network");
  w.element("name", spec.name);
  if (spec.mode == NetworkMode::kBridge) {
    // The bridge exists on the host already; libvirt only attaches guests' taps to it.
    w.start("forward").attr("mode", "bridge").end();
    w.start("bridge").attr("name", spec.bridge).end();
    return w.finish();
  }
  if (spec.mode == NetworkMode::kNat) w.start("forward").attr("mode", "nat").end();
  w.start("bridge").attr("name", spec.bridge).attr("stp", "off").attr("delay", 0LL).end();
  w.start("mtu").attr("size", spec.mtu).end();
  auto host = parse_ipv4_prefix("ipv4_cidr", spec.ipv4_cidr, false);
  std::string addr = spec.ipv4_cidr.substr(0, spec.ipv4_cidr.find('/'));
  w.start("ip").attr("address", addr).attr("prefix", host->length);
  w.start("dhcp")
      .start("range")
      .attr("start", spec.dhcp_start)
      .attr("end", spec.dhcp_end)
      .end()
      .end();
  w.end();
  w.end();
  return w.finish();
}

Status ensure_network(const Connection& connection, const NetworkSpec& spec) {
  ARMHIVE_ASSIGN_OR_RETURN(std::string xml, build_network_xml(spec));
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, connection.get());
  NetworkHandle net(virNetworkLookupByName(conn.get(), spec.name.c_str()));
  if (net) {
    int active = virNetworkIsActive(net.get());
    if (active < 0) return libvirt_error("check network", spec.name);
    if (active == 0 && virNetworkCreate(net.get()) < 0)
      return libvirt_error("start network", spec.name);
    return Status::ok();
  }
  virResetLastError();
  NetworkHandle created(virNetworkCreateXML(conn.get(), xml.c_str()));
  if (!created) {
    Status s = libvirt_error("create network", spec.name);
    // Lost a race with another creator: fine if it is there now.
    NetworkHandle again(virNetworkLookupByName(conn.get(), spec.name.c_str()));
    if (again && virNetworkIsActive(again.get()) == 1) return Status::ok();
    virResetLastError();
    return s;
  }
  return Status::ok();
}

Status remove_network(const Connection& connection, const std::string& name) {
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, connection.get());
  NetworkHandle net(virNetworkLookupByName(conn.get(), name.c_str()));
  if (!net) {
    Status s = libvirt_error("look up network", name);
    return s.code() == ErrorCode::kNotFound ? Status::ok() : s;
  }
  if (virNetworkIsActive(net.get()) == 1 && virNetworkDestroy(net.get()) < 0) {
    Status s = libvirt_error("destroy network", name);
    if (s.code() != ErrorCode::kNotFound && s.code() != ErrorCode::kConflict) return s;
  }
  virResetLastError();
  if (virNetworkIsPersistent(net.get()) == 1 && virNetworkUndefine(net.get()) < 0) {
    Status s = libvirt_error("undefine network", name);
    if (s.code() != ErrorCode::kNotFound) return s;
  }
  virResetLastError();
  return Status::ok();
}

}  // namespace armhive
