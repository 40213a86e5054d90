#include "daemon/config/secret_files.h"

#include <sys/stat.h>

#include "base/secret_file.h"

namespace armhive {

std::vector<SecretFile> secret_files(const DaemonConfig& config) {
  std::vector<SecretFile> out;
  if (!config.bootstrap_token_file.empty()) {
    out.push_back(
        {config.bootstrap_token_file, "the bootstrap token file ([server] bootstrap_token_file)"});
  }
  if (!config.tls_key.empty()) out.push_back({config.tls_key, "the TLS key ([server] tls_key)"});
  if (!config.github.token_file.empty()) {
    out.push_back({config.github.token_file, "the GitHub token ([github] token_file)"});
  }
  if (!config.github.webhook_secret_file.empty()) {
    out.push_back({config.github.webhook_secret_file,
                   "the GitHub webhook secret ([github] webhook_secret_file)"});
  }
  if (config.access.enabled) {
    out.push_back({config.ssh_ca_key_path(), "the SSH CA key ([access] ssh_ca_key)"});
  }
  return out;
}

Status check_secret_files(const DaemonConfig& config) {
  for (const SecretFile& f : secret_files(config)) {
    struct stat st {};
    if (::stat(f.path.c_str(), &st) != 0) continue;  // absent: see the header
    ARMHIVE_RETURN_IF_ERROR(check_secret_file(f.path, f.what));
  }
  return Status::ok();
}

}  // namespace armhive
