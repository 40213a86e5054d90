#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/core/clock.h"
#include "daemon/core/demand_model.h"
#include "daemon/core/pool_queue.h"
#include "daemon/core/usage_meter.h"

namespace armhive {

// Lease lifecycle: pending -> provisioning -> ready -> releasing -> released,
// with failed and expired as the other ends. Terminal states never change again.
enum class LeaseState {
  kPending,       // waiting for capacity; `reason` says why
  kProvisioning,  // a VM is being created and booted for it
  kReady,         // handed out: keys installed, address known
  kReleasing,     // its VM is being destroyed
  kReleased,      // ended by its owner
  kExpired,       // ended by the server when its TTL ran out
  kFailed,        // could not be provisioned or its VM died; `reason` says why
  // Its VM's host stopped answering (issue 13): the VM may still run, so nothing is declared
  // lost yet. Back to ready when the host answers again within the grace period; `lost` after.
  kHostUnreachable,
  kLost,  // its host stayed unreachable past the grace period; the VM is destroyed once it answers
};

std::string_view to_string(LeaseState s);
std::optional<LeaseState> lease_state_from_string(std::string_view s);
bool is_terminal(LeaseState s);
// Whether the state machine allows from -> to.
bool is_valid_transition(LeaseState from, LeaseState to);

enum class Purpose { kCi, kDev };
std::string_view to_string(Purpose p);
std::optional<Purpose> purpose_from_string(std::string_view s);

struct LeaseTransition {
  LeaseState from = LeaseState::kPending;
  LeaseState to = LeaseState::kPending;
  TimePoint at;
  std::string reason;
};

struct Lease {
  std::string id;  // "l-" + 12 hex
  std::string pool;
  std::string owner;  // token name that created it
  Purpose purpose = Purpose::kCi;
  std::vector<std::string> ssh_keys;
  std::map<std::string, std::string> labels;
  std::string idempotency_key;  // scoped to the owner
  LeaseState state = LeaseState::kPending;
  std::string reason;  // why it waits / failed / ended
  Seconds ttl{0};
  TimePoint created_at;
  TimePoint ready_at;    // epoch while not ready
  TimePoint expires_at;  // created_at + ttl, moved by renew
  TimePoint ended_at;
  // The VM, once assigned, and the host (HostConfig::name) that runs it.
  std::string vm_name;
  std::string host;
  std::string address;
  std::string login_user;
  // Its VM's SSH host keys ("TYPE BASE64"), set with the address when it turns ready: a ready
  // lease of a pool with sshd always has them (the VM was not ready before they were read).
  // Empty for pools without sshd (PoolConfig::ssh false).
  std::vector<std::string> host_keys;
  std::vector<int> cpus;      // host CPUs pinned to it
  bool warm_handout = false;  // served from the warm pool
  std::vector<LeaseTransition> history;
  // What its VM used (daemon/core/usage_meter.h): set when it turns ready, updated by the
  // engine's samples, final once it ended. nullopt for a lease that never got a VM.
  std::optional<LeaseUsage> usage;
  // While it waits in its pool's queue: its position and what holds it (daemon/core/
  // pool_queue.h). Computed by the engine when the lease is read; never persisted.
  std::optional<QueueSlot> queue;
};

struct LeaseRequest {
  std::string pool;
  std::optional<Seconds> ttl;  // absent: the pool's default
  std::vector<std::string> ssh_keys;
  std::map<std::string, std::string> labels;
  Purpose purpose = Purpose::kCi;
  std::string idempotency_key;
  std::string owner;
};

enum class CpuPolicy { kDedicated, kShared };

// What `armhive cp` may do in a pool's VMs ([pools.files]).
struct FilePolicy {
  uint64_t max_bytes = uint64_t{1} << 30;  // per transfer (a tar stream counts whole)
  std::string path_prefix = "/";           // absolute, normalised; guest paths must lie under it
};

// A pool's health benchmarks: every `every` a spare warm VM of the pool runs the short `suite`,
// its headline figure joins the host's time series, and a figure outside the band of the
// host's last `runs_kept` results (daemon/bench/health_band.h) marks the host degraded
// (daemon/bench/health_scheduler.h).
struct HealthScheduleConfig {
  Seconds every{0};  // 0: off (the default)
  std::string suite = "compression";
  int runs_kept = 10;  // K: the baseline band's window
  // k: the band is median ± k × MAD (1..10). Lower on a noisy host catches smaller slowdowns
  // and flags more noise; 3 by default.
  int band_mads = 3;
};

struct PoolConfig {
  std::string name;
  std::string image;  // catalogue name, e.g. "tiny"
  int vcpus = 1;
  uint64_t memory_mib = 512;
  uint64_t disk_gib = 0;
  std::string network = "default";
  int mtu = 1500;
  int min_warm = 0;
  // min_warm = "auto": the warm VMs follow demand (daemon/core/demand_model.h), between
  // auto_min and auto_max; `min_warm` then holds the current target. Unset: a fixed min_warm.
  std::optional<AutoWarmConfig> auto_warm;
  int max = 1;
  int max_starting = 1;
  Seconds default_ttl{3600};
  Seconds max_ttl{8 * 3600};
  CpuPolicy cpu_policy = CpuPolicy::kDedicated;
  double overcommit = 1.0;  // shared pools only: vCPUs per shared core
  std::map<std::string, std::string> labels;
  // The hosts the pool may use: those carrying every one of these labels (empty: every host).
  std::map<std::string, std::string> host_labels;
  // Guest TCP ports besides SSH that a lease may ask to have forwarded (daemon/access).
  std::vector<int> access_ports;
  // How many of them one lease may ask for; unset: [access] max_extra_ports. Never above it
  // (the configuration loader refuses that).
  std::optional<int> max_extra_ports;
  FilePolicy files;
  HealthScheduleConfig health;
  // Whether the pool's image runs sshd. True: a VM is warm (a cold lease ready) only once its
  // SSH host keys have been read through the guest agent, and its leases offer SSH with them.
  // False (an image without sshd): no keys are read and its leases offer no SSH.
  bool ssh = true;
  // What the SSH certificates of its leases permit (OpenSSH certificate extensions, without
  // "permit-"): kSshPermissions names them. Default: a terminal only. A lease runs untrusted CI
  // code, and port, agent and X11 forwarding let whoever holds the certificate use the VM as a
  // relay or reach back into the client's agent and display; a pool meant for developers lists
  // them (ssh_permissions = ["pty", "port-forwarding"]).
  std::vector<std::string> ssh_permissions = {"pty"};
};

// The SSH certificate permissions a pool may grant ([[pools]] ssh_permissions).
inline constexpr std::string_view kSshPermissions[] = {"pty", "port-forwarding", "agent-forwarding",
                                                       "x11-forwarding", "user-rc"};
// kInvalidArgument naming `field[i]` for a name not in kSshPermissions or given twice.
Status validate_ssh_permissions(const std::string& field, const std::vector<std::string>& names);

struct PoolStatus {
  PoolConfig config;
  int warm = 0;      // booted, idle, ready to hand out
  int starting = 0;  // booting (warm refills and cold leases)
  int leased = 0;    // handed to a lease
  int pending_leases = 0;
  bool removed = false;  // gone from the configuration: no new leases, listed until empty
  // min_warm = "auto": the current target and why (config.min_warm is that target).
  std::optional<WarmTarget> warm_target;
};

// The VM behind a ready lease, as benchmarks and exec need it.
struct LeasedVm {
  Lease lease;
  PoolConfig pool;
  std::vector<int> housekeeping;  // the host's housekeeping CPUs
};

// Validates a pool name, label key/value, SSH public key, etc. Returns kInvalidArgument
// naming `field`.
Status validate_name(std::string_view field, std::string_view value);
Status validate_ssh_key(std::string_view field, std::string_view key);
Status validate_labels(std::string_view field, const std::map<std::string, std::string>& labels);

}  // namespace armhive
