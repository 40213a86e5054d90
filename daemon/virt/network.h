#pragma once

#include <string>

#include "base/result.h"
#include "daemon/virt/connection.h"

namespace armhive {

// An isolated libvirt network: a bridge with the host's address, DHCP, no <forward> (guests
// reach the host and each other only). Needs dnsmasq (dnsmasq-base) on the host.
struct NetworkSpec {
  std::string name;        // libvirt network name, [A-Za-z0-9_.-]
  std::string bridge;      // bridge device, at most 15 characters of [A-Za-z0-9_.-]
  std::string ipv4_cidr;   // the host's address on it and the prefix, e.g. "10.77.0.1/24"
  std::string dhcp_start;  // e.g. "10.77.0.10"
  std::string dhcp_end;    // e.g. "10.77.0.250"
  int mtu = 1500;
};

// Validates `spec`; starts the network if it exists but is inactive, creates it transient
// (virNetworkCreateXML) if it is missing, and does nothing if it is active (whatever its
// definition). Blocks on libvirt; any thread.
Status ensure_network(const Connection& connection, const NetworkSpec& spec);

// Destroys (and undefines, if persistent) the network; missing is not an error.
Status remove_network(const Connection& connection, const std::string& name);

// The network XML for `spec` (exposed for tests).
Result<std::string> build_network_xml(const NetworkSpec& spec);

}  // namespace armhive
