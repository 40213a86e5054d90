#include "daemon/config/daemon_config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <toml++/toml.h>

#include <cctype>
#include <fstream>
#include <set>

#include "base/libvirt_uri.h"
#include "base/toml_reader.h"
#include "base/validation.h"
#include "daemon/config/store_url.h"
#include "daemon/core/cpu_sets.h"
#include "daemon/core/file_policy.h"
#include "daemon/core/fleet.h"

namespace armhive {
namespace {

const toml::table* subtable(const toml::table& t, std::string_view key, Status& status,
                            const std::string& prefix) {
  const toml::node* n = t.get(key);
  if (!n) return nullptr;
  if (!n->is_table()) status = invalid_argument(prefix + std::string(key), "must be a table");
  return n->as_table();
}

// A repository's name as GitHub allows it (letters, digits, '-', '_', '.'), at most 100
// characters, and never a path segment of its own ('.', '..'): it becomes part of a URL path.
bool github_repository_name_ok(const std::string& name) {
  if (name.empty() || name.size() > 100 || name == "." || name.find("..") != std::string::npos) {
    return false;
  }
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return false;
    }
  }
  return true;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// [github] reconcile_repos: repositories of the organisation, each once. GitHub compares
// owners and names without regard to case, so armhived does too ("Octo-Org/App" is
// octo-org/app). Each costs GitHub calls every pass, hence the bound.
Status check_reconcile_repos(const GithubConfig& gh) {
  const std::string key = "github.reconcile_repos";
  if (gh.reconcile_repos.empty()) return Status::ok();
  if (!gh.repo.empty()) {
    return invalid_argument(key,
                            "only with github.org (a repository scope lists its own repository's "
                            "jobs): remove it or set org instead of repo");
  }
  if (gh.reconcile_repos.size() > kMaxReconcileRepos) {
    return invalid_argument(key, "at most " + std::to_string(kMaxReconcileRepos) +
                                     " repositories (each costs GitHub calls every pass), got " +
                                     std::to_string(gh.reconcile_repos.size()));
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < gh.reconcile_repos.size(); ++i) {
    const std::string& entry = gh.reconcile_repos[i];
    const std::string field = key + "[" + std::to_string(i) + "]";
    const size_t slash = entry.find('/');
    if (slash == std::string::npos) {
      return invalid_argument(field,
                              "'" + entry + "' must be OWNER/NAME (\"" + gh.org + "/NAME\")");
    }
    const std::string owner = entry.substr(0, slash);
    if (lower(owner) != lower(gh.org)) {
      return invalid_argument(field, "'" + entry + "': the owner must be the organisation '" +
                                         gh.org + "' (github.org), got '" + owner + "'");
    }
    if (!github_repository_name_ok(entry.substr(slash + 1))) {
      return invalid_argument(field, "'" + entry +
                                         "': the repository name must be 1 to 100 letters, "
                                         "digits, '-', '_' or '.', and not hold '..'");
    }
    if (!seen.insert(lower(entry)).second) {
      return invalid_argument(field,
                              "'" + entry + "' is listed twice (GitHub ignores case in names)");
    }
  }
  return Status::ok();
}

// [pools.files]: what `armhive cp` may do in the pool's VMs.
Status parse_pool_files(const toml::table& pool, const std::string& prefix, FilePolicy& f) {
  const toml::node* n = pool.get("files");
  if (!n) return Status::ok();
  if (!n->is_table()) return invalid_argument(prefix + "files", "must be a table");
  TomlReader r(*n->as_table(), prefix + "files.");
  ARMHIVE_RETURN_IF_ERROR(r.integer_as("max_bytes", f.max_bytes, 0, int64_t{1} << 50));
  ARMHIVE_RETURN_IF_ERROR(r.str("path_prefix", f.path_prefix));
  ARMHIVE_RETURN_IF_ERROR(r.no_unknown_keys());
  ARMHIVE_ASSIGN_OR_RETURN(f.path_prefix,
                           normalize_path_prefix(r.field("path_prefix"), f.path_prefix));
  return Status::ok();
}

// [pools.health]: off unless `every` is set; `every` at least `min_interval`.
Status parse_health(const toml::table& t, const std::string& prefix,
                    std::chrono::milliseconds min_interval, HealthScheduleConfig& h) {
  TomlReader r(t, prefix);
  std::chrono::milliseconds every{0};
  ARMHIVE_RETURN_IF_ERROR(r.duration("every", every));
  ARMHIVE_RETURN_IF_ERROR(r.str("suite", h.suite));
  ARMHIVE_RETURN_IF_ERROR(r.integer_as("runs_kept", h.runs_kept, 5, 1000));
  ARMHIVE_RETURN_IF_ERROR(r.integer_as("band_mads", h.band_mads, 1, 10));
  ARMHIVE_RETURN_IF_ERROR(r.no_unknown_keys());
  static const std::set<std::string> kSuites = {"network", "compression", "memory", "crypto",
                                                "storage"};
  if (!kSuites.contains(h.suite)) {
    return invalid_argument(r.field("suite"),
                            "must be one of network, compression, memory, crypto, storage");
  }
  if (every.count() == 0) return Status::ok();  // no `every`: off
  const auto min_s = std::chrono::duration_cast<Seconds>(min_interval).count();
  const auto every_s = std::chrono::duration_cast<Seconds>(every).count();
  constexpr int64_t kMaxEvery = 365LL * 24 * 3600;
  if (every_s < min_s || every_s > kMaxEvery) {
    return invalid_argument(r.field("every"), "must be between " + format_duration(min_s) +
                                                  " (engine.min_health_interval) and 365d, got " +
                                                  format_duration(every_s));
  }
  h.every = Seconds(every_s);
  return Status::ok();
}

Status parse_pool(const toml::table& t, const std::string& prefix,
                  std::chrono::milliseconds min_health_interval, PoolConfig& p) {
  TomlReader r(t, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.str("name", p.name));
  ARMHIVE_RETURN_IF_ERROR(check_name(r.field("name"), p.name));
  ARMHIVE_RETURN_IF_ERROR(r.str("image", p.image));
  ARMHIVE_RETURN_IF_ERROR(check_name(r.field("image"), p.image));
  ARMHIVE_RETURN_IF_ERROR(r.integer_as("vcpus", p.vcpus, 1, 256));
  ARMHIVE_RETURN_IF_ERROR(r.integer_as("memory_mib", p.memory_mib, 64, 4 << 20));
  ARMHIVE_RETURN_IF_ERROR(r.integer_as("disk_gib", p.disk_gib, 0, 16384));
  ARMHIVE_RETURN_IF_ERROR(r.str("network", p.network));
  ARMHIVE_RETURN_IF_ERROR(r.integer_as("mtu", p.mtu, 576, 9216));
  if (const toml::node* mw = t.get("min_warm"); mw != nullptr && mw->is_string()) {
    if (mw->as_string()->get() != "auto") {
      return invalid_argument(r.field("min_warm"), "must be a number or \"auto\"");
    }
    r.skip("min_warm");
    p.auto_warm = AutoWarmConfig{};
  } else {
    ARMHIVE_RETURN_IF_ERROR(r.integer_as("min_warm", p.min_warm, 0, 1024));
  }
  ARMHIVE_RETURN_IF_ERROR(r.integer_as("max", p.max, 1, 1024));
  for (const char* key : {"auto_min", "auto_max", "scale_to_zero_after", "burst_every"}) {
    if (t.contains(key) && !p.auto_warm) {
      return invalid_argument(r.field(key), "only with min_warm = \"auto\"");
    }
  }
  if (p.auto_warm) {
    AutoWarmConfig& a = *p.auto_warm;
    a.auto_max = p.max;
    ARMHIVE_RETURN_IF_ERROR(r.integer_as("auto_min", a.auto_min, 0, 1024));
    ARMHIVE_RETURN_IF_ERROR(r.integer_as("auto_max", a.auto_max, 0, 1024));
    std::chrono::milliseconds idle = a.scale_to_zero_after;
    ARMHIVE_RETURN_IF_ERROR(r.duration("scale_to_zero_after", idle));
    a.scale_to_zero_after = std::chrono::duration_cast<Seconds>(idle);
    std::chrono::milliseconds burst = a.burst_every;
    ARMHIVE_RETURN_IF_ERROR(r.duration("burst_every", burst));
    a.burst_every = std::chrono::duration_cast<Seconds>(burst);
    if (a.auto_max > p.max) {
      return invalid_argument(r.field("auto_max"),
                              "must not exceed max (" + std::to_string(p.max) + ")");
    }
    if (a.auto_min > a.auto_max) {
      return invalid_argument(r.field("auto_min"),
                              "must not exceed auto_max (" + std::to_string(a.auto_max) + ")");
    }
    if (a.scale_to_zero_after.count() < 1) {
      return invalid_argument(r.field("scale_to_zero_after"), "must be at least 1s");
    }
    if (a.burst_every.count() < 60) {
      return invalid_argument(r.field("burst_every"), "must be at least 1m");
    }
    Status valid = validate_auto_warm(a);
    if (!valid.is_ok()) return invalid_argument(r.field(valid.field()), valid.message());
    p.min_warm = a.auto_min;  // until the first scheduling pass computes a target
  }
  ARMHIVE_RETURN_IF_ERROR(r.integer_as("max_starting", p.max_starting, 1, 1024));
  std::chrono::milliseconds def = p.default_ttl, max = p.max_ttl;
  ARMHIVE_RETURN_IF_ERROR(r.duration("default_ttl", def));
  ARMHIVE_RETURN_IF_ERROR(r.duration("max_ttl", max));
  p.default_ttl = std::chrono::duration_cast<Seconds>(def);
  p.max_ttl = std::chrono::duration_cast<Seconds>(max);
  std::string policy = p.cpu_policy == CpuPolicy::kDedicated ? "dedicated" : "shared";
  ARMHIVE_RETURN_IF_ERROR(r.str("cpu_policy", policy));
  if (policy == "dedicated") {
    p.cpu_policy = CpuPolicy::kDedicated;
  } else if (policy == "shared") {
    p.cpu_policy = CpuPolicy::kShared;
  } else {
    return invalid_argument(r.field("cpu_policy"), "must be \"dedicated\" or \"shared\"");
  }
  ARMHIVE_RETURN_IF_ERROR(r.number("overcommit", p.overcommit, 1.0, 16.0));
  ARMHIVE_RETURN_IF_ERROR(r.boolean("ssh", p.ssh));
  if (t.contains("ssh_permissions")) {  // replaces the default (a terminal only); [] is none
    p.ssh_permissions.clear();
    ARMHIVE_RETURN_IF_ERROR(r.strings("ssh_permissions", p.ssh_permissions));
  }
  ARMHIVE_RETURN_IF_ERROR(validate_ssh_permissions(r.field("ssh_permissions"), p.ssh_permissions));
  ARMHIVE_RETURN_IF_ERROR(r.labels("labels", p.labels));
  ARMHIVE_RETURN_IF_ERROR(r.labels("host_labels", p.host_labels));
  ARMHIVE_RETURN_IF_ERROR(validate_labels(r.field("host_labels"), p.host_labels));
  if (t.contains("max_extra_ports")) {
    int cap = 0;
    ARMHIVE_RETURN_IF_ERROR(r.integer_as("max_extra_ports", cap, 0, 64));
    p.max_extra_ports = cap;
  }
  r.skip("access_ports");
  r.skip("files");
  r.skip("health");
  ARMHIVE_RETURN_IF_ERROR(r.no_unknown_keys());
  ARMHIVE_RETURN_IF_ERROR(parse_pool_files(t, prefix, p.files));
  Status st;
  if (const toml::table* h = r.table("health", st)) {
    ARMHIVE_RETURN_IF_ERROR(
        parse_health(*h, r.field("health") + ".", min_health_interval, p.health));
  }
  ARMHIVE_RETURN_IF_ERROR(st);
  if (const toml::node* ports = t.get("access_ports")) {
    if (!ports->is_array()) return invalid_argument(r.field("access_ports"), "must be an array");
    size_t j = 0;
    for (const toml::node& n : *ports->as_array()) {
      std::string field = r.field("access_ports") + "[" + std::to_string(j++) + "]";
      if (!n.is_integer()) return invalid_argument(field, "must be an integer");
      int64_t v = n.as_integer()->get();
      if (v < 1 || v > 65535) return invalid_argument(field, "must be 1-65535");
      p.access_ports.push_back(static_cast<int>(v));
    }
  }
  if (p.min_warm > p.max) return invalid_argument(r.field("min_warm"), "must not exceed max");
  if (p.max_starting > p.max) p.max_starting = p.max;
  if (p.default_ttl > p.max_ttl) {
    return invalid_argument(r.field("default_ttl"), "must not exceed max_ttl");
  }
  return Status::ok();
}

Status parse_egress(const toml::table& net_table, const std::string& prefix, NetworkConfig& net) {
  const toml::node* n = net_table.get("egress");
  if (!n) return Status::ok();
  if (!n->is_array_of_tables())
    return invalid_argument(prefix + "egress", "must be [[networks.egress]] tables");
  if (net.mode != "nat") {
    return invalid_argument(prefix + "egress", "an egress allow-list needs mode = \"nat\"");
  }
  size_t i = 0;
  for (const toml::node& item : *n->as_array()) {
    std::string eprefix = prefix + "egress[" + std::to_string(i++) + "].";
    TomlReader r(*item.as_table(), eprefix);
    EgressConfig e;
    ARMHIVE_RETURN_IF_ERROR(r.str("cidr", e.cidr));
    if (e.cidr.empty()) return invalid_argument(r.field("cidr"), "required");
    r.skip("ports");
    ARMHIVE_RETURN_IF_ERROR(r.no_unknown_keys());
    if (const toml::node* ports = item.as_table()->get("ports")) {
      if (!ports->is_array()) return invalid_argument(r.field("ports"), "must be an array");
      size_t j = 0;
      for (const toml::node& p : *ports->as_array()) {
        std::string field = r.field("ports") + "[" + std::to_string(j++) + "]";
        if (!p.is_integer()) return invalid_argument(field, "must be an integer");
        int64_t v = p.as_integer()->get();
        if (v < 1 || v > 65535) return invalid_argument(field, "must be 1-65535");
        e.ports.push_back(static_cast<int>(v));
      }
    }
    net.egress.push_back(std::move(e));
  }
  return Status::ok();
}

Status parse_cpus(const toml::table& t, const std::string& prefix, HostConfig& h) {
  Status st;
  if (const toml::table* cpus = subtable(t, "cpus", st, prefix)) {
    TomlReader cr(*cpus, prefix + "cpus.");
    ARMHIVE_RETURN_IF_ERROR(cr.opt_str("housekeeping", h.housekeeping_cpus));
    ARMHIVE_RETURN_IF_ERROR(cr.opt_str("dedicated", h.dedicated_cpus));
    ARMHIVE_RETURN_IF_ERROR(cr.opt_str("shared", h.shared_cpus));
    ARMHIVE_RETURN_IF_ERROR(cr.no_unknown_keys());
  }
  return st;
}

Status parse_hosts(const toml::node& n, DaemonConfig& c) {
  if (!n.is_array_of_tables()) return invalid_argument("hosts", "must be [[hosts]] tables");
  size_t i = 0;
  std::set<std::string> names;
  for (const toml::node& item : *n.as_array()) {
    std::string prefix = "hosts[" + std::to_string(i++) + "].";
    TomlReader r(*item.as_table(), prefix);
    HostConfig h;
    h.field_prefix = prefix;
    ARMHIVE_RETURN_IF_ERROR(r.str("name", h.name));
    ARMHIVE_RETURN_IF_ERROR(r.str("libvirt_uri", h.libvirt_uri));
    ARMHIVE_RETURN_IF_ERROR(r.labels("labels", h.labels));
    ARMHIVE_RETURN_IF_ERROR(r.strings("l2_clusters", h.l2_clusters));
    ARMHIVE_RETURN_IF_ERROR(r.str("vm_dir", h.vm_dir));
    ARMHIVE_RETURN_IF_ERROR(r.str("image_dir", h.image_dir));
    ARMHIVE_RETURN_IF_ERROR(r.str("network_guard", h.network_guard));
    r.skip("cpus");
    ARMHIVE_RETURN_IF_ERROR(r.no_unknown_keys());
    ARMHIVE_RETURN_IF_ERROR(parse_cpus(*item.as_table(), prefix, h));
    // With guest networks or not: check_network_guards() sees the networks later.
    ARMHIVE_RETURN_IF_ERROR(validate_host_spec(h, false, SpecOrigin::kConfig));
    if (!names.insert(h.name).second) {
      return invalid_argument(prefix + "name", "host '" + h.name + "' is defined twice");
    }
    c.hosts.push_back(std::move(h));
  }
  if (c.hosts.empty()) return invalid_argument("hosts", "[[hosts]] needs at least one host");
  return Status::ok();
}

// A remote host's guests are guarded by that host's own nftables (armhived's run here): the
// configuration must say that the host installs them.
Status check_network_guards(const DaemonConfig& c, bool hosts_table) {
  if (c.networks.empty()) return Status::ok();
  for (const HostConfig& h : c.hosts) {
    if (!hosts_table && is_remote_uri(h.libvirt_uri)) {
      return invalid_argument("host.libvirt_uri",
                              "'" + h.libvirt_uri +
                                  "' is another host: describe it in [[hosts]] with "
                                  "network_guard = \"host\" (its guard is that host's to install)");
    }
    if (hosts_table) ARMHIVE_RETURN_IF_ERROR(validate_host_spec(h, true, SpecOrigin::kConfig));
  }
  return Status::ok();
}

// Every pool must be able to use at least one host.
Status check_pools_have_hosts(const DaemonConfig& c) {
  for (size_t i = 0; i < c.pools.size(); ++i) {
    const PoolConfig& p = c.pools[i];
    bool any = false;
    for (const HostConfig& h : c.hosts) any = any || labels_match(p.host_labels, h.labels);
    if (any) continue;
    std::string wanted;
    for (const auto& [k, v] : p.host_labels) wanted += (wanted.empty() ? "" : ", ") + k + "=" + v;
    return invalid_argument("pools[" + std::to_string(i) + "].host_labels",
                            "pool '" + p.name + "' matches no host: none of the " +
                                std::to_string(c.hosts.size()) + " host(s) has " + wanted);
  }
  return Status::ok();
}

// An IPv4 or IPv6 literal (what a forward can bind).
bool is_ip_address(const std::string& text) {
  in6_addr buf{};
  return ::inet_pton(AF_INET, text.c_str(), &buf) == 1 ||
         ::inet_pton(AF_INET6, text.c_str(), &buf) == 1;
}

}  // namespace

Result<DaemonConfig> parse_daemon_config(std::string_view toml_text) {
  ARMHIVE_ASSIGN_OR_RETURN(toml::table root, parse_toml(toml_text, "config", "config"));
  DaemonConfig c;
  Status st;
  TomlReader top(root, "");
  for (const char* k : {"server", "host", "hosts", "engine", "store", "audit", "access", "github",
                        "networks", "pools"}) {
    top.skip(k);
  }
  ARMHIVE_RETURN_IF_ERROR(top.no_unknown_keys());

  if (const toml::table* s = subtable(root, "server", st, "")) {
    TomlReader r(*s, "server.");
    ARMHIVE_RETURN_IF_ERROR(r.str("bind", c.bind));
    ARMHIVE_RETURN_IF_ERROR(r.integer_as("port", c.port, 0, 65535));
    ARMHIVE_RETURN_IF_ERROR(r.str("tls_cert", c.tls_cert));
    ARMHIVE_RETURN_IF_ERROR(r.str("tls_key", c.tls_key));
    ARMHIVE_RETURN_IF_ERROR(r.str("bootstrap_token_file", c.bootstrap_token_file));
    ARMHIVE_RETURN_IF_ERROR(r.integer_as("max_execs_per_token", c.max_execs_per_token, 1, 1000));
    ARMHIVE_RETURN_IF_ERROR(
        r.integer_as("max_file_transfers_per_token", c.max_file_transfers_per_token, 1, 1000));
    ARMHIVE_RETURN_IF_ERROR(
        r.integer_as("max_tunnels_per_token", c.max_tunnels_per_token, 1, 100000));
    ARMHIVE_RETURN_IF_ERROR(
        r.integer_as("max_event_streams_per_token", c.max_event_streams_per_token, 1, 100000));
    ARMHIVE_RETURN_IF_ERROR(r.integer_as("upload_min_bytes_per_second",
                                         c.upload_min_bytes_per_second, 1, int64_t{1} << 40));
    ARMHIVE_RETURN_IF_ERROR(r.no_unknown_keys());
    if (c.tls_cert.empty() != c.tls_key.empty()) {
      return invalid_argument("server.tls_key", "tls_cert and tls_key go together");
    }
  }
  ARMHIVE_RETURN_IF_ERROR(st);
  if (const toml::table* h = subtable(root, "host", st, "")) {
    TomlReader r(*h, "host.");
    ARMHIVE_RETURN_IF_ERROR(r.str("name", c.host_name));
    if (!c.host_name.empty()) ARMHIVE_RETURN_IF_ERROR(check_name("host.name", c.host_name));
    ARMHIVE_RETURN_IF_ERROR(r.str("libvirt_uri", c.libvirt_uri));
    ARMHIVE_RETURN_IF_ERROR(
        check_libvirt_uri("host.libvirt_uri", c.libvirt_uri, SpecOrigin::kConfig));
    ARMHIVE_RETURN_IF_ERROR(r.str("storage_pool", c.storage_pool));
    ARMHIVE_RETURN_IF_ERROR(check_name("host.storage_pool", c.storage_pool));
    ARMHIVE_RETURN_IF_ERROR(r.str("state_dir", c.state_dir));
    ARMHIVE_RETURN_IF_ERROR(r.str("catalog", c.catalog));
    ARMHIVE_RETURN_IF_ERROR(r.str("database", c.database));
    std::string placement(to_string(c.placement));
    ARMHIVE_RETURN_IF_ERROR(r.str("placement", placement));
    auto strategy = placement_strategy_from_string(placement);
    if (!strategy) return invalid_argument("host.placement", "must be \"pack\" or \"spread\"");
    c.placement = *strategy;
    ARMHIVE_RETURN_IF_ERROR(r.duration("libvirt_timeout", c.libvirt_timeout));
    if (c.libvirt_timeout <= std::chrono::milliseconds(0)) {
      return invalid_argument("host.libvirt_timeout", "must be positive");
    }
    r.skip("cpus");
    ARMHIVE_RETURN_IF_ERROR(r.no_unknown_keys());
    HostConfig local;
    ARMHIVE_RETURN_IF_ERROR(parse_cpus(*h, "host.", local));
    c.housekeeping_cpus = local.housekeeping_cpus;
    c.dedicated_cpus = local.dedicated_cpus;
    c.shared_cpus = local.shared_cpus;
    // With [[hosts]] these belong to each host: refuse them here rather than guess which wins.
    if (root.get("hosts")) {
      for (const char* key : {"name", "libvirt_uri", "cpus"}) {
        if (h->get(key)) {
          return invalid_argument(std::string("host.") + key,
                                  "set it per host in [[hosts]] when [[hosts]] is used");
        }
      }
    }
  }
  ARMHIVE_RETURN_IF_ERROR(st);
  if (const toml::node* n = root.get("hosts")) {
    ARMHIVE_RETURN_IF_ERROR(parse_hosts(*n, c));
    if (c.hosts.size() == 1) {
      const HostConfig& only = c.hosts.front();
      c.host_name = only.name;
      c.libvirt_uri = only.libvirt_uri;
      c.housekeeping_cpus = only.housekeeping_cpus;
      c.dedicated_cpus = only.dedicated_cpus;
      c.shared_cpus = only.shared_cpus;
    }
  } else {
    HostConfig local{c.host_name,         c.libvirt_uri,    {},
                     c.housekeeping_cpus, c.dedicated_cpus, c.shared_cpus};
    c.hosts.push_back(std::move(local));
  }
  if (const toml::table* e = subtable(root, "engine", st, "")) {
    TomlReader r(*e, "engine.");
    ARMHIVE_RETURN_IF_ERROR(r.duration("boot_timeout", c.boot_timeout));
    ARMHIVE_RETURN_IF_ERROR(r.duration("reconcile_period", c.reconcile_period));
    ARMHIVE_RETURN_IF_ERROR(r.integer_as("threads", c.threads, 1, 64));
    ARMHIVE_RETURN_IF_ERROR(r.duration("min_health_interval", c.min_health_interval));
    ARMHIVE_RETURN_IF_ERROR(r.duration("host_probe_period", c.host_probe_period));
    ARMHIVE_RETURN_IF_ERROR(r.duration("host_probe_timeout", c.host_probe_timeout));
    ARMHIVE_RETURN_IF_ERROR(r.duration("unreachable_grace", c.unreachable_grace));
    ARMHIVE_RETURN_IF_ERROR(r.duration("image_gc_period", c.image_gc_period));
    ARMHIVE_RETURN_IF_ERROR(r.duration("guard_check_period", c.guard_check_period));
    ARMHIVE_RETURN_IF_ERROR(r.duration("usage_period", c.usage_period));
    ARMHIVE_RETURN_IF_ERROR(r.no_unknown_keys());
  }
  ARMHIVE_RETURN_IF_ERROR(st);

  if (const toml::table* t = subtable(root, "store", st, "")) {
    TomlReader r(*t, "store.");
    ARMHIVE_RETURN_IF_ERROR(r.str("url", c.store.url));
    ARMHIVE_RETURN_IF_ERROR(r.duration("leader_lease", c.store.leader_lease));
    ARMHIVE_RETURN_IF_ERROR(r.no_unknown_keys());
    ARMHIVE_RETURN_IF_ERROR(check_store_url(c.store.url));
    // Below 2 s a renewal every 400 ms competes with the store's own statements; above 5 min a
    // dead leader's lab waits too long.
    if (c.store.leader_lease < std::chrono::seconds(2) ||
        c.store.leader_lease > std::chrono::minutes(5)) {
      return invalid_argument("store.leader_lease", "must be between 2s and 5m");
    }
  }
  ARMHIVE_RETURN_IF_ERROR(st);

  if (const toml::table* a = subtable(root, "audit", st, "")) {
    TomlReader r(*a, "audit.");
    ARMHIVE_RETURN_IF_ERROR(r.duration("keep", c.audit_keep));
    ARMHIVE_RETURN_IF_ERROR(r.no_unknown_keys());
    // Shorter than a day, the log would lose what happened overnight before anyone looked.
    if (c.audit_keep < std::chrono::hours(24)) {
      return invalid_argument("audit.keep", "must be at least 1d");
    }
  }
  ARMHIVE_RETURN_IF_ERROR(st);

  if (const toml::table* a = subtable(root, "access", st, "")) {
    TomlReader r(*a, "access.");
    c.access.enabled = true;
    ARMHIVE_RETURN_IF_ERROR(r.str("listen", c.access.listen));
    ARMHIVE_RETURN_IF_ERROR(r.str("advertise", c.access.advertise));
    ARMHIVE_RETURN_IF_ERROR(r.integer_as("port_min", c.access.port_min, 1, 65535));
    ARMHIVE_RETURN_IF_ERROR(r.integer_as("port_max", c.access.port_max, 1, 65535));
    ARMHIVE_RETURN_IF_ERROR(r.integer_as("max_extra_ports", c.access.max_extra_ports, 0, 64));
    ARMHIVE_RETURN_IF_ERROR(r.str("ssh_ca_key", c.access.ssh_ca_key));
    ARMHIVE_RETURN_IF_ERROR(
        r.integer_as("max_sessions_per_forward", c.access.max_sessions_per_forward, 1, 65535));
    ARMHIVE_RETURN_IF_ERROR(r.integer_as("max_sessions", c.access.max_sessions, 1, 1000000));
    ARMHIVE_RETURN_IF_ERROR(r.duration("forward_idle_timeout", c.access.forward_idle_timeout));
    ARMHIVE_RETURN_IF_ERROR(r.no_unknown_keys());
    if (c.access.port_min > c.access.port_max) {
      return invalid_argument("access.port_max", "must not be below port_min");
    }
    if (!c.access.listen.empty() && !is_ip_address(c.access.listen)) {
      return invalid_argument("access.listen",
                              "must be an IP address (\"0.0.0.0\" for every "
                              "address), got \"" +
                                  c.access.listen + "\"");
    }
    if (c.access.listen.empty()) {
      // The access address: where clients are told to dial, else where the API already
      // listens; every address only when written (it includes the guests' own bridges).
      if (is_ip_address(c.access.advertise)) {
        c.access.listen = c.access.advertise;
      } else if (is_ip_address(c.bind) && c.bind != "0.0.0.0" && c.bind != "::") {
        c.access.listen = c.bind;
      } else {
        return invalid_argument(
            "access.listen",
            "no address to listen on: set [access] listen to the address runners reach (the "
            "forwards no longer listen on every address unless told: \"0.0.0.0\")");
      }
    }
  }
  ARMHIVE_RETURN_IF_ERROR(st);

  if (const toml::table* g = subtable(root, "github", st, "")) {
    TomlReader r(*g, "github.");
    GithubConfig& gh = c.github;
    gh.enabled = true;
    ARMHIVE_RETURN_IF_ERROR(r.str("api_url", gh.api_url));
    ARMHIVE_RETURN_IF_ERROR(r.str("org", gh.org));
    ARMHIVE_RETURN_IF_ERROR(r.str("repo", gh.repo));
    ARMHIVE_RETURN_IF_ERROR(r.str("token_file", gh.token_file));
    ARMHIVE_RETURN_IF_ERROR(r.integer_as("app_id", gh.app_id, 1, int64_t{1} << 53));
    ARMHIVE_RETURN_IF_ERROR(r.str("app_private_key_file", gh.app_private_key_file));
    ARMHIVE_RETURN_IF_ERROR(
        r.integer_as("installation_id", gh.installation_id, 1, int64_t{1} << 53));
    ARMHIVE_RETURN_IF_ERROR(r.str("webhook_secret_file", gh.webhook_secret_file));
    // A duration that may be zero ("0s" or 0: no overlap), which TomlReader::duration refuses.
    const toml::node* overlap = g->get("webhook_secret_overlap");
    if (overlap != nullptr && ((overlap->is_integer() && overlap->as_integer()->get() == 0) ||
                               (overlap->is_string() && (overlap->as_string()->get() == "0s" ||
                                                         overlap->as_string()->get() == "0")))) {
      gh.webhook_secret_overlap = std::chrono::milliseconds(0);
      r.skip("webhook_secret_overlap");
    } else {
      ARMHIVE_RETURN_IF_ERROR(r.duration("webhook_secret_overlap", gh.webhook_secret_overlap));
    }
    ARMHIVE_RETURN_IF_ERROR(
        r.integer_as("runner_group_id", gh.runner_group_id, 1, int64_t{1} << 40));
    ARMHIVE_RETURN_IF_ERROR(r.duration("idle_timeout", gh.idle_timeout));
    ARMHIVE_RETURN_IF_ERROR(r.duration("replay_window", gh.replay_window));
    ARMHIVE_RETURN_IF_ERROR(r.duration("reconcile_period", gh.reconcile_period));
    ARMHIVE_RETURN_IF_ERROR(r.strings("reconcile_repos", gh.reconcile_repos));
    std::vector<std::string> command;
    ARMHIVE_RETURN_IF_ERROR(r.strings("runner_command", command));
    if (g->contains("runner_command")) gh.runner_command = std::move(command);
    ARMHIVE_RETURN_IF_ERROR(r.labels("labels", gh.labels));
    ARMHIVE_RETURN_IF_ERROR(r.no_unknown_keys());
    if (gh.org.empty() == gh.repo.empty()) {
      return invalid_argument("github.org", "set exactly one of github.org and github.repo");
    }
    ARMHIVE_RETURN_IF_ERROR(check_reconcile_repos(gh));
    const bool app = gh.app_id > 0 || !gh.app_private_key_file.empty() || gh.installation_id > 0;
    if (app == !gh.token_file.empty()) {
      return invalid_argument("github.token_file",
                              "set either token_file or a GitHub App (app_id, "
                              "app_private_key_file, installation_id)");
    }
    if (app && (gh.app_id <= 0 || gh.app_private_key_file.empty() || gh.installation_id <= 0)) {
      return invalid_argument(
          gh.app_id <= 0                    ? "github.app_id"
          : gh.app_private_key_file.empty() ? "github.app_private_key_file"
                                            : "github.installation_id",
          "a GitHub App needs app_id, app_private_key_file and installation_id");
    }
    if (gh.webhook_secret_file.empty()) {
      return invalid_argument("github.webhook_secret_file", "is required");
    }
    if (gh.webhook_secret_overlap > std::chrono::hours(1)) {
      return invalid_argument("github.webhook_secret_overlap", "must be between 0s and 1h");
    }
    if (gh.labels.empty()) {
      return invalid_argument("github.labels", "map at least one runs-on label to a pool");
    }
    if (gh.runner_command.empty() || gh.runner_command.front().empty() ||
        gh.runner_command.front().front() != '/') {
      return invalid_argument("github.runner_command",
                              "must be an argv whose program is an absolute path in the image");
    }
    if (gh.idle_timeout < std::chrono::seconds(10)) {
      return invalid_argument("github.idle_timeout", "must be at least 10s");
    }
    // Each pass costs GitHub API calls (1 + pages of runners, 2 + runs for each repository
    // whose jobs it lists): more often than every 10 s would spend the hourly limit on little.
    if (gh.reconcile_period < std::chrono::seconds(10) ||
        gh.reconcile_period > std::chrono::hours(1)) {
      return invalid_argument("github.reconcile_period", "must be between 10s and 1h");
    }
  }
  ARMHIVE_RETURN_IF_ERROR(st);

  if (const toml::node* n = root.get("networks")) {
    if (!n->is_array_of_tables())
      return invalid_argument("networks", "must be [[networks]] tables");
    size_t i = 0;
    for (const toml::node& item : *n->as_array()) {
      std::string prefix = "networks[" + std::to_string(i++) + "].";
      TomlReader r(*item.as_table(), prefix);
      NetworkConfig net;
      ARMHIVE_RETURN_IF_ERROR(r.str("name", net.name));
      ARMHIVE_RETURN_IF_ERROR(r.str("bridge", net.bridge));
      ARMHIVE_RETURN_IF_ERROR(r.str("cidr", net.cidr));
      ARMHIVE_RETURN_IF_ERROR(r.str("dhcp_start", net.dhcp_start));
      ARMHIVE_RETURN_IF_ERROR(r.str("dhcp_end", net.dhcp_end));
      ARMHIVE_RETURN_IF_ERROR(r.integer_as("mtu", net.mtu, 576, 9216));
      ARMHIVE_RETURN_IF_ERROR(r.str("mode", net.mode));
      ARMHIVE_RETURN_IF_ERROR(r.boolean("isolate_guests", net.isolate_guests));
      if (net.mode != "isolated" && net.mode != "nat" && net.mode != "bridge") {
        return invalid_argument(r.field("mode"), "must be \"isolated\", \"nat\" or \"bridge\"");
      }
      r.skip("egress");
      ARMHIVE_RETURN_IF_ERROR(r.no_unknown_keys());
      ARMHIVE_RETURN_IF_ERROR(parse_egress(*item.as_table(), prefix, net));
      c.networks.push_back(net);
    }
  }
  if (const toml::node* n = root.get("pools")) {
    if (!n->is_array_of_tables()) return invalid_argument("pools", "must be [[pools]] tables");
    size_t i = 0;
    std::set<std::string> names;
    for (const toml::node& item : *n->as_array()) {
      std::string prefix = "pools[" + std::to_string(i++) + "].";
      PoolConfig p;
      ARMHIVE_RETURN_IF_ERROR(parse_pool(*item.as_table(), prefix, c.min_health_interval, p));
      if (!names.insert(p.name).second) {
        return invalid_argument(prefix + "name", "pool '" + p.name + "' is defined twice");
      }
      // A pool narrows the daemon's cap, never widens it: [access] max_extra_ports is what the
      // operator sized the forward range for.
      if (p.max_extra_ports && *p.max_extra_ports > c.access.max_extra_ports) {
        return invalid_argument(prefix + "max_extra_ports",
                                "must not exceed [access] max_extra_ports (" +
                                    std::to_string(c.access.max_extra_ports) + "), got " +
                                    std::to_string(*p.max_extra_ports));
      }
      c.pools.push_back(std::move(p));
    }
  }
  if (c.pools.empty()) return invalid_argument("pools", "configure at least one [[pools]] table");
  ARMHIVE_RETURN_IF_ERROR(check_pools_have_hosts(c));
  ARMHIVE_RETURN_IF_ERROR(check_network_guards(c, root.get("hosts") != nullptr));
  for (const auto& [label, pool] : c.github.labels) {
    bool known = false;
    for (const PoolConfig& p : c.pools) known = known || p.name == pool;
    if (!known) {
      return invalid_argument("github.labels." + label,
                              "names no configured pool ('" + pool + "')");
    }
  }
  return c;
}

Result<DaemonConfig> load_daemon_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("cannot read configuration file", path);
  std::stringstream buf;
  buf << in.rdbuf();
  auto c = parse_daemon_config(buf.str());
  if (!c.is_ok()) return Status(c.status().code(), c.status().message(), path, c.status().field());
  return c;
}

}  // namespace armhive
