#include "daemon/core/hypervisor.h"

#include <algorithm>

namespace armhive {

Status validate_domain_name(std::string_view name) {
  bool ok = !name.empty() && name.size() <= 63 && name.front() != '-' &&
            std::all_of(name.begin(), name.end(), [](char c) {
              return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
            });
  if (!ok) return invalid_argument("name", "domain name must be 1-63 characters of [a-z0-9-]");
  return Status::ok();
}

}  // namespace armhive
