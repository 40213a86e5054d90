#include "daemon/core/fleet.h"

#include <algorithm>
#include <tuple>

namespace armhive {
namespace {

std::string format_labels(const std::map<std::string, std::string>& labels) {
  std::string out;
  for (const auto& [k, v] : labels) {
    if (!out.empty()) out += ",";
    out += k + "=" + v;
  }
  return out;
}

// "; "-joined reasons of the hosts that refused, for one error message.
std::string join_reasons(const std::vector<HostVerdict>& verdicts) {
  std::string out;
  for (const HostVerdict& v : verdicts) {
    if (v.status.is_ok()) continue;
    if (!out.empty()) out += "; ";
    out += v.host + ": " + v.status.message();
  }
  return out;
}

}  // namespace

bool labels_match(const std::map<std::string, std::string>& wanted,
                  const std::map<std::string, std::string>& have) {
  for (const auto& [k, v] : wanted) {
    auto it = have.find(k);
    if (it == have.end() || it->second != v) return false;
  }
  return true;
}

FleetRequest fleet_request_for(const PoolConfig& pool, std::string vm_name,
                               PlacementStrategy strategy) {
  FleetRequest r;
  r.vm_name = std::move(vm_name);
  r.pool = pool.name;
  r.image = pool.image;
  r.host_labels = pool.host_labels;
  r.vcpus = pool.vcpus;
  r.policy = pool.cpu_policy;
  r.overcommit = pool.overcommit;
  r.strategy = strategy;
  return r;
}

Status Fleet::add_host(const FleetHostSpec& spec, CoreAllocator cores, TimePoint now) {
  ARMHIVE_RETURN_IF_ERROR(validate_name("name", spec.name));
  ARMHIVE_RETURN_IF_ERROR(validate_labels("labels", spec.labels));
  if (hosts_.count(spec.name)) return conflict("a host of this name exists", spec.name);
  Slot slot{FleetHostState{}, std::move(cores)};
  slot.state.name = spec.name;
  slot.state.labels = spec.labels;
  slot.state.health = HostHealthTracker(now);
  hosts_.emplace(spec.name, std::move(slot));
  return Status::ok();
}

Status Fleet::remove_host(const std::string& name) {
  auto it = hosts_.find(name);
  if (it == hosts_.end()) return not_found("no such host", name);
  if (!it->second.state.vm_pool.empty()) {
    return conflict("the host still runs " + std::to_string(it->second.state.vm_pool.size()) +
                        " VM(s): drain first",
                    name);
  }
  hosts_.erase(it);
  return Status::ok();
}

HostHealthTracker* Fleet::health(const std::string& name) {
  auto it = hosts_.find(name);
  return it == hosts_.end() ? nullptr : &it->second.state.health;
}

Status Fleet::set_image(const std::string& host, const std::string& image, bool present) {
  auto it = hosts_.find(host);
  if (it == hosts_.end()) return not_found("no such host", host);
  if (present) {
    it->second.state.images.insert(image);
  } else {
    it->second.state.images.erase(image);
  }
  return Status::ok();
}

Status Fleet::usable(const Slot& slot, const FleetRequest& request) const {
  const FleetHostState& s = slot.state;
  if (!labels_match(request.host_labels, s.labels)) {
    return Status(ErrorCode::kUnprocessable,
                  "labels do not match " + format_labels(request.host_labels), s.name);
  }
  const std::string& arch = slot.cores.topology().arch;
  if (!request.arch.empty() && arch != request.arch) {
    return Status(ErrorCode::kUnprocessable, "architecture " + arch + ", not " + request.arch,
                  s.name);
  }
  Status fits = slot.cores.can_ever_fit(request.vcpus, request.policy, request.overcommit);
  if (!fits.is_ok()) return Status(ErrorCode::kUnprocessable, fits.message(), s.name);
  if (!takes_new_vms(s.health.health())) {
    return Status(ErrorCode::kResourceExhausted,
                  "host is " + std::string(to_string(s.health.health())), s.name);
  }
  if (auto held = request.held_hosts.find(s.name); held != request.held_hosts.end()) {
    return Status(ErrorCode::kResourceExhausted, held->second, s.name);
  }
  if (!s.images.count(request.image)) {
    return Status(ErrorCode::kResourceExhausted, "image " + request.image + " not on the host yet",
                  s.name);
  }
  // Room now: try on a copy, so the check and place() can never disagree.
  CoreAllocator probe = slot.cores;
  PlacementRequest pr{request.vm_name, request.vcpus, request.policy, request.overcommit,
                      request.strategy};
  auto placed = probe.allocate(pr);
  if (!placed.is_ok()) return Status(placed.status().code(), placed.status().message(), s.name);
  return Status::ok();
}

std::vector<HostVerdict> Fleet::verdicts(const FleetRequest& request) const {
  std::vector<HostVerdict> out;
  for (const auto& [name, slot] : hosts_) out.push_back({name, usable(slot, request)});
  return out;
}

Result<FleetPlacement> Fleet::place(const FleetRequest& request) {
  if (request.vm_name.empty()) return invalid_argument("vm_name", "must not be empty");
  if (request.vcpus < 1) return invalid_argument("vcpus", "must be at least 1");
  if (!(request.overcommit > 0)) return invalid_argument("overcommit", "must be > 0");
  if (vm_host_.count(request.vm_name)) return conflict("VM already placed", request.vm_name);
  std::vector<HostVerdict> all = verdicts(request);
  // Candidates ranked by (not up, VMs of the pool, -free dedicated CPUs, name).
  using Rank = std::tuple<bool, int, int, std::string>;
  std::vector<Rank> ranked;
  bool ever = false;
  for (const HostVerdict& v : all) {
    if (v.status.code() != ErrorCode::kUnprocessable) ever = true;
    if (!v.status.is_ok()) continue;
    const Slot& slot = hosts_.at(v.host);
    int of_pool = 0;
    for (const auto& [vm, pool] : slot.state.vm_pool) of_pool += pool == request.pool ? 1 : 0;
    ranked.emplace_back(slot.state.health.health() != HostHealth::kUp, of_pool,
                        -slot.cores.free_dedicated(), v.host);
  }
  if (ranked.empty()) {
    std::string why = all.empty() ? "the fleet has no hosts" : join_reasons(all);
    return Status(ever ? ErrorCode::kResourceExhausted : ErrorCode::kUnprocessable,
                  "no host can take a VM of pool " + request.pool + " now: " + why,
                  request.vm_name);
  }
  std::sort(ranked.begin(), ranked.end());
  Slot& slot = hosts_.at(std::get<3>(ranked.front()));
  PlacementRequest pr{request.vm_name, request.vcpus, request.policy, request.overcommit,
                      request.strategy};
  auto placed = slot.cores.allocate(pr);
  if (!placed.is_ok()) return placed.status();  // usable() tried the same on a copy
  slot.state.vm_pool[request.vm_name] = request.pool;
  vm_host_[request.vm_name] = slot.state.name;
  return FleetPlacement{slot.state.name, std::move(placed).value()};
}

Status Fleet::adopt(const std::string& host, const std::string& vm_name, const std::string& pool,
                    const std::vector<int>& vcpu_pins, CpuPolicy policy) {
  auto it = hosts_.find(host);
  if (it == hosts_.end()) return not_found("no such host", host);
  if (vm_host_.count(vm_name)) return conflict("VM already placed", vm_name);
  Status st = it->second.cores.adopt(vm_name, vcpu_pins, policy);
  // CoreAllocator records the VM even on kConflict (so nothing else lands on its CPUs).
  if (st.is_ok() || st.code() == ErrorCode::kConflict) {
    if (it->second.cores.find(vm_name)) {
      it->second.state.vm_pool[vm_name] = pool;
      vm_host_[vm_name] = host;
    }
  }
  return st;
}

Status Fleet::release(const std::string& vm_name) {
  auto it = vm_host_.find(vm_name);
  if (it == vm_host_.end()) return not_found("VM not placed", vm_name);
  Slot& slot = hosts_.at(it->second);
  Status st = slot.cores.release(vm_name);
  slot.state.vm_pool.erase(vm_name);
  vm_host_.erase(it);
  return st;
}

std::vector<std::string> Fleet::hosts_matching(
    const std::map<std::string, std::string>& host_labels, const std::string& arch) const {
  std::vector<std::string> out;
  for (const auto& [name, slot] : hosts_) {
    if (!labels_match(host_labels, slot.state.labels)) continue;
    if (!arch.empty() && slot.cores.topology().arch != arch) continue;
    out.push_back(name);
  }
  return out;
}

std::vector<std::string> Fleet::unreachable_past_grace(TimePoint now, Seconds grace) const {
  std::vector<std::string> out;
  for (const auto& [name, slot] : hosts_) {
    if (slot.state.health.past_grace(now, grace)) {
      out.push_back(name);
    }
  }
  return out;
}

std::map<std::string, int> Fleet::pool_counts(const std::string& pool) const {
  std::map<std::string, int> out;
  for (const auto& [name, slot] : hosts_) {
    for (const auto& [vm, p] : slot.state.vm_pool) {
      if (p == pool) ++out[name];
    }
  }
  return out;
}

const std::string* Fleet::host_of(const std::string& vm_name) const {
  auto it = vm_host_.find(vm_name);
  return it == vm_host_.end() ? nullptr : &it->second;
}

const FleetHostState* Fleet::host(const std::string& name) const {
  auto it = hosts_.find(name);
  return it == hosts_.end() ? nullptr : &it->second.state;
}

const CoreAllocator* Fleet::cores(const std::string& name) const {
  auto it = hosts_.find(name);
  return it == hosts_.end() ? nullptr : &it->second.cores;
}

std::vector<std::string> Fleet::host_names() const {
  std::vector<std::string> out;
  for (const auto& [name, slot] : hosts_) out.push_back(name);
  return out;
}

}  // namespace armhive
