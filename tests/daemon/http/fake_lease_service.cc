#include "tests/daemon/http/fake_lease_service.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "daemon/core/file_policy.h"
#include "daemon/virt/guest_file_transfer.h"

namespace armhive {
namespace {

std::string hex_id(const char* prefix, uint64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s%012llx", prefix, static_cast<unsigned long long>(n));
  return buf;
}

}  // namespace

FakeLeaseService::FakeLeaseService() : now_(from_unix_ms(1'790'000'000'000)) {
  PoolConfig tiny;
  tiny.name = "tiny";
  tiny.image = "tiny";
  tiny.vcpus = 2;
  tiny.memory_mib = 512;
  tiny.min_warm = 2;
  tiny.max = 4;
  tiny.default_ttl = Seconds(3600);
  tiny.max_ttl = Seconds(8 * 3600);
  tiny.files.max_bytes = 1 << 20;
  tiny.access_ports = {8080, 9000};  // what a server wired with LeaseAccess checks "ports" against
  PoolConfig slow = tiny;
  slow.max_extra_ports = 1;  // a pool cap below the daemon's
  slow.files.path_prefix = "/work";
  slow.name = "slow";
  slow.min_warm = 0;
  slow.max_ttl = Seconds(2 * 3600);
  slow.cpu_policy = CpuPolicy::kShared;
  pools_["tiny"] = tiny;
  pools_["slow"] = slow;
}

void FakeLeaseService::event_locked(const std::string& type, const Lease& l) {
  Event e;
  e.seq = next_seq_++;
  e.at = now_;
  e.type = type;
  e.lease_id = l.id;
  e.vm_name = l.vm_name;
  e.pool = l.pool;
  e.owner = l.owner;
  e.state = std::string(to_string(l.state));
  events_.push_back(e);
}

void FakeLeaseService::transition_locked(Lease& l, LeaseState to, const std::string& reason) {
  l.history.push_back({l.state, to, now_, reason});
  l.state = to;
  l.queue.reset();
  l.reason = reason;
  if (to == LeaseState::kReady) {
    l.ready_at = now_;
    l.vm_name = "armhive-vm-" + l.id.substr(2);
    l.address = "192.168.122." + std::to_string(10 + leases_.size());
    l.login_user = "armhive";
    l.cpus = {2, 3};
    l.host_keys = {kFakeHostKey};  // as the engine: a ready lease's VM's keys are known
  }
  if (is_terminal(to)) l.ended_at = now_;
  event_locked("lease." + std::string(to_string(to)), l);
  cv_.notify_all();
}

Result<Lease> FakeLeaseService::create_lease(const LeaseRequest& r) {
  std::lock_guard lock(mu_);
  auto pool = pools_.find(r.pool);
  if (pool == pools_.end()) return not_found("no pool \"" + r.pool + "\"");
  if (!r.idempotency_key.empty()) {
    for (const auto& l : leases_) {
      if (l.owner == r.owner && l.idempotency_key == r.idempotency_key) return l;
    }
  }
  Seconds ttl = r.ttl.value_or(pool->second.default_ttl);
  if (ttl > pool->second.max_ttl) {
    return Status(ErrorCode::kUnprocessable,
                  "pool \"" + r.pool + "\" allows at most " +
                      std::to_string(pool->second.max_ttl.count()) + " s",
                  {}, "ttl");
  }
  Lease l;
  l.id = hex_id("l-", next_id_++);
  l.pool = r.pool;
  l.owner = r.owner;
  l.purpose = r.purpose;
  l.ssh_keys = r.ssh_keys;
  l.labels = r.labels;
  l.idempotency_key = r.idempotency_key;
  l.ttl = ttl;
  l.created_at = now_;
  l.expires_at = now_ + ttl;
  event_locked("lease.created", l);
  if (host_admin_ != HostHealthTracker::Admin::kNone) {
    l.reason = "host 'honeycomb' is draining: no new VMs until it is undrained";
    int ahead = 0;
    for (const auto& other : leases_) ahead += other.queue && other.pool == l.pool ? 1 : 0;
    l.queue = QueueSlot{.position = ahead + 1, .reason = QueueReason::kHostDraining};
  } else if (r.pool != "slow") {  // "tiny" and the pools of add_warm_pool()
    l.warm_handout = true;
    transition_locked(l, LeaseState::kReady, "warm VM handed out");
  } else {
    // As the engine says of a pool whose VMs are all leased: queued behind the pending ones.
    l.reason = "waiting for capacity";
    int ahead = 0;
    for (const auto& other : leases_) ahead += other.queue ? 1 : 0;
    l.queue = QueueSlot{.position = ahead + 1, .reason = QueueReason::kAtPoolMax};
  }
  leases_.push_back(l);
  cv_.notify_all();
  return l;
}

Result<Lease> FakeLeaseService::get_lease(const std::string& id) {
  std::lock_guard lock(mu_);
  for (const auto& l : leases_) {
    if (l.id == id) return l;
  }
  return not_found("no lease \"" + id + "\"");
}

Result<std::vector<Lease>> FakeLeaseService::list_leases(const LeaseFilter& f) {
  std::lock_guard lock(mu_);
  std::vector<Lease> out;
  bool past_cursor = f.after_id.empty();
  for (const auto& l : leases_) {
    if (!past_cursor) {
      past_cursor = l.id == f.after_id;
      continue;
    }
    if (f.owner && l.owner != *f.owner) continue;
    if (f.pool && l.pool != *f.pool) continue;
    if (f.state && l.state != *f.state) continue;
    if (!f.include_ended && is_terminal(l.state)) continue;
    bool labels_ok = true;
    for (const auto& [k, v] : f.labels) {
      auto it = l.labels.find(k);
      labels_ok = labels_ok && it != l.labels.end() && it->second == v;
    }
    if (!labels_ok) continue;
    out.push_back(l);
    if (out.size() >= effective_limit(f)) break;  // as the real store caps it
  }
  return out;
}

Result<Lease> FakeLeaseService::wait_lease(const std::string& id,
                                           std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  auto find = [&]() -> Lease* {
    for (auto& l : leases_) {
      if (l.id == id) return &l;
    }
    return nullptr;
  };
  if (find() == nullptr) return not_found("no lease \"" + id + "\"");
  ++waits_;
  cv_.wait_for(lock, timeout, [&] {
    Lease* l = find();
    return l->state == LeaseState::kReady || is_terminal(l->state);
  });
  return *find();
}

Result<Lease> FakeLeaseService::renew_lease(const std::string& id, Seconds ttl) {
  std::lock_guard lock(mu_);
  for (auto& l : leases_) {
    if (l.id != id) continue;
    if (is_terminal(l.state)) return conflict("lease \"" + id + "\" has ended", id);
    if (ttl > pools_[l.pool].max_ttl) {
      return Status(ErrorCode::kUnprocessable,
                    "pool \"" + l.pool + "\" allows at most " +
                        std::to_string(pools_[l.pool].max_ttl.count()) + " s",
                    {}, "ttl");
    }
    l.ttl = ttl;
    l.expires_at = now_ + ttl;
    event_locked("lease.renewed", l);
    return l;
  }
  return not_found("no lease \"" + id + "\"");
}

Result<Lease> FakeLeaseService::release_lease(const std::string& id) {
  std::lock_guard lock(mu_);
  for (auto& l : leases_) {
    if (l.id != id) continue;
    if (is_terminal(l.state)) return conflict("lease \"" + id + "\" has already ended", id);
    if (l.state != LeaseState::kPending) transition_locked(l, LeaseState::kReleasing, "released");
    transition_locked(l, LeaseState::kReleased, "released by its owner");
    return l;
  }
  return not_found("no lease \"" + id + "\"");
}

Result<GuestExecResult> FakeLeaseService::exec(const std::string& lease_id,
                                               const GuestExecRequest& request) {
  std::lock_guard lock(mu_);
  const Lease* lease = nullptr;
  for (const auto& l : leases_) {
    if (l.id == lease_id) lease = &l;
  }
  if (lease == nullptr) return not_found("no lease \"" + lease_id + "\"");
  if (lease->state != LeaseState::kReady) {
    return conflict("lease \"" + lease_id + "\" is " + std::string(to_string(lease->state)) +
                    ", not ready");
  }
  last_exec_ = request;
  GuestExecResult r;
  r.exit_code = 0;
  const std::string& cmd = request.argv[0];
  if (cmd == "echo") {
    for (size_t i = 1; i < request.argv.size(); ++i) r.out += (i > 1 ? " " : "") + request.argv[i];
    r.out += "\n";
  } else if (cmd == "cat") {
    r.out = request.stdin_data;
  } else if (cmd == "false") {
    r.exit_code = 1;
    r.err = "failed\n";
  } else if (cmd == "exit" && request.argv.size() > 1) {
    r.exit_code = std::atoi(request.argv[1].c_str());
  } else if (cmd == "binary") {
    r.out = std::string("\xff\xfe\x00\x01", 4);
  } else if (cmd == "throw") {
    throw std::runtime_error("fake exec blew up");  // the server must turn this into a 500
  } else if (cmd == "sleep") {
    r.exit_code = -1;
    r.timed_out = true;
  } else {
    r.exit_code = 127;
    r.err = cmd + ": not found\n";
  }
  return r;
}

Result<GuestExecResult> FakeLeaseService::exec_stream(const std::string& lease_id,
                                                      const GuestExecRequest& request,
                                                      ExecSink& sink) {
  if (request.argv.empty() || request.argv[0] != "hold") {
    return LeaseService::exec_stream(lease_id, request, sink);
  }
  ARMHIVE_ASSIGN_OR_RETURN(PoolConfig pool, ready_pool(lease_id));
  (void)pool;
  {
    std::lock_guard lock(mu_);
    last_exec_ = request;
  }
  ++holding_;
  sink.started();
  sink.output(ExecOutputStream::kStdout, "holding\n");
  while (!sink.cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  --holding_;
  GuestExecResult r;
  r.cancelled = true;
  r.signal = 9;
  return r;
}

int FakeLeaseService::holding() const { return holding_.load(); }

Result<std::string> FakeLeaseService::console(const std::string& lease_id, size_t max_bytes) {
  auto l = get_lease(lease_id);
  if (!l.is_ok()) return l.status();
  std::string log = "[    0.000000] Booting Linux on physical CPU 0x0\nWelcome to armhive tiny\n";
  if (log.size() > max_bytes) log = log.substr(log.size() - max_bytes);
  return log;
}

std::vector<PoolStatus> FakeLeaseService::pools() {
  std::lock_guard lock(mu_);
  std::vector<PoolStatus> out;
  for (const auto& [name, cfg] : pools_) {
    PoolStatus s;
    s.config = cfg;
    s.warm = name == "tiny" ? 2 : 0;
    if (auto t = auto_targets_.find(name); t != auto_targets_.end()) s.warm_target = t->second;
    for (const auto& l : leases_) {
      if (l.pool != name) continue;
      if (l.state == LeaseState::kReady) ++s.leased;
      if (l.state == LeaseState::kPending) ++s.pending_leases;
    }
    out.push_back(s);
  }
  return out;
}

void FakeLeaseService::set_host_health(std::vector<HealthResult> latest) {
  std::lock_guard lock(mu_);
  host_health_ = std::move(latest);
}

std::vector<HostView> FakeLeaseService::hosts() {
  std::lock_guard lock(mu_);
  HostView h;
  h.health = host_health_;
  h.admin = host_admin_;
  h.topology.hostname = "honeycomb";
  h.topology.arch = "aarch64";
  h.topology.cpu_model = "cortex-a72";
  h.topology.accel = Accel::kKvm;
  h.topology.memory_kib = 32 * 1024 * 1024;
  NumaCell cell;
  cell.id = 0;
  cell.memory_kib = h.topology.memory_kib;
  for (int i = 0; i < 4; ++i) {
    HostCpu c;
    c.id = i;
    c.core = i;
    c.cluster = i / 2;
    c.siblings = {i};
    h.topology.cpus.push_back(c);
    cell.cpus.push_back(i);
  }
  h.topology.cells.push_back(cell);
  h.cores.push_back({0, "housekeeping", "", "", ""});
  h.cores.push_back({1, "housekeeping", "", "", ""});
  const Lease* ready = nullptr;
  for (const auto& l : leases_) {
    if (l.state == LeaseState::kReady && l.pool == "tiny") ready = &l;
  }
  for (int cpu : {2, 3}) {
    CoreUse c{cpu, "dedicated", "", "", ""};
    if (ready != nullptr) {
      c.vm_name = ready->vm_name;
      c.lease_id = ready->id;
      c.pool = ready->pool;
    }
    h.cores.push_back(c);
  }
  h.fragmentation = 0;
  h.state = host_state_;
  for (const HealthResult& r : host_health_) {
    if (r.verdict == "degraded") h.state = HostState::kDegraded;
  }
  h.last_error = host_last_error_;
  // An unreachable host says since when (the engine's tracker does; a fixed instant here).
  if (host_state_ == HostState::kUnreachable) h.unreachable_since = from_unix_ms(1800000000000);
  std::vector<HostView> out{h};
  out.insert(out.end(), extra_hosts_.begin(), extra_hosts_.end());
  return out;
}

void FakeLeaseService::add_host(const std::string& name, const std::string& uri,
                                std::map<std::string, std::string> labels) {
  std::lock_guard lock(mu_);
  HostView h;
  h.topology.hostname = name;
  h.topology.arch = "aarch64";
  h.topology.cpu_model = "thunderx";
  h.topology.accel = Accel::kKvm;
  h.uri = uri;
  h.labels = std::move(labels);
  extra_hosts_.push_back(std::move(h));
}

void FakeLeaseService::remove_host(const std::string& name) {
  std::lock_guard lock(mu_);
  std::erase_if(extra_hosts_, [&](const HostView& h) { return h.topology.hostname == name; });
}

void FakeLeaseService::set_host_state(HostState state, std::string last_error) {
  std::lock_guard lock(mu_);
  host_state_ = state;
  host_last_error_ = std::move(last_error);
}

std::vector<Event> FakeLeaseService::events_since(uint64_t after,
                                                  std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  auto has_new = [&] { return !events_.empty() && events_.back().seq > after; };
  cv_.wait_for(lock, timeout, has_new);
  std::vector<Event> out;
  for (const auto& e : events_) {
    if (e.seq > after) out.push_back(e);
  }
  return out;
}

Status FakeLeaseService::set_host_admin(const std::string& host, HostHealthTracker::Admin admin) {
  std::lock_guard lock(mu_);
  if (host != "honeycomb") {
    return Status(ErrorCode::kNotFound, "no host named '" + host + "'", host, "name");
  }
  if (host_admin_ == admin) return Status::ok();
  host_admin_ = admin;
  Event e;
  e.seq = next_seq_++;
  e.at = now_;
  e.type = admin == HostHealthTracker::Admin::kDrain         ? "host.draining"
           : admin == HostHealthTracker::Admin::kMaintenance ? "host.maintenance"
                                                             : "host.undrained";
  e.detail = "host " + host;
  events_.push_back(std::move(e));
  if (admin == HostHealthTracker::Admin::kNone) {
    for (auto& l : leases_) {
      if (!l.queue || l.queue->reason != QueueReason::kHostDraining || is_terminal(l.state)) {
        continue;
      }
      if (l.pool == "slow") {
        l.queue->reason = QueueReason::kAtPoolMax;
        l.reason = "waiting for capacity";
        continue;
      }
      l.queue.reset();
      transition_locked(l, LeaseState::kProvisioning, "booting");
      transition_locked(l, LeaseState::kReady, "booted");
    }
  }
  cv_.notify_all();
  return Status::ok();
}

int FakeLeaseService::waits() const {
  std::lock_guard lock(mu_);
  return waits_;
}

void FakeLeaseService::make_ready(const std::string& id) {
  std::lock_guard lock(mu_);
  for (auto& l : leases_) {
    if (l.id == id && !is_terminal(l.state) && l.state != LeaseState::kReady) {
      transition_locked(l, LeaseState::kProvisioning, "booting");
      transition_locked(l, LeaseState::kReady, "booted");
    }
  }
}

bool FakeLeaseService::set_usage(const std::string& id, const LeaseUsage& usage) {
  std::lock_guard lock(mu_);
  for (auto& l : leases_) {
    if (l.id == id) {
      l.usage = usage;
      return true;
    }
  }
  return false;
}

void FakeLeaseService::emit(const std::string& type, const std::string& lease_id,
                            const std::string& owner) {
  std::lock_guard lock(mu_);
  Lease l;
  l.id = lease_id;
  l.owner = owner;
  event_locked(type, l);
  cv_.notify_all();
}

void FakeLeaseService::add_warm_pool(const std::string& name) {
  std::lock_guard lock(mu_);
  PoolConfig p = pools_["tiny"];
  p.name = name;
  pools_[name] = p;
}

void FakeLeaseService::set_auto_target(const std::string& name, const AutoWarmConfig& config,
                                       WarmTarget target) {
  std::lock_guard lock(mu_);
  pools_[name].auto_warm = config;
  pools_[name].min_warm = target.target;
  auto_targets_[name] = std::move(target);
}

Result<PoolConfig> FakeLeaseService::ready_pool(const std::string& lease_id) {
  std::lock_guard lock(mu_);
  for (const auto& l : leases_) {
    if (l.id != lease_id) continue;
    if (l.state != LeaseState::kReady) {
      return conflict("lease \"" + lease_id + "\" is " + std::string(to_string(l.state)) +
                      ", not ready");
    }
    return pools_.at(l.pool);
  }
  return not_found("no lease \"" + lease_id + "\"");
}

Result<GuestFileTransfer> FakeLeaseService::put_file(const std::string& lease_id,
                                                     const GuestFilePut& put, ByteSource& source) {
  ARMHIVE_ASSIGN_OR_RETURN(PoolConfig pool, ready_pool(lease_id));
  GuestFilePut checked = put;
  ARMHIVE_ASSIGN_OR_RETURN(checked.path, check_guest_path(pool.files, put.path));
  ARMHIVE_RETURN_IF_ERROR(check_transfer_size(pool.files, pool.name, put.size));
  AgentCall agent = std::ref(guest_);
  return put_guest_file(agent, checked, source);
}

Result<GuestFileTransfer> FakeLeaseService::get_file(const std::string& lease_id,
                                                     const std::string& path, ByteSink& sink) {
  ARMHIVE_ASSIGN_OR_RETURN(PoolConfig pool, ready_pool(lease_id));
  ARMHIVE_ASSIGN_OR_RETURN(std::string checked, check_guest_path(pool.files, path));
  PolicyCheckedSink limited(sink, pool.files, pool.name);
  AgentCall agent = std::ref(guest_);
  return get_guest_file(agent, checked, limited);
}

GuestExecRequest FakeLeaseService::last_exec() const {
  std::lock_guard lock(mu_);
  return last_exec_;
}

Result<BenchmarkRun> FakeBenchmarkService::start(const BenchmarkRequest& request) {
  auto lease = leases_.get_lease(request.lease_id);
  if (!lease.is_ok()) return lease.status();
  if (lease->state != LeaseState::kReady) {
    return conflict("lease \"" + request.lease_id + "\" has no ready VM");
  }
  std::lock_guard lock(mu_);
  BenchmarkRun run;
  run.id = hex_id("b-", runs_.size() + 1);
  run.lease_id = request.lease_id;
  run.owner = request.owner;
  run.vm_name = lease->vm_name;
  run.pool = lease->pool;
  run.host = "honeycomb";
  run.state = BenchmarkState::kQueued;
  run.created_at = lease->created_at;
  run.request = request;
  if (run.request.suites.empty()) run.request.suites = {"network", "compression"};
  runs_.push_back(run);
  return run;
}

Result<BenchmarkRun> FakeBenchmarkService::get(const std::string& id) {
  std::lock_guard lock(mu_);
  for (auto& r : runs_) {
    if (r.id != id) continue;
    r.state = BenchmarkState::kSucceeded;
    r.finished_at = r.created_at + Seconds(30);
    r.report = {{"compression", {{"single_thread_mb_s", {{"median", 410.5}}}}}};
    return r;
  }
  return not_found("no benchmark run \"" + id + "\"");
}

std::vector<BenchmarkRun> FakeBenchmarkService::list(const BenchmarkFilter& f) {
  std::lock_guard lock(mu_);
  std::vector<BenchmarkRun> out;
  for (auto it = runs_.rbegin(); it != runs_.rend() && out.size() < f.limit; ++it) {
    if (f.owner && it->owner != *f.owner) continue;
    if (f.lease_id && it->lease_id != *f.lease_id) continue;
    out.push_back(*it);
  }
  return out;
}

Result<std::string> FakeBenchmarkService::report_html(const std::vector<std::string>& ids) {
  if (ids.empty()) return invalid_argument("ids", "none given");
  std::string html = "<!DOCTYPE html><html><body><h1>armhive benchmark</h1>";
  for (const auto& id : ids) {
    auto r = get(id);
    if (!r.is_ok()) return r.status();
    html += "<p>" + id + "</p>";
  }
  return html + "</body></html>";
}

Result<std::string> FakeBenchmarkService::report_csv(const std::vector<std::string>& ids) {
  std::string csv = "run,suite,metric,value\n";
  for (const auto& id : ids) {
    auto r = get(id);
    if (!r.is_ok()) return r.status();
    csv += id + ",compression,single_thread_mb_s,410.5\n";
  }
  return csv;
}

Result<nlohmann::json> FakeBenchmarkService::compare(const std::vector<std::string>& ids) {
  // daemon/bench/README.md "Comparison JSON".
  nlohmann::json runs = nlohmann::json::array();
  nlohmann::json values = nlohmann::json::array();
  nlohmann::json ratios = nlohmann::json::array();
  double base = 410.5;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto r = get(ids[i]);
    if (!r.is_ok()) return r.status();
    runs.push_back({{"id", ids[i]},
                    {"vm_name", r->vm_name},
                    {"pool", r->pool},
                    {"host", r->host},
                    {"state", "succeeded"},
                    {"emulated", false},
                    {"created_at", to_rfc3339(r->created_at)}});
    double v = base * (1.0 + 0.5 * static_cast<double>(i));
    values.push_back(v);
    ratios.push_back(v / base);
  }
  nlohmann::json metric = {{"key", "compression.guest.t1.compress_mb_s"},
                           {"label", "zstd -3 compress MB/s (1 thread)"},
                           {"unit", "MB/s"},
                           {"higher_is_better", true},
                           {"values", values},
                           {"ratios", ratios}};
  return nlohmann::json{{"runs", runs}, {"metrics", nlohmann::json::array({metric})}};
}

}  // namespace armhive
