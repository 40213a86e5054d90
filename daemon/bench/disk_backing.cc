#include "daemon/bench/disk_backing.h"

#include <sys/vfs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace armhive {

std::string filesystem_type_name(uint64_t magic) {
  switch (magic) {
    case 0xEF53:
      return "ext4";  // ext2/3/4 share the magic; armhive hosts use ext4
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0x01021994:
      return "tmpfs";
    case 0x794C7630:
      return "overlayfs";
    case 0x2FC12FC1:
      return "zfs";
    case 0x6969:
      return "nfs";
    case 0xF2F52010:
      return "f2fs";
    case 0x65735546:
      return "fuse";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "unknown (0x%llx)", static_cast<unsigned long long>(magic));
      return buf;
    }
  }
}

std::optional<GuestMount> guest_mount_for(const std::string& proc_mounts, const std::string& dir) {
  std::istringstream in(proc_mounts);
  std::string line;
  std::optional<GuestMount> best;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    GuestMount m;
    if (!(fields >> m.device >> m.mount_point >> m.fs_type)) continue;
    const std::string& mp = m.mount_point;
    bool prefix =
        dir == mp || mp == "/" ||
        (dir.size() > mp.size() && dir.compare(0, mp.size(), mp) == 0 && dir[mp.size()] == '/');
    if (prefix && (!best || mp.size() >= best->mount_point.size())) best = m;
  }
  return best;
}

nlohmann::json host_disk_backing(const LeaseTarget& t) {
  nlohmann::json j{
      {"format", t.disk_format.empty() ? "unknown" : t.disk_format},
      {"overlay", t.disk_path.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.disk_path)},
      {"host_filesystem", "unknown"}};
  if (t.disk_path.empty()) {
    j["note"] = "the lease target names no disk file";
    return j;
  }
  struct statfs st {};
  if (::statfs(t.disk_path.c_str(), &st) != 0) {
    j["note"] = std::string("statfs failed: ") + std::strerror(errno);
    return j;
  }
  j["host_filesystem"] = filesystem_type_name(static_cast<uint64_t>(st.f_type));
  return j;
}

}  // namespace armhive
