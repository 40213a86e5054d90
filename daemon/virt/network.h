#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/virt/connection.h"

namespace armhive {

// How guests on a network reach the world:
//   isolated  a bridge with the host's address and DHCP, no <forward>: no egress at all
//   nat       the same plus <forward mode='nat'>: egress through the host's routes, masqueraded
//   bridge    <forward mode='bridge'> onto an existing host bridge (e.g. one over the LACP bond);
//             addresses come from the site's DHCP, armhive sets none
enum class NetworkMode { kIsolated, kNat, kBridge };
std::string_view to_string(NetworkMode mode);
std::optional<NetworkMode> network_mode_from_string(std::string_view s);

// One allowed egress destination: an IPv4 CIDR and the TCP/UDP ports allowed there (empty:
// every port).
struct EgressRule {
  std::string cidr;  // "192.0.2.0/24", or one address "192.0.2.7"
  std::vector<int> ports;
};

// A libvirt network for guests. isolated/nat need dnsmasq (dnsmasq-base) on the host.
struct NetworkSpec {
  std::string name;        // libvirt network name, [A-Za-z0-9_.-]
  std::string bridge;      // bridge device, at most 15 characters of [A-Za-z0-9_.-]
  std::string ipv4_cidr;   // the host's address on it and the prefix, e.g. "10.77.0.1/24"
  std::string dhcp_start;  // e.g. "10.77.0.10"
  std::string dhcp_end;    // e.g. "10.77.0.250"
  int mtu = 1500;
  NetworkMode mode = NetworkMode::kIsolated;
  // nat only: when non-empty, guests may open connections to these destinations only (enforced
  // by the network guard, see network_guard.h). Empty: any destination.
  std::vector<EgressRule> egress;
  // Guests are kept to their own identity and apart (guest_filter.h): their interfaces get the
  // nwfilter and isolated ports, and the guard drops what the host would route between them.
  bool isolate_guests = true;
};

// Validates `spec`; starts the network if it exists but is inactive, creates it transient
// (virNetworkCreateXML) if it is missing, and does nothing if it is active (whatever its
// definition). Blocks on libvirt; any thread.
Status ensure_network(const Connection& connection, const NetworkSpec& spec);

// Destroys (and undefines, if persistent) the network; missing is not an error.
Status remove_network(const Connection& connection, const std::string& name);

// An IPv4 address with a prefix length, parsed from "A.B.C.D/N" (or "A.B.C.D" as /32 when
// allowed); kInvalidArgument naming `field`.
struct Ipv4Prefix {
  uint32_t address = 0;  // host byte order
  int length = 32;
  std::string network_address() const;  // the address with the host bits cleared
};
Result<Ipv4Prefix> parse_ipv4_prefix(const std::string& field, const std::string& text,
                                     bool allow_bare_address);

// Validates the mode-independent and mode-specific fields (kInvalidArgument naming the field).
Status validate_network_spec(const NetworkSpec& spec);

// The network XML for `spec` (exposed for tests).
Result<std::string> build_network_xml(const NetworkSpec& spec);

}  // namespace armhive
