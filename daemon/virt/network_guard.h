#pragma once

#include <string>

#include "base/process_runner.h"
#include "base/result.h"
#include "daemon/virt/network.h"

namespace armhive {

// The host-side rules armhive owns for one guest network: one nftables table per network
// (`inet armhive_<name>`, and in bridge mode its `bridge armhive_<name>` twin), replaced
// atomically by apply and deleted by remove. Nothing else
// in the host's ruleset is touched.
//
// What the table enforces, in every mode:
//   input    a guest reaches no host service (armhived's API, libvirtd, sshd, the access
//            forwards' listeners, anything on any host address) except DHCP and DNS of the
//            network's own dnsmasq (isolated/nat); replies to connections the host opened
//            (SSH forwards, benchmarks) pass. In bridge mode only what arrives through a
//            guest's tap (libvirt's vnet* devices, marked by the table's bridge-family twin)
//            is matched, so the site's LAN on the same bridge is unaffected — and a guest that
//            changes its MAC is still a guest.
//   forward  isolated: nothing from the bridge is forwarded. nat with an egress allow-list:
//            only new connections to the listed CIDRs/ports (and replies) are forwarded. With
//            isolate_guests, nat routes nothing from the bridge back onto it (guest to guest).
//
// nftables here, beside libvirt's nwfilter on each interface (guest_filter.h: a guest's own
// MAC and address, no L2 neighbour): nwfilter's IP-level rules live in iptables physdev
// matches, which see bridged frames only with br_netfilter loaded (not loadable inside a
// sandbox, and a host-wide switch), and an L2 filter cannot tell "to the host" (any of its
// addresses) from "routed through the host" — the input hook can.
// Requires the `nft` binary (Debian package nftables). Blocks on the nft process; any thread.

// The table's name for network `network` ("armhive_" + the name with '-' and '.' as '_').
std::string guard_table_name(const std::string& network);

// The nft JSON ruleset (for `nft -j -f -`) that replaces the network's table (exposed for tests).
Result<std::string> build_guard_ruleset(const NetworkSpec& spec);

Status apply_network_guard(ProcessRunner& runner, const NetworkSpec& spec);
// Deletes the network's tables; a missing table is not an error.
Status remove_network_guard(ProcessRunner& runner, const std::string& network);

// How many rules the guard of `spec` holds once applied (-1: an invalid spec).
int guard_rule_count(const NetworkSpec& spec);

// Applies the guard again when the host's ruleset no longer holds all of its rules (a firewall
// reload's `nft flush ruleset` removes it without a word): true when it had to. Blocks on nft.
Result<bool> restore_network_guard(ProcessRunner& runner, const NetworkSpec& spec);

}  // namespace armhive
