#include "api/server_url.h"

namespace armhive {

Result<std::string> normalize_server(const std::string& url) {
  bool http = url.rfind("http://", 0) == 0;
  bool https = url.rfind("https://", 0) == 0;
  if (!http && !https) {
    return invalid_argument("server", "must start with http:// or https:// (got \"" + url + "\")");
  }
  std::string rest = url.substr(http ? 7 : 8);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.empty() || rest.find('/') != std::string::npos) {
    return invalid_argument("server",
                            "must be http(s)://host[:port] without a path (got \"" + url + "\")");
  }
  return (http ? "http://" : "https://") + rest;
}

Result<RedirectTarget> redirect_target(const std::string& from, const std::string& location) {
  const std::string shown = location.substr(0, 200);
  bool http = location.rfind("http://", 0) == 0;
  bool https = location.rfind("https://", 0) == 0;
  if (!http && !https) {
    return unavailable(from + " redirected to \"" + shown + "\", not an http(s) URL: not followed");
  }
  if (http && from.rfind("https://", 0) == 0) {
    return unavailable(from + " redirected to " + shown +
                       ": not followed from https to http (the token would travel in clear)");
  }
  size_t slash = location.find('/', http ? 7 : 8);
  RedirectTarget out;
  out.target = slash == std::string::npos ? "/" : location.substr(slash);
  auto origin = normalize_server(location.substr(0, slash));
  if (!origin.is_ok()) {
    return unavailable(from + " redirected to an invalid URL: " + origin.status().message());
  }
  out.origin = std::move(origin).value();
  return out;
}

}  // namespace armhive
