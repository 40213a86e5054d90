#include "daemon/core/pool_reload.h"

#include <map>
#include <sstream>

namespace armhive {
namespace {

std::string text(const std::string& v) { return "'" + v + "'"; }
std::string text(int v) { return std::to_string(v); }
std::string text(uint64_t v) { return std::to_string(v); }
std::string text(bool v) { return v ? "true" : "false"; }
std::string text(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}
std::string text(CpuPolicy v) { return v == CpuPolicy::kDedicated ? "dedicated" : "shared"; }
std::string text(const std::map<std::string, std::string>& labels) {
  std::string out = "{";
  for (const auto& [k, v] : labels) out += (out.size() > 1 ? ", " : "") + k + " = " + v;
  return out + "}";
}
std::string text(const HealthScheduleConfig& h) {
  return h.every.count() == 0 ? "off"
                              : "every " + std::to_string(h.every.count()) + " s " + h.suite;
}

bool same(const HealthScheduleConfig& a, const HealthScheduleConfig& b) {
  return a.every == b.every && a.suite == b.suite && a.runs_kept == b.runs_kept &&
         a.band_mads == b.band_mads;
}
bool same(const FilePolicy& a, const FilePolicy& b) {
  return a.max_bytes == b.max_bytes && a.path_prefix == b.path_prefix;
}

// The shape of the running VMs: kept, and a change named.
void compare_shape(const PoolConfig& run, const PoolConfig& next, std::vector<std::string>& out) {
  auto shape = [&](const char* key, const std::string& from, const std::string& to) {
    if (from != to) {
      out.push_back("pool " + run.name + ": " + key + " " + from + " -> " + to +
                    " needs a restart (the running VMs have the old one; VMs keep running "
                    "across it)");
    }
  };
  shape("image", text(run.image), text(next.image));
  shape("vcpus", text(run.vcpus), text(next.vcpus));
  shape("memory_mib", text(run.memory_mib), text(next.memory_mib));
  shape("disk_gib", text(run.disk_gib), text(next.disk_gib));
  shape("network", text(run.network), text(next.network));
  shape("mtu", text(run.mtu), text(next.mtu));
  shape("cpu_policy", text(run.cpu_policy), text(next.cpu_policy));
  shape("overcommit", text(run.overcommit), text(next.overcommit));
  shape("host_labels", text(run.host_labels), text(next.host_labels));
  shape("ssh", text(run.ssh), text(next.ssh));
  if (!same(run.health, next.health)) {
    shape("health", text(run.health), text(next.health));
  }
}

// The values that change in place: taken from `next` into `out`, each changed key named.
std::vector<std::string> take_in_place(const PoolConfig& next, PoolConfig& out) {
  std::vector<std::string> changed;
  auto take = [&changed](const char* key, auto& field, const auto& value, bool differs) {
    if (!differs) return;
    field = value;
    changed.emplace_back(key);
  };
  // An auto pool's min_warm is its running target, not configuration: only the switch between
  // a fixed number and "auto", a fixed number, or the auto bounds are changes.
  const bool auto_changed =
      out.auto_warm.has_value() != next.auto_warm.has_value() ||
      (out.auto_warm &&
       (out.auto_warm->auto_min != next.auto_warm->auto_min ||
        out.auto_warm->auto_max != next.auto_warm->auto_max ||
        out.auto_warm->scale_to_zero_after != next.auto_warm->scale_to_zero_after ||
        out.auto_warm->burst_every != next.auto_warm->burst_every));
  take("min_warm", out.auto_warm, next.auto_warm, auto_changed);
  if (!next.auto_warm) {
    take("min_warm", out.min_warm, next.min_warm, out.min_warm != next.min_warm && !auto_changed);
    if (auto_changed) out.min_warm = next.min_warm;
  }
  take("max", out.max, next.max, out.max != next.max);
  take("max_starting", out.max_starting, next.max_starting, out.max_starting != next.max_starting);
  take("default_ttl", out.default_ttl, next.default_ttl, out.default_ttl != next.default_ttl);
  take("max_ttl", out.max_ttl, next.max_ttl, out.max_ttl != next.max_ttl);
  take("labels", out.labels, next.labels, out.labels != next.labels);
  take("access_ports", out.access_ports, next.access_ports, out.access_ports != next.access_ports);
  take("max_extra_ports", out.max_extra_ports, next.max_extra_ports,
       out.max_extra_ports != next.max_extra_ports);
  take("files", out.files, next.files, !same(out.files, next.files));
  take("ssh_permissions", out.ssh_permissions, next.ssh_permissions,
       out.ssh_permissions != next.ssh_permissions);
  return changed;
}

}  // namespace

PoolReload plan_pool_reload(const std::vector<PoolConfig>& running,
                            const std::vector<PoolConfig>& next) {
  PoolReload plan;
  std::map<std::string, const PoolConfig*> next_by_name;
  for (const PoolConfig& p : next) next_by_name[p.name] = &p;
  std::map<std::string, const PoolConfig*> running_by_name;
  for (const PoolConfig& p : running) running_by_name[p.name] = &p;
  for (const PoolConfig& run : running) {
    auto it = next_by_name.find(run.name);
    if (it == next_by_name.end()) {
      plan.changes.push_back({PoolChange::Kind::kRemove, run, {}});
      continue;
    }
    compare_shape(run, *it->second, plan.restart_needed);
    PoolConfig updated = run;
    std::vector<std::string> changed = take_in_place(*it->second, updated);
    if (!changed.empty()) {
      plan.changes.push_back({PoolChange::Kind::kUpdate, std::move(updated), std::move(changed)});
    }
  }
  for (const PoolConfig& p : next) {
    if (!running_by_name.count(p.name)) plan.changes.push_back({PoolChange::Kind::kAdd, p, {}});
  }
  return plan;
}

}  // namespace armhive
