#pragma once

#include <string_view>

namespace armhive {

// Whether a libvirt URI names another host ("qemu+tcp://tx1/system", "qemu+ssh://u@hc1/system")
// rather than this one ("qemu:///system", "test:///default"): its files are not on this disk,
// and nothing armhived runs on this machine (nftables, host baselines) reaches it. Pure.
bool is_remote_uri(std::string_view uri);

}  // namespace armhive
