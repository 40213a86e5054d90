#include "daemon/http/convert.h"

#include <cmath>
#include <cstdint>

#include "api/host_key_alias.h"
#include "api/json.h"
#include "daemon/core/host_keys.h"

namespace armhive {

std::string ssh_command(const std::string& user, const std::string& host, int port,
                        const std::string& lease_id) {
  // Every part is validated before it gets here (login user, address or advertised name, lease
  // id): the command is for people to paste, never run by us.
  std::string cmd =
      "ssh -o HostKeyAlias=" + host_key_alias(lease_id) +
      " -o StrictHostKeyChecking=yes -o UserKnownHostsFile=" + lease_known_hosts_file(lease_id);
  if (port != 22) cmd += " -p " + std::to_string(port);
  cmd += " " + user + "@" + host;
  return cmd;
}

std::string lease_known_hosts_file(const std::string& lease_id) {
  return lease_id + ".known_hosts";
}

std::optional<SshDto> ssh_dto(const Lease& l) {
  // No keys: a pool without sshd (PoolConfig::ssh false), or a lease made ready before keys
  // were read; either way nothing a client could verify, so no SSH is offered.
  if (l.address.empty() || l.state != LeaseState::kReady || l.host_keys.empty()) {
    return std::nullopt;
  }
  SshDto s;
  s.user = l.login_user.empty() ? "root" : l.login_user;
  s.host = l.address;
  s.port = 22;
  s.host_keys = l.host_keys;
  s.host_key_alias = host_key_alias(l.id);
  s.known_hosts = known_hosts_lines(s.host_key_alias, l.host_keys);
  s.command = ssh_command(s.user, s.host, s.port, l.id);
  return s;
}

LeaseRequest from_dto(const LeaseCreateRequest& in, const std::string& owner,
                      const std::string& idempotency_key) {
  LeaseRequest r;
  r.pool = in.pool;
  r.ssh_keys = in.ssh_keys;
  r.labels = in.labels;
  r.purpose = in.purpose == "dev" ? Purpose::kDev : Purpose::kCi;
  r.idempotency_key = idempotency_key;
  r.owner = owner;
  if (in.ttl_seconds) r.ttl = Seconds(*in.ttl_seconds);
  return r;
}

GuestExecRequest from_dto(const ExecRequestDto& in) {
  GuestExecRequest g;
  g.argv = in.argv;
  g.stdin_data = in.stdin_data;
  g.timeout = std::chrono::seconds(in.timeout_s);
  return g;
}

ExecResultDto to_dto(GuestExecResult r) {
  ExecResultDto out;
  out.exit_code = r.exit_code;
  out.signal = r.signal;
  out.timed_out = r.timed_out;
  out.out = std::move(r.out);
  out.err = std::move(r.err);
  out.out_truncated = r.out_truncated;
  return out;
}

namespace {

// Bytes and counters as JSON integers (int64): a counter past 2^63 is shown as the largest.
int64_t wire_count(uint64_t v) {
  return v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
}

// Seconds to the millisecond: the samples are not finer than that.
double wire_seconds(double s) { return std::round(s * 1000.0) / 1000.0; }

}  // namespace

LeaseUsageDto to_dto(const LeaseUsage& u) {
  LeaseUsageDto d;
  d.cpu_seconds = wire_seconds(u.cpu_seconds());
  d.wall_seconds = wire_seconds(u.wall_seconds());
  d.peak_memory_bytes = wire_count(u.peak_rss_bytes);
  d.disk_write_bytes = wire_count(u.disk_write_bytes);
  d.net_rx_bytes = wire_count(u.net_rx_bytes);
  d.net_tx_bytes = wire_count(u.net_tx_bytes);
  d.sampled_at = to_rfc3339(u.sampled_at);
  d.final = u.final;
  return d;
}

UsageRowDto to_dto(const UsageRow& r) {
  UsageRowDto d;
  d.group = r.group;
  d.leases = r.leases;
  d.cpu_seconds = wire_seconds(static_cast<double>(r.cpu_ns) / 1e9);
  d.wall_seconds = wire_seconds(static_cast<double>(r.wall_ms) / 1e3);
  d.disk_write_bytes = wire_count(r.disk_write_bytes);
  d.net_rx_bytes = wire_count(r.net_rx_bytes);
  d.net_tx_bytes = wire_count(r.net_tx_bytes);
  d.peak_memory_bytes = wire_count(r.peak_rss_bytes);
  return d;
}

LeaseDto to_dto(const Lease& l) {
  LeaseDto d;
  d.id = l.id;
  d.pool = l.pool;
  d.owner = l.owner;
  d.state = std::string(to_string(l.state));
  d.reason = l.reason;
  d.purpose = std::string(to_string(l.purpose));
  d.labels = l.labels;
  d.created_at = to_rfc3339(l.created_at);
  if (to_unix_ms(l.ready_at) != 0) d.ready_at = to_rfc3339(l.ready_at);
  d.expires_at = to_rfc3339(l.expires_at);
  if (to_unix_ms(l.ended_at) != 0) d.ended_at = to_rfc3339(l.ended_at);
  d.ttl_seconds = l.ttl.count();
  d.warm_handout = l.warm_handout;
  if (l.queue) d.queue = LeaseQueueDto{l.queue->position, std::string(to_string(l.queue->reason))};
  if (!l.vm_name.empty()) {
    d.vm = VmDto{l.vm_name, l.address, l.login_user, l.cpus, l.host};
  }
  d.ssh = ssh_dto(l);
  if (l.usage) d.usage = to_dto(*l.usage);
  for (const auto& t : l.history) {
    d.history.push_back(
        {std::string(to_string(t.from)), std::string(to_string(t.to)), to_rfc3339(t.at), t.reason});
  }
  return d;
}

PoolDto to_dto(const PoolStatus& p) {
  PoolDto d;
  d.name = p.config.name;
  d.image = p.config.image;
  d.vcpus = p.config.vcpus;
  d.memory_mib = static_cast<int64_t>(p.config.memory_mib);
  d.disk_gib = static_cast<int64_t>(p.config.disk_gib);
  d.mtu = p.config.mtu;
  d.cpu_policy = p.config.cpu_policy == CpuPolicy::kDedicated ? "dedicated" : "shared";
  d.min_warm = p.config.min_warm;
  d.max = p.config.max;
  d.default_ttl_seconds = p.config.default_ttl.count();
  d.max_ttl_seconds = p.config.max_ttl.count();
  d.labels = p.config.labels;
  d.warm = p.warm;
  d.starting = p.starting;
  d.leased = p.leased;
  d.pending_leases = p.pending_leases;
  d.files_max_bytes = static_cast<int64_t>(p.config.files.max_bytes);
  d.files_path_prefix = p.config.files.path_prefix;
  d.ssh = p.config.ssh;
  d.removed = p.removed;
  if (p.config.auto_warm && p.warm_target) {
    d.warm_target = WarmTargetDto{.target = p.warm_target->target,
                                  .reason = p.warm_target->reason,
                                  .auto_min = p.config.auto_warm->auto_min,
                                  .auto_max = p.config.auto_warm->auto_max,
                                  .expected_arrivals = p.warm_target->expected_arrivals,
                                  .rate_per_min = p.warm_target->rate_per_min,
                                  .run_size = p.warm_target->run_size,
                                  .runs_per_hour = p.warm_target->runs_per_hour};
  }
  return d;
}

HealthResultDto to_dto(const HealthResult& r) {
  HealthResultDto d;
  d.at = to_rfc3339(r.at);
  d.pool = r.pool;
  d.suite = r.suite;
  d.figure = r.figure;
  d.label = r.label;
  d.unit = r.unit;
  d.higher_is_better = r.higher_is_better;
  d.value = r.value;
  d.run_id = r.run_id;
  d.verdict = r.verdict;
  if (r.band) {
    d.band = HealthBandDto{static_cast<int64_t>(r.band->n), r.band->median, r.band->mad,
                           r.band->low, r.band->high};
  }
  d.reason = r.reason;
  return d;
}

HostSpec from_dto(const HostCreateDto& h) {
  HostSpec s;
  s.name = h.name;
  s.libvirt_uri = h.libvirt_uri;
  s.labels = h.labels;
  s.housekeeping_cpus = h.housekeeping_cpus;
  s.dedicated_cpus = h.dedicated_cpus;
  s.shared_cpus = h.shared_cpus;
  s.l2_clusters = h.l2_clusters;
  s.vm_dir = h.vm_dir;
  s.image_dir = h.image_dir;
  if (!h.network_guard.empty()) s.network_guard = h.network_guard;
  s.field_prefix.clear();  // the request body's own keys
  return s;
}

HostDto to_dto(const HostView& h) {
  HostDto d;
  for (const HealthResult& r : h.health) d.health.push_back(to_dto(r));
  const HostTopology& t = h.topology;
  d.hostname = t.hostname;
  d.uri = h.uri;
  d.labels = h.labels;
  d.connected = h.state == HostState::kOk;
  d.state = std::string(to_string(h.state));
  // The admin's state wins, as in HostHealthTracker::health(); degraded still shows through
  // `connected` and last_error.
  if (h.admin == HostHealthTracker::Admin::kMaintenance) d.state = "maintenance";
  if (h.admin == HostHealthTracker::Admin::kDrain) d.state = "draining";
  // As HostHealthTracker::health(): unreachable wins over draining (its leases show it),
  // maintenance over both.
  if (h.state == HostState::kUnreachable && h.admin != HostHealthTracker::Admin::kMaintenance) {
    d.state = "unreachable";
  }
  if (h.unreachable_since) d.unreachable_since = to_rfc3339(*h.unreachable_since);
  d.last_error = h.last_error;
  d.arch = t.arch;
  d.cpu_model = t.cpu_model;
  // A host never reached has no capabilities to say which.
  d.accel = t.cpus.empty() ? "unknown" : t.accel == Accel::kKvm ? "kvm" : "tcg";
  d.memory_kib = static_cast<int64_t>(t.memory_kib);
  for (const auto& c : t.cells) {
    d.numa_nodes.push_back({c.id, static_cast<int64_t>(c.memory_kib), c.cpus});
  }
  for (const auto& [id, cpus] : t.clusters()) {
    if (id >= 0) d.clusters.push_back(cpus);
  }
  for (const auto& c : h.cores) {
    CoreDto cd;
    cd.cpu = c.cpu;
    if (const HostCpu* cpu = t.cpu(c.cpu)) {
      cd.cluster = cpu->cluster;
      cd.numa_node = cpu->numa_node;
    }
    cd.role = c.role;
    cd.lease_id = c.lease_id;
    cd.vm = c.vm_name;
    cd.pool = c.pool;
    d.cores.push_back(std::move(cd));
  }
  d.fragmentation = h.fragmentation;
  return d;
}

EventDto to_dto(const Event& e) {
  EventDto d;
  d.seq = e.seq;
  d.at = to_rfc3339(e.at);
  d.type = e.type;
  d.lease_id = e.lease_id;
  d.vm = e.vm_name;
  d.pool = e.pool;
  d.owner = e.owner;
  d.state = e.state;
  d.detail = e.detail;
  return d;
}

ClusterLeaderDto to_dto(const ClusterLeader& leader) {
  return ClusterLeaderDto{leader.holder, leader.url, leader.epoch,
                          to_rfc3339(from_unix_ms(leader.since_ms))};
}

ClusterDto to_dto(const ClusterView& view) {
  ClusterDto d;
  d.store = view.postgres ? "postgresql" : "sqlite";
  if (view.leader) d.leader = to_dto(*view.leader);
  for (const ClusterMember& m : view.members) {
    d.members.push_back(ClusterMemberDto{m.holder, m.url, m.role,
                                         to_rfc3339(from_unix_ms(m.started_at_ms)),
                                         to_rfc3339(from_unix_ms(m.last_contact_ms)),
                                         static_cast<double>(m.last_contact_age_ms) / 1000.0});
  }
  return d;
}

std::string cluster_json_text(const ClusterView& view) { return to_json(to_dto(view)).dump(); }

std::string problem_json_text(const Status& status) {
  return to_json(problem_from_status(status)).dump();
}

}  // namespace armhive
