#pragma once

#include <string>
#include <string_view>

#include "base/result.h"
#include "daemon/virt/connection.h"

namespace armhive {

// What keeps a guest to its own identity and away from its neighbours on a shared network,
// with what libvirt already has (a CI job is root in its guest and may rewrite its MAC, claim a
// neighbour's address or answer ARP for it):
//   - nwfilter `armhive-guest` (ebtables, so no br_netfilter needed), bound per interface to the
//     VM's MAC and reserved IPv4 address: frames from another MAC, IPv4 from another address
//     (DHCP from 0.0.0.0 excepted), ARP naming another MAC or address, and every other L2
//     protocol are dropped at the guest's tap; towards the guest only IPv4 and ARP pass. Without
//     a reserved address (bridge mode: the site's DHCP answers) libvirt learns the address from
//     the guest's DHCP exchange (CTRL_IP_LEARNING=dhcp) and lets only DHCP pass until then.
//   - an isolated bridge port (<port isolated='yes'/>): guest taps never exchange frames with
//     each other, only with the bridge itself (the host, its dnsmasq) and non-isolated ports
//     (the site's uplink in bridge mode). Guest-to-guest through the host's routing is the
//     network guard's (network_guard.h).
// The interface elements are written by build_domain_xml() (domain_xml.h) when the VM's
// network isolates its guests.

// The filter's name, as <filterref filter=…> names it.
inline constexpr std::string_view kGuestFilterName = "armhive-guest";

// The filter's XML (`uuid` empty: libvirt assigns one). Exposed for tests.
Result<std::string> build_guest_filter_xml(std::string_view uuid);

// Defines (or redefines, keeping its UUID) the filter on `connection`'s host; idempotent.
// libvirt re-instantiates the rules of running guests that use it. kUnavailable naming the
// missing piece when the host's libvirtd has no nwfilter driver. Blocks on libvirt; any thread.
Status ensure_guest_filter(const Connection& connection);

}  // namespace armhive
