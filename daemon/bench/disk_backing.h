#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "daemon/bench/lease_target.h"

namespace armhive {

// What stands behind the storage suite's figures: the VM disk's format, its overlay file and
// the host filesystem holding it, and the guest's view (device, filesystem, mount point).

// statfs(2) f_type -> "ext4", "xfs", "btrfs", "tmpfs", "overlayfs", "zfs", "nfs", ...;
// "unknown (0x...)" otherwise. Pure.
std::string filesystem_type_name(uint64_t magic);

struct GuestMount {
  std::string device;       // "/dev/vda"
  std::string mount_point;  // "/"
  std::string fs_type;      // "ext4"
};
// The /proc/mounts entry whose mount point is the longest prefix of `dir`. Pure.
std::optional<GuestMount> guest_mount_for(const std::string& proc_mounts, const std::string& dir);

// {"format": "qcow2", "overlay": PATH, "host_filesystem": "ext4"} — or "unknown" members with
// a "note" when the lease target has no disk path or statfs fails. Calls statfs(2).
nlohmann::json host_disk_backing(const LeaseTarget& target);

}  // namespace armhive
