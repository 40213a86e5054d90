// Daemon: armhived's parts built from one configuration, in dependency order.

#include "daemon/daemon.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/secret_file.h"
#include "daemon/bench/lease_target_resolver.h"
#include "daemon/bench/mtu_journal.h"
#include "daemon/config/config_check.h"
#include "daemon/config/github_reload.h"
#include "daemon/config/secret_files.h"
#include "daemon/core/pool_reload.h"
#include "daemon/fleet/host_setup.h"
#include "daemon/http/convert.h"
#include "daemon/http/token_commands.h"
#include "daemon/standby_server.h"
#include "daemon/store/state_schema.h"
#include "daemon/virt/network_guard.h"

namespace armhive {
namespace {

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

// What a [github] table's secret files hold, each checked first (0600, as at start: a reload
// re-reads them, so a mode widened since is refused there too).
Result<GithubSecrets> read_github_secrets(const GithubConfig& config) {
  for (const std::string* path :
       {&config.token_file, &config.app_private_key_file, &config.webhook_secret_file}) {
    if (path->empty()) continue;  // token_file or the App's key, not both
    if (Status s = check_secret_file(*path, "a [github] secret file"); !s.is_ok()) return s;
  }
  GithubSecrets out;
  ARMHIVE_ASSIGN_OR_RETURN(out.webhook_secret, read_token_file(config.webhook_secret_file));
  if (config.app_id > 0) {
    std::ifstream key_in(config.app_private_key_file, std::ios::binary);
    std::string key((std::istreambuf_iterator<char>(key_in)), std::istreambuf_iterator<char>());
    if (!key_in && !key_in.eof()) {
      return unavailable("cannot read " + config.app_private_key_file,
                         "github.app_private_key_file");
    }
    out.app_private_key = std::move(key);
  } else {
    ARMHIVE_ASSIGN_OR_RETURN(out.token, read_token_file(config.token_file));
  }
  return out;
}

GithubCredentials github_credentials(const GithubConfig& config, const GithubSecrets& secrets) {
  return GithubCredentials{secrets.token, config.app_id, secrets.app_private_key,
                           config.installation_id};
}

// The provider's options of a [github] table: what start uses and a reload hands to
// GithubProvider::reconfigure.
GithubProviderOptions github_provider_options(const GithubConfig& config,
                                              const GithubSecrets& secrets, Metrics& metrics) {
  GithubProviderOptions options;
  options.webhook_secret = secrets.webhook_secret;
  options.webhook_secret_overlap =
      std::chrono::duration_cast<Seconds>(config.webhook_secret_overlap);
  options.label_pools = config.labels;
  options.runner_group_id = config.runner_group_id;
  options.idle_timeout = std::chrono::duration_cast<Seconds>(config.idle_timeout);
  options.replay_window = std::chrono::duration_cast<Seconds>(config.replay_window);
  options.runner_command = config.runner_command;
  options.reconcile_period = std::chrono::duration_cast<Seconds>(config.reconcile_period);
  // Pass 1 lists a repository scope's own jobs, an organisation's in the repositories listed.
  options.job_repositories =
      config.repo.empty() ? config.reconcile_repos : std::vector<std::string>{config.repo};
  options.metrics = &metrics;
  return options;
}

// The GitHub provider of a [github] table: its token and webhook secret read from their 0600
// files (check_secret_files refused wider modes), the REST client and the provider, started.
Status start_github(const GithubConfig& config, const GithubSecrets& secrets, LeaseService& leases,
                    StartupRunner& startups, AuditLog& audit, const Clock& clock, Metrics& metrics,
                    std::unique_ptr<GithubApi>& api, std::unique_ptr<GithubProvider>& provider) {
  GithubApiOptions api_options;
  api_options.api_url = config.api_url;
  api_options.scope = config.org.empty() ? "repos/" + config.repo : "orgs/" + config.org;
  api_options.clock = &clock;  // the backoff's time, the provider's too
  api_options.token = secrets.token;
  api_options.app_id = config.app_id;
  api_options.app_private_key = secrets.app_private_key;
  api_options.installation_id = config.installation_id;
  ARMHIVE_ASSIGN_OR_RETURN(api, make_github_api(std::move(api_options)));
  GithubProviderOptions options = github_provider_options(config, secrets, metrics);
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
  if (!config.org.empty()) {
    std::string repos;
    for (const std::string& r : config.reconcile_repos) repos += (repos.empty() ? "" : ", ") + r;
    spdlog::info(
        "github: jobs whose webhook was lost are looked for in {}",
        repos.empty() ? "no repository (reconcile_repos is empty): redeliveries only" : repos);
  }
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

}  // namespace

NetworkSpec network_spec(const NetworkConfig& n) {
  NetworkSpec spec{n.name, n.bridge, n.cidr, n.dhcp_start, n.dhcp_end, n.mtu};
  spec.mode = network_mode_from_string(n.mode).value_or(NetworkMode::kIsolated);
  for (const EgressConfig& e : n.egress) spec.egress.push_back({e.cidr, e.ports});
  spec.isolate_guests = n.isolate_guests;
  return spec;
}

Result<std::unique_ptr<Daemon>> Daemon::start(const DaemonConfig& config, std::string config_path,
                                              const Progress& progress,
                                              const LeaderElection::Pause& pause) {
  // Before anything else: a secret others can read is a configuration error.
  if (Status s = check_secret_files(config); !s.is_ok()) return s.annotate("secret files");
  std::unique_ptr<Daemon> d(new Daemon(config, std::move(config_path), progress, pause));
  struct Stage {
    const char* status;
    Status (Daemon::*run)();
  };
  const Stage stages[] = {
      {"opening the state", &Daemon::open_state},
      {"connecting the libvirt hosts", &Daemon::connect_hosts},
      {"recovering leases and VMs", &Daemon::start_engine},
      {"loading benchmark runs", &Daemon::start_benchmarks},
      {"starting access forwards", &Daemon::start_access},
      {"starting startup commands and integrations", &Daemon::start_integrations},
      {"starting the HTTP API", &Daemon::start_http},
  };
  for (const Stage& stage : stages) {
    if (progress) progress(stage.status);
    // What started so far is stopped by the destructor, in reverse.
    ARMHIVE_RETURN_IF_ERROR((d.get()->*stage.run)());
  }
  if (d->election_) d->election_->set_api_url(d->url());  // the others' standbys point here
  return d;
}

Daemon::~Daemon() noexcept {
  // The registry's reconnect thread adds hosts to the engine: it stops before anything else.
  if (registry_) registry_->stop();
}

Status Daemon::open_state() {
  std::error_code ec;
  std::filesystem::create_directories(config_.state_dir, ec);
  // With PostgreSQL the leader lease is what keeps two armhived from acting at once, on the
  // database and on the files here alike; the directory's lock would only stop a new leader on
  // the machine of a paused one (which holds it, and exits without acting when it wakes).
  if (config_.store.url.empty()) {
    auto lock = StateLock::acquire(config_.state_dir);
    if (!lock.is_ok()) return lock.status().annotate("state directory");
    state_lock_ = std::move(lock).value();
  }
  ARMHIVE_RETURN_IF_ERROR(open_database());
  // Every component's schema through the one list that `armhived migrate` copies by
  // (daemon/store/state_schema.h); each store's open() below finds its steps applied.
  if (Status s = migrate_state(*db_); !s.is_ok()) return s.annotate("database");
  auto leases = SqliteLeaseStore::open(*db_);
  if (!leases.is_ok()) return leases.status().annotate("lease store");
  leases_ = std::move(leases).value();
  auto tokens = TokenStore::open(*db_, clock_);
  if (!tokens.is_ok()) return tokens.status().annotate("token store");
  tokens_ = std::move(tokens).value();
  // Tokens made before their names were reserved stay in the table (the audit log names them)
  // but no longer authenticate: say so, so that their holders get a new one.
  if (auto all = tokens_->list(); all.is_ok()) {
    for (const TokenInfo& t : *all) {
      if (is_reserved_token_name(t.name) && !t.revoked()) {
        spdlog::error(
            "token \"{}\" has a reserved name (armhived acts under it itself): it no longer "
            "authenticates; revoke it (armhived token revoke {}) and create one with another name",
            t.name, t.name);
      }
    }
  }
  AuditOptions audit_options;
  audit_options.keep = std::chrono::duration_cast<Seconds>(config_.audit_keep);
  auto audit = AuditLog::open(*db_, clock_, audit_options, &metrics_);
  if (!audit.is_ok()) return audit.status().annotate("audit log");
  audit_ = std::move(audit).value();
  audit_->start();  // its writer: strangers' entries and the retention, off the request path
  if (Status s = bootstrap_admin(*tokens_, config_.bootstrap_token_file); !s.is_ok()) {
    return s.annotate("bootstrap token");
  }
  auto host_store = SqliteHostStore::open(*db_);
  if (!host_store.is_ok()) return host_store.status().annotate("host store");
  host_store_ = std::move(host_store).value();
  auto health_store = SqliteHealthStore::open(*db_);
  if (!health_store.is_ok()) return health_store.status().annotate("health series");
  health_store_ = std::move(health_store).value();
  return Status::ok();
}

// Every host of [[hosts]] (or [host] alone), connected and set up at once; a stopped libvirtd
// or a cut link costs libvirt_timeout, once (daemon/fleet).
Status Daemon::open_database() {
  if (config_.store.url.empty()) {
    auto db = Database::open(config_.database_path());
    if (!db.is_ok()) return db.status().annotate("database");
    db_ = std::move(db).value();
    return Status::ok();
  }
  // PostgreSQL: lead first (a standby waits here), then write only under this term's fence.
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  const std::string name = config_.host_name.empty() ? std::string(host) : config_.host_name;
  LeaderElection::Options o;
  o.url = config_.store.url;
  o.holder = "armhived@" + name + "/" + std::to_string(::getpid());
  o.api_url = std::string(config_.tls_cert.empty() ? "http://" : "https://") +
              (config_.bind == "0.0.0.0" || config_.bind == "::" ? name : config_.bind) + ":" +
              std::to_string(config_.port);
  o.lease = config_.store.leader_lease;
  // While it waits, the API's address answers as a standby: where the leader is.
  StandbyServer::Options standby_options;
  standby_options.bind = config_.bind;
  standby_options.port = config_.port;
  standby_options.tls_cert = config_.tls_cert;
  standby_options.tls_key = config_.tls_key;
  standby_options.store_url = config_.store.url;
  standby_options.lease = config_.store.leader_lease;
  auto standby = StandbyServer::start(standby_options);
  if (!standby.is_ok()) return standby.status().annotate("standby API");
  auto won = LeaderElection::win(
      o, pause_,
      [this](std::string_view line) {
        if (progress_) progress_(line);
      },
      [&standby](const PgLeaderLease::Renewal& r) {
        (*standby)->set_leader(r.holder, r.url, r.epoch, r.since_ms);
      });
  standby->reset();  // the address is free for the API the leader starts
  if (!won.is_ok()) return won.status().annotate("leader election");
  election_ = std::move(won).value();
  auto db = PgDatabase::connect(config_.store.url);
  if (!db.is_ok()) return db.status().annotate("database");
  (*db)->set_fence(election_->holder(), election_->epoch());
  db_ = std::move(db).value();
  election_->start();
  return Status::ok();
}

Status Daemon::connect_hosts() {
  // libvirt: the event loop must exist before any connection.
  auto loop = EventLoop::start();
  if (!loop.is_ok()) return loop.status().annotate("libvirt event loop");
  loop_ = std::move(loop).value();
  images_ = std::make_unique<CatalogImageSource>(config_.catalog_dir());
  for (const PoolConfig& p : config_.pools) {
    auto image = images_->resolve(p.image);
    if (!image.is_ok()) {
      spdlog::warn("pool {}: image '{}' not usable yet ({}); its leases will wait", p.name, p.image,
                   image.status().message());
    }
  }
  HostRegistryOptions options;
  options.storage_pool = config_.storage_pool;
  options.connect_timeout = config_.libvirt_timeout;
  options.guard_runner = &guard_runner_;
  options.catalogue = [images = images_.get()](const std::string& name) {
    return images->resolve(name);
  };
  for (const NetworkConfig& n : config_.networks) options.networks.push_back(network_spec(n));
  // The configuration's hosts, then those added through the API (kept in the database).
  auto api_hosts = host_store_->list();
  if (!api_hosts.is_ok()) return api_hosts.status().annotate("hosts added through the API");
  std::vector<HostSetup> setups;
  for (const HostConfig& h : config_.hosts) {
    std::string name = h.name.empty() ? machine_hostname() : h.name;
    configured_hosts_.insert(name);
    setups.push_back(make_host_setup(h, name, config_.pools, config_.state_dir));
  }
  std::vector<std::string> vouched;
  for (const HostConfig& c : config_.hosts) vouched.push_back(c.libvirt_uri);
  for (const HostSpec& h : *api_hosts) {
    if (configured_hosts_.count(h.name)) {
      spdlog::warn("host {}: in the configuration now; the API's entry is dropped", h.name);
      (void)host_store_->remove(h.name);
      continue;
    }
    // Added before armhived checked the URIs the API may name (issue 33): one it would refuse
    // now is dropped, as POST /v1/hosts would refuse it, and said so.
    if (Status s = check_libvirt_uri("libvirt_uri", h.libvirt_uri, SpecOrigin::kApi, vouched);
        !s.is_ok()) {
      spdlog::error("host {} ({}): added through the API, dropped: {}", h.name, h.libvirt_uri,
                    s.message());
      (void)host_store_->remove(h.name);
      continue;
    }
    spdlog::info("host {} ({}): added through the API", h.name, h.libvirt_uri);
    setups.push_back(make_host_setup(h, h.name, config_.pools, config_.state_dir));
  }
  // A host that cannot be reached now is driven as unreachable with the topology it had last
  // time (or, never seen, once it answers): one board down does not keep the lab down.
  if (auto caps = host_store_->capabilities(); caps.is_ok()) {
    options.remembered_capabilities = std::move(caps).value();
  } else {
    spdlog::warn("hosts' last capabilities not read: {}", caps.status().to_string());
  }
  options.remember = [store = host_store_.get()](const std::string& name, const std::string& xml) {
    if (Status s = store->put_capabilities(name, xml); !s.is_ok()) {
      spdlog::warn("host {}: capabilities not kept: {}", name, s.to_string());
    }
  };
  options.reconnect_period = config_.host_probe_period;
  auto registry = HostRegistry::open(std::move(options), std::move(setups));
  if (!registry.is_ok()) return registry.status().annotate("libvirt hosts");
  registry_ = std::move(registry).value();
  return Status::ok();
}

Status Daemon::start_engine() {
  auto engine_hosts = registry_->engine_hosts();
  if (!engine_hosts.is_ok()) return engine_hosts.status().annotate("CPU allocator");
  std::vector<std::string> pool_images;
  for (const PoolConfig& p : config_.pools) {
    if (std::find(pool_images.begin(), pool_images.end(), p.image) == pool_images.end()) {
      pool_images.push_back(p.image);
    }
  }
  registry_->start_image_collection(pool_images, config_.image_gc_period);
  registry_->start_guard_watch(config_.guard_check_period);

  EngineOptions options;
  options.pools = config_.pools;
  options.strategy = config_.placement;
  options.threads = config_.threads;
  options.boot_timeout = config_.boot_timeout;
  options.reconcile_period = config_.reconcile_period;
  options.host_probe_period = config_.host_probe_period;
  options.usage_period = config_.usage_period;
  options.host_probe_timeout = config_.host_probe_timeout;
  options.unreachable_grace = config_.unreachable_grace;
  engine_ = std::make_unique<LeaseEngine>(options, std::move(engine_hosts).value(), *leases_,
                                          clock_, &metrics_);
  if (Status s = engine_->start(); !s.is_ok()) return s.annotate("lease engine");
  // Hosts not connected are tried again; one never seen joins the engine once it answers. The
  // destructor stops that before the engine goes.
  registry_->start_reconnecting(
      [engine = engine_.get()](EngineHost h) { return engine->add_host(std::move(h)); });
  return Status::ok();
}

Status Daemon::start_benchmarks() {
  std::map<std::string, std::string> network_bridges;  // MTU runs change the VM's bridge too
  for (const NetworkConfig& n : config_.networks) network_bridges[n.name] = n.bridge;
  BenchmarkRunnerOptions options;
  options.runs_dir = config_.state_dir + "/benchmarks";
  {
    // An MTU benchmark interrupted by a crash left the shared bridge (and a tap) at its MTU.
    std::vector<std::string> errors;
    for (const MtuStep& s :
         restore_mtu_journals(runner_, options.runs_dir, std::chrono::seconds(30), errors)) {
      spdlog::warn("link {}: MTU restored to {} (a benchmark was interrupted)", s.link, s.to);
    }
    for (const std::string& e : errors) spdlog::error("MTU restore: {}", e);
  }
  const HostRegistry* hosts = registry_.get();
  LeaseEngine* engine = engine_.get();
  CatalogImageSource* images = images_.get();
  benchmarks_ = std::make_unique<BenchmarkRunner>(
      engine_->guest_agent(), runner_,
      make_lease_target_resolver(
          [engine](const std::string& id) { return engine->lease_vm(id); },
          [hosts](const std::string& name) {
            // "": a record from before hosts were recorded, the first host's. The registry
            // keeps every Host (removed ones too) until it goes: the topology outlives this.
            std::shared_ptr<HostRegistry::Host> h =
                name.empty() ? hosts->hosts().front() : hosts->host(name);
            return h == nullptr ? LeaseHost{} : LeaseHost{&h->topology, !h->remote};
          },
          [images](const std::string& name) { return images->resolve(name); }, network_bridges,
          // The storage suite's host baseline writes next to the VM's overlay (a local host's).
          [hosts](const std::string& vm) {
            for (const auto& h : hosts->hosts()) {
              if (!h->remote && h->connected()) return h->hypervisor->paths_for(vm).overlay;
            }
            return std::string();
          }),
      clock_, options);
  if (Status s = benchmarks_->load(); !s.is_ok()) {
    spdlog::warn("benchmarks: earlier runs not loaded: {}", s.to_string());
  }
  // Health benchmarks ([[pools]] health): a short suite on a spare warm VM every `every`.
  health_source_ = std::make_unique<LeaseServiceHealthSource>(*engine_);
  HealthSchedulerOptions health_options;
  health_options.host = hosts->hosts().front()->setup.name;  // per pool, shown on every host
  for (const PoolConfig& p : config_.pools) {
    if (p.health.every.count() > 0) {
      health_options.pools.push_back(
          {p.name, p.health.every, p.health.suite, p.health.runs_kept, p.health.band_mads});
    }
  }
  health_ = std::make_unique<HealthScheduler>(health_options, *health_source_, *benchmarks_,
                                              *health_store_, clock_);
  if (Status s = health_->load(); !s.is_ok()) {
    spdlog::warn("health benchmarks: earlier results not loaded: {}", s.to_string());
  }
  return Status::ok();
}

// A VM on a remote host is reached only on a bridged network (the lab's LAN); behind that
// host's own NAT or isolated network its address is the host's private one, which here may
// even be another guest's.
Status Daemon::reach(const Lease& lease) const {
  std::shared_ptr<HostRegistry::Host> h =
      lease.host.empty() ? registry_->hosts().front() : registry_->host(lease.host);
  if (h == nullptr || !h->remote) return Status::ok();
  std::string network = "default", mode = "isolated";
  if (std::optional<PoolConfig> p = pool(lease.pool)) network = p->network;
  for (const NetworkConfig& n : config_.networks) {
    if (n.name == network) mode = n.mode;
  }
  if (mode == "bridge") return Status::ok();
  return unavailable("lease " + lease.id + "'s VM runs on host " + h->setup.name +
                     " behind that host's own network '" + network + "' (" + mode +
                     "), which armhived cannot reach: give pools on remote hosts a bridge "
                     "network on the lab's LAN to reach their VMs from outside");
}

std::optional<PoolConfig> Daemon::pool(const std::string& name) const {
  MutexLock lock(reload_mu_);
  for (const PoolConfig& p : pools_) {
    if (p.name == name) return p;
  }
  return std::nullopt;
}

Daemon::ReloadOutcome Daemon::reload(const DaemonConfig& next) {
  ReloadOutcome out;
  // [github]'s secret files first: one that does not read, or credentials that cannot be used,
  // refuse the whole reload before anything applies (the configuration in force is kept).
  GithubConfig github_running;
  GithubSecrets secrets_running;
  AccessConfig access_running;
  {
    MutexLock lock(reload_mu_);
    github_running = github_config_;
    secrets_running = github_secrets_;
    access_running = access_config_;
  }
  GithubSecrets secrets_next = secrets_running;  // kept when [github] is removed (a restart's)
  if (github_ && next.github.enabled) {
    auto read = read_github_secrets(next.github);
    Status s = read.is_ok() ? check_github_credentials(github_credentials(next.github, *read))
                            : read.status();
    if (!s.is_ok()) {
      out.refused.push_back("[github]: " + s.to_string() +
                            ": the reload is refused, the configuration in force is kept");
      return out;
    }
    secrets_next = std::move(read).value();
  }
  GithubReload github_plan =
      plan_github_reload(github_running, secrets_running, next.github, secrets_next);
  for (const std::string& section : changed_sections(config_, next)) {
    out.restart_needed.push_back("[" + section +
                                 "] changed: it takes effect at the next start "
                                 "(VMs keep running across a restart)");
  }
  std::vector<PoolConfig> running;
  {
    MutexLock lock(reload_mu_);
    running = pools_;
  }
  PoolReload plan = plan_pool_reload(running, next.pools);
  out.restart_needed.insert(out.restart_needed.end(), plan.restart_needed.begin(),
                            plan.restart_needed.end());
  for (const PoolChange& c : plan.changes) {
    std::string keys;
    for (const std::string& k : c.changed) keys += (keys.empty() ? "" : ", ") + k;
    switch (c.kind) {
      case PoolChange::Kind::kUpdate:
        out.applied.push_back("pool " + c.config.name + ": " + keys);
        break;
      case PoolChange::Kind::kAdd:
        out.applied.push_back("pool " + c.config.name + ": added");
        break;
      case PoolChange::Kind::kRemove:
        out.applied.push_back("pool " + c.config.name + ": removed (it goes once its leases end)");
        break;
    }
  }
  out.refused = engine_->reload_pools(plan);
  // What the engine now serves is what requests look pools up in.
  std::vector<PoolConfig> now;
  for (const PoolStatus& p : engine_->pools()) {
    if (!p.removed) now.push_back(p.config);
  }
  // [github] after the pools: its labels may name a pool this reload added.
  out.restart_needed.insert(out.restart_needed.end(), github_plan.restart_needed.begin(),
                            github_plan.restart_needed.end());
  if (github_ && (github_plan.credentials || github_plan.settings)) {
    if (github_plan.credentials) {
      if (Status s =
              github_api_->set_credentials(github_credentials(github_plan.config, secrets_next));
          !s.is_ok()) {
        out.refused.push_back("[github]: the token or App: " + s.to_string());
      }
    }
    if (github_plan.settings) {
      github_->reconfigure(github_provider_options(github_plan.config, secrets_next, metrics_));
    }
    out.applied.insert(out.applied.end(), github_plan.applied.begin(), github_plan.applied.end());
  }
  // [access]: the caps and timeouts of forwards; nothing open is closed or moved.
  AccessReload access_plan = plan_access_reload(access_running, next.access);
  out.restart_needed.insert(out.restart_needed.end(), access_plan.restart_needed.begin(),
                            access_plan.restart_needed.end());
  if (forwards_ && access_plan.limits) {
    const AccessConfig& a = access_plan.config;
    forwards_->set_limits(a.max_sessions_per_forward, a.max_sessions, a.forward_idle_timeout);
    access_->set_max_extra_ports(a.max_extra_ports);
    out.applied.insert(out.applied.end(), access_plan.applied.begin(), access_plan.applied.end());
  }
  MutexLock lock(reload_mu_);
  pools_ = std::move(now);
  restart_needed_ = out.restart_needed;
  if (forwards_) access_config_ = access_plan.config;
  if (github_) {
    github_config_ = github_plan.config;
    github_secrets_ = std::move(secrets_next);
  }
  return out;
}

// [access]: per-lease forwards from the host to the guests' SSH.
Status Daemon::start_access() {
  if (!config_.access.enabled) return Status::ok();
  AccessOptions options;
  options.listen_address = config_.access.listen;
  options.advertise_host = config_.access.advertise;
  options.port_min = config_.access.port_min;
  options.port_max = config_.access.port_max;
  options.max_sessions_per_forward = config_.access.max_sessions_per_forward;
  options.max_sessions = config_.access.max_sessions;
  options.idle_timeout = config_.access.forward_idle_timeout;
  auto table = ForwardTable::start(
      options,
      [audit = audit_.get(), engine = engine_.get()](const AccessEvent& e) {
        spdlog::info("lease {}: {} {}", e.lease_id, e.type, e.detail);
        (void)audit->record("armhived", e.type, e.lease_id, e.detail);
        engine->record_event(e.lease_id, e.type, e.detail);
      },
      &metrics_);
  if (!table.is_ok()) return table.status().annotate("access forwards");
  forwards_ = std::move(table).value();
  access_ = std::make_unique<LeaseAccess>(*engine_, *forwards_, config_.access.max_extra_ports);
  access_->set_reach([this](const Lease& lease) { return reach(lease); });
  auto ca = SshCertificateAuthority::open(config_.ssh_ca_key_path(), runner_);
  if (!ca.is_ok()) return ca.status().annotate("SSH certificate authority");
  ssh_ca_ = std::move(ca).value();
  access_->set_user_ca(ssh_ca_->public_key());
  access_->start();
  spdlog::info("access forwards on {} ports {}-{}", options.listen_address, options.port_min,
               options.port_max);
  return Status::ok();
}

// Startup commands of leases (daemon/startup; secrets stay in this process's memory) and
// [github]: workflow_job webhooks -> just-in-time runners in leased VMs (daemon/github).
Status Daemon::start_integrations() {
  auto startups =
      StartupRunner::open(*engine_, engine_->guest_agent(), *db_, clock_, {},
                          [audit = audit_.get()](const StartupEvent& e) {
                            spdlog::info("lease {}: {} {}", e.lease_id, e.type, e.detail);
                            (void)audit->record("armhived", e.type, e.lease_id, e.detail);
                          });
  if (!startups.is_ok()) return startups.status().annotate("startup commands");
  startups_ = std::move(startups).value();
  startups_->start();
  if (!config_.github.enabled) return Status::ok();
  auto secrets = read_github_secrets(config_.github);
  if (!secrets.is_ok()) return secrets.status().annotate("github");
  Status s = start_github(config_.github, *secrets, *engine_, *startups_, *audit_, clock_, metrics_,
                          github_api_, github_);
  if (!s.is_ok()) return s.annotate("github");
  MutexLock lock(reload_mu_);
  github_secrets_ = std::move(secrets).value();
  return Status::ok();
}

Status Daemon::start_http() {
  HttpOptions options;
  options.bind_address = config_.bind;
  options.port = config_.port;
  options.tls_cert_file = config_.tls_cert;
  options.tls_key_file = config_.tls_key;
  options.long_operations.execs = static_cast<size_t>(config_.max_execs_per_token);
  options.long_operations.file_transfers =
      static_cast<size_t>(config_.max_file_transfers_per_token);
  options.long_operations.tunnels = static_cast<size_t>(config_.max_tunnels_per_token);
  options.long_operations.event_streams = static_cast<size_t>(config_.max_event_streams_per_token);
  options.upload_min_bytes_per_second = static_cast<uint64_t>(config_.upload_min_bytes_per_second);
  options.log = [](std::string_view line) { spdlog::info("{}", line); };
  if (election_) {
    options.instance = election_->holder();
    options.leader_epoch = election_->epoch();
    options.leader_since_ms = election_->since_ms();
    // Read on the store's connection: a read, not fenced, answered from the database as a
    // standby answers it.
    options.cluster = [db = db_.get(), lease = config_.store.leader_lease] {
      return PgLeaderLease::read_view(*db, lease);
    };
  } else {
    options.instance = "armhived@" +
                       (config_.host_name.empty() ? machine_hostname() : config_.host_name) + "/" +
                       std::to_string(::getpid());
  }
  if (access_) add_access_hooks(options);
  options.lease_startup = [runner = startups_.get()](const std::string& id,
                                                     const StartupRequestDto& startup) {
    return runner->set_startup(id, startup);
  };
  options.startup_view = [runner = startups_.get()](const Lease& lease, LeaseDto& dto) {
    dto.startup = runner->view(lease.id);
  };
  if (github_) {
    options.github_webhook = [github = github_.get()](
                                 const std::string& event, const std::string& delivery,
                                 const std::string& signature, const std::string& body,
                                 const std::string& remote) {
      return github->deliver(event, delivery, signature, body, remote);
    };
    options.github_state = [this, github = github_.get()] {
      const GithubProviderState st = github->state();
      auto rfc3339_or_none = [](TimePoint t) -> std::optional<std::string> {
        if (t == TimePoint{}) return std::nullopt;
        return to_rfc3339(t);
      };
      GithubStateDto dto;
      dto.last_reconcile = rfc3339_or_none(st.last_reconcile);
      dto.last_reconcile_error = st.last_reconcile_error;
      dto.pending_jobs = static_cast<int64_t>(st.pending_jobs);
      dto.runners = static_cast<int64_t>(st.runners);
      if (st.rate_limit.remaining >= 0) dto.rate_limit_remaining = st.rate_limit.remaining;
      dto.rate_limit_reset = rfc3339_or_none(st.rate_limit.reset);
      if (st.rate_limit.backoff_until > clock_.now()) {
        dto.backoff_until = rfc3339_or_none(st.rate_limit.backoff_until);
      }
      dto.reconciled_jobs_total = static_cast<int64_t>(st.reconciled_jobs_total);
      dto.ghosts_deleted_total = static_cast<int64_t>(st.ghosts_deleted_total);
      dto.forgotten_runners_total = static_cast<int64_t>(st.forgotten_runners_total);
      dto.rate_limited_total = static_cast<int64_t>(st.rate_limited_total);
      return dto;
    };
  }
  options.restart_required = [this] {
    MutexLock lock(reload_mu_);
    return restart_needed_;
  };
  options.health_series = [store = health_store_.get()](const std::string& host,
                                                        const std::string& pool, size_t limit) {
    return store->recent(host, pool, "", limit);
  };
  HostAdmin::Options admin_options;
  admin_options.configured = configured_hosts_;
  for (const HostConfig& h : config_.hosts) admin_options.configured_uris.push_back(h.libvirt_uri);
  admin_options.has_networks = !config_.networks.empty();
  admin_options.pools = config_.pools;
  admin_options.state_dir = config_.state_dir;
  admin_options.config_path = config_path_;
  options.configured_host_uris = admin_options.configured_uris;
  host_admin_ = std::make_unique<HostAdmin>(admin_options, *registry_, *engine_, *host_store_);
  options.add_host = [admin = host_admin_.get()](const HostSpec& spec) { return admin->add(spec); };
  options.remove_host = [admin = host_admin_.get()](const std::string& name) {
    return admin->remove(name);
  };
  options.waiting_hosts = [registry = registry_.get()] {
    std::vector<HostView> out;
    for (const HostRegistry::Waiting& w : registry->waiting_hosts()) {
      out.push_back(HostRegistry::view_of(w));
    }
    return out;
  };
  server_ = std::make_unique<HttpServer>(options, *engine_, benchmarks_.get(), *tokens_, *audit_,
                                         metrics_);
  if (Status s = server_->start(); !s.is_ok()) return s.annotate("HTTP server");
  spdlog::info("armhived listening on {}", server_->url());
  health_->start();
  return Status::ok();
}

// The lease view's SSH endpoint, tunnels, extra ports and SSH certificates ([access]).
void Daemon::add_access_hooks(HttpOptions& options) {
  options.lease_view = [this](const Lease& lease, LeaseDto& dto) -> Status {
    if (!dto.ssh) return Status::ok();
    if (!reach(lease).is_ok()) {
      dto.ssh.reset();  // its address is another host's private one: nothing to offer here
      return Status::ok();
    }
    ARMHIVE_ASSIGN_OR_RETURN(std::optional<SshEndpoint> ep, access_->ssh_endpoint(lease));
    if (!ep) return Status::ok();
    // The keys and their known_hosts lines (for the lease's alias) stay as they are: the
    // alias, not the forward's host:port, is what ssh looks them up under.
    dto.ssh->host = ep->host;
    dto.ssh->port = ep->port;
    dto.ssh->command = ssh_command(dto.ssh->user, ep->host, ep->port, lease.id);
    for (const ForwardInfo& f : ep->extra) dto.forwards.push_back({f.guest_port, f.host, f.port});
    return Status::ok();
  };
  options.tunnel = [this](const Lease& lease, int port) -> Result<TunnelRoute> {
    ARMHIVE_ASSIGN_OR_RETURN(LeaseAccess::TunnelTarget t, access_->tunnel_target(lease, port));
    TunnelRoute route{t.address, t.port, {}, {}};
    route.attach = [forwards = forwards_.get(), id = lease.id](std::function<void()> cut) {
      return forwards->attach(id, std::move(cut));
    };
    route.detach = [forwards = forwards_.get(), id = lease.id](uint64_t n) {
      forwards->detach(id, n);
    };
    return route;
  };
  options.check_ports = [access = access_.get()](const std::string& pool,
                                                 const std::vector<int>& ports) {
    return access->check_ports(pool, ports);
  };
  options.lease_ports = [access = access_.get()](const std::string& id,
                                                 const std::vector<int>& ports) {
    access->set_ports(id, ports);
  };
  options.ssh_certificate = [this](const Lease& lease, const std::string& token,
                                   const std::string& public_key) -> Result<SshCertificateDto> {
    // The pool's ssh_permissions; a pool no longer configured permits nothing but the login.
    std::vector<std::string> permissions;
    if (std::optional<PoolConfig> p = pool(lease.pool)) permissions = p->ssh_permissions;
    ARMHIVE_ASSIGN_OR_RETURN(
        SshCertificate cert,
        ssh_ca_->sign(public_key, lease.id, token, clock_.now(), lease.expires_at, permissions));
    // The guest must accept it before the client tries it.
    ARMHIVE_RETURN_IF_ERROR(access_->install_trust(lease));
    engine_->record_event(lease.id, "ssh.certificate",
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

}  // namespace armhive
