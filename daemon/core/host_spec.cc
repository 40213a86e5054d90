#include "daemon/core/host_spec.h"

#include <cctype>

#include "base/libvirt_uri.h"
#include "base/validation.h"
#include "daemon/core/cpu_sets.h"
#include "daemon/core/lease.h"

namespace armhive {

Status check_libvirt_uri(const std::string& field, const std::string& uri) {
  if (uri.empty()) return invalid_argument(field, "required");
  size_t scheme_end = uri.find("://");
  if (scheme_end == std::string::npos || scheme_end == 0) {
    return invalid_argument(field, "not a libvirt URI (driver://host/path): '" + uri + "'");
  }
  for (size_t i = 0; i < scheme_end; ++i) {
    char ch = uri[i];
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '+' && ch != '-' && ch != '.') {
      return invalid_argument(field, "not a libvirt URI (driver://host/path): '" + uri + "'");
    }
  }
  for (char ch : uri) {
    if (static_cast<unsigned char>(ch) <= ' ' || ch == 0x7f) {
      return invalid_argument(field, "must not contain spaces or control characters");
    }
  }
  return Status::ok();
}

Status validate_host_spec(const HostSpec& h, bool has_networks) {
  const std::string& p = h.field_prefix;
  ARMHIVE_RETURN_IF_ERROR(check_name(p + "name", h.name));
  ARMHIVE_RETURN_IF_ERROR(check_libvirt_uri(p + "libvirt_uri", h.libvirt_uri));
  ARMHIVE_RETURN_IF_ERROR(validate_labels(p + "labels", h.labels));
  const std::pair<const char*, const std::optional<std::string>*> cpus[] = {
      {"housekeeping", &h.housekeeping_cpus},
      {"dedicated", &h.dedicated_cpus},
      {"shared", &h.shared_cpus}};
  for (const auto& [key, value] : cpus) {
    if (*value) ARMHIVE_RETURN_IF_ERROR(parse_cpu_list(p + "cpus." + key, **value).status());
  }
  for (size_t k = 0; k < h.l2_clusters.size(); ++k) {
    std::string field = p + "l2_clusters[" + std::to_string(k) + "]";
    ARMHIVE_RETURN_IF_ERROR(parse_cpu_list(field, h.l2_clusters[k]).status());
  }
  for (const auto& [key, dir] : {std::pair<const char*, const std::string*>{"vm_dir", &h.vm_dir},
                                 {"image_dir", &h.image_dir}}) {
    if (!dir->empty() && (dir->front() != '/' || dir->find("..") != std::string::npos)) {
      return invalid_argument(p + key, "must be an absolute path without '..'");
    }
  }
  if (h.network_guard != "armhived" && h.network_guard != "host") {
    return invalid_argument(p + "network_guard", "must be \"armhived\" or \"host\"");
  }
  if (!has_networks) return Status::ok();
  // A remote host's guests are guarded by that host's own nftables (armhived's run here).
  if (is_remote_uri(h.libvirt_uri) && h.network_guard != "host") {
    return invalid_argument(
        p + "network_guard",
        "host '" + h.name + "' is remote (" + h.libvirt_uri +
            "): armhived cannot apply the network guard of [[networks]] there; install the "
            "tables `armhived network-guard` prints on that host and set network_guard = "
            "\"host\"");
  }
  if (!is_remote_uri(h.libvirt_uri) && h.network_guard != "armhived") {
    return invalid_argument(p + "network_guard", "host '" + h.name + "' is this machine (" +
                                                     h.libvirt_uri +
                                                     "): armhived applies its guard here; "
                                                     "remove the key");
  }
  return Status::ok();
}

}  // namespace armhive
