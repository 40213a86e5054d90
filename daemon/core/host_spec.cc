#include "daemon/core/host_spec.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <string_view>

#include "base/libvirt_uri.h"
#include "base/validation.h"
#include "daemon/core/cpu_sets.h"
#include "daemon/core/lease.h"

namespace armhive {

namespace {

bool one_of(std::string_view v, std::initializer_list<std::string_view> set) {
  for (std::string_view s : set) {
    if (v == s) return true;
  }
  return false;
}

// The query's name=value pairs, in order.
std::vector<std::string_view> query_pairs(std::string_view uri) {
  std::vector<std::string_view> out;
  const size_t at = uri.find('?');
  if (at == std::string_view::npos) return out;
  std::string_view query = uri.substr(at + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    if (amp != 0) out.push_back(query.substr(0, amp));
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
  }
  return out;
}

}  // namespace

Status check_libvirt_uri(const std::string& field, const std::string& uri, SpecOrigin origin,
                         const std::vector<std::string>& vouched) {
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
  const bool config = origin == SpecOrigin::kConfig;
  const std::string scheme = uri.substr(0, scheme_end);
  const size_t query_at = uri.find('?', scheme_end);
  const std::string rest =
      uri.substr(scheme_end + 3,
                 query_at == std::string::npos ? std::string::npos : query_at - scheme_end - 3);
  const bool local = !rest.empty() && rest.front() == '/';
  const std::string path = local ? rest : rest.substr(std::min(rest.find('/'), rest.size()));
  // The driver and transport, and where each may point.
  bool allowed = false;
  if (scheme == "qemu") {
    allowed = local && (path == "/system" || path == "/session");
  } else if (one_of(scheme, {"qemu+tls", "qemu+ssh", "qemu+tcp"})) {
    allowed = !local && one_of(path, {"/system", "/session"});
  } else if (scheme == "qemu+unix") {
    allowed = config && local && (path == "/system" || path == "/session");
  } else if (scheme == "test") {
    allowed = local && path == "/default";
  }
  if (!allowed) {
    return invalid_argument(
        field, "'" + uri +
                   "' is not a URI armhived drives: use qemu:///system (this machine) or "
                   "qemu+tls://, qemu+ssh://, qemu+tcp:// with a host and /system" +
                   (config ? " (or qemu+unix:///system?socket=...)" : ""));
  }
  // libvirt percent-decodes the values itself: compared as written, so an encoded variant of a
  // vouched value is not the same value.
  for (std::string_view pair : query_pairs(uri)) {
    const std::string name(pair.substr(0, pair.find('=')));
    if (one_of(name, {"name", "mode", "no_tty", "sshauth", "tls_priority"})) continue;
    if (one_of(name, {"keyfile", "pkipath", "known_hosts", "socket", "no_verify",
                      "known_hosts_verify"})) {
      if (config) continue;
      bool same = false;
      for (const std::string& v : vouched) {
        for (std::string_view theirs : query_pairs(v)) same = same || theirs == pair;
      }
      if (same) continue;
      return invalid_argument(field, "the URI parameter '" + name.substr(0, 64) +
                                         "' names a file on armhived's machine or weakens a "
                                         "check: only as the configuration file's hosts have it");
    }
    return invalid_argument(field,
                            "the URI parameter '" + name.substr(0, 64) +
                                "' is not allowed (command, netcat and proxy would run a "
                                "program as armhived; allowed: name, mode, no_tty, "
                                "sshauth, tls_priority, and keyfile, pkipath, "
                                "known_hosts, socket, no_verify, known_hosts_verify " +
                                (config ? std::string("in the configuration file")
                                        : std::string("as the configuration file has them")) +
                                ")");
  }
  return Status::ok();
}

Status validate_host_spec(const HostSpec& h, bool has_networks, SpecOrigin origin,
                          const std::vector<std::string>& vouched_uris) {
  const std::string& p = h.field_prefix;
  ARMHIVE_RETURN_IF_ERROR(check_name(p + "name", h.name));
  ARMHIVE_RETURN_IF_ERROR(
      check_libvirt_uri(p + "libvirt_uri", h.libvirt_uri, origin, vouched_uris));
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
