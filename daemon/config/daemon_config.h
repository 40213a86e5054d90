#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "daemon/core/host_spec.h"
#include "daemon/core/lease.h"
#include "daemon/core/placement.h"

namespace armhive {

// armhived's configuration file (TOML). See examples/armhived.toml for every key.
// Plain data, parsed once at start-up.

// One allowed egress destination of a nat network ([[networks.egress]]).
struct EgressConfig {
  std::string cidr;
  std::vector<int> ports;  // empty: every port
};

struct NetworkConfig {
  std::string name = "armhive";
  std::string mode = "isolated";  // "isolated", "nat" or "bridge" (daemon/virt/network.h)
  std::string bridge = "ahbr0";
  std::string cidr = "10.77.0.1/24";
  std::string dhcp_start = "10.77.0.10";
  std::string dhcp_end = "10.77.0.250";
  int mtu = 1500;
  std::vector<EgressConfig> egress;  // nat only; empty: any destination
  // Each guest kept to its own MAC and address and away from the others (guest_filter.h).
  bool isolate_guests = true;
};

// [access]: per-lease TCP forwards from the host to the guests (daemon/access).
struct AccessConfig {
  bool enabled = false;  // the [access] table is present
  // Address the forwards listen on. Not set: `advertise` when it is an IP address, else
  // [server] bind when that is one address (not 0.0.0.0 / ::); never every address unless
  // written ("0.0.0.0" listens on the guests' bridges too).
  std::string listen;
  std::string advertise;  // host name clients use (ssh.host); empty: `listen`
  int port_min = 22000;   // forwards take ports from [port_min, port_max]
  int port_max = 22999;
  int max_extra_ports = 4;  // guest ports besides SSH one lease may ask for (pools' access_ports)
  // Sessions relayed at once by one forward, and by every forward of the host together; a
  // connection over either cap is closed at once (and counted).
  int max_sessions_per_forward = 64;
  int max_sessions = 1024;
  // A forwarded session carrying nothing either way for this long is closed.
  std::chrono::milliseconds forward_idle_timeout{std::chrono::minutes(15)};
  // The SSH user CA's private key (0600; created on first start). Empty: <state_dir>/ssh_ca_key.
  std::string ssh_ca_key;
};

// [github]: the GitHub Actions provider (daemon/github). Exactly one of org / repo.
// Each repository of reconcile_repos costs 2 + its runs GitHub calls a pass.
inline constexpr size_t kMaxReconcileRepos = 20;
struct GithubConfig {
  bool enabled = false;                            // the [github] table is present
  std::string api_url = "https://api.github.com";  // https://HOST/api/v3 for Enterprise Server
  std::string org;
  std::string repo;        // "owner/name"
  std::string token_file;  // fine-grained token, 0600
  // Or a GitHub App: its id, its private key (.pem, 0600) and the installation on the org/repo.
  int64_t app_id = 0;
  std::string app_private_key_file;
  int64_t installation_id = 0;
  std::string webhook_secret_file;  // the webhook's secret, 0600
  // After a reload changed the webhook secret, deliveries signed with the previous one are
  // accepted this long too (daemon/github/README.md, "Reload"); zero: refused at once. 0..1h.
  std::chrono::milliseconds webhook_secret_overlap{std::chrono::minutes(10)};
  int64_t runner_group_id = 1;
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(5)};
  std::chrono::milliseconds replay_window{std::chrono::hours(24)};
  // How often armhived reconciles with GitHub (daemon/github/README.md, "Healing"); 10 s..1 h.
  std::chrono::milliseconds reconcile_period{std::chrono::seconds(60)};
  // With `org` only: the repositories ("OWNER/NAME", OWNER the org) whose queued jobs each pass
  // lists for lost webhooks (daemon/github/README.md, "Healing"); GitHub has no org-wide list.
  // At most kMaxReconcileRepos, as written in the file.
  std::vector<std::string> reconcile_repos;
  // The runner in the image, as an argv (no shell).
  std::vector<std::string> runner_command{"/opt/actions-runner/run.sh"};
  std::map<std::string, std::string> labels;  // [github.labels] runs-on label -> pool
};

// [[hosts]]: one libvirt host of the fleet armhived drives (daemon/core/host_spec.h). Without
// [[hosts]] the fleet is the one host of [host] (name, libvirt_uri, [host.cpus]), as it always
// was.
using HostConfig = HostSpec;

// [store]: where armhived keeps its state. Absent (url empty): the SQLite file of
// [host] database. With a PostgreSQL url, several armhived share one database and one of them
// at a time leads (acts on the lab); the others wait to take over (daemon/store/pg_leader_lease.h).
struct StoreConfig {
  // A libpq connection URI (postgresql://user@host[,host2]/db?...); never with a password in it
  // (a passfile= parameter or PGPASSWORD carries that).
  std::string url;
  // How long a leader acts without having renewed its lease; a standby takes over after it
  // ends. Renewed every fifth of it.
  std::chrono::milliseconds leader_lease{std::chrono::seconds(10)};
};

struct DaemonConfig {
  // [server]
  std::string bind = "127.0.0.1";
  int port = 8470;
  std::string tls_cert;
  std::string tls_key;
  std::string bootstrap_token_file;  // admin token written here on first start (0600)
  // Long operations one token may have at once (daemon/http/long_operations.h; beyond: 429).
  int max_execs_per_token = 8;  // buffered and streamed execs, SSH certificates
  int max_file_transfers_per_token = 4;
  int max_tunnels_per_token = 16;
  int max_event_streams_per_token = 8;
  // An upload's whole body must arrive within 30 s + Content-Length at this rate (else 408).
  int64_t upload_min_bytes_per_second = 128 * 1024;
  // [host]
  std::string host_name;  // empty: the machine's hostname
  std::string libvirt_uri = "qemu:///system";
  std::string storage_pool = "armhive-overlays";  // libvirt dir pool for the VMs' overlays
  std::string state_dir = "/var/lib/armhive";
  std::string catalog;   // empty: <state_dir>/images
  std::string database;  // empty: <state_dir>/armhive.db
  PlacementStrategy placement = PlacementStrategy::kPack;
  // How long a libvirt call that can hang (connecting, host discovery) is waited for.
  std::chrono::milliseconds libvirt_timeout{std::chrono::seconds(60)};
  // [host.cpus] in cpuset syntax; absent: defaults from discovery.
  std::optional<std::string> housekeeping_cpus;
  std::optional<std::string> dedicated_cpus;
  std::optional<std::string> shared_cpus;
  // [engine]
  std::chrono::milliseconds boot_timeout{std::chrono::minutes(3)};
  std::chrono::milliseconds reconcile_period{std::chrono::seconds(30)};
  int threads = 4;
  // The shortest pools[].health.every allowed: health runs take a VM and the host's cores.
  std::chrono::milliseconds min_health_interval{std::chrono::hours(1)};
  // A host is probed every host_probe_period; one that misses host_probe_timeout is
  // unreachable, and its leases end as lost after unreachable_grace (EngineOptions).
  std::chrono::milliseconds host_probe_period{std::chrono::seconds(5)};
  std::chrono::milliseconds host_probe_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds unreachable_grace{std::chrono::minutes(5)};
  // How often the ready leases' VMs are sampled for their usage (EngineOptions::usage_period);
  // a duration of whole seconds, so at least 1s.
  std::chrono::milliseconds usage_period{std::chrono::seconds(10)};
  // How often the images shipped to remote hosts that no pool or VM uses any more are deleted
  // there (daemon/fleet HostRegistry::collect_images). Zero: never.
  std::chrono::milliseconds image_gc_period{std::chrono::minutes(10)};
  // How often this machine's network guards are checked and applied again if the host's
  // firewall removed them (HostRegistry::restore_guards). Zero: never.
  std::chrono::milliseconds guard_check_period{std::chrono::seconds(30)};
  // [audit] keep: audit rows older than this are deleted (hourly, by the audit writer).
  std::chrono::milliseconds audit_keep{std::chrono::hours(90 * 24)};
  StoreConfig store;
  AccessConfig access;
  GithubConfig github;
  // [[hosts]]; never empty after parsing: without [[hosts]], the one host of [host]. With a
  // single [[hosts]] entry, host_name / libvirt_uri / the *_cpus fields above are its values.
  std::vector<HostConfig> hosts;
  // [[networks]] and [[pools]]
  std::vector<NetworkConfig> networks;
  std::vector<PoolConfig> pools;

  std::string catalog_dir() const { return catalog.empty() ? state_dir + "/images" : catalog; }
  std::string ssh_ca_key_path() const {
    return access.ssh_ca_key.empty() ? state_dir + "/ssh_ca_key" : access.ssh_ca_key;
  }
  std::string database_path() const {
    return database.empty() ? state_dir + "/armhive.db" : database;
  }
};

// Parses TOML text. Errors are kInvalidArgument naming the key ("pools[1].max_ttl"); a pool
// whose host_labels match no host is one ("pools[0].host_labels").
Result<DaemonConfig> parse_daemon_config(std::string_view toml_text);
Result<DaemonConfig> load_daemon_config(const std::string& path);

}  // namespace armhive
