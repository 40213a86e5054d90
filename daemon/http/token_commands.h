#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace armhive {

class Database;
class TokenStore;

// `armhived token ...`: `args` are the words after "token":
//   create NAME [--role admin|ci|dev|read] [--max-leases N] [--max-ttl 4h]
//       prints the secret once on `out` (nothing else on stdout, so it can be captured)
//   revoke NAME
//   list [--json]
// Returns the process exit code: 0 ok, 1 usage error, 2 refused (name taken, unknown name),
// 3 database failure. Messages for people go to `err`.
// Threading: call from main() before or while the server runs (the store is thread-safe).
int run_token_command(const std::vector<std::string>& args, Database& db, std::ostream& out,
                      std::ostream& err);

inline constexpr std::string_view kBootstrapAdminName = "bootstrap-admin";

// The bootstrap admin token: main() passes a secret from a file (first line) or the
// ARMHIVE_ADMIN_TOKEN environment variable; it is stored (hashed) as the admin token `name`,
// replacing an earlier bootstrap secret. kInvalidArgument when it does not look like a token.
Status install_bootstrap_token(TokenStore& tokens, std::string_view secret,
                               std::string_view name = kBootstrapAdminName);
// The first line of `path`, trimmed; kNotFound / kPermissionDenied style errors as kUnavailable.
Result<std::string> read_token_file(const std::string& path);

}  // namespace armhive
