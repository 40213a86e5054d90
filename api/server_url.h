#pragma once

#include <string>

#include "base/result.h"

namespace armhive {

// The URLs a client is given for armhived (--server, ARMHIVE_SERVER, the config file) and the
// ones a standby redirects it to: the rules the HTTP client (client.h) and the tunnel client
// (tunnel_client.h) share. Pure functions, any thread.

// "http(s)://host[:port]" without a trailing slash, or kInvalidArgument (field "server") for
// anything else (another scheme, a path, no host).
[[nodiscard]] Result<std::string> normalize_server(const std::string& url);

struct RedirectTarget {
  std::string origin;  // http(s)://host[:port]
  std::string target;  // path and query, "/" at least
};

// Where a 307/308 that `from` answered may be followed: an absolute http(s) Location that does
// not turn https into http (the bearer token would cross the network in clear text).
// kUnavailable naming `from` and the Location otherwise.
[[nodiscard]] Result<RedirectTarget> redirect_target(const std::string& from,
                                                     const std::string& location);

}  // namespace armhive
