#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "daemon/config/daemon_config.h"

namespace armhive {

// The files of a configuration that hold secrets, with what each is: the bootstrap token file
// and the TLS private key (add the SSH CA key here when it exists). Only set fields.
struct SecretFile {
  std::string path;
  std::string what;
};
std::vector<SecretFile> secret_files(const DaemonConfig& config);

// armhived refuses to start when any existing secret file is accessible by group or others:
// the first such file, as check_secret_file says (naming it and the chmod that fixes it).
// A missing bootstrap token file is fine (armhived creates it 0600); a missing TLS key is left
// to the server, which names it.
Status check_secret_files(const DaemonConfig& config);

}  // namespace armhive
