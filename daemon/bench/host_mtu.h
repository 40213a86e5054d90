#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/process_runner.h"
#include "base/result.h"
#include "daemon/bench/mtu_plan.h"

namespace armhive {

// Jumbo frames' host side, applied: reads the VM's bridge and its ports with `ip -d -j link`,
// refuses an MTU they cannot carry, sets bridge and tap MTUs (`ip link set dev L mtu M`, argv
// vectors through ProcessRunner) and verifies the path MTU with `ping -M do -s M-28`.
// Blocking; called from the benchmark runner (start() for the check, the worker for the rest).

struct HostMtuLinks {
  HostLinkMtu bridge;
  std::vector<HostLinkMtu> ports;  // every port of the bridge (the VM's tap among them)
};

// `ip -d -j link show dev BRIDGE` and `ip -d -j link show master BRIDGE`.
Result<HostMtuLinks> read_host_mtu_links(ProcessRunner& processes, const std::string& bridge,
                                         std::chrono::milliseconds timeout);

// kInvalidArgument naming network.mtus[i] for the first MTU the bridge or one of its ports
// (an uplink, the VM's tap) cannot carry: "MTU 9000: the host's eno1 carries at most 1500".
Status check_host_mtus(const std::vector<int>& mtus, const HostMtuLinks& links);

// The VM's tap: the bridge port whose MAC is the guest's with the first byte fe (libvirt's
// rule for tap devices). kNotFound when no port matches.
Result<HostLinkMtu> find_tap(const HostMtuLinks& links, const std::string& guest_mac);

// Runs the steps in order; stops at the first failure and returns it (the caller restores
// the steps that were applied: `applied` says how many).
Status apply_mtu_steps(ProcessRunner& processes, const std::vector<MtuStep>& steps,
                       std::chrono::milliseconds timeout, size_t* applied = nullptr);

// `ping -M do -s MTU-28 -c 2 -W 2 ADDRESS` (IPv4: 20 bytes of header and 8 of ICMP, don't
// fragment): the MTU when the packets came back whole, else nullopt with `why` set.
std::optional<int> verify_path_mtu(ProcessRunner& processes, const std::string& address, int mtu,
                                   std::chrono::milliseconds timeout, std::string& why);

}  // namespace armhive
