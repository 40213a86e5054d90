// JSON forms of the cluster's wire types: pools, hosts (cores, NUMA nodes), events, benchmark
// runs and health (declared in json.h, beside the lease types of json.cc).
#include <vector>

#include "api/json.h"
#include "base/json_reader.h"
#include "base/validation.h"

namespace armhive {
namespace {

using nlohmann::json;

#define AH_TRY(expr) ARMHIVE_RETURN_IF_ERROR(expr)

Status parse_pool(const json& j, const std::string& prefix, PoolDto& p) {
  JsonReader r(j, prefix);
  AH_TRY(r.require_object());
  AH_TRY(r.str("name", p.name, true));
  AH_TRY(r.str("image", p.image));
  AH_TRY(r.integer("vcpus", p.vcpus));
  AH_TRY(r.integer("memory_mib", p.memory_mib));
  AH_TRY(r.integer("disk_gib", p.disk_gib));
  AH_TRY(r.integer("mtu", p.mtu));
  AH_TRY(r.str("cpu_policy", p.cpu_policy));
  AH_TRY(r.integer("min_warm", p.min_warm));
  AH_TRY(r.integer("max", p.max));
  AH_TRY(r.integer("default_ttl_seconds", p.default_ttl_seconds));
  AH_TRY(r.integer("max_ttl_seconds", p.max_ttl_seconds));
  AH_TRY(r.str_map("labels", p.labels));
  AH_TRY(r.integer("warm", p.warm));
  AH_TRY(r.integer("starting", p.starting));
  AH_TRY(r.integer("leased", p.leased));
  AH_TRY(r.integer("pending_leases", p.pending_leases));
  AH_TRY(r.integer("files_max_bytes", p.files_max_bytes));
  AH_TRY(r.str("files_path_prefix", p.files_path_prefix));
  AH_TRY(r.boolean("ssh", p.ssh));
  return Status::ok();
}

Status parse_core(const json& j, const std::string& prefix, CoreDto& c) {
  JsonReader r(j, prefix);
  AH_TRY(r.require_object());
  AH_TRY(r.integer("cpu", c.cpu, true));
  AH_TRY(r.integer("cluster", c.cluster));
  AH_TRY(r.integer("numa_node", c.numa_node));
  AH_TRY(r.str("role", c.role));
  AH_TRY(r.str("lease_id", c.lease_id));
  AH_TRY(r.str("vm", c.vm));
  AH_TRY(r.str("pool", c.pool));
  return Status::ok();
}

Status parse_numa(const json& j, const std::string& prefix, NumaNodeDto& n) {
  JsonReader r(j, prefix);
  AH_TRY(r.require_object());
  AH_TRY(r.integer("id", n.id));
  AH_TRY(r.integer("memory_kib", n.memory_kib));
  AH_TRY(r.int_list("cpus", n.cpus));
  return Status::ok();
}

Status parse_health_result(const json& j, const std::string& prefix, HealthResultDto& h) {
  JsonReader r(j, prefix);
  AH_TRY(r.require_object());
  AH_TRY(r.str("at", h.at));
  AH_TRY(r.str("pool", h.pool));
  AH_TRY(r.str("suite", h.suite));
  AH_TRY(r.str("figure", h.figure));
  AH_TRY(r.str("label", h.label));
  AH_TRY(r.str("unit", h.unit));
  AH_TRY(r.boolean("higher_is_better", h.higher_is_better));
  AH_TRY(r.number("value", h.value));
  AH_TRY(r.str("run_id", h.run_id));
  AH_TRY(r.str("verdict", h.verdict));
  AH_TRY(r.str("reason", h.reason));
  if (const json* b = r.find("band")) {
    JsonReader br(*b, r.field("band") + ".");
    AH_TRY(br.require_object());
    HealthBandDto band;
    AH_TRY(br.integer("n", band.n));
    AH_TRY(br.number("median", band.median));
    AH_TRY(br.number("mad", band.mad));
    AH_TRY(br.number("low", band.low));
    AH_TRY(br.number("high", band.high));
    h.band = band;
  }
  return Status::ok();
}

Status parse_host(const json& j, const std::string& prefix, HostDto& h) {
  JsonReader r(j, prefix);
  AH_TRY(r.require_object());
  AH_TRY(r.str("hostname", h.hostname));
  AH_TRY(r.str("uri", h.uri));
  AH_TRY(r.str_map("labels", h.labels));
  AH_TRY(r.boolean("connected", h.connected));
  AH_TRY(r.str("state", h.state));
  AH_TRY(r.str("unreachable_since", h.unreachable_since));
  AH_TRY(r.str("last_error", h.last_error));
  AH_TRY(r.str("arch", h.arch));
  AH_TRY(r.str("cpu_model", h.cpu_model));
  AH_TRY(r.str("accel", h.accel));
  AH_TRY(r.integer("memory_kib", h.memory_kib));
  AH_TRY(r.objects("numa_nodes", h.numa_nodes, parse_numa));
  if (const json* c = r.find("clusters")) {
    if (!c->is_array()) return invalid_argument(r.field("clusters"), "must be an array");
    h.clusters.clear();
    for (size_t i = 0; i < c->size(); ++i) {
      std::vector<int> cpus;
      const json wrapped = {{"c", (*c)[i]}};  // JsonReader keeps a reference: must outlive it
      JsonReader inner(wrapped, r.field("clusters") + "[" + std::to_string(i) + "]");
      AH_TRY(inner.int_list("c", cpus));
      h.clusters.push_back(std::move(cpus));
    }
  }
  AH_TRY(r.objects("cores", h.cores, parse_core));
  AH_TRY(r.number("fragmentation", h.fragmentation));
  AH_TRY(r.objects("health", h.health, parse_health_result));
  return Status::ok();
}

Status parse_benchmark_run(const json& j, const std::string& prefix, BenchmarkRunDto& b) {
  JsonReader r(j, prefix);
  AH_TRY(r.require_object());
  AH_TRY(r.str("id", b.id, true));
  AH_TRY(r.str("lease_id", b.lease_id));
  AH_TRY(r.str("owner", b.owner));
  AH_TRY(r.str("vm_name", b.vm_name));
  AH_TRY(r.str("pool", b.pool));
  AH_TRY(r.str("host", b.host));
  AH_TRY(r.str("state", b.state, true));
  AH_TRY(r.str("error", b.error));
  AH_TRY(r.str("created_at", b.created_at));
  AH_TRY(r.opt_str("finished_at", b.finished_at));
  if (const json* req = r.find("request")) b.request_json = dump_json(*req);
  if (const json* rep = r.find("report")) b.report_json = dump_json(*rep);
  return Status::ok();
}

template <typename T, typename F>
Result<std::vector<T>> items_from_json(const json& j, F parse) {
  JsonReader r(j, "");
  AH_TRY(r.require_object());
  if (r.find("items") == nullptr) return r.missing("items");
  std::vector<T> out;
  AH_TRY(r.objects("items", out, parse));
  return out;
}

}  // namespace

json to_json(const PoolDto& p) {
  return {{"name", p.name},
          {"image", p.image},
          {"vcpus", p.vcpus},
          {"memory_mib", p.memory_mib},
          {"disk_gib", p.disk_gib},
          {"mtu", p.mtu},
          {"cpu_policy", p.cpu_policy},
          {"min_warm", p.min_warm},
          {"max", p.max},
          {"default_ttl_seconds", p.default_ttl_seconds},
          {"max_ttl_seconds", p.max_ttl_seconds},
          {"labels", p.labels},
          {"warm", p.warm},
          {"starting", p.starting},
          {"leased", p.leased},
          {"pending_leases", p.pending_leases},
          {"files_max_bytes", p.files_max_bytes},
          {"files_path_prefix", p.files_path_prefix},
          {"ssh", p.ssh}};
}

Result<PoolDto> pool_from_json(const json& j) {
  PoolDto p;
  AH_TRY(parse_pool(j, "", p));
  return p;
}

json to_json(const HealthResultDto& h) {
  json band = nullptr;
  if (h.band) {
    band = {{"n", h.band->n},
            {"median", h.band->median},
            {"mad", h.band->mad},
            {"low", h.band->low},
            {"high", h.band->high}};
  }
  return {{"at", h.at},
          {"pool", h.pool},
          {"suite", h.suite},
          {"figure", h.figure},
          {"label", h.label},
          {"unit", h.unit},
          {"higher_is_better", h.higher_is_better},
          {"value", h.value},
          {"run_id", h.run_id},
          {"verdict", h.verdict},
          {"band", std::move(band)},
          {"reason", h.reason}};
}

json to_json(const HostDto& h) {
  json numa = json::array();
  for (const auto& n : h.numa_nodes) {
    numa.push_back({{"id", n.id}, {"memory_kib", n.memory_kib}, {"cpus", n.cpus}});
  }
  json cores = json::array();
  for (const auto& c : h.cores) {
    cores.push_back({{"cpu", c.cpu},
                     {"cluster", c.cluster},
                     {"numa_node", c.numa_node},
                     {"role", c.role},
                     {"lease_id", c.lease_id},
                     {"vm", c.vm},
                     {"pool", c.pool}});
  }
  json health = json::array();
  for (const auto& r : h.health) health.push_back(to_json(r));
  json out = {{"hostname", h.hostname},           {"uri", h.uri},
              {"connected", h.connected},         {"state", h.state},
              {"last_error", h.last_error},       {"arch", h.arch},
              {"cpu_model", h.cpu_model},         {"accel", h.accel},
              {"memory_kib", h.memory_kib},       {"numa_nodes", std::move(numa)},
              {"clusters", h.clusters},           {"cores", std::move(cores)},
              {"fragmentation", h.fragmentation}, {"health", std::move(health)}};
  if (!h.unreachable_since.empty()) out["unreachable_since"] = h.unreachable_since;
  if (!h.labels.empty()) out["labels"] = h.labels;
  return out;
}

Result<HostCreateDto> host_create_from_json(const json& j) {
  HostCreateDto h;
  JsonReader r(j, "");
  AH_TRY(r.require_object());
  AH_TRY(r.only({"name", "libvirt_uri", "labels", "cpus", "l2_clusters", "vm_dir", "image_dir",
                 "network_guard"}));
  AH_TRY(r.str("name", h.name, true));
  AH_TRY(r.str("libvirt_uri", h.libvirt_uri, true));
  AH_TRY(r.str_map("labels", h.labels));
  AH_TRY(r.str_list("l2_clusters", h.l2_clusters));
  AH_TRY(r.str("vm_dir", h.vm_dir));
  AH_TRY(r.str("image_dir", h.image_dir));
  AH_TRY(r.str("network_guard", h.network_guard));
  if (const json* cpus = r.find("cpus")) {
    JsonReader c(*cpus, "cpus");
    AH_TRY(c.require_object());
    AH_TRY(c.only({"housekeeping", "dedicated", "shared"}));
    AH_TRY(c.opt_str("housekeeping", h.housekeeping_cpus));
    AH_TRY(c.opt_str("dedicated", h.dedicated_cpus));
    AH_TRY(c.opt_str("shared", h.shared_cpus));
  }
  return h;
}

json to_json(const HostCreateDto& h) {
  json out = {{"name", h.name}, {"libvirt_uri", h.libvirt_uri}};
  if (!h.labels.empty()) out["labels"] = h.labels;
  json cpus = json::object();
  if (h.housekeeping_cpus) cpus["housekeeping"] = *h.housekeeping_cpus;
  if (h.dedicated_cpus) cpus["dedicated"] = *h.dedicated_cpus;
  if (h.shared_cpus) cpus["shared"] = *h.shared_cpus;
  if (!cpus.empty()) out["cpus"] = cpus;
  if (!h.l2_clusters.empty()) out["l2_clusters"] = h.l2_clusters;
  if (!h.vm_dir.empty()) out["vm_dir"] = h.vm_dir;
  if (!h.image_dir.empty()) out["image_dir"] = h.image_dir;
  if (!h.network_guard.empty()) out["network_guard"] = h.network_guard;
  return out;
}

Result<HostDto> host_from_json(const json& j) {
  HostDto h;
  AH_TRY(parse_host(j, "", h));
  return h;
}

json to_json(const EventDto& e) {
  return {{"seq", e.seq},           {"at", e.at},       {"type", e.type},
          {"lease_id", e.lease_id}, {"vm", e.vm},       {"pool", e.pool},
          {"owner", e.owner},       {"state", e.state}, {"detail", e.detail}};
}

Result<EventDto> event_from_json(const json& j) {
  JsonReader r(j, "");
  AH_TRY(r.require_object());
  EventDto e;
  AH_TRY(r.integer("seq", e.seq, true));
  AH_TRY(r.str("at", e.at));
  AH_TRY(r.str("type", e.type, true));
  AH_TRY(r.str("lease_id", e.lease_id));
  AH_TRY(r.str("vm", e.vm));
  AH_TRY(r.str("pool", e.pool));
  AH_TRY(r.str("owner", e.owner));
  AH_TRY(r.str("state", e.state));
  AH_TRY(r.str("detail", e.detail));
  return e;
}

Result<BenchmarkRunDto> benchmark_run_dto_from_json(const json& j) {
  BenchmarkRunDto b;
  AH_TRY(parse_benchmark_run(j, "", b));
  return b;
}

json to_json(const HealthDto& h) { return {{"status", h.status}, {"version", h.version}}; }

Result<std::vector<PoolDto>> pools_from_json(const json& j) {
  return items_from_json<PoolDto>(j, parse_pool);
}
Result<std::vector<HostDto>> hosts_from_json(const json& j) {
  return items_from_json<HostDto>(j, parse_host);
}
Result<std::vector<BenchmarkRunDto>> benchmark_runs_from_json(const json& j) {
  return items_from_json<BenchmarkRunDto>(j, parse_benchmark_run);
}

}  // namespace armhive
