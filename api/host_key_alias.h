#pragma once

#include <string>

namespace armhive {

// The name a lease's VM is known under in ssh.known_hosts and by ssh (-o HostKeyAlias=): one
// per lease, so a later VM at the same address or forward port, with its own fresh host keys,
// never collides with this one's in a known_hosts file. Server and CLI both use it. Lease ids
// are [a-z0-9-], so the alias is safe on a command line and in a known_hosts file.
inline std::string host_key_alias(const std::string& lease_id) {
  return "armhive-lease-" + lease_id;
}

}  // namespace armhive
