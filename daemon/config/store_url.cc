#include "daemon/config/store_url.h"

namespace armhive {

// The config file is world-readable (/etc/armhive, a conffile): a password goes in a passfile
// (0600) or PGPASSWORD, which libpq reads itself.
Status check_store_url(const std::string& url) {
  if (url.empty()) return Status::ok();
  std::string_view rest;
  for (std::string_view scheme : {"postgresql://", "postgres://"}) {
    if (url.rfind(scheme, 0) == 0) rest = std::string_view(url).substr(scheme.size());
  }
  if (rest.data() == nullptr) {
    return invalid_argument("store.url", "must be a postgresql:// connection URI");
  }
  const std::string_view authority = rest.substr(0, rest.find_first_of("/?"));
  const size_t at = authority.rfind('@');
  const bool inline_password = (at != std::string_view::npos &&
                                authority.substr(0, at).find(':') != std::string_view::npos) ||
                               url.find("password=") != std::string::npos;
  if (inline_password) {
    return invalid_argument("store.url",
                            "holds a password: put it in a passfile (mode 0600, named by "
                            "?passfile=...) or in PGPASSWORD, not in the configuration");
  }
  for (char ch : url) {
    if (static_cast<unsigned char>(ch) < 0x21 || ch == 0x7f) {
      return invalid_argument("store.url", "must not contain spaces or control characters");
    }
  }
  return Status::ok();
}

}  // namespace armhive
