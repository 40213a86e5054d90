#include "tests/support/fake_hypervisor.h"

#include <array>

#include "base/base64.h"
#include "daemon/core/host_keys.h"

namespace armhive {

Status FakeHypervisor::create_vm(const VmSpec& spec) {
  ARMHIVE_RETURN_IF_ERROR(validate_domain_name(spec.name));
  std::lock_guard lock(mu_);
  ++creates_;
  if (fail_create) return Status(fail_create_code, "injected create failure", spec.name);
  if (domains_.count(spec.name)) return conflict("domain exists", spec.name);
  Domain d{spec, {}, 0, {}, {}, 0, {}};
  d.counters = UsageCounters{next_run_id_++, 0, spec.memory_mib << 19, 0, 0, 0};  // rss: half
  domains_[spec.name] = std::move(d);
  files_.insert(spec.name);
  return Status::ok();
}

Status FakeHypervisor::destroy_vm(std::string_view name) {
  ARMHIVE_RETURN_IF_ERROR(validate_domain_name(name));
  std::lock_guard lock(mu_);
  domains_.erase(std::string(name));
  files_.erase(std::string(name));
  return Status::ok();
}

Result<std::vector<VmInfo>> FakeHypervisor::list_vms() {
  std::lock_guard lock(mu_);
  std::vector<VmInfo> out;
  for (const auto& [name, d] : domains_) {
    out.push_back({name, d.spec.vm_id, d.spec.pool, d.lease_id, true, d.spec.vcpu_pins,
                   d.spec.emulator_cpus, 0});
  }
  return out;
}

Result<std::vector<std::string>> FakeHypervisor::list_vm_files() {
  std::lock_guard lock(mu_);
  return std::vector<std::string>(files_.begin(), files_.end());
}

Status FakeHypervisor::set_lease(std::string_view name, std::string_view lease_id) {
  std::lock_guard lock(mu_);
  auto it = domains_.find(std::string(name));
  if (it == domains_.end()) return not_found("no domain", std::string(name));
  it->second.lease_id = std::string(lease_id);
  return Status::ok();
}

Status FakeHypervisor::ping_agent(std::string_view name, std::chrono::milliseconds) {
  std::lock_guard lock(mu_);
  auto it = domains_.find(std::string(name));
  if (it == domains_.end()) return not_found("no domain", std::string(name));
  if (never_ready) return Status(ErrorCode::kTimeout, "agent not responding", std::string(name));
  if (++it->second.pings < pings_until_ready) {
    return Status(ErrorCode::kTimeout, "agent not responding", std::string(name));
  }
  return Status::ok();
}

Result<std::string> FakeHypervisor::guest_address(std::string_view name) {
  std::lock_guard lock(mu_);
  if (!domains_.count(std::string(name))) return not_found("no domain", std::string(name));
  return "10.77.0." + std::to_string(next_ip_++ % 250 + 2);
}

Status FakeHypervisor::set_authorized_keys(std::string_view name, std::string_view user,
                                           const std::vector<std::string>& keys) {
  std::lock_guard lock(mu_);
  auto it = domains_.find(std::string(name));
  if (it == domains_.end()) return not_found("no domain", std::string(name));
  if (fail_keys) return unavailable("agent rejected keys", std::string(name));
  it->second.keys = keys;
  it->second.key_user = std::string(user);
  return Status::ok();
}

std::string FakeHypervisor::host_key_of(const std::string& name) {
  // An ed25519 public key blob (RFC 8709: the type string, then 32 key bytes) whose bytes
  // come from the name, so each domain has its own well-formed key.
  static constexpr char kHead[] = "\0\0\0\x0bssh-ed25519\0\0\0\x20";
  std::string blob(kHead, sizeof kHead - 1);  // 4 + 11 + 4 bytes: the literal's NUL not in it
  std::array<char, 32> key{};
  for (size_t i = 0; i < name.size(); ++i)
    key[i % 32] = static_cast<char>(key[i % 32] * 31 + name[i]);
  blob.append(key.data(), key.size());
  return "ssh-ed25519 " + base64_encode(blob);
}

int FakeHypervisor::host_key_reads(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = domains_.find(name);
  return it == domains_.end() ? 0 : it->second.host_key_reads;
}

Result<GuestExecResult> FakeHypervisor::exec(std::string_view name,
                                             const GuestExecRequest& request) {
  if (request.argv.size() == 3 && request.argv[0] == "sh" && request.argv[1] == "-c" &&
      request.argv[2] == kHostKeysScript) {
    int reads = 0;
    {
      std::lock_guard lock(mu_);
      auto it = domains_.find(std::string(name));
      if (it == domains_.end()) return not_found("no domain", std::string(name));
      reads = ++it->second.host_key_reads;
    }
    GuestExecResult r;
    r.exit_code = 0;
    if (host_keys_output) {
      r.out = host_keys_output(std::string(name));
    } else if (host_key_reads_until_ready > 0 && reads >= host_key_reads_until_ready) {
      r.out = host_key_of(std::string(name)) + " root@" + std::string(name) + "\n";
    }
    return r;
  }
  {
    std::lock_guard lock(mu_);
    if (!domains_.count(std::string(name))) return not_found("no domain", std::string(name));
    std::string line = std::string(name) + ":";
    for (const std::string& a : request.argv) line += " " + a;
    execs_.push_back(std::move(line));
  }
  if (exec_handler) {
    if (auto answer = exec_handler(request.argv)) return *answer;
  }
  GuestExecResult r;
  r.exit_code = 0;
  for (const std::string& a : request.argv) r.out += a + " ";
  return r;
}

Result<int64_t> FakeHypervisor::exec_start(std::string_view name, const GuestExecRequest& request) {
  std::lock_guard lock(mu_);
  if (!domains_.count(std::string(name))) return not_found("no domain", std::string(name));
  if (request.argv.empty()) return invalid_argument("argv", "must not be empty");
  std::string line = std::string(name) + ":";
  for (const std::string& a : request.argv) line += " " + a;
  execs_.push_back(std::move(line));
  const int64_t pid = next_pid_++;
  processes_[pid] = Process{std::string(name), request.env, std::nullopt};
  return pid;
}

Result<std::optional<GuestExecResult>> FakeHypervisor::exec_status(std::string_view name,
                                                                   int64_t pid) {
  std::lock_guard lock(mu_);
  if (!domains_.count(std::string(name))) return not_found("no domain", std::string(name));
  auto it = processes_.find(pid);
  if (it == processes_.end() || it->second.domain != name) {
    return invalid_argument("pid", "no such process " + std::to_string(pid));
  }
  if (!it->second.exit_code) return std::optional<GuestExecResult>();
  GuestExecResult r;
  r.exit_code = *it->second.exit_code;
  processes_.erase(it);  // as qemu-ga: an exited process is reported once
  return std::optional<GuestExecResult>(r);
}

bool FakeHypervisor::finish_process(int64_t pid, int exit_code) {
  std::lock_guard lock(mu_);
  auto it = processes_.find(pid);
  if (it == processes_.end() || it->second.exit_code) return false;
  it->second.exit_code = exit_code;
  return true;
}

std::vector<int64_t> FakeHypervisor::running_processes() const {
  std::lock_guard lock(mu_);
  std::vector<int64_t> out;
  for (const auto& [pid, p] : processes_) {
    if (!p.exit_code && domains_.count(p.domain)) out.push_back(pid);
  }
  return out;
}

std::vector<std::string> FakeHypervisor::started_env(int64_t pid) const {
  std::lock_guard lock(mu_);
  auto it = processes_.find(pid);
  return it == processes_.end() ? std::vector<std::string>() : it->second.env;
}

Result<std::string> FakeHypervisor::console_log(std::string_view name, size_t) {
  std::lock_guard lock(mu_);
  if (!files_.count(std::string(name))) return not_found("no console log", std::string(name));
  return std::string("[    0.000000] Booting Linux on physical CPU 0x0\n");
}

void FakeHypervisor::set_event_handler(std::function<void(const VmEvent&)> handler) {
  std::lock_guard lock(mu_);
  handler_ = std::move(handler);
}

Result<std::vector<VmCounters>> FakeHypervisor::vm_counters(const std::vector<std::string>& names) {
  for (const std::string& n : names) ARMHIVE_RETURN_IF_ERROR(validate_domain_name(n));
  std::lock_guard lock(mu_);
  counter_requests_.push_back(names);
  std::vector<VmCounters> out;
  for (const std::string& n : names) {
    auto it = domains_.find(n);
    if (it != domains_.end()) out.push_back({n, it->second.counters});
  }
  return out;
}

bool FakeHypervisor::add_usage(const std::string& name, std::chrono::nanoseconds cpu,
                               uint64_t disk_write, uint64_t net_rx, uint64_t net_tx) {
  std::lock_guard lock(mu_);
  auto it = domains_.find(name);
  if (it == domains_.end()) return false;
  UsageCounters& c = it->second.counters;
  c.cpu_ns = c.cpu_ns.value_or(0) + static_cast<uint64_t>(cpu.count());
  c.disk_write_bytes = c.disk_write_bytes.value_or(0) + disk_write;
  c.net_rx_bytes = c.net_rx_bytes.value_or(0) + net_rx;
  c.net_tx_bytes = c.net_tx_bytes.value_or(0) + net_tx;
  return true;
}

bool FakeHypervisor::set_rss(const std::string& name, uint64_t bytes) {
  std::lock_guard lock(mu_);
  auto it = domains_.find(name);
  if (it == domains_.end()) return false;
  it->second.counters.rss_bytes = bytes;
  return true;
}

bool FakeHypervisor::restart_qemu(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = domains_.find(name);
  if (it == domains_.end()) return false;
  it->second.counters = UsageCounters{next_run_id_++, 0, it->second.counters.rss_bytes, 0, 0, 0};
  return true;
}

bool FakeHypervisor::set_counters(const std::string& name, const UsageCounters& counters) {
  std::lock_guard lock(mu_);
  auto it = domains_.find(name);
  if (it == domains_.end()) return false;
  it->second.counters = counters;
  return true;
}

int FakeHypervisor::counter_calls() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(counter_requests_.size());
}

std::vector<std::vector<std::string>> FakeHypervisor::counter_requests() const {
  std::lock_guard lock(mu_);
  return counter_requests_;
}

void FakeHypervisor::crash(const std::string& name) {
  std::function<void(const VmEvent&)> handler;
  {
    std::lock_guard lock(mu_);
    domains_.erase(name);
    handler = handler_;
  }
  if (handler) handler({name, VmEventKind::kCrashed, "killed"});
}

void FakeHypervisor::add_orphan(const std::string& name) {
  std::lock_guard lock(mu_);
  VmSpec spec;
  spec.name = name;
  spec.vm_id = "vm-orphan";
  spec.pool = "ci";
  domains_[name] = Domain{spec, {}, 0, {}, {}};
  files_.insert(name);
}

void FakeHypervisor::add_stray_files(const std::string& name) {
  std::lock_guard lock(mu_);
  files_.insert(name);
}

void FakeHypervisor::repin(const std::string& name, std::vector<int> pins) {
  std::lock_guard lock(mu_);
  domains_.at(name).spec.vcpu_pins = std::move(pins);
}

std::vector<std::string> FakeHypervisor::execs() const {
  std::lock_guard lock(mu_);
  return execs_;
}

bool FakeHypervisor::saw(const std::string& needle) const { return index_of(needle) != SIZE_MAX; }

size_t FakeHypervisor::index_of(const std::string& needle) const {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < execs_.size(); ++i) {
    if (execs_[i].find(needle) != std::string::npos) return i;
  }
  return SIZE_MAX;
}

std::map<std::string, FakeHypervisor::Domain> FakeHypervisor::domains() const {
  std::lock_guard lock(mu_);
  return domains_;
}

std::set<std::string> FakeHypervisor::files() const {
  std::lock_guard lock(mu_);
  return files_;
}

int FakeHypervisor::creates() const {
  std::lock_guard lock(mu_);
  return creates_;
}

}  // namespace armhive
