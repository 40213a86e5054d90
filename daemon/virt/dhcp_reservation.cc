#include "daemon/virt/dhcp_reservation.h"

#include <arpa/inet.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <random>
#include <set>

#include "daemon/core/hypervisor.h"
#include "daemon/virt/error.h"
#include "daemon/virt/handles.h"
#include "daemon/virt/xml.h"

namespace armhive {

namespace {

using detail::attr_of;
using detail::XmlDoc;
using detail::XmlWriter;

// Bounds the retries when other reservations take the chosen address between our read of the
// network and our update (each retry re-reads it).
constexpr int kMaxAttempts = 16;

std::optional<uint32_t> parse_ipv4(const std::string& s) {
  in_addr a{};
  if (inet_pton(AF_INET, s.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

std::string format_ipv4(uint32_t host_order) {
  in_addr a{};
  a.s_addr = htonl(host_order);
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, buf, sizeof(buf));
  return buf;
}

Result<std::string> network_xml(virNetworkPtr net, const std::string& network) {
  LibvirtString xml(virNetworkGetXMLDesc(net, 0));
  if (!xml) return libvirt_error("read network XML", network);
  return xml.str();
}

// What dnsmasq has handed out: former VMs' leases (kept for the lease time after they are
// gone), guests of before reservations, anything else on the network.
std::vector<DhcpLease> current_leases(virNetworkPtr net) {
  std::vector<DhcpLease> out;
  virNetworkDHCPLeasePtr* leases = nullptr;
  int n = virNetworkGetDHCPLeases(net, nullptr, &leases, 0);
  if (n < 0) {
    virResetLastError();  // no lease file yet: nothing leased
    return out;
  }
  for (int i = 0; i < n; ++i) {
    if (leases[i]->type == VIR_IP_ADDR_TYPE_IPV4 && leases[i]->ipaddr != nullptr) {
      out.push_back({leases[i]->ipaddr, leases[i]->mac != nullptr ? leases[i]->mac : ""});
    }
    virNetworkDHCPLeaseFree(leases[i]);
  }
  free(leases);  // NOLINT: libvirt allocated the array
  return out;
}

Status update_host(virNetworkPtr net, const std::string& network, virNetworkUpdateCommand command,
                   const DhcpHost& host) {
  ARMHIVE_ASSIGN_OR_RETURN(std::string xml, build_dhcp_host_xml(host));
  if (virNetworkUpdate(net, command, VIR_NETWORK_SECTION_IP_DHCP_HOST, -1, xml.c_str(),
                       VIR_NETWORK_UPDATE_AFFECT_LIVE) < 0) {
    return libvirt_error(command == VIR_NETWORK_UPDATE_COMMAND_DELETE ? "delete DHCP host entry"
                                                                      : "add DHCP host entry",
                         network + " " + host.name);
  }
  return Status::ok();
}

std::vector<NetworkHandle> active_networks(virConnectPtr conn, Status& error) {
  std::vector<NetworkHandle> out;
  virNetworkPtr* nets = nullptr;
  int n = virConnectListAllNetworks(conn, &nets, VIR_CONNECT_LIST_NETWORKS_ACTIVE);
  if (n < 0) {
    error = libvirt_error("list networks", "");
    return out;
  }
  out.reserve(n);
  for (int i = 0; i < n; ++i) out.emplace_back(nets[i]);
  free(nets);  // NOLINT: libvirt allocated the array
  return out;
}

}  // namespace

Result<NetworkDhcp> parse_network_dhcp(std::string_view network_xml) {
  ARMHIVE_ASSIGN_OR_RETURN(XmlDoc doc, XmlDoc::parse(network_xml));
  NetworkDhcp out;
  // The IPv4 <ip> element: family absent or "ipv4".
  xmlNodePtr ip = doc.node("/network/ip[not(@family) or @family='ipv4'][dhcp]");
  if (ip == nullptr) return out;
  if (xmlNodePtr range = doc.node("dhcp/range", ip)) {
    out.range_start = attr_of(range, "start");
    out.range_end = attr_of(range, "end");
  }
  for (xmlNodePtr h : doc.nodes("dhcp/host", ip)) {
    out.hosts.push_back({attr_of(h, "mac"), attr_of(h, "name"), attr_of(h, "ip")});
  }
  return out;
}

Result<std::string> build_dhcp_host_xml(const DhcpHost& host) {
  XmlWriter w;
  w.start("host");
  if (!host.mac.empty()) w.attr("mac", host.mac);
  if (!host.name.empty()) w.attr("name", host.name);
  if (!host.ip.empty()) w.attr("ip", host.ip);
  w.end();
  return w.finish();
}

std::string random_mac() {
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_int_distribution<int> byte(0, 255);
  char buf[18] = {};
  std::snprintf(buf, sizeof(buf), "52:54:00:%02x:%02x:%02x", byte(rng), byte(rng), byte(rng));
  return buf;
}

std::string mac_for_address(const std::string& ip) {
  auto a = parse_ipv4(ip);
  if (!a) return "";
  char buf[18] = {};
  std::snprintf(buf, sizeof(buf), "52:54:00:%02x:%02x:%02x", (*a >> 16) & 0xff, (*a >> 8) & 0xff,
                *a & 0xff);
  return buf;
}

std::vector<std::string> addresses_in_use(const std::vector<DhcpLease>& leases,
                                          const std::vector<DhcpHost>& hosts,
                                          const std::string& mac) {
  auto lower = [](std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  std::vector<std::string> out;
  for (const DhcpHost& h : hosts) out.push_back(h.ip);
  for (const DhcpLease& l : leases) {
    std::string would_use = mac.empty() ? mac_for_address(l.ip) : mac;
    if (would_use.empty() || lower(l.mac) != lower(would_use)) out.push_back(l.ip);
  }
  return out;
}

std::optional<std::string> first_free_address(const std::string& range_start,
                                              const std::string& range_end,
                                              const std::vector<std::string>& taken) {
  auto lo = parse_ipv4(range_start);
  auto hi = parse_ipv4(range_end);
  if (!lo || !hi || *lo > *hi) return std::nullopt;
  std::set<uint32_t> used;
  for (const std::string& t : taken) {
    if (auto a = parse_ipv4(t)) used.insert(*a);
  }
  for (uint64_t a = *lo; a <= *hi; ++a) {
    if (used.count(static_cast<uint32_t>(a)) == 0) return format_ipv4(static_cast<uint32_t>(a));
  }
  return std::nullopt;
}

Result<std::optional<DhcpHost>> reserve_dhcp_host(const Connection& connection,
                                                  const std::string& network,
                                                  const std::string& name, const std::string& mac) {
  ARMHIVE_RETURN_IF_ERROR(validate_domain_name(name));
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, connection.get());
  NetworkHandle net(virNetworkLookupByName(conn.get(), network.c_str()));
  if (!net) return libvirt_error("look up network", network);
  Status last = Status::ok();
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    ARMHIVE_ASSIGN_OR_RETURN(std::string xml, network_xml(net.get(), network));
    ARMHIVE_ASSIGN_OR_RETURN(NetworkDhcp dhcp, parse_network_dhcp(xml));
    if (dhcp.range_start.empty()) {
      return std::optional<DhcpHost>();  // the network serves no DHCP
    }
    for (const DhcpHost& h : dhcp.hosts) {
      if (h.name == name) return std::optional<DhcpHost>(h);  // reserved already
    }
    std::vector<std::string> taken = addresses_in_use(current_leases(net.get()), dhcp.hosts, mac);
    auto ip = first_free_address(dhcp.range_start, dhcp.range_end, taken);
    if (!ip) {
      return Status(ErrorCode::kResourceExhausted, "no free address in the DHCP range", network);
    }
    DhcpHost host{mac.empty() ? mac_for_address(*ip) : mac, name, *ip};
    last = update_host(net.get(), network, VIR_NETWORK_UPDATE_COMMAND_ADD_LAST, host);
    if (last.is_ok()) return std::optional<DhcpHost>(std::move(host));
    // Taken in between (same MAC, name or address): read the network again.
    if (last.code() != ErrorCode::kConflict) return last;
  }
  return last;
}

Status release_dhcp_host(const Connection& connection, const std::string& name) {
  ARMHIVE_RETURN_IF_ERROR(validate_domain_name(name));
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, connection.get());
  Status error = Status::ok();
  std::vector<NetworkHandle> nets = active_networks(conn.get(), error);
  ARMHIVE_RETURN_IF_ERROR(error);
  for (const NetworkHandle& net : nets) {
    const char* raw = virNetworkGetName(net.get());
    std::string network = raw != nullptr ? raw : "";
    auto xml = network_xml(net.get(), network);
    if (!xml.is_ok()) {
      if (xml.status().code() == ErrorCode::kNotFound) continue;  // gone since listing
      return xml.status();
    }
    auto dhcp = parse_network_dhcp(*xml);
    if (!dhcp.is_ok()) continue;
    for (const DhcpHost& h : dhcp->hosts) {
      if (h.name != name) continue;
      Status s = update_host(net.get(), network, VIR_NETWORK_UPDATE_COMMAND_DELETE, h);
      // Deleted in between by a concurrent release: that is what we wanted.
      if (!s.is_ok() && s.code() != ErrorCode::kNotFound && s.code() != ErrorCode::kConflict) {
        return s;
      }
    }
  }
  return Status::ok();
}

Result<std::optional<DhcpHost>> find_dhcp_host(const Connection& connection,
                                               const std::string& network,
                                               const std::string& name) {
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, connection.get());
  NetworkHandle net(virNetworkLookupByName(conn.get(), network.c_str()));
  if (!net) return libvirt_error("look up network", network);
  ARMHIVE_ASSIGN_OR_RETURN(std::string xml, network_xml(net.get(), network));
  ARMHIVE_ASSIGN_OR_RETURN(NetworkDhcp dhcp, parse_network_dhcp(xml));
  for (DhcpHost& h : dhcp.hosts) {
    if (h.name == name) return std::optional<DhcpHost>(std::move(h));
  }
  return std::optional<DhcpHost>();
}

Result<std::vector<std::string>> list_dhcp_host_names(const Connection& connection,
                                                      std::string_view prefix) {
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, connection.get());
  Status error = Status::ok();
  std::vector<NetworkHandle> nets = active_networks(conn.get(), error);
  ARMHIVE_RETURN_IF_ERROR(error);
  std::set<std::string> names;
  for (const NetworkHandle& net : nets) {
    LibvirtString xml(virNetworkGetXMLDesc(net.get(), 0));
    if (!xml) {
      virResetLastError();
      continue;
    }
    auto dhcp = parse_network_dhcp(xml.get());
    if (!dhcp.is_ok()) continue;
    for (const DhcpHost& h : dhcp->hosts) {
      if (h.name.rfind(prefix, 0) == 0 && validate_domain_name(h.name).is_ok()) {
        names.insert(h.name);
      }
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

}  // namespace armhive
