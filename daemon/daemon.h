#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/metrics.h"
#include "base/process_runner.h"
#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/access/forward_table.h"
#include "daemon/access/lease_access.h"
#include "daemon/access/ssh_ca.h"
#include "daemon/bench/benchmark_runner.h"
#include "daemon/bench/health_scheduler.h"
#include "daemon/config/access_reload.h"
#include "daemon/config/daemon_config.h"
#include "daemon/config/github_reload.h"
#include "daemon/core/clock.h"
#include "daemon/engine/catalog_image_source.h"
#include "daemon/engine/health_vm_source.h"
#include "daemon/engine/lease_engine.h"
#include "daemon/fleet/host_admin.h"
#include "daemon/fleet/host_registry.h"
#include "daemon/github/github_api.h"
#include "daemon/github/github_provider.h"
#include "daemon/http/server.h"
#include "daemon/leader_election.h"
#include "daemon/startup/startup_runner.h"
#include "daemon/store/audit_log.h"
#include "daemon/store/database.h"
#include "daemon/store/sqlite_health_store.h"
#include "daemon/store/sqlite_host_store.h"
#include "daemon/store/sqlite_lease_store.h"
#include "daemon/store/state_lock.h"
#include "daemon/store/token_store.h"
#include "daemon/virt/event_loop.h"
#include "daemon/virt/network.h"

namespace armhive {

// The guest network a [[networks]] table describes.
NetworkSpec network_spec(const NetworkConfig& n);

// One running armhived: every part built from a configuration, in dependency order, and
// stopped in reverse by the destructor (the members are declared in that order, so no stop
// ladder is written by hand). Stopping leaves the VMs running; the next start re-adopts them.
//
// Thread-safety: start() and the destructor run on one thread; answers() may be called from
// another while the daemon runs.
class Daemon {
 public:
  // What start() is doing, as one line a supervisor can show (systemd's STATUS=).
  using Progress = std::function<void(std::string_view)>;

  // Builds and starts everything. A failure names the stage ("lease store: ...") and leaves
  // nothing running: the parts started so far are stopped by the destructor.
  // With [store] url (PostgreSQL) it first waits until it leads (daemon/leader_election.h):
  // `pause` sleeps between tries and says whether to go on (false: armhived is to stop).
  [[nodiscard]] static Result<std::unique_ptr<Daemon>> start(
      const DaemonConfig& config, std::string config_path, const Progress& progress,
      const LeaderElection::Pause& pause = {});
  ~Daemon() noexcept;
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  std::string url() const { return server_->url(); }

  // What a reload did: the changes applied, those refused (an added pool no host can hold; a
  // [github] secret file that does not read, which refuses the whole reload),
  // and those that take effect only at the next start (also listed by GET /healthz).
  struct ReloadOutcome {
    std::vector<std::string> applied;
    std::vector<std::string> refused;
    std::vector<std::string> restart_needed;
  };
  // Applies a configuration re-read from the file (SIGHUP; it has passed check_daemon_config):
  // the pools' sizes, TTLs and limits, new pools, removed pools (once empty); [github]'s secrets
  // and settings but its scope (daemon/config/github_reload.h); [access]'s session caps, idle
  // timeout and max_extra_ports (daemon/config/access_reload.h). [github]'s secret files are
  // read first: one that does not read or holds unusable credentials refuses the whole reload
  // (`refused`, nothing applied). Nothing running is dropped. Everything else is compared with
  // the configuration armhived started with, and what differs is named as needing a restart.
  // One reload at a time (the signal thread's); it calls the engine and the GitHub provider
  // without reload_mu_ held.
  ReloadOutcome reload(const DaemonConfig& next);

  // Whether the engine's event loop runs a posted task within `deadline`: the loop whose hang
  // the service watchdog exists to catch.
  [[nodiscard]] Status answers(std::chrono::milliseconds deadline) {
    return engine_->ping(deadline);
  }

 private:
  Daemon(const DaemonConfig& config, std::string config_path, Progress progress,
         LeaderElection::Pause pause)
      : progress_(std::move(progress)),
        pause_(std::move(pause)),
        config_(config),
        config_path_(std::move(config_path)),
        pools_(config.pools),
        github_config_(config.github),
        access_config_(config.access) {}

  Status open_state();
  Status open_database();
  Status connect_hosts();
  Status start_engine();
  Status start_benchmarks();
  Status start_access();
  Status start_integrations();
  Status start_http();
  void add_access_hooks(HttpOptions& options);
  // Whether this machine reaches a lease's guest (see start_access()).
  Status reach(const Lease& lease) const;
  // A configured pool as last applied (start, then each reload); nullopt: not configured.
  std::optional<PoolConfig> pool(const std::string& name) const;

  const Progress progress_;
  const LeaderElection::Pause pause_;
  // As started: a reload changes only the pools, [github] and [access] (the members below).
  const DaemonConfig config_;
  const std::string config_path_;
  mutable Mutex reload_mu_;  // never held across a call into another part
  std::vector<PoolConfig> pools_ GUARDED_BY(reload_mu_);
  std::vector<std::string> restart_needed_ GUARDED_BY(reload_mu_);
  // [github] as in force (start, then each reload) and what its secret files held then.
  GithubConfig github_config_ GUARDED_BY(reload_mu_);
  GithubSecrets github_secrets_ GUARDED_BY(reload_mu_);
  AccessConfig access_config_ GUARDED_BY(reload_mu_);  // [access] as in force
  SystemClock clock_;
  Metrics metrics_;
  SubprocessRunner runner_;
  SubprocessRunner guard_runner_;

  // Declared in the order they start; destroyed (stopped) in reverse.
  // PostgreSQL only: released after everything else has stopped, so that a standby takes over
  // from a leader that no longer acts.
  std::unique_ptr<LeaderElection> election_;
  std::unique_ptr<StateLock> state_lock_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<SqliteLeaseStore> leases_;
  std::unique_ptr<TokenStore> tokens_;
  std::unique_ptr<AuditLog> audit_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<CatalogImageSource> images_;
  std::unique_ptr<SqliteHostStore> host_store_;
  std::unique_ptr<HostRegistry> registry_;
  std::set<std::string> configured_hosts_;
  std::unique_ptr<LeaseEngine> engine_;
  std::unique_ptr<BenchmarkRunner> benchmarks_;
  std::unique_ptr<SqliteHealthStore> health_store_;
  std::unique_ptr<LeaseServiceHealthSource> health_source_;
  std::unique_ptr<HealthScheduler> health_;
  std::unique_ptr<ForwardTable> forwards_;
  std::unique_ptr<LeaseAccess> access_;
  std::unique_ptr<SshCertificateAuthority> ssh_ca_;
  std::unique_ptr<StartupRunner> startups_;
  std::unique_ptr<GithubApi> github_api_;
  std::unique_ptr<GithubProvider> github_;
  std::unique_ptr<HostAdmin> host_admin_;
  std::unique_ptr<HttpServer> server_;
};

}  // namespace armhive
