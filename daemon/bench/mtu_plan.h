#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace armhive {

// Jumbo frames end to end, the pure part: what an MTU run changes on the
// host side (the bridge and the VM's tap device) besides the guest, whether those links can
// carry the MTU at all, and what to restore afterwards. Applying it (ip link set ... mtu M
// through ProcessRunner, in the order bridge, tap, guest, and back in reverse) and measuring
// the path MTU are host_mtu.h's. Pure; any thread.
struct HostLinkMtu {
  std::string name;     // "ahbrb0", "vnet3"
  int mtu = 0;          // current
  int min_mtu = 0;      // from `ip -d -j link show dev NAME`; 0: not reported
  int max_mtu = 0;      // 0: not reported (no limit known)
  std::string address;  // MAC, lower case; empty when not reported
};

// `ip -d -j link show dev NAME` -> the link's MTU limits; kInvalidArgument for anything else.
Result<HostLinkMtu> parse_ip_link_json(std::string_view output);
// `ip -d -j link show master BRIDGE` (the bridge's ports, possibly none) -> their limits.
Result<std::vector<HostLinkMtu>> parse_ip_link_list_json(std::string_view output);

struct MtuStep {
  std::string link;
  int from = 0;
  int to = 0;
};

// The steps raising every link to `mtu` (bridge first, so the tap never exceeds it) and the
// steps undoing them in reverse order. Links already at `mtu` get no step. kInvalidArgument
// naming network.mtus when a link cannot carry it: "MTU 9000: the host's tap device vnet3
// carries at most 1500".
struct MtuPlan {
  std::vector<MtuStep> apply;
  std::vector<MtuStep> restore;
};
Result<MtuPlan> plan_host_mtu(int mtu, const std::vector<HostLinkMtu>& links_bridge_first);

}  // namespace armhive
