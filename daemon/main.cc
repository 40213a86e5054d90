// armhived: wires the real implementations together and runs until SIGINT/SIGTERM.
// Everything with behaviour lives in the module libraries; this file only connects them.

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "base/deadline_worker.h"
#include "base/metrics.h"
#include "base/process_runner.h"
#include "base/secret_file.h"
#include "base/version.h"
#include "daemon/access/forward_table.h"
#include "daemon/access/lease_access.h"
#include "daemon/access/ssh_ca.h"
#include "daemon/bench/benchmark_runner.h"
#include "daemon/bench/health_scheduler.h"
#include "daemon/bench/lease_target_resolver.h"
#include "daemon/bench/mtu_journal.h"
#include "daemon/config/daemon_config.h"
#include "daemon/config/secret_files.h"
#include "daemon/core/cpu_sets.h"
#include "daemon/engine/catalog_image_source.h"
#include "daemon/engine/health_vm_source.h"
#include "daemon/engine/lease_engine.h"
#include "daemon/fleet/host_admin.h"
#include "daemon/fleet/host_registry.h"
#include "daemon/fleet/host_setup.h"
#include "daemon/github/github_api.h"
#include "daemon/github/github_provider.h"
#include "daemon/http/convert.h"
#include "daemon/http/server.h"
#include "daemon/http/token_commands.h"
#include "daemon/startup/startup_runner.h"
#include "daemon/store/sqlite_health_store.h"
#include "daemon/store/sqlite_host_store.h"
#include "daemon/store/sqlite_lease_store.h"
#include "daemon/store/token_store.h"
#include "daemon/virt/connection.h"
#include "daemon/virt/event_loop.h"
#include "daemon/virt/host_discovery.h"
#include "daemon/virt/libvirt_hypervisor.h"
#include "daemon/virt/network.h"
#include "daemon/virt/network_guard.h"

namespace armhive {
namespace {

int fail(const Status& s, std::string_view what) {
  spdlog::critical("{}: {}", what, s.to_string());
  return 1;
}

// The machine's host name as an armhive host name (lower-case letters, digits, '-', '_', '.',
// at most 63): the engine refuses any other, and a machine named "HoneyComb-1" should still
// start. host.name in the configuration overrides it.
std::string machine_hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  std::string raw = buf;
  std::string name;
  for (char c : raw.substr(0, 63)) {
    char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    bool ok = (lower >= 'a' && lower <= 'z') || (lower >= '0' && lower <= '9') || lower == '-' ||
              lower == '_' || lower == '.';
    name += ok ? lower : '-';
  }
  if (name.empty()) return "localhost";
  if (name != raw) {
    spdlog::info("host name '{}' is used as '{}' (set host.name to choose another)", raw, name);
  }
  return name;
}

// The GitHub provider of a [github] table: its token and webhook secret read from their 0600
// files (check_secret_files refused wider modes), the REST client and the provider, started.
Status start_github(const GithubConfig& config, LeaseService& leases, StartupRunner& startups,
                    AuditLog& audit, const Clock& clock, std::unique_ptr<GithubApi>& api,
                    std::unique_ptr<GithubProvider>& provider) {
  for (const std::string* path :
       {&config.token_file, &config.app_private_key_file, &config.webhook_secret_file}) {
    if (path->empty()) continue;  // token_file or the App's key, not both
    if (Status s = check_secret_file(*path, "a [github] secret file"); !s.is_ok()) return s;
  }
  ARMHIVE_ASSIGN_OR_RETURN(std::string secret, read_token_file(config.webhook_secret_file));
  GithubApiOptions api_options;
  api_options.api_url = config.api_url;
  api_options.scope = config.org.empty() ? "repos/" + config.repo : "orgs/" + config.org;
  if (config.app_id > 0) {
    std::ifstream key_in(config.app_private_key_file, std::ios::binary);
    std::string key((std::istreambuf_iterator<char>(key_in)), std::istreambuf_iterator<char>());
    if (!key_in && !key_in.eof()) {
      return unavailable("cannot read " + config.app_private_key_file,
                         "github.app_private_key_file");
    }
    api_options.app_id = config.app_id;
    api_options.app_private_key = std::move(key);
    api_options.installation_id = config.installation_id;
    api_options.clock = &clock;
  } else {
    ARMHIVE_ASSIGN_OR_RETURN(api_options.token, read_token_file(config.token_file));
  }
  ARMHIVE_ASSIGN_OR_RETURN(api, make_github_api(std::move(api_options)));
  GithubProviderOptions options;
  options.webhook_secret = std::move(secret);
  options.label_pools = config.labels;
  options.runner_group_id = config.runner_group_id;
  options.idle_timeout = std::chrono::duration_cast<Seconds>(config.idle_timeout);
  options.replay_window = std::chrono::duration_cast<Seconds>(config.replay_window);
  options.runner_command = config.runner_command;
  provider = std::make_unique<GithubProvider>(
      std::move(options), leases,
      [&startups](const std::string& id, const StartupRequestDto& startup) {
        return startups.set_startup(id, startup);
      },
      *api, clock,
      [&audit](const GithubEvent& e) {
        // A rejected delivery may come from anyone who reaches the endpoint: rate limited per
        // address (AuditLog::record_stranger), its log line with it.
        if (!e.source.empty()) {
          if (audit.record_stranger("github", e.type, e.source, e.lease_id, e.detail)) {
            spdlog::info("github: {} {} {}", e.type, e.lease_id, e.detail);
          }
          return;
        }
        spdlog::info("github: {} {} {}", e.type, e.lease_id, e.detail);
        (void)audit.record("github", e.type, e.lease_id, e.detail);
      });
  provider->start();
  spdlog::info("github: webhooks on /v1/github/webhook for {} via {}",
               config.org.empty() ? config.repo : config.org, config.api_url);
  return Status::ok();
}

// The admin token behind `bootstrap_token_file`: an operator-provided secret in that file is
// installed (hashed) as token "admin"; without the file, a fresh installation creates the token
// and writes its secret there (0600), so it can be driven without a manual step.
Status bootstrap_admin(TokenStore& tokens, const std::string& path) {
  if (path.empty()) return Status::ok();
  if (std::filesystem::exists(path)) {
    auto secret = read_token_file(path);
    if (!secret.is_ok()) return secret.status();
    return install_bootstrap_token(tokens, *secret, "admin");
  }
  if (tokens.get("admin").is_ok()) {
    return conflict("token 'admin' exists but " + path +
                    " is missing: put its secret there, or revoke it with `armhived token revoke "
                    "admin` to create a new one");
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  auto secret = tokens.create({.name = "admin", .role = TokenRole::kAdmin});
  if (!secret.is_ok()) return secret.status();
  // 0600 from the first byte: never a moment where another user could read it.
  if (Status written = write_secret_file(path, *secret + "\n"); !written.is_ok()) {
    (void)tokens.revoke("admin");
    return written.annotate("writing the bootstrap token");
  }
  spdlog::info("created admin token; its secret is in {}", path);
  return Status::ok();
}

NetworkSpec network_spec(const NetworkConfig& n) {
  NetworkSpec spec{n.name, n.bridge, n.cidr, n.dhcp_start, n.dhcp_end, n.mtu};
  spec.mode = network_mode_from_string(n.mode).value_or(NetworkMode::kIsolated);
  for (const EgressConfig& e : n.egress) spec.egress.push_back({e.cidr, e.ports});
  spec.isolate_guests = n.isolate_guests;
  return spec;
}

// The guard's ruleset for one of the configured networks, as armhived applies it to a local
// host: what a remote host's provisioning must install (`nft -j -f FILE`).
int print_network_guard(const DaemonConfig& config, const std::string& name) {
  std::string known;
  for (const NetworkConfig& n : config.networks) {
    known += (known.empty() ? "" : ", ") + n.name;
    if (n.name != name) continue;
    auto ruleset = build_guard_ruleset(network_spec(n));
    if (!ruleset.is_ok()) {
      std::cerr << "armhived: network " << name << ": " << ruleset.status().message() << "\n";
      return 2;
    }
    std::cout << *ruleset << "\n";
    return 0;
  }
  std::cerr << "armhived: no [[networks]] named '" << name << "' in the configuration"
            << (known.empty() ? " (it has none)" : " (it has " + known + ")") << "\n";
  return 2;
}

int serve(const DaemonConfig& config, const std::string& config_path) {
  // Before anything else: a secret others can read is a configuration error.
  if (Status s = check_secret_files(config); !s.is_ok()) return fail(s, "secret files");
  std::error_code ec;
  std::filesystem::create_directories(config.state_dir, ec);
  auto db = Database::open(config.database_path());
  if (!db.is_ok()) return fail(db.status(), "database");
  auto leases = SqliteLeaseStore::open(**db);
  if (!leases.is_ok()) return fail(leases.status(), "lease store");
  SystemClock clock;
  auto tokens = TokenStore::open(**db, clock);
  if (!tokens.is_ok()) return fail(tokens.status(), "token store");
  // Tokens made before their names were reserved stay in the table (the audit log names them)
  // but no longer authenticate: say so, so that their holders get a new one.
  if (auto all = (*tokens)->list(); all.is_ok()) {
    for (const TokenInfo& t : *all) {
      if (is_reserved_token_name(t.name) && !t.revoked()) {
        spdlog::error(
            "token \"{}\" has a reserved name (armhived acts under it itself): it no longer "
            "authenticates; revoke it (armhived token revoke {}) and create one with another name",
            t.name, t.name);
      }
    }
  }
  Metrics metrics;
  AuditOptions audit_options;
  audit_options.keep = std::chrono::duration_cast<Seconds>(config.audit_keep);
  auto audit = AuditLog::open(**db, clock, audit_options, &metrics);
  if (!audit.is_ok()) return fail(audit.status(), "audit log");
  (*audit)->start();  // its writer: strangers' entries and the retention, off the request path
  if (Status s = bootstrap_admin(**tokens, config.bootstrap_token_file); !s.is_ok()) {
    return fail(s, "bootstrap token");
  }

  // libvirt: the event loop must exist before any connection.
  auto loop = EventLoop::start();
  if (!loop.is_ok()) return fail(loop.status(), "libvirt event loop");

  CatalogImageSource images(config.catalog_dir());
  for (const PoolConfig& p : config.pools) {
    auto image = images.resolve(p.image);
    if (!image.is_ok()) {
      spdlog::warn("pool {}: image '{}' not usable yet ({}); its leases will wait", p.name, p.image,
                   image.status().message());
    }
  }

  // Every host of [[hosts]] (or [host] alone), connected and set up at once; a stopped
  // libvirtd or a cut link costs libvirt_timeout, once (daemon/fleet).
  SubprocessRunner guard_runner;
  HostRegistryOptions registry_options;
  registry_options.storage_pool = config.storage_pool;
  registry_options.connect_timeout = config.libvirt_timeout;
  registry_options.guard_runner = &guard_runner;
  registry_options.catalogue = [&images](const std::string& name) { return images.resolve(name); };
  for (const NetworkConfig& n : config.networks) {
    registry_options.networks.push_back(network_spec(n));
  }
  // The configuration's hosts, then those added through the API (kept in the database).
  auto host_store = SqliteHostStore::open(**db);
  if (!host_store.is_ok()) return fail(host_store.status(), "host store");
  auto api_hosts = (*host_store)->list();
  if (!api_hosts.is_ok()) return fail(api_hosts.status(), "hosts added through the API");
  std::vector<HostSetup> setups;
  std::set<std::string> configured;
  for (const HostConfig& h : config.hosts) {
    std::string name = h.name.empty() ? machine_hostname() : h.name;
    configured.insert(name);
    setups.push_back(make_host_setup(h, name, config.pools, config.state_dir));
  }
  for (const HostSpec& h : *api_hosts) {
    if (configured.count(h.name)) {
      spdlog::warn("host {}: in the configuration now; the API's entry is dropped", h.name);
      (void)(*host_store)->remove(h.name);
      continue;
    }
    // Added before armhived checked the URIs the API may name (issue 33): one it would refuse
    // now is dropped, as POST /v1/hosts would refuse it, and said so.
    std::vector<std::string> vouched;
    for (const HostConfig& c : config.hosts) vouched.push_back(c.libvirt_uri);
    if (Status s = check_libvirt_uri("libvirt_uri", h.libvirt_uri, SpecOrigin::kApi, vouched);
        !s.is_ok()) {
      spdlog::error("host {} ({}): added through the API, dropped: {}", h.name, h.libvirt_uri,
                    s.message());
      (void)(*host_store)->remove(h.name);
      continue;
    }
    spdlog::info("host {} ({}): added through the API", h.name, h.libvirt_uri);
    setups.push_back(make_host_setup(h, h.name, config.pools, config.state_dir));
  }
  // A host that cannot be reached now is driven as unreachable with the topology it had last
  // time (or, never seen, once it answers): one board down does not keep the lab down.
  if (auto caps = (*host_store)->capabilities(); caps.is_ok()) {
    registry_options.remembered_capabilities = std::move(caps).value();
  } else {
    spdlog::warn("hosts' last capabilities not read: {}", caps.status().to_string());
  }
  registry_options.remember = [&store = **host_store](const std::string& name,
                                                      const std::string& xml) {
    if (Status s = store.put_capabilities(name, xml); !s.is_ok()) {
      spdlog::warn("host {}: capabilities not kept: {}", name, s.to_string());
    }
  };
  registry_options.reconnect_period = config.host_probe_period;
  auto registry = HostRegistry::open(std::move(registry_options), std::move(setups));
  if (!registry.is_ok()) return fail(registry.status(), "libvirt hosts");
  auto engine_hosts = (*registry)->engine_hosts();
  if (!engine_hosts.is_ok()) return fail(engine_hosts.status(), "CPU allocator");
  std::vector<std::string> pool_images;
  for (const PoolConfig& p : config.pools) {
    if (std::find(pool_images.begin(), pool_images.end(), p.image) == pool_images.end()) {
      pool_images.push_back(p.image);
    }
  }
  (*registry)->start_image_collection(pool_images, config.image_gc_period);
  (*registry)->start_guard_watch(config.guard_check_period);

  EngineOptions engine_options;
  engine_options.pools = config.pools;
  engine_options.strategy = config.placement;
  engine_options.threads = config.threads;
  engine_options.boot_timeout = config.boot_timeout;
  engine_options.reconcile_period = config.reconcile_period;
  engine_options.host_probe_period = config.host_probe_period;
  engine_options.usage_period = config.usage_period;
  engine_options.host_probe_timeout = config.host_probe_timeout;
  engine_options.unreachable_grace = config.unreachable_grace;
  LeaseEngine engine(engine_options, std::move(engine_hosts).value(), **leases, clock, &metrics);
  if (Status s = engine.start(); !s.is_ok()) return fail(s, "lease engine");
  // Hosts not connected are tried again; one never seen joins the engine once it answers. The
  // guard stops that before the engine goes, on every way out of serve().
  (*registry)->start_reconnecting(
      [&engine](EngineHost h) { return engine.add_host(std::move(h)); });
  struct StopRegistry {
    HostRegistry& registry;
    ~StopRegistry() { registry.stop(); }
  } stop_registry{**registry};

  SubprocessRunner runner;
  std::map<std::string, std::string> network_bridges;  // MTU runs change the VM's bridge too
  for (const NetworkConfig& n : config.networks) network_bridges[n.name] = n.bridge;
  BenchmarkRunnerOptions bench_options;
  bench_options.runs_dir = config.state_dir + "/benchmarks";
  {
    // An MTU benchmark interrupted by a crash left the shared bridge (and a tap) at its MTU.
    std::vector<std::string> errors;
    for (const MtuStep& s :
         restore_mtu_journals(runner, bench_options.runs_dir, std::chrono::seconds(30), errors)) {
      spdlog::warn("link {}: MTU restored to {} (a benchmark was interrupted)", s.link, s.to);
    }
    for (const std::string& e : errors) spdlog::error("MTU restore: {}", e);
  }
  const HostRegistry& hosts = **registry;
  BenchmarkRunner benchmarks(
      engine.guest_agent(), runner,
      make_lease_target_resolver(
          [&engine](const std::string& id) { return engine.lease_vm(id); },
          [&hosts](const std::string& name) {
            // "": a record from before hosts were recorded, the first host's. The registry
            // keeps every Host (removed ones too) until it goes: the topology outlives this.
            std::shared_ptr<HostRegistry::Host> h =
                name.empty() ? hosts.hosts().front() : hosts.host(name);
            return h == nullptr ? LeaseHost{} : LeaseHost{&h->topology, !h->remote};
          },
          [&images](const std::string& name) { return images.resolve(name); }, network_bridges,
          // The storage suite's host baseline writes next to the VM's overlay (a local host's).
          [&hosts](const std::string& vm) {
            for (const auto& h : hosts.hosts()) {
              if (!h->remote && h->connected()) return h->hypervisor->paths_for(vm).overlay;
            }
            return std::string();
          }),
      clock, bench_options);
  if (Status s = benchmarks.load(); !s.is_ok()) {
    spdlog::warn("benchmarks: earlier runs not loaded: {}", s.to_string());
  }
  // Health benchmarks ([[pools]] health): a short suite on a spare warm VM every `every`.
  auto health_store = SqliteHealthStore::open(**db);
  if (!health_store.is_ok()) return fail(health_store.status(), "health series");
  LeaseServiceHealthSource health_source(engine);
  HealthSchedulerOptions health_options;
  health_options.host = hosts.hosts().front()->setup.name;  // per pool, shown on every host
  for (const PoolConfig& p : config.pools) {
    if (p.health.every.count() > 0) {
      health_options.pools.push_back(
          {p.name, p.health.every, p.health.suite, p.health.runs_kept, p.health.band_mads});
    }
  }
  HealthScheduler health(health_options, health_source, benchmarks, **health_store, clock);
  if (Status s = health.load(); !s.is_ok()) {
    spdlog::warn("health benchmarks: earlier results not loaded: {}", s.to_string());
  }

  // Whether this machine reaches a lease's guest: a VM on a remote host only on a bridged
  // network (the lab's LAN); behind that host's own NAT or isolated network its address is
  // the host's private one, which here may even be another guest's.
  std::function<Status(const Lease&)> reach = [&hosts, &config](const Lease& lease) -> Status {
    std::shared_ptr<HostRegistry::Host> h =
        lease.host.empty() ? hosts.hosts().front() : hosts.host(lease.host);
    if (h == nullptr || !h->remote) return Status::ok();
    std::string network = "default", mode = "isolated";
    for (const PoolConfig& p : config.pools) {
      if (p.name == lease.pool) network = p.network;
    }
    for (const NetworkConfig& n : config.networks) {
      if (n.name == network) mode = n.mode;
    }
    if (mode == "bridge") return Status::ok();
    return unavailable("lease " + lease.id + "'s VM runs on host " + h->setup.name +
                       " behind that host's own network '" + network + "' (" + mode +
                       "), which armhived cannot reach: give pools on remote hosts a bridge "
                       "network on the lab's LAN to reach their VMs from outside");
  };

  // [access]: per-lease forwards from the host to the guests' SSH.
  std::unique_ptr<ForwardTable> forwards;
  std::unique_ptr<LeaseAccess> access;
  std::unique_ptr<SshCertificateAuthority> ssh_ca;
  if (config.access.enabled) {
    AccessOptions access_options;
    access_options.listen_address = config.access.listen;
    access_options.advertise_host = config.access.advertise;
    access_options.port_min = config.access.port_min;
    access_options.port_max = config.access.port_max;
    access_options.max_sessions_per_forward = config.access.max_sessions_per_forward;
    access_options.max_sessions = config.access.max_sessions;
    access_options.idle_timeout = config.access.forward_idle_timeout;
    auto table = ForwardTable::start(
        access_options,
        [&audit = **audit, &engine](const AccessEvent& e) {
          spdlog::info("lease {}: {} {}", e.lease_id, e.type, e.detail);
          (void)audit.record("armhived", e.type, e.lease_id, e.detail);
          engine.record_event(e.lease_id, e.type, e.detail);
        },
        &metrics);
    if (!table.is_ok()) {
      engine.stop();
      return fail(table.status(), "access forwards");
    }
    forwards = std::move(table).value();
    access = std::make_unique<LeaseAccess>(engine, *forwards, config.access.max_extra_ports);
    access->set_reach(reach);
    auto ca = SshCertificateAuthority::open(config.ssh_ca_key_path(), runner);
    if (!ca.is_ok()) {
      engine.stop();
      return fail(ca.status(), "SSH certificate authority");
    }
    ssh_ca = std::move(ca).value();
    access->set_user_ca(ssh_ca->public_key());
    access->start();
    spdlog::info("access forwards on {} ports {}-{}", access_options.listen_address,
                 access_options.port_min, access_options.port_max);
  }

  // Startup commands of leases (daemon/startup): secrets stay in this process's memory.
  auto startups = StartupRunner::open(
      engine, engine.guest_agent(), **db, clock, {}, [&audit = **audit](const StartupEvent& e) {
        spdlog::info("lease {}: {} {}", e.lease_id, e.type, e.detail);
        (void)audit.record("armhived", e.type, e.lease_id, e.detail);
      });
  if (!startups.is_ok()) {
    if (access) access->stop();
    engine.stop();
    return fail(startups.status(), "startup commands");
  }
  (*startups)->start();

  // [github]: workflow_job webhooks -> just-in-time runners in leased VMs (daemon/github).
  std::unique_ptr<GithubApi> github_api;
  std::unique_ptr<GithubProvider> github;
  if (config.github.enabled) {
    Status s = start_github(config.github, engine, **startups, **audit, clock, github_api, github);
    if (!s.is_ok()) {
      (*startups)->stop();
      if (access) access->stop();
      engine.stop();
      return fail(s, "github");
    }
  }

  HttpOptions http_options;
  http_options.bind_address = config.bind;
  http_options.port = config.port;
  http_options.tls_cert_file = config.tls_cert;
  http_options.tls_key_file = config.tls_key;
  http_options.long_operations.execs = static_cast<size_t>(config.max_execs_per_token);
  http_options.long_operations.file_transfers =
      static_cast<size_t>(config.max_file_transfers_per_token);
  http_options.long_operations.tunnels = static_cast<size_t>(config.max_tunnels_per_token);
  http_options.long_operations.event_streams =
      static_cast<size_t>(config.max_event_streams_per_token);
  http_options.upload_min_bytes_per_second =
      static_cast<uint64_t>(config.upload_min_bytes_per_second);
  http_options.log = [](std::string_view line) { spdlog::info("{}", line); };
  if (access) {
    http_options.lease_view = [&access, &reach](const Lease& lease, LeaseDto& dto) -> Status {
      if (!dto.ssh) return Status::ok();
      if (!reach(lease).is_ok()) {
        dto.ssh.reset();  // its address is another host's private one: nothing to offer here
        return Status::ok();
      }
      ARMHIVE_ASSIGN_OR_RETURN(std::optional<SshEndpoint> ep, access->ssh_endpoint(lease));
      if (!ep) return Status::ok();
      // The keys and their known_hosts lines (for the lease's alias) stay as they are: the
      // alias, not the forward's host:port, is what ssh looks them up under.
      dto.ssh->host = ep->host;
      dto.ssh->port = ep->port;
      dto.ssh->command = ssh_command(dto.ssh->user, ep->host, ep->port, lease.id);
      for (const ForwardInfo& f : ep->extra) dto.forwards.push_back({f.guest_port, f.host, f.port});
      return Status::ok();
    };
    http_options.tunnel = [&access, &forwards](const Lease& lease,
                                               int port) -> Result<TunnelRoute> {
      ARMHIVE_ASSIGN_OR_RETURN(LeaseAccess::TunnelTarget t, access->tunnel_target(lease, port));
      TunnelRoute route{t.address, t.port, {}, {}};
      route.attach = [&forwards, id = lease.id](std::function<void()> cut) {
        return forwards->attach(id, std::move(cut));
      };
      route.detach = [&forwards, id = lease.id](uint64_t n) { forwards->detach(id, n); };
      return route;
    };
    http_options.check_ports = [&access](const std::string& pool, const std::vector<int>& ports) {
      return access->check_ports(pool, ports);
    };
    http_options.lease_ports = [&access](const std::string& id, const std::vector<int>& ports) {
      access->set_ports(id, ports);
    };
    http_options.ssh_certificate = [&access, &ssh_ca, &clock, &engine, &config](
                                       const Lease& lease, const std::string& token,
                                       const std::string& public_key) -> Result<SshCertificateDto> {
      // The pool's ssh_permissions; a pool no longer configured permits nothing but the login.
      std::vector<std::string> permissions;
      for (const PoolConfig& p : config.pools) {
        if (p.name == lease.pool) permissions = p.ssh_permissions;
      }
      ARMHIVE_ASSIGN_OR_RETURN(
          SshCertificate cert,
          ssh_ca->sign(public_key, lease.id, token, clock.now(), lease.expires_at, permissions));
      // The guest must accept it before the client tries it.
      ARMHIVE_RETURN_IF_ERROR(access->install_trust(lease));
      engine.record_event(lease.id, "ssh.certificate",
                          "serial=" + std::to_string(cert.serial) + " principal=" + cert.principal);
      return SshCertificateDto{cert.certificate,
                               lease.login_user,
                               cert.principal,
                               cert.key_id,
                               cert.serial,
                               to_rfc3339(cert.valid_after),
                               to_rfc3339(cert.valid_before)};
    };
  }
  http_options.lease_startup = [&runner = **startups](const std::string& id,
                                                      const StartupRequestDto& startup) {
    return runner.set_startup(id, startup);
  };
  http_options.startup_view = [&runner = **startups](const Lease& lease, LeaseDto& dto) {
    dto.startup = runner.view(lease.id);
  };
  if (github) {
    http_options.github_webhook = [&github](const std::string& event, const std::string& delivery,
                                            const std::string& signature, const std::string& body,
                                            const std::string& remote) {
      return github->deliver(event, delivery, signature, body, remote);
    };
  }
  http_options.health_series = [&store = **health_store](const std::string& host,
                                                         const std::string& pool, size_t limit) {
    return store.recent(host, pool, "", limit);
  };
  HostAdmin::Options admin_options;
  admin_options.configured = configured;
  for (const HostConfig& h : config.hosts) admin_options.configured_uris.push_back(h.libvirt_uri);
  admin_options.has_networks = !config.networks.empty();
  admin_options.pools = config.pools;
  admin_options.state_dir = config.state_dir;
  admin_options.config_path = config_path;
  HostAdmin host_admin(admin_options, **registry, engine, **host_store);
  http_options.configured_host_uris = admin_options.configured_uris;
  http_options.add_host = [&host_admin](const HostSpec& spec) { return host_admin.add(spec); };
  http_options.remove_host = [&host_admin](const std::string& name) {
    return host_admin.remove(name);
  };
  http_options.waiting_hosts = [&hosts = **registry] {
    std::vector<HostView> out;
    for (const HostRegistry::Waiting& w : hosts.waiting_hosts()) {
      out.push_back(HostRegistry::view_of(w));
    }
    return out;
  };
  HttpServer server(http_options, engine, &benchmarks, **tokens, **audit, metrics);
  if (Status s = server.start(); !s.is_ok()) {
    if (github) github->stop();
    (*startups)->stop();
    if (access) access->stop();
    engine.stop();
    return fail(s, "HTTP server");
  }
  spdlog::info("armhived listening on {}", server.url());
  health.start();

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: stopping (VMs keep running and are re-adopted on restart)", sig);
  health.stop();
  server.stop();
  if (github) github->stop();
  (*startups)->stop();
  if (access) access->stop();
  if (forwards) forwards->stop();
  engine.stop();
  return 0;
}

}  // namespace
}  // namespace armhive

int main(int argc, char** argv) {
  using namespace armhive;
  // Block the stop signals in every thread; serve() waits for them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  CLI::App app{"armhived: a pool of ephemeral aarch64 VMs for CI, leased over a REST API"};
  app.set_version_flag("--version", "armhived " + std::string(kVersion));
  std::string config_path = "/etc/armhive/armhived.toml";
  app.add_option("-c,--config", config_path, "Configuration file")->capture_default_str();
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "Debug logging");
  CLI::App* token = app.add_subcommand("token", "Manage API tokens: create, revoke, list");
  token->allow_extras();
  token->prefix_command();
  CLI::App* guard = app.add_subcommand(
      "network-guard",
      "Print the nftables ruleset (JSON, for `nft -j -f FILE`) that guards a guest network; a "
      "remote host's provisioning installs it there (network_guard = \"host\")");
  std::string guard_network;
  guard->add_option("NETWORK", guard_network, "a [[networks]] name")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::info);

  auto config = load_daemon_config(config_path);
  if (!config.is_ok()) {
    std::cerr << "armhived: configuration error in " << config_path << ": "
              << config.status().message()
              << (config.status().field().empty() ? "" : " (key " + config.status().field() + ")")
              << "\n";
    return 2;
  }
  if (*guard) return print_network_guard(*config, guard_network);
  if (*token) {
    auto db = Database::open(config->database_path());
    if (!db.is_ok()) {
      std::cerr << "armhived: " << db.status().to_string() << "\n";
      return 1;
    }
    return run_token_command(token->remaining(), **db, std::cout, std::cerr);
  }
  return serve(*config, config_path);
}
