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

Result<std::string> build_network_xml(const NetworkSpec& spec) {
  if (!valid_name(spec.name, 63)) {
    return invalid_argument("name", "network name must be 1-63 characters of [A-Za-z0-9_.-]");
  }
  if (!valid_name(spec.bridge, 15)) {
    return invalid_argument("bridge", "bridge name must be 1-15 characters of [A-Za-z0-9_.-]");
  }
  size_t slash = spec.ipv4_cidr.find('/');
  if (slash == std::string::npos) return invalid_argument("ipv4_cidr", "expected ADDRESS/PREFIX");
  std::string addr = spec.ipv4_cidr.substr(0, slash);
  std::string prefix_s = spec.ipv4_cidr.substr(slash + 1);
  uint32_t a = 0;
  uint32_t lo = 0;
  uint32_t hi = 0;
  if (!ipv4(addr, a)) return invalid_argument("ipv4_cidr", "not an IPv4 address");
  if (prefix_s.empty() || prefix_s.size() > 2 ||
      !std::all_of(prefix_s.begin(), prefix_s.end(),
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    return invalid_argument("ipv4_cidr", "bad prefix length");
  }
  int prefix = std::stoi(prefix_s);
  if (prefix < 8 || prefix > 30) return invalid_argument("ipv4_cidr", "prefix must be 8-30");
  if (!ipv4(spec.dhcp_start, lo)) return invalid_argument("dhcp_start", "not an IPv4 address");
  if (!ipv4(spec.dhcp_end, hi)) return invalid_argument("dhcp_end", "not an IPv4 address");
  uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
  if ((lo & mask) != (a & mask) || (hi & mask) != (a & mask) || lo > hi) {
    return invalid_argument("dhcp_start", "DHCP range must lie inside the network, start <= end");
  }
  if (a >= lo && a <= hi)
    return invalid_argument("dhcp_start", "DHCP range must not contain the host address");
  if (spec.mtu < 68 || spec.mtu > 65535) return invalid_argument("mtu", "must be 68-65535");

  detail::XmlWriter w;
  w.start("network");
  w.element("name", spec.name);
  w.start("bridge").attr("name", spec.bridge).attr("stp", "off").attr("delay", 0LL).end();
  w.start("mtu").attr("size", spec.mtu).end();
  w.start("ip").attr("address", addr).attr("prefix", prefix);
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
  ConnectPtr conn = connection.get();
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
  ConnectPtr conn = connection.get();
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
