#include "base/libvirt_uri.h"

namespace armhive {

bool is_remote_uri(std::string_view uri) {
  const size_t scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) return false;  // a bare driver name is local
  const size_t host = scheme_end + 3;
  return host < uri.size() && uri[host] != '/';
}

}  // namespace armhive
