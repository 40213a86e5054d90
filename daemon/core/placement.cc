#include "daemon/core/placement.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>
#include <tuple>
#include <utility>

namespace armhive {
namespace {

std::string join_ints(const std::set<int>& values) {
  std::string out;
  for (int v : values) {
    if (!out.empty()) out += ',';
    out += std::to_string(v);
  }
  return out;
}

std::string format_ratio(double r) {
  std::string s = std::to_string(r);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

int shared_capacity(size_t shared_cpus, double overcommit) {
  return static_cast<int>(std::floor(overcommit * static_cast<double>(shared_cpus) + 1e-9));
}

}  // namespace

std::string_view to_string(PlacementStrategy s) {
  return s == PlacementStrategy::kSpread ? "spread" : "pack";
}

std::optional<PlacementStrategy> placement_strategy_from_string(std::string_view s) {
  if (s == "pack") return PlacementStrategy::kPack;
  if (s == "spread") return PlacementStrategy::kSpread;
  return std::nullopt;
}

Status compare_recorded_pins(const std::string& vm_name, const std::vector<int>& recorded,
                             const std::vector<int>& running) {
  const std::set<int> rec(recorded.begin(), recorded.end());
  const std::set<int> run(running.begin(), running.end());
  if (rec == run) return Status::ok();
  std::vector<int> only_rec;
  std::vector<int> only_run;
  std::set_difference(rec.begin(), rec.end(), run.begin(), run.end(), std::back_inserter(only_rec));
  std::set_difference(run.begin(), run.end(), rec.begin(), rec.end(), std::back_inserter(only_run));
  std::string msg = "recorded CPUs " + format_cpu_list(recorded) +
                    " disagree with the running "
                    "domain's pins " +
                    format_cpu_list(running);
  if (!only_rec.empty()) msg += "; only recorded: " + format_cpu_list(only_rec);
  if (!only_run.empty()) msg += "; only running: " + format_cpu_list(only_run);
  return conflict(msg, vm_name);
}

std::string_view to_string(CpuRole r) {
  switch (r) {
    case CpuRole::kHousekeeping:
      return "housekeeping";
    case CpuRole::kDedicated:
      return "dedicated";
    case CpuRole::kShared:
      return "shared";
    case CpuRole::kUnassigned:
      return "unassigned";
  }
  return "unassigned";
}

CpuList Placement::cpus() const {
  std::set<int> s(vcpu_pins.begin(), vcpu_pins.end());
  return CpuList(s.begin(), s.end());
}

Result<CoreAllocator> CoreAllocator::create(HostTopology topology, CpuSets sets) {
  CpuSetsConfig relaxed;
  relaxed.dedicated_pools = false;
  relaxed.shared_pools = false;
  ARMHIVE_RETURN_IF_ERROR(validate_cpu_sets(topology, sets, relaxed));
  std::set<int> ids;
  for (const HostCpu& c : topology.cpus) {
    if (!ids.insert(c.id).second) {
      return invalid_argument("topology", "CPU " + std::to_string(c.id) + " listed twice");
    }
  }
  return CoreAllocator(std::move(topology), std::move(sets));
}

CoreAllocator::CoreAllocator(HostTopology topology, CpuSets sets)
    : topology_(std::move(topology)), sets_(std::move(sets)) {
  std::map<std::pair<int, int>, Group> groups;
  for (const HostCpu& c : topology_.cpus) {
    node_of_cpu_[c.id] = c.numa_node;
    if (!sets_.is_dedicated(c.id)) continue;
    // An unknown cluster (-1) groups the whole node.
    Group& g = groups[{c.numa_node, c.cluster}];
    g.node = c.numa_node;
    g.cluster = c.cluster;
    g.cpus.push_back(c.id);
  }
  for (auto& [key, g] : groups) {
    std::sort(g.cpus.begin(), g.cpus.end());
    groups_.push_back(std::move(g));
  }
}

int CoreAllocator::node_of(int cpu) const {
  auto it = node_of_cpu_.find(cpu);
  return it == node_of_cpu_.end() ? 0 : it->second;
}

int CoreAllocator::free_in(const Group& g) const {
  int n = 0;
  for (int c : g.cpus) n += dedicated_owner_.contains(c) ? 0 : 1;
  return n;
}

int CoreAllocator::free_dedicated() const {
  return static_cast<int>(sets_.dedicated.size() - dedicated_owner_.size());
}

int CoreAllocator::shared_vcpus_in_use() const {
  int n = 0;
  for (const auto& [cpu, vms] : shared_load_) {
    for (const auto& [vm, count] : vms) n += count;
  }
  return n;
}

const Placement* CoreAllocator::find(const std::string& vm_name) const {
  auto it = vms_.find(vm_name);
  return it == vms_.end() ? nullptr : &it->second;
}

Status CoreAllocator::can_ever_fit(int vcpus, CpuPolicy policy, double overcommit) const {
  const std::string host = topology_.hostname.empty() ? "this host" : "host " + topology_.hostname;
  if (policy == CpuPolicy::kDedicated) {
    if (vcpus > static_cast<int>(sets_.dedicated.size())) {
      return Status(ErrorCode::kUnprocessable,
                    "a " + std::to_string(vcpus) + "-vCPU dedicated VM can never fit: " + host +
                        " has " + std::to_string(sets_.dedicated.size()) + " dedicated CPUs (" +
                        format_cpu_list(sets_.dedicated) + ")");
    }
    return Status::ok();
  }
  if (sets_.shared.empty()) {
    return Status(ErrorCode::kUnprocessable,
                  "shared-CPU VMs can never fit: " + host + " has no shared CPU set");
  }
  if (vcpus > static_cast<int>(sets_.shared.size())) {
    return Status(ErrorCode::kUnprocessable,
                  "a " + std::to_string(vcpus) +
                      "-vCPU shared VM can never fit: the shared set of " + host + " has " +
                      std::to_string(sets_.shared.size()) +
                      " CPUs and a VM gets a distinct CPU per vCPU");
  }
  int capacity = shared_capacity(sets_.shared.size(), overcommit);
  if (vcpus > capacity) {
    return Status(ErrorCode::kUnprocessable,
                  "a " + std::to_string(vcpus) + "-vCPU shared VM can never fit: " +
                      std::to_string(sets_.shared.size()) + " shared CPUs x overcommit " +
                      format_ratio(overcommit) + " = " + std::to_string(capacity) + " vCPUs");
  }
  return Status::ok();
}

Result<Placement> CoreAllocator::allocate(const PlacementRequest& request) {
  if (request.vm_name.empty()) return invalid_argument("vm_name", "must not be empty");
  if (request.vcpus < 1) {
    return invalid_argument("vcpus", "must be at least 1, got " + std::to_string(request.vcpus));
  }
  if (request.policy == CpuPolicy::kShared &&
      !(std::isfinite(request.overcommit) && request.overcommit > 0)) {
    return invalid_argument("overcommit", "must be a positive number");
  }
  if (vms_.contains(request.vm_name)) {
    return conflict("VM already holds CPUs " + format_cpu_list(vms_.at(request.vm_name).vcpu_pins),
                    request.vm_name);
  }
  ARMHIVE_RETURN_IF_ERROR(can_ever_fit(request.vcpus, request.policy, request.overcommit));
  Result<Placement> placed = request.policy == CpuPolicy::kDedicated ? allocate_dedicated(request)
                                                                     : allocate_shared(request);
  if (placed.is_ok()) vms_[request.vm_name] = placed.value();
  return placed;
}

Result<Placement> CoreAllocator::allocate_dedicated(const PlacementRequest& request) {
  const int n = request.vcpus;
  const int total = static_cast<int>(sets_.dedicated.size());
  const int free = free_dedicated();
  if (n > free) {
    return Status(ErrorCode::kResourceExhausted,
                  "no free dedicated cores: " + std::to_string(total - free) + " of " +
                      std::to_string(total) + " in use, " + std::to_string(n) + " needed",
                  request.vm_name);
  }
  // Free CPUs per node, and whether one group there can take the whole VM.
  std::map<int, int> node_free;
  std::map<int, bool> node_one_group;
  for (const Group& g : groups_) {
    int f = free_in(g);
    node_free[g.node] += f;
    if (f >= n) node_one_group[g.node] = true;
  }
  std::optional<int> best;
  for (const auto& [node, f] : node_free) {
    if (f < n) continue;
    if (!best) {
      best = node;
      continue;
    }
    int bf = node_free[*best];
    if (request.strategy == PlacementStrategy::kPack) {
      // Best fit: a node where one cluster takes it all, then the fewest free CPUs.
      auto key = [&](int nd) { return std::make_tuple(!node_one_group[nd], node_free[nd]); };
      if (key(node) < key(*best)) best = node;
    } else if (f > bf) {
      best = node;
    }
  }

  Placement p;
  p.vm_name = request.vm_name;
  p.policy = CpuPolicy::kDedicated;
  if (best) {
    p.vcpu_pins = pick_in_node(*best, n, request.strategy);
    p.numa_node = *best;
  } else {
    // No node fits: take from the nodes with the most free CPUs first, so the VM spans as few
    // nodes as possible.
    std::vector<std::pair<int, int>> order;  // (free, node)
    order.reserve(node_free.size());
    for (const auto& [node, f] : node_free) order.emplace_back(f, node);
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    int remaining = n;
    std::set<int> spanned;
    for (const auto& [f, node] : order) {
      if (remaining == 0) break;
      int take = std::min(f, remaining);
      if (take == 0) continue;
      std::vector<int> got = pick_in_node(node, take, request.strategy);
      p.vcpu_pins.insert(p.vcpu_pins.end(), got.begin(), got.end());
      remaining -= take;
      spanned.insert(node);
    }
    p.note = "spans NUMA nodes " + join_ints(spanned) + ": no single node had " +
             std::to_string(n) + " free cores (most free: " + std::to_string(order.front().first) +
             " on node " + std::to_string(order.front().second) + ")";
  }
  std::sort(p.vcpu_pins.begin(), p.vcpu_pins.end());
  if (static_cast<int>(p.vcpu_pins.size()) != n) {
    return internal_error("placement picked " + std::to_string(p.vcpu_pins.size()) + " CPUs for " +
                              std::to_string(n) + " vCPUs",
                          request.vm_name);
  }
  for (int c : p.vcpu_pins) dedicated_owner_[c] = request.vm_name;
  p.emulator_cpus = emulator_cpus_for(p.vcpu_pins);
  if (p.numa_node) {
    std::set<int> clusters;
    for (int c : p.vcpu_pins) {
      const HostCpu* hc = topology_.cpu(c);
      if (hc != nullptr && hc->cluster >= 0) clusters.insert(hc->cluster);
    }
    p.note = "NUMA node " + std::to_string(*p.numa_node);
    if (!clusters.empty()) p.note += ", L2 clusters " + join_ints(clusters);
    p.note += " (" + std::string(to_string(request.strategy)) + ")";
  }
  return p;
}

std::vector<int> CoreAllocator::pick_in_node(int node, int count,
                                             PlacementStrategy strategy) const {
  struct Candidate {
    size_t order = 0;  // position in groups_ (node, cluster order)
    CpuList free;
    bool whole = false;
  };
  std::vector<Candidate> cands;
  for (size_t i = 0; i < groups_.size(); ++i) {
    const Group& g = groups_[i];
    if (g.node != node) continue;
    Candidate c;
    c.order = i;
    for (int cpu : g.cpus) {
      if (!dedicated_owner_.contains(cpu)) c.free.push_back(cpu);
    }
    c.whole = c.free.size() == g.cpus.size();
    if (!c.free.empty()) cands.push_back(std::move(c));
  }
  std::vector<int> out;
  int remaining = count;
  if (strategy == PlacementStrategy::kSpread) {
    // Most free groups first; one CPU from each in turn.
    std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
      return a.free.size() > b.free.size();
    });
    for (size_t round = 0; remaining > 0; ++round) {
      bool took = false;
      for (const Candidate& c : cands) {
        if (remaining == 0) break;
        if (round < c.free.size()) {
          out.push_back(c.free[round]);
          --remaining;
          took = true;
        }
      }
      if (!took) break;
    }
    return out;
  }
  // Pack: while no single group can take the rest, empty the fullest group (broken groups
  // first on ties); then finish in the best-fitting group (fewest free, broken first).
  while (remaining > 0 && !cands.empty()) {
    auto best_fit = cands.end();
    for (auto it = cands.begin(); it != cands.end(); ++it) {
      if (static_cast<int>(it->free.size()) < remaining) continue;
      if (best_fit == cands.end() ||
          std::make_tuple(it->free.size(), it->whole, it->order) <
              std::make_tuple(best_fit->free.size(), best_fit->whole, best_fit->order)) {
        best_fit = it;
      }
    }
    if (best_fit != cands.end()) {
      out.insert(out.end(), best_fit->free.begin(), best_fit->free.begin() + remaining);
      remaining = 0;
      break;
    }
    auto largest = cands.begin();
    for (auto it = cands.begin(); it != cands.end(); ++it) {
      if (std::make_tuple(-static_cast<int>(it->free.size()), it->whole, it->order) <
          std::make_tuple(-static_cast<int>(largest->free.size()), largest->whole,
                          largest->order)) {
        largest = it;
      }
    }
    out.insert(out.end(), largest->free.begin(), largest->free.end());
    remaining -= static_cast<int>(largest->free.size());
    cands.erase(largest);
  }
  return out;
}

CpuList CoreAllocator::emulator_cpus_for(const std::vector<int>& cpus) const {
  std::set<int> nodes;
  for (int c : cpus) nodes.insert(node_of(c));
  CpuList local;
  for (int h : sets_.housekeeping) {
    if (nodes.contains(node_of(h))) local.push_back(h);
  }
  return local.empty() ? sets_.housekeeping : local;
}

Result<Placement> CoreAllocator::allocate_shared(const PlacementRequest& request) {
  const int n = request.vcpus;
  const int capacity = shared_capacity(sets_.shared.size(), request.overcommit);
  const int used = shared_vcpus_in_use();
  if (used + n > capacity) {
    return Status(ErrorCode::kResourceExhausted,
                  "shared CPUs full: " + std::to_string(used) + " of " + std::to_string(capacity) +
                      " vCPU slots in use (" + std::to_string(sets_.shared.size()) +
                      " shared CPUs x overcommit " + format_ratio(request.overcommit) + "), " +
                      std::to_string(n) + " needed",
                  request.vm_name);
  }
  // Round-robin over the least-loaded shared CPUs: distinct CPUs, lowest load first.
  std::vector<std::pair<int, int>> by_load;  // (load, cpu)
  for (int c : sets_.shared) {
    int load = 0;
    auto it = shared_load_.find(c);
    if (it != shared_load_.end()) {
      for (const auto& [vm, count] : it->second) load += count;
    }
    by_load.emplace_back(load, c);
  }
  std::sort(by_load.begin(), by_load.end());
  Placement p;
  p.vm_name = request.vm_name;
  p.policy = CpuPolicy::kShared;
  std::set<int> nodes;
  for (int i = 0; i < n; ++i) {
    int cpu = by_load[static_cast<size_t>(i)].second;
    p.vcpu_pins.push_back(cpu);
    shared_load_[cpu][request.vm_name] += 1;
    nodes.insert(node_of(cpu));
  }
  if (nodes.size() == 1) p.numa_node = *nodes.begin();
  p.emulator_cpus = emulator_cpus_for(p.vcpu_pins);
  p.note = "shared CPUs " + format_cpu_list(p.vcpu_pins) + ", " + std::to_string(used + n) +
           " of " + std::to_string(capacity) + " shared vCPU slots in use";
  if (nodes.size() > 1) p.note += "; spans NUMA nodes " + join_ints(nodes);
  return p;
}

Status CoreAllocator::release(const std::string& vm_name) {
  auto it = vms_.find(vm_name);
  if (it == vms_.end()) return not_found("VM holds no CPUs", vm_name);
  for (auto o = dedicated_owner_.begin(); o != dedicated_owner_.end();) {
    o = o->second == vm_name ? dedicated_owner_.erase(o) : std::next(o);
  }
  for (auto l = shared_load_.begin(); l != shared_load_.end();) {
    l->second.erase(vm_name);
    l = l->second.empty() ? shared_load_.erase(l) : std::next(l);
  }
  vms_.erase(it);
  return Status::ok();
}

Status CoreAllocator::adopt(const std::string& vm_name, const std::vector<int>& vcpu_pins,
                            CpuPolicy policy) {
  if (vm_name.empty()) return invalid_argument("vm_name", "must not be empty");
  if (vcpu_pins.empty()) {
    return invalid_argument("vcpu_pins", "VM " + vm_name + " has no pinned vCPUs to adopt");
  }
  if (vms_.contains(vm_name)) return conflict("VM is already recorded", vm_name);
  std::vector<std::string> problems;
  std::vector<int> claimed;
  for (size_t i = 0; i < vcpu_pins.size(); ++i) {
    const int cpu = vcpu_pins[i];
    const std::string where = "vCPU " + std::to_string(i) + " on CPU " + std::to_string(cpu);
    if (topology_.cpu(cpu) == nullptr) {
      problems.push_back(where + ": no such CPU on this host");
      continue;
    }
    const CpuRole role = sets_.is_housekeeping(cpu) ? CpuRole::kHousekeeping
                         : sets_.is_dedicated(cpu)  ? CpuRole::kDedicated
                         : sets_.is_shared(cpu)     ? CpuRole::kShared
                                                    : CpuRole::kUnassigned;
    const CpuRole wanted = policy == CpuPolicy::kDedicated ? CpuRole::kDedicated : CpuRole::kShared;
    if (role != wanted) {
      problems.push_back(where + ": outside the " + std::string(to_string(wanted)) +
                         " set (it is " + std::string(to_string(role)) + ")");
      continue;
    }
    if (policy == CpuPolicy::kShared) {
      shared_load_[cpu][vm_name] += 1;
      claimed.push_back(cpu);
      continue;
    }
    auto owner = dedicated_owner_.find(cpu);
    if (owner != dedicated_owner_.end()) {
      problems.push_back(where + ": double-booked, already held by " +
                         (owner->second == vm_name ? "another vCPU of this VM" : owner->second));
      continue;
    }
    dedicated_owner_[cpu] = vm_name;
    claimed.push_back(cpu);
  }
  Placement p;
  p.vm_name = vm_name;
  p.policy = policy;
  p.vcpu_pins = vcpu_pins;
  std::set<int> nodes;
  for (int c : claimed) nodes.insert(node_of(c));
  if (nodes.size() == 1) p.numa_node = *nodes.begin();
  p.emulator_cpus = emulator_cpus_for(claimed);
  p.note = problems.empty() ? "adopted from the running domain"
                            : "adopted with conflicts; holds only CPUs " + format_cpu_list(claimed);
  vms_[vm_name] = std::move(p);
  if (problems.empty()) return Status::ok();
  std::string msg = "pins of the running domain conflict: ";
  for (size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
  return conflict(msg, vm_name);
}

std::vector<CpuUsage> CoreAllocator::usage() const {
  std::vector<CpuUsage> out;
  for (const HostCpu& c : topology_.cpus) {
    CpuUsage u;
    u.cpu = c.id;
    if (sets_.is_housekeeping(c.id)) {
      u.role = CpuRole::kHousekeeping;
    } else if (sets_.is_dedicated(c.id)) {
      u.role = CpuRole::kDedicated;
      auto it = dedicated_owner_.find(c.id);
      if (it != dedicated_owner_.end()) {
        u.vms.push_back(it->second);
        u.vcpus = 1;
      }
    } else if (sets_.is_shared(c.id)) {
      u.role = CpuRole::kShared;
      auto it = shared_load_.find(c.id);
      if (it != shared_load_.end()) {
        for (const auto& [vm, count] : it->second) {
          u.vms.push_back(vm);
          u.vcpus += count;
        }
      }
    }
    out.push_back(std::move(u));
  }
  std::sort(out.begin(), out.end(),
            [](const CpuUsage& a, const CpuUsage& b) { return a.cpu < b.cpu; });
  return out;
}

double CoreAllocator::fragmentation() const {
  int free_total = 0;
  int free_broken = 0;
  for (const Group& g : groups_) {
    int f = free_in(g);
    free_total += f;
    if (f > 0 && f < static_cast<int>(g.cpus.size())) free_broken += f;
  }
  return free_total == 0 ? 0.0 : static_cast<double>(free_broken) / free_total;
}

}  // namespace armhive
