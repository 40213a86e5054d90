#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/validation.h"  // kMaxTtlSeconds

namespace armhive {

// The wire types of the REST API (api/openapi.yaml), shared by the daemon and the CLI. They
// mirror the JSON documents, not the daemon's core types: times are RFC 3339 strings, states
// and roles are their wire names. JSON conversion is in api/json.h (kept out of this header so
// that users of the plain types do not pay for nlohmann::json).
//
// Plain data; no thread affinity.

inline constexpr size_t kMaxBodyBytes = 64 * 1024;  // larger bodies: 413
inline constexpr int64_t kMaxExecTimeoutSeconds = 3600;
inline constexpr size_t kMaxSshKeys = 32;
inline constexpr std::string_view kProblemTypeBase = "https://armhive.dev/problems/";

// A lease's startup command (daemon/startup/README.md): run in the guest through the agent
// right after hand-out, with these environment variables. Secret values are held only in the
// daemon's memory and never shown again.
inline constexpr size_t kMaxStartupArgs = 256;
inline constexpr size_t kMaxStartupArgBytes = 4096;
inline constexpr size_t kMaxStartupEnv = 64;
inline constexpr size_t kMaxStartupEnvNameBytes = 128;
inline constexpr size_t kMaxStartupEnvValueBytes = 16 * 1024;

struct StartupEnvVar {
  std::string value;
  bool secret = false;
};

struct StartupRequestDto {
  std::vector<std::string> argv;
  std::map<std::string, StartupEnvVar> env;
  bool release_on_exit = false;  // the command's exit ends the lease
};

// The startup command as a lease's JSON shows it: never a secret value.
struct StartupStatusDto {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // the variables that are not secret
  std::vector<std::string> secret_env;     // names of the secret ones
  bool release_on_exit = false;
  // waiting (lease not ready yet) | running | exited | failed (could not be started) |
  // not_run (the lease ended first) | lost (daemon restarted before it ran, see detail)
  std::string state = "waiting";
  std::optional<int> exit_code;
  int signal = 0;
  std::optional<std::string> started_at;
  std::optional<std::string> ended_at;
  std::string detail;
};

// POST /v1/leases
struct LeaseCreateRequest {
  std::string pool;
  std::optional<int64_t> ttl_seconds;  // wire: "ttl": 7200 or "2h" / "90m" / "1h30m"
  std::vector<std::string> ssh_keys;
  std::map<std::string, std::string> labels;
  std::string purpose = "ci";  // "ci" | "dev"
  // Guest TCP ports besides SSH to forward through the host (each 1-65535, allowed by the pool).
  std::vector<int> ports;
  std::optional<StartupRequestDto> startup;
};

// POST /v1/leases/{id}/renew
struct LeaseRenewRequest {
  int64_t ttl_seconds = 0;
};

// POST /v1/leases/{id}/ssh-certificate
struct SshCertificateRequest {
  std::string public_key;  // "ssh-ed25519 AAAA... [comment]"
};

// An OpenSSH user certificate for one lease: its principal opens only that lease's VM, and it
// expires with the lease (renew and ask again for a longer one).
// The answer to PUT /v1/leases/{id}/files: what was written and its checksum, which the server
// computed while streaming and the guest's sha256sum confirmed.
struct FileTransferDto {
  std::string path;  // in the guest
  std::string kind;  // "file" or "tar" (a directory, unpacked at path)
  uint64_t bytes = 0;
  std::string sha256;
};

struct SshCertificateDto {
  std::string certificate;  // the -cert.pub line for the key that was sent
  std::string user;         // the guest's login user
  std::string principal;    // "lease-<id>"
  std::string key_id;
  uint64_t serial = 0;
  std::string valid_after;   // RFC 3339
  std::string valid_before;  // RFC 3339: the lease's expiry when issued
};

struct VmDto {
  std::string name;
  std::string address;
  std::string login_user;
  std::vector<int> cpus;
  std::string host;  // the host that runs it (empty from servers before hosts were recorded)
};

struct SshDto {
  std::string user;
  std::string host;
  int port = 22;
  std::string command;  // a ready-to-paste command line, for people
  // The VM's SSH host public keys ("ssh-ed25519 AAAA…"), read through the guest agent before
  // the lease was ready (a server before that change may send none). known_hosts: the same as
  // known_hosts lines for host_key_alias (host_key_alias(lease id), api/host_key_alias.h), the
  // name ssh looks them up under (-o HostKeyAlias): addresses and ports are reused by later
  // VMs with other keys, the alias never.
  std::vector<std::string> host_keys;
  std::string known_hosts;
  std::string host_key_alias;
};

// A guest port the lease asked for, as the host forwards it.
struct PortForwardDto {
  int guest_port = 0;
  std::string host;
  int port = 0;
};

struct TransitionDto {
  std::string from;
  std::string to;
  std::string at;
  std::string reason;
};

// A waiting lease's place in its pool's queue (daemon/core/pool_queue.h).
struct LeaseQueueDto {
  int position = 0;    // 1-based, in the order the pool serves its waiting leases
  std::string reason;  // at_max_starting, at_pool_max, no_free_cores, warm_vm_booting, …
};

// What a lease's VM used (daemon/core/usage_meter.h): counted from its hand-out, sampled while
// it is ready, and `final` once the lease ended (the figures of the last sample before its VM
// was destroyed).
struct LeaseUsageDto {
  double cpu_seconds = 0;         // its vCPUs and QEMU's own threads
  double wall_seconds = 0;        // from the hand-out to the last sample: what cpu_seconds covers
  int64_t peak_memory_bytes = 0;  // the highest resident memory (QEMU's rss) sampled
  int64_t disk_write_bytes = 0;
  int64_t net_rx_bytes = 0;
  int64_t net_tx_bytes = 0;
  std::string sampled_at;  // RFC 3339: the last sample
  bool final = false;
};

struct LeaseDto {
  std::string id;
  std::string pool;
  std::string owner;
  std::string state;  // pending|provisioning|ready|releasing|released|expired|failed|
                      // host_unreachable|lost
  std::string reason;
  std::string purpose;
  std::map<std::string, std::string> labels;
  std::string created_at;
  std::optional<std::string> ready_at;
  std::string expires_at;
  std::optional<std::string> ended_at;
  int64_t ttl_seconds = 0;
  bool warm_handout = false;
  std::optional<VmDto> vm;
  std::optional<SshDto> ssh;
  std::vector<PortForwardDto> forwards;  // the extra ports' forwards while ready
  std::optional<StartupStatusDto> startup;
  std::optional<LeaseQueueDto> queue;  // set while it waits in its pool's queue
  std::optional<LeaseUsageDto> usage;  // set once it got a VM
  std::vector<TransitionDto> history;
};

// GET /v1/usage: what the leases created in [since, until) used, per group.
struct UsageRowDto {
  std::string group;  // the owner, pool or label value ("" for leases without the label)
  int64_t leases = 0;
  double cpu_seconds = 0;
  double wall_seconds = 0;
  int64_t disk_write_bytes = 0;
  int64_t net_rx_bytes = 0;
  int64_t net_tx_bytes = 0;
  int64_t peak_memory_bytes = 0;  // the highest of the group's leases
};

struct UsageReportDto {
  std::string since;     // RFC 3339
  std::string until;     // RFC 3339
  std::string group_by;  // owner|pool|label
  std::string label;     // the label key, when group_by is label
  std::vector<UsageRowDto> rows;
};

// The query of GET /v1/usage as the client sends it (empty: the server's default).
struct UsageQueryDto {
  std::string since;     // RFC 3339 or a duration before now ("7d")
  std::string until;     // the same; empty: now
  std::string group_by;  // owner|pool|label
  std::string label;     // group_by label: the key
};

struct LeasePage {
  std::vector<LeaseDto> items;
  std::string next_cursor;  // empty: no more
};

// A pool whose min_warm is "auto": the warm VMs it holds now and why (daemon/core/demand_model.h).
struct WarmTargetDto {
  int target = 0;  // = the pool's min_warm now
  std::string reason;
  int auto_min = 0;
  int auto_max = 0;
  double expected_arrivals = 0;  // lease requests expected within the next boot time
  double rate_per_min = 0;       // the arrival rate that expectation was made with
  // The largest run of requests at once the hour ahead expects at least once per
  // burst_every, and how often such runs came (per hour); 0 when none does.
  int run_size = 0;
  double runs_per_hour = 0;
};

struct PoolDto {
  std::string name;
  std::string image;
  int vcpus = 0;
  int64_t memory_mib = 0;
  int64_t disk_gib = 0;
  int mtu = 1500;
  std::string cpu_policy;  // dedicated|shared
  int min_warm = 0;
  int max = 0;
  int64_t default_ttl_seconds = 0;
  int64_t max_ttl_seconds = 0;
  std::map<std::string, std::string> labels;
  int warm = 0;
  int starting = 0;
  int leased = 0;
  int pending_leases = 0;
  // [pools.files]: what `armhive cp` may move (the CLI checks before sending a byte).
  int64_t files_max_bytes = 0;
  std::string files_path_prefix = "/";
  bool ssh = true;       // its image runs sshd; false: its leases offer no SSH (no ssh block)
  bool removed = false;  // gone from the configuration: no new leases, listed until empty
  std::optional<WarmTargetDto> warm_target;  // min_warm = "auto" only
};

struct CoreDto {
  int cpu = 0;
  int cluster = -1;
  int numa_node = 0;
  std::string role;  // housekeeping|dedicated|shared
  std::string lease_id;
  std::string vm;
  std::string pool;
};

struct NumaNodeDto {
  int id = 0;
  int64_t memory_kib = 0;
  std::vector<int> cpus;
};

// One health benchmark result of a host (GET /v1/hosts/{name}/health, HostDto::health).
struct HealthBandDto {
  int64_t n = 0;  // earlier results the band was made of
  double median = 0;
  double mad = 0;
  double low = 0;
  double high = 0;
};
struct HealthResultDto {
  std::string at;  // RFC 3339
  std::string pool;
  std::string suite;
  std::string figure;  // "compression.guest.t1.compress_mb_s"
  std::string label;
  std::string unit;
  bool higher_is_better = true;
  double value = 0;
  std::string run_id;
  std::string verdict;  // insufficient_history | within_band | degraded
  std::optional<HealthBandDto> band;
  std::string reason;
};

struct HostDto {
  std::string hostname;
  std::string uri;                            // its libvirt URI
  std::map<std::string, std::string> labels;  // what pools select it by ([[hosts]] labels)
  bool connected = true;                      // false while degraded
  // ok | degraded (recent libvirt or database calls failed) | unreachable (its probe missed its
  // deadline: its leases show host_unreachable) | draining | maintenance (the admin's: no new
  // VMs; either wins over degraded, which `connected` and last_error still show)
  std::string state = "ok";
  std::string unreachable_since;  // RFC 3339, while unreachable
  std::string last_error;         // the last failed call and why; empty if none
  std::string arch;
  std::string cpu_model;
  std::string accel;  // kvm|tcg
  int64_t memory_kib = 0;
  std::vector<NumaNodeDto> numa_nodes;
  std::vector<std::vector<int>> clusters;  // CPUs sharing an L2
  std::vector<CoreDto> cores;
  double fragmentation = 0;
  // The newest health benchmark result per pool with a schedule; a degraded one makes the
  // host's state degraded.
  std::vector<HealthResultDto> health;
};

// POST /v1/hosts (admin): a libvirt host for armhived to drive from now on, with the keys of
// a [[hosts]] table (daemon/config/README.md).
struct HostCreateDto {
  std::string name;
  std::string libvirt_uri;
  std::map<std::string, std::string> labels;
  std::optional<std::string> housekeeping_cpus;  // wire: "cpus": {"housekeeping": "0-1", ...}
  std::optional<std::string> dedicated_cpus;
  std::optional<std::string> shared_cpus;
  std::vector<std::string> l2_clusters;
  std::string vm_dir;
  std::string image_dir;
  std::string network_guard;  // empty: the default ("armhived" for a local URI)
};

struct EventDto {
  uint64_t seq = 0;
  std::string at;
  std::string type;
  std::string lease_id;
  std::string vm;
  std::string pool;
  std::string owner;
  std::string state;
  std::string detail;
};

// application/problem+json (RFC 7807).
struct Problem {
  std::string type;  // kProblemTypeBase + code name, e.g. ".../invalid-argument"
  std::string title;
  int status = 500;
  std::string detail;
  std::string field;  // the request field at fault, e.g. "ssh_keys[1]"; empty when none
};

// POST /v1/leases/{id}/exec. stdin travels as "stdin" (UTF-8 text) or "stdin_base64".
struct ExecRequestDto {
  std::vector<std::string> argv;
  std::string stdin_data;
  int64_t timeout_s = 60;
  // Whether the request named timeout_s: a streamed exec without it runs until the command
  // ends or the lease does (set by exec_request_from_json).
  bool timeout_given = false;
};

// Output travels as "stdout"/"stderr" when it is valid UTF-8, else as "stdout_base64"/
// "stderr_base64"; the DTO holds the bytes.
struct ExecResultDto {
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  std::string out;
  std::string err;
  bool out_truncated = false;
};

// A benchmark run as GET /v1/benchmarks/{id} returns it (daemon/bench/README.md): the CLI
// needs only the envelope; request and report stay JSON text.
struct BenchmarkRunDto {
  std::string id;
  std::string lease_id;
  std::string owner;
  std::string vm_name;
  std::string pool;
  std::string host;
  std::string state;  // queued|running|succeeded|failed
  std::string error;
  std::string created_at;
  std::optional<std::string> finished_at;
  std::string request_json;
  std::string report_json;
};

// GET /v1/github: the GitHub provider's reconciliation and rate limit (daemon/github).
struct GithubStateDto {
  std::optional<std::string> last_reconcile;    // RFC 3339; absent before the first pass
  std::string last_reconcile_error;             // empty: the last pass succeeded
  int64_t pending_jobs = 0;                     // deliveries waiting for the worker
  int64_t runners = 0;                          // runners of ours
  std::optional<int64_t> rate_limit_remaining;  // absent until GitHub said
  std::optional<std::string> rate_limit_reset;  // RFC 3339
  std::optional<std::string> backoff_until;     // RFC 3339; absent: no backoff
  int64_t reconciled_jobs_total = 0;
  int64_t ghosts_deleted_total = 0;
  int64_t forgotten_runners_total = 0;
  int64_t rate_limited_total = 0;
};

// Who leads the armhived instances sharing one database (GET /v1/cluster, GET /healthz).
struct ClusterLeaderDto {
  std::string holder;  // armhived@HOST/PID
  std::string url;     // its API URL
  int64_t epoch = 0;   // 0: SQLite, one instance, no election
  std::string since;   // RFC 3339: when this epoch began (SQLite: when armhived started)
};

struct ClusterMemberDto {
  std::string holder;
  std::string url;
  std::string role;  // leader | standby
  std::string started_at;
  std::string last_contact;  // RFC 3339, the database's clock
  double last_contact_age_s = 0;
};

struct ClusterDto {
  std::string store;  // sqlite | postgresql
  std::optional<ClusterLeaderDto> leader;
  std::vector<ClusterMemberDto> members;
};

struct HealthDto {
  std::string status = "ok";
  std::string version;
  std::optional<ClusterLeaderDto> leader;  // who leads: this instance, whenever it answers 200
  // Configuration changes read by a reload that take effect only at the next start.
  std::vector<std::string> restart_required;
};

}  // namespace armhive
