#pragma once

#include <string>

#include "api/client.h"
#include "base/result.h"

namespace armhive {

// Where the CLI finds its server and token, first match wins:
//   1. --server / --token (and --ca-file, --insecure)
//   2. ARMHIVE_SERVER / ARMHIVE_TOKEN (ARMHIVE_CA_FILE)
//   3. the config file: --config, else $ARMHIVE_CONFIG, else
//      $XDG_CONFIG_HOME/armhive/config.toml, else ~/.config/armhive/config.toml:
//        server = "https://armhive.example:8470"
//        # or several armhived sharing one database, tried in order (api/client.h):
//        #   server = "https://a.example:8470,https://b.example:8470"
//        #   server = ["https://a.example:8470", "https://b.example:8470"]
//        token = "ah_..."            # or token_file = "~/.config/armhive/token"
//        ca_file = "/etc/armhive/ca.pem"
//        insecure = false
//   4. http://127.0.0.1:8470 and no token
struct CliSettings {
  std::string server;  // one URL or a comma list, as --server and ARMHIVE_SERVER take it
  std::string token;
  std::string ca_file;
  bool insecure = false;
  std::string config_path;  // explicit --config
};

// The result's `servers` is the list (a comma list split, blanks trimmed; not yet validated:
// Client::create names a bad entry) and `server` its first entry.
// A missing default config file is not an error; a missing explicit one, a TOML syntax error or
// a wrong type is kInvalidArgument naming the file and key.
Result<ClientOptions> resolve_client_options(const CliSettings& flags);

// Writes a lease's known_hosts lines to $XDG_CACHE_HOME/armhive/known_hosts/LEASE (else
// ~/.cache/…, else /tmp/armhive-UID/…) and returns the path, for `ssh -o UserKnownHostsFile=`.
Result<std::string> write_known_hosts(const std::string& lease_id, const std::string& lines);
// A private (0700) directory for one lease's ephemeral SSH key and certificate:
// <cache>/armhive/ssh/<lease>.
Result<std::string> lease_key_dir(const std::string& lease_id);

// "~/x" -> "$HOME/x".
std::string expand_home(const std::string& path);

}  // namespace armhive
