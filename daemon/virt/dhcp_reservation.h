#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/virt/connection.h"

namespace armhive {

// Addresses known before boot (issue 17 item 2): every VM on a network with libvirt DHCP gets
// a `<host mac name ip>` entry in that network before its domain starts, so its address is
// known the moment the domain exists and readiness waits for the guest agent alone. The entry
// is named after the domain: that is how release_dhcp_host() and recovery find it again even
// when the domain is gone.
//
// Threading: all functions block on libvirt and may be called from any thread; no lock of ours
// is held. Concurrent reservations on one network are safe without one: libvirt refuses an
// entry whose MAC, name or IP is already there (kConflict) and reserve_dhcp_host() moves on to
// the next free address.

struct DhcpHost {
  std::string mac;   // "52:54:00:xx:xx:xx"
  std::string name;  // the domain name
  std::string ip;    // IPv4
  bool operator==(const DhcpHost&) const = default;
};

// What a network's XML says about its DHCP: the dynamic range and the host entries of its
// first IPv4 <ip> element. No range: libvirt serves no DHCP there (bridge mode, the site's
// DHCP), and no address can be reserved.
struct NetworkDhcp {
  std::string range_start;
  std::string range_end;
  std::vector<DhcpHost> hosts;
};
Result<NetworkDhcp> parse_network_dhcp(std::string_view network_xml);

// The <host> element for virNetworkUpdate (escaped by libxml2).
Result<std::string> build_dhcp_host_xml(const DhcpHost& host);

// A random locally administered MAC in QEMU's 52:54:00 prefix.
std::string random_mac();

// The MAC a VM reserving IPv4 `ip` gets: 52:54:00 and the address's last three bytes; empty for
// a malformed address. One MAC per address on purpose: dnsmasq keeps a destroyed VM's lease for
// its lease time (an hour), and a lease held by another MAC blocks its address, so fresh random
// MACs would exhaust a range within an hour of busy CI (a /24 serves ~240 VMs an hour). The next
// VM on that address has the lease's own MAC and dnsmasq simply renews it. Pure.
std::string mac_for_address(const std::string& ip);

// A current DHCP lease of a network (virNetworkGetDHCPLeases).
struct DhcpLease {
  std::string ip;
  std::string mac;
};

// Addresses a new reservation must not take: every host entry's, and every leased address
// except those whose lease is held by the MAC the reservation would use there (`mac`, or
// mac_for_address(ip) when `mac` is empty) — that lease is a former VM's of this address.
// Pure.
std::vector<std::string> addresses_in_use(const std::vector<DhcpLease>& leases,
                                          const std::vector<DhcpHost>& hosts,
                                          const std::string& mac);

// The first address of [range_start, range_end] not in `taken`; nullopt when the range is full
// or malformed. Pure.
std::optional<std::string> first_free_address(const std::string& range_start,
                                              const std::string& range_end,
                                              const std::vector<std::string>& taken);

// Adds a host entry for domain `name` on the active network `network` (live only: armhive's
// networks are transient) under `mac` (empty: mac_for_address() of the address) and the first
// address of the DHCP range that addresses_in_use() leaves free; the existing entry when `name`
// has one already. nullopt when the network serves no DHCP (the guest then finds its own address);
// kResourceExhausted when the range is full, kNotFound when the network does not exist.
Result<std::optional<DhcpHost>> reserve_dhcp_host(const Connection& connection,
                                                  const std::string& network,
                                                  const std::string& name, const std::string& mac);

// Removes every host entry named `name` from every active network. Missing entries and
// networks are not errors (idempotent: destroy and failure paths call it unconditionally).
Status release_dhcp_host(const Connection& connection, const std::string& name);

// The reserved entry of domain `name` on `network`, if any.
Result<std::optional<DhcpHost>> find_dhcp_host(const Connection& connection,
                                               const std::string& network, const std::string& name);

// Names of the host entries on active networks that look like armhive's (valid domain names
// starting with `prefix`), for orphan cleanup after a crash.
Result<std::vector<std::string>> list_dhcp_host_names(const Connection& connection,
                                                      std::string_view prefix);

}  // namespace armhive
