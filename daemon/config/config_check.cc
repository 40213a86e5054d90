#include "daemon/config/config_check.h"

#include <toml++/toml.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "base/toml_reader.h"
#include "base/validation.h"
#include "daemon/config/secret_files.h"

namespace armhive {
namespace {

// The line of `field` ("pools[1].vcpus") in the parsed file, walking up to the nearest part
// that exists; 0 when even the top key is absent.
int line_of(const toml::table& root, std::string field) {
  while (!field.empty()) {
    toml::node_view<const toml::node> node = toml::at_path(root, field);
    if (node && node.node()->source().begin.line > 0) {
      return static_cast<int>(node.node()->source().begin.line);
    }
    size_t cut = field.find_last_of(".[");
    if (cut == std::string::npos) break;
    field.resize(cut);
  }
  return 0;
}

std::string duration(std::chrono::milliseconds d) {
  return format_duration(std::chrono::duration_cast<std::chrono::seconds>(d).count());
}

template <typename T>
toml::array array_of(const std::vector<T>& items) {
  toml::array a;
  for (const T& i : items) a.push_back(i);
  return a;
}

toml::table table_of(const std::map<std::string, std::string>& labels) {
  toml::table t;
  for (const auto& [k, v] : labels) t.insert(k, v);
  return t;
}

toml::table cpus_of(const std::optional<std::string>& housekeeping,
                    const std::optional<std::string>& dedicated,
                    const std::optional<std::string>& shared) {
  toml::table t;
  if (housekeeping) t.insert("housekeeping", *housekeeping);
  if (dedicated) t.insert("dedicated", *dedicated);
  if (shared) t.insert("shared", *shared);
  return t;
}

toml::table server_of(const DaemonConfig& c) {
  toml::table t{{"bind", c.bind},
                {"port", c.port},
                {"max_execs_per_token", c.max_execs_per_token},
                {"max_file_transfers_per_token", c.max_file_transfers_per_token},
                {"max_tunnels_per_token", c.max_tunnels_per_token},
                {"max_event_streams_per_token", c.max_event_streams_per_token},
                {"upload_min_bytes_per_second", c.upload_min_bytes_per_second}};
  if (!c.tls_cert.empty()) t.insert("tls_cert", c.tls_cert);
  if (!c.tls_key.empty()) t.insert("tls_key", c.tls_key);
  if (!c.bootstrap_token_file.empty()) t.insert("bootstrap_token_file", c.bootstrap_token_file);
  return t;
}

toml::table engine_of(const DaemonConfig& c) {
  return toml::table{{"boot_timeout", duration(c.boot_timeout)},
                     {"reconcile_period", duration(c.reconcile_period)},
                     {"threads", c.threads},
                     {"min_health_interval", duration(c.min_health_interval)},
                     {"host_probe_period", duration(c.host_probe_period)},
                     {"host_probe_timeout", duration(c.host_probe_timeout)},
                     {"unreachable_grace", duration(c.unreachable_grace)},
                     {"image_gc_period", duration(c.image_gc_period)},
                     {"guard_check_period", duration(c.guard_check_period)},
                     {"usage_period", duration(c.usage_period)}};
}

toml::table access_of(const AccessConfig& a) {
  toml::table t{{"listen", a.listen},
                {"port_min", a.port_min},
                {"port_max", a.port_max},
                {"max_extra_ports", a.max_extra_ports},
                {"max_sessions_per_forward", a.max_sessions_per_forward},
                {"max_sessions", a.max_sessions},
                {"forward_idle_timeout", duration(a.forward_idle_timeout)}};
  if (!a.advertise.empty()) t.insert("advertise", a.advertise);
  if (!a.ssh_ca_key.empty()) t.insert("ssh_ca_key", a.ssh_ca_key);
  return t;
}

toml::table github_of(const GithubConfig& g) {
  toml::table t{{"api_url", g.api_url},
                {"runner_group_id", g.runner_group_id},
                {"idle_timeout", duration(g.idle_timeout)},
                {"replay_window", duration(g.replay_window)},
                {"reconcile_period", duration(g.reconcile_period)},
                {"runner_command", array_of(g.runner_command)},
                {"webhook_secret_file", g.webhook_secret_file},
                {"webhook_secret_overlap", duration(g.webhook_secret_overlap)},
                {"labels", table_of(g.labels)}};
  if (!g.org.empty()) {
    t.insert("org", g.org);
    // Empty too: that an organisation's lost webhooks are healed only where listed is worth
    // seeing.
    t.insert("reconcile_repos", array_of(g.reconcile_repos));
  }
  if (!g.repo.empty()) t.insert("repo", g.repo);
  if (!g.token_file.empty()) t.insert("token_file", g.token_file);
  if (g.app_id > 0) {
    t.insert("app_id", g.app_id);
    t.insert("app_private_key_file", g.app_private_key_file);
    t.insert("installation_id", g.installation_id);
  }
  return t;
}

toml::table host_of(const HostConfig& h) {
  toml::table t{{"name", h.name},
                {"libvirt_uri", h.libvirt_uri},
                {"labels", table_of(h.labels)},
                {"l2_clusters", array_of(h.l2_clusters)},
                {"network_guard", h.network_guard}};
  if (!h.vm_dir.empty()) t.insert("vm_dir", h.vm_dir);
  if (!h.image_dir.empty()) t.insert("image_dir", h.image_dir);
  toml::table cpus = cpus_of(h.housekeeping_cpus, h.dedicated_cpus, h.shared_cpus);
  if (!cpus.empty()) t.insert("cpus", std::move(cpus));
  return t;
}

toml::table network_of(const NetworkConfig& n) {
  toml::table t{{"name", n.name},
                {"mode", n.mode},
                {"bridge", n.bridge},
                {"cidr", n.cidr},
                {"dhcp_start", n.dhcp_start},
                {"dhcp_end", n.dhcp_end},
                {"mtu", n.mtu},
                {"isolate_guests", n.isolate_guests}};
  if (!n.egress.empty()) {
    toml::array egress;
    for (const EgressConfig& e : n.egress) {
      egress.push_back(toml::table{{"cidr", e.cidr}, {"ports", array_of(e.ports)}});
    }
    t.insert("egress", std::move(egress));
  }
  return t;
}

toml::table pool_of(const PoolConfig& p) {
  toml::table t{{"name", p.name},
                {"image", p.image},
                {"vcpus", p.vcpus},
                {"memory_mib", static_cast<int64_t>(p.memory_mib)},
                {"disk_gib", static_cast<int64_t>(p.disk_gib)},
                {"network", p.network},
                {"mtu", p.mtu},
                {"min_warm", p.min_warm},
                {"max", p.max},
                {"max_starting", p.max_starting},
                {"default_ttl", format_duration(p.default_ttl.count())},
                {"max_ttl", format_duration(p.max_ttl.count())},
                {"cpu_policy", p.cpu_policy == CpuPolicy::kDedicated ? "dedicated" : "shared"},
                {"overcommit", p.overcommit},
                {"ssh", p.ssh},
                {"ssh_permissions", array_of(p.ssh_permissions)},
                {"labels", table_of(p.labels)},
                {"host_labels", table_of(p.host_labels)},
                {"access_ports", array_of(p.access_ports)}};
  if (p.auto_warm) {
    t.insert_or_assign("min_warm", "auto");
    t.insert("auto_min", p.auto_warm->auto_min);
    t.insert("auto_max", p.auto_warm->auto_max);
    t.insert("scale_to_zero_after", format_duration(p.auto_warm->scale_to_zero_after.count()));
    t.insert("burst_every", format_duration(p.auto_warm->burst_every.count()));
  }
  if (p.max_extra_ports) t.insert("max_extra_ports", *p.max_extra_ports);
  toml::table files{{"max_bytes", static_cast<int64_t>(p.files.max_bytes)}};
  if (!p.files.path_prefix.empty()) files.insert("path_prefix", p.files.path_prefix);
  t.insert("files", std::move(files));
  toml::table health{{"suite", p.health.suite},
                     {"runs_kept", p.health.runs_kept},
                     {"band_mads", p.health.band_mads}};
  if (p.health.every.count() > 0) health.insert("every", format_duration(p.health.every.count()));
  t.insert("health", std::move(health));
  return t;
}

// The whole configuration as one TOML table, defaults written out.
toml::table render_table(const DaemonConfig& c) {
  toml::table root;
  root.insert("server", server_of(c));
  toml::table host{{"storage_pool", c.storage_pool},
                   {"state_dir", c.state_dir},
                   {"catalog", c.catalog_dir()},
                   {"database", c.database_path()},
                   {"placement", std::string(to_string(c.placement))},
                   {"libvirt_timeout", duration(c.libvirt_timeout)}};
  // One host without a name is [host] alone (the machine's own name); otherwise [[hosts]].
  const bool local = c.hosts.size() == 1 && c.hosts.front().name.empty();
  if (local) {
    host.insert("libvirt_uri", c.hosts.front().libvirt_uri);
    toml::table cpus = cpus_of(c.housekeeping_cpus, c.dedicated_cpus, c.shared_cpus);
    if (!cpus.empty()) host.insert("cpus", std::move(cpus));
  }
  root.insert("host", std::move(host));
  if (!c.store.url.empty()) {
    root.insert("store", toml::table{{"url", c.store.url},
                                     {"leader_lease", duration(c.store.leader_lease)}});
  }
  if (!local) {
    toml::array hosts;
    for (const HostConfig& h : c.hosts) hosts.push_back(host_of(h));
    root.insert("hosts", std::move(hosts));
  }
  root.insert("engine", engine_of(c));
  root.insert("audit", toml::table{{"keep", duration(c.audit_keep)}});
  if (c.access.enabled) root.insert("access", access_of(c.access));
  if (c.github.enabled) root.insert("github", github_of(c.github));
  if (!c.networks.empty()) {
    toml::array networks;
    for (const NetworkConfig& n : c.networks) networks.push_back(network_of(n));
    root.insert("networks", std::move(networks));
  }
  toml::array pools;
  for (const PoolConfig& p : c.pools) pools.push_back(pool_of(p));
  root.insert("pools", std::move(pools));
  return root;
}

}  // namespace

std::string locate_config_error(std::string_view file, std::string_view text, const Status& error) {
  const std::string where(file);
  // A TOML syntax error (parse_toml): "config: line L, column C: what".
  static const std::regex kSyntax(R"(line (\d+), column (\d+): ([\s\S]*))");
  std::smatch m;
  const std::string message = error.message();
  if (std::regex_search(message, m, kSyntax)) {
    return where + ":" + m[1].str() + ":" + m[2].str() + ": " + m[3].str();
  }
  const std::string key = error.field();
  int line = 0;
  if (!key.empty()) {
    try {
      toml::table root = toml::parse(text);
      line = line_of(root, key);
    } catch (const toml::parse_error&) {
      // Not TOML: the syntax error above would have been reported instead.
    }
  }
  std::string out = where + (line > 0 ? ":" + std::to_string(line) : "") + ": ";
  if (!key.empty()) out += key + ": ";
  return out + message;
}

ConfigCheck check_daemon_config(const std::string& path) {
  ConfigCheck check;
  std::ifstream in(path);
  if (!in) {
    check.problems.push_back(path +
                             ": cannot be read (is the path right, and readable by this "
                             "user?)");
    return check;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  auto parsed = parse_daemon_config(text);
  if (!parsed.is_ok()) {
    check.problems.push_back(locate_config_error(path, text, parsed.status()));
    return check;
  }
  check.config = std::move(parsed).value();
  check.parsed = true;
  const DaemonConfig& c = check.config;
  // Each file a key names, reported at that key.
  auto at = [&](const Status& s) { check.problems.push_back(locate_config_error(path, text, s)); };
  if (Status s = check_secret_files(c); !s.is_ok()) at(s);
  for (const auto& [file, key] :
       {std::pair{c.tls_cert, "server.tls_cert"}, std::pair{c.tls_key, "server.tls_key"}}) {
    if (!file.empty() && !std::ifstream(file)) {
      at(invalid_argument(key, "cannot read " + file));
    }
  }
  return check;
}

std::vector<std::string> changed_sections(const DaemonConfig& running, const DaemonConfig& next) {
  toml::table a = render_table(running);
  toml::table b = render_table(next);
  std::vector<std::string> out;
  for (const char* key : {"server", "host", "hosts", "engine", "audit", "networks"}) {
    // Compared as the TOML they print as: the same text is the same effective values.
    auto text = [key](const toml::table& t) {
      std::ostringstream o;
      if (const toml::node* n = t.get(key)) o << toml::node_view<const toml::node>(n);
      return o.str();
    };
    if (text(a) != text(b)) out.emplace_back(key);
  }
  return out;
}

std::string render_daemon_config(const DaemonConfig& c) {
  std::ostringstream out;
  out << render_table(c) << "\n";
  return out.str();
}

}  // namespace armhive
