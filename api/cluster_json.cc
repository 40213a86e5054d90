// JSON forms of the cluster's wire types: pools, hosts (cores, NUMA nodes), events, benchmark
// runs, health and who leads (GET /v1/cluster) (declared in json.h, beside the lease types of
// json.cc).
#include <vector>

#include "api/json.h"
#include "base/json_reader.h"
#include "base/validation.h"

namespace armhive {
namespace {

using nlohmann::json;

Status parse_cluster_leader(const json& j, const std::string& prefix, ClusterLeaderDto& l) {
  JsonReader r(j, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.str("holder", l.holder, true));
  ARMHIVE_RETURN_IF_ERROR(r.str("url", l.url));
  ARMHIVE_RETURN_IF_ERROR(r.integer("epoch", l.epoch));
  return r.str("since", l.since);
}

Status parse_cluster_member(const json& j, const std::string& prefix, ClusterMemberDto& m) {
  JsonReader r(j, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.str("holder", m.holder, true));
  ARMHIVE_RETURN_IF_ERROR(r.str("url", m.url));
  ARMHIVE_RETURN_IF_ERROR(r.str("role", m.role));
  ARMHIVE_RETURN_IF_ERROR(r.str("started_at", m.started_at));
  ARMHIVE_RETURN_IF_ERROR(r.str("last_contact", m.last_contact));
  return r.number("last_contact_age_s", m.last_contact_age_s);
}

Status parse_pool(const json& j, const std::string& prefix, PoolDto& p) {
  JsonReader r(j, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.str("name", p.name, true));
  ARMHIVE_RETURN_IF_ERROR(r.str("image", p.image));
  ARMHIVE_RETURN_IF_ERROR(r.integer("vcpus", p.vcpus));
  ARMHIVE_RETURN_IF_ERROR(r.integer("memory_mib", p.memory_mib));
  ARMHIVE_RETURN_IF_ERROR(r.integer("disk_gib", p.disk_gib));
  ARMHIVE_RETURN_IF_ERROR(r.integer("mtu", p.mtu));
  ARMHIVE_RETURN_IF_ERROR(r.str("cpu_policy", p.cpu_policy));
  ARMHIVE_RETURN_IF_ERROR(r.integer("min_warm", p.min_warm));
  ARMHIVE_RETURN_IF_ERROR(r.integer("max", p.max));
  ARMHIVE_RETURN_IF_ERROR(r.integer("default_ttl_seconds", p.default_ttl_seconds));
  ARMHIVE_RETURN_IF_ERROR(r.integer("max_ttl_seconds", p.max_ttl_seconds));
  ARMHIVE_RETURN_IF_ERROR(r.str_map("labels", p.labels));
  ARMHIVE_RETURN_IF_ERROR(r.integer("warm", p.warm));
  ARMHIVE_RETURN_IF_ERROR(r.integer("starting", p.starting));
  ARMHIVE_RETURN_IF_ERROR(r.integer("leased", p.leased));
  ARMHIVE_RETURN_IF_ERROR(r.integer("pending_leases", p.pending_leases));
  ARMHIVE_RETURN_IF_ERROR(r.integer("files_max_bytes", p.files_max_bytes));
  ARMHIVE_RETURN_IF_ERROR(r.str("files_path_prefix", p.files_path_prefix));
  ARMHIVE_RETURN_IF_ERROR(r.boolean("ssh", p.ssh));
  ARMHIVE_RETURN_IF_ERROR(r.boolean("removed", p.removed));
  if (const json* w = r.find("warm_target")) {
    JsonReader wr(*w, r.field("warm_target"));
    ARMHIVE_RETURN_IF_ERROR(wr.require_object());
    WarmTargetDto t;
    ARMHIVE_RETURN_IF_ERROR(wr.integer("target", t.target, true));
    ARMHIVE_RETURN_IF_ERROR(wr.str("reason", t.reason));
    ARMHIVE_RETURN_IF_ERROR(wr.integer("auto_min", t.auto_min));
    ARMHIVE_RETURN_IF_ERROR(wr.integer("auto_max", t.auto_max));
    ARMHIVE_RETURN_IF_ERROR(wr.number("expected_arrivals", t.expected_arrivals));
    ARMHIVE_RETURN_IF_ERROR(wr.number("rate_per_min", t.rate_per_min));
    ARMHIVE_RETURN_IF_ERROR(wr.integer("run_size", t.run_size));
    ARMHIVE_RETURN_IF_ERROR(wr.number("runs_per_hour", t.runs_per_hour));
    p.warm_target = std::move(t);
  }
  return Status::ok();
}

Status parse_core(const json& j, const std::string& prefix, CoreDto& c) {
  JsonReader r(j, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.integer("cpu", c.cpu, true));
  ARMHIVE_RETURN_IF_ERROR(r.integer("cluster", c.cluster));
  ARMHIVE_RETURN_IF_ERROR(r.integer("numa_node", c.numa_node));
  ARMHIVE_RETURN_IF_ERROR(r.str("role", c.role));
  ARMHIVE_RETURN_IF_ERROR(r.str("lease_id", c.lease_id));
  ARMHIVE_RETURN_IF_ERROR(r.str("vm", c.vm));
  ARMHIVE_RETURN_IF_ERROR(r.str("pool", c.pool));
  return Status::ok();
}

Status parse_numa(const json& j, const std::string& prefix, NumaNodeDto& n) {
  JsonReader r(j, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.integer("id", n.id));
  ARMHIVE_RETURN_IF_ERROR(r.integer("memory_kib", n.memory_kib));
  ARMHIVE_RETURN_IF_ERROR(r.int_list("cpus", n.cpus));
  return Status::ok();
}

Status parse_health_result(const json& j, const std::string& prefix, HealthResultDto& h) {
  JsonReader r(j, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.str("at", h.at));
  ARMHIVE_RETURN_IF_ERROR(r.str("pool", h.pool));
  ARMHIVE_RETURN_IF_ERROR(r.str("suite", h.suite));
  ARMHIVE_RETURN_IF_ERROR(r.str("figure", h.figure));
  ARMHIVE_RETURN_IF_ERROR(r.str("label", h.label));
  ARMHIVE_RETURN_IF_ERROR(r.str("unit", h.unit));
  ARMHIVE_RETURN_IF_ERROR(r.boolean("higher_is_better", h.higher_is_better));
  ARMHIVE_RETURN_IF_ERROR(r.number("value", h.value));
  ARMHIVE_RETURN_IF_ERROR(r.str("run_id", h.run_id));
  ARMHIVE_RETURN_IF_ERROR(r.str("verdict", h.verdict));
  ARMHIVE_RETURN_IF_ERROR(r.str("reason", h.reason));
  if (const json* b = r.find("band")) {
    JsonReader br(*b, r.field("band") + ".");
    ARMHIVE_RETURN_IF_ERROR(br.require_object());
    HealthBandDto band;
    ARMHIVE_RETURN_IF_ERROR(br.integer("n", band.n));
    ARMHIVE_RETURN_IF_ERROR(br.number("median", band.median));
    ARMHIVE_RETURN_IF_ERROR(br.number("mad", band.mad));
    ARMHIVE_RETURN_IF_ERROR(br.number("low", band.low));
    ARMHIVE_RETURN_IF_ERROR(br.number("high", band.high));
    h.band = band;
  }
  return Status::ok();
}

Status parse_host(const json& j, const std::string& prefix, HostDto& h) {
  JsonReader r(j, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.str("hostname", h.hostname));
  ARMHIVE_RETURN_IF_ERROR(r.str("uri", h.uri));
  ARMHIVE_RETURN_IF_ERROR(r.str_map("labels", h.labels));
  ARMHIVE_RETURN_IF_ERROR(r.boolean("connected", h.connected));
  ARMHIVE_RETURN_IF_ERROR(r.str("state", h.state));
  ARMHIVE_RETURN_IF_ERROR(r.str("unreachable_since", h.unreachable_since));
  ARMHIVE_RETURN_IF_ERROR(r.str("last_error", h.last_error));
  ARMHIVE_RETURN_IF_ERROR(r.str("arch", h.arch));
  ARMHIVE_RETURN_IF_ERROR(r.str("cpu_model", h.cpu_model));
  ARMHIVE_RETURN_IF_ERROR(r.str("accel", h.accel));
  ARMHIVE_RETURN_IF_ERROR(r.integer("memory_kib", h.memory_kib));
  ARMHIVE_RETURN_IF_ERROR(r.objects("numa_nodes", h.numa_nodes, parse_numa));
  if (const json* c = r.find("clusters")) {
    if (!c->is_array()) return invalid_argument(r.field("clusters"), "must be an array");
    h.clusters.clear();
    for (size_t i = 0; i < c->size(); ++i) {
      std::vector<int> cpus;
      const json wrapped = {{"c", (*c)[i]}};  // JsonReader keeps a reference: must outlive it
      JsonReader inner(wrapped, r.field("clusters") + "[" + std::to_string(i) + "]");
      ARMHIVE_RETURN_IF_ERROR(inner.int_list("c", cpus));
      h.clusters.push_back(std::move(cpus));
    }
  }
  ARMHIVE_RETURN_IF_ERROR(r.objects("cores", h.cores, parse_core));
  ARMHIVE_RETURN_IF_ERROR(r.number("fragmentation", h.fragmentation));
  ARMHIVE_RETURN_IF_ERROR(r.objects("health", h.health, parse_health_result));
  return Status::ok();
}

Status parse_benchmark_run(const json& j, const std::string& prefix, BenchmarkRunDto& b) {
  JsonReader r(j, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.str("id", b.id, true));
  ARMHIVE_RETURN_IF_ERROR(r.str("lease_id", b.lease_id));
  ARMHIVE_RETURN_IF_ERROR(r.str("owner", b.owner));
  ARMHIVE_RETURN_IF_ERROR(r.str("vm_name", b.vm_name));
  ARMHIVE_RETURN_IF_ERROR(r.str("pool", b.pool));
  ARMHIVE_RETURN_IF_ERROR(r.str("host", b.host));
  ARMHIVE_RETURN_IF_ERROR(r.str("state", b.state, true));
  ARMHIVE_RETURN_IF_ERROR(r.str("error", b.error));
  ARMHIVE_RETURN_IF_ERROR(r.str("created_at", b.created_at));
  ARMHIVE_RETURN_IF_ERROR(r.opt_str("finished_at", b.finished_at));
  if (const json* req = r.find("request")) b.request_json = dump_json(*req);
  if (const json* rep = r.find("report")) b.report_json = dump_json(*rep);
  return Status::ok();
}

template <typename T, typename F>
Result<std::vector<T>> items_from_json(const json& j, F parse) {
  JsonReader r(j, "");
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  if (r.find("items") == nullptr) return r.missing("items");
  std::vector<T> out;
  ARMHIVE_RETURN_IF_ERROR(r.objects("items", out, parse));
  return out;
}

}  // namespace

json to_json(const PoolDto& p) {
  json j = {{"name", p.name},
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
            {"ssh", p.ssh},
            {"removed", p.removed}};
  if (p.warm_target) {
    const WarmTargetDto& t = *p.warm_target;
    j["warm_target"] = {{"target", t.target},
                        {"reason", t.reason},
                        {"auto_min", t.auto_min},
                        {"auto_max", t.auto_max},
                        {"expected_arrivals", t.expected_arrivals},
                        {"rate_per_min", t.rate_per_min},
                        {"run_size", t.run_size},
                        {"runs_per_hour", t.runs_per_hour}};
  }
  return j;
}

Result<PoolDto> pool_from_json(const json& j) {
  PoolDto p;
  ARMHIVE_RETURN_IF_ERROR(parse_pool(j, "", p));
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
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.only({"name", "libvirt_uri", "labels", "cpus", "l2_clusters", "vm_dir",
                                  "image_dir", "network_guard"}));
  ARMHIVE_RETURN_IF_ERROR(r.str("name", h.name, true));
  ARMHIVE_RETURN_IF_ERROR(r.str("libvirt_uri", h.libvirt_uri, true));
  ARMHIVE_RETURN_IF_ERROR(r.str_map("labels", h.labels));
  ARMHIVE_RETURN_IF_ERROR(r.str_list("l2_clusters", h.l2_clusters));
  ARMHIVE_RETURN_IF_ERROR(r.str("vm_dir", h.vm_dir));
  ARMHIVE_RETURN_IF_ERROR(r.str("image_dir", h.image_dir));
  ARMHIVE_RETURN_IF_ERROR(r.str("network_guard", h.network_guard));
  if (const json* cpus = r.find("cpus")) {
    JsonReader c(*cpus, "cpus");
    ARMHIVE_RETURN_IF_ERROR(c.require_object());
    ARMHIVE_RETURN_IF_ERROR(c.only({"housekeeping", "dedicated", "shared"}));
    ARMHIVE_RETURN_IF_ERROR(c.opt_str("housekeeping", h.housekeeping_cpus));
    ARMHIVE_RETURN_IF_ERROR(c.opt_str("dedicated", h.dedicated_cpus));
    ARMHIVE_RETURN_IF_ERROR(c.opt_str("shared", h.shared_cpus));
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
  ARMHIVE_RETURN_IF_ERROR(parse_host(j, "", h));
  return h;
}

json to_json(const EventDto& e) {
  return {{"seq", e.seq},           {"at", e.at},       {"type", e.type},
          {"lease_id", e.lease_id}, {"vm", e.vm},       {"pool", e.pool},
          {"owner", e.owner},       {"state", e.state}, {"detail", e.detail}};
}

Result<EventDto> event_from_json(const json& j) {
  JsonReader r(j, "");
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  EventDto e;
  ARMHIVE_RETURN_IF_ERROR(r.integer("seq", e.seq, true));
  ARMHIVE_RETURN_IF_ERROR(r.str("at", e.at));
  ARMHIVE_RETURN_IF_ERROR(r.str("type", e.type, true));
  ARMHIVE_RETURN_IF_ERROR(r.str("lease_id", e.lease_id));
  ARMHIVE_RETURN_IF_ERROR(r.str("vm", e.vm));
  ARMHIVE_RETURN_IF_ERROR(r.str("pool", e.pool));
  ARMHIVE_RETURN_IF_ERROR(r.str("owner", e.owner));
  ARMHIVE_RETURN_IF_ERROR(r.str("state", e.state));
  ARMHIVE_RETURN_IF_ERROR(r.str("detail", e.detail));
  return e;
}

Result<BenchmarkRunDto> benchmark_run_dto_from_json(const json& j) {
  BenchmarkRunDto b;
  ARMHIVE_RETURN_IF_ERROR(parse_benchmark_run(j, "", b));
  return b;
}

json to_json(const HealthDto& h) {
  json j = {{"status", h.status}, {"version", h.version}};
  if (h.leader) j["leader"] = to_json(*h.leader);
  if (!h.restart_required.empty()) j["restart_required"] = h.restart_required;
  return j;
}

json to_json(const ClusterLeaderDto& l) {
  return {{"holder", l.holder}, {"url", l.url}, {"epoch", l.epoch}, {"since", l.since}};
}

Result<ClusterLeaderDto> cluster_leader_from_json(const json& j) {
  ClusterLeaderDto l;
  ARMHIVE_RETURN_IF_ERROR(parse_cluster_leader(j, "leader", l));
  return l;
}

json to_json(const ClusterDto& c) {
  json members = json::array();
  for (const ClusterMemberDto& m : c.members) {
    members.push_back({{"holder", m.holder},
                       {"url", m.url},
                       {"role", m.role},
                       {"started_at", m.started_at},
                       {"last_contact", m.last_contact},
                       {"last_contact_age_s", m.last_contact_age_s}});
  }
  json j = {{"store", c.store}, {"members", members}};
  if (c.leader) j["leader"] = to_json(*c.leader);
  return j;
}

Result<ClusterDto> cluster_from_json(const json& j) {
  ClusterDto c;
  JsonReader r(j, "");
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.str("store", c.store, true));
  if (const json* leader = r.find("leader"); leader != nullptr) {
    ClusterLeaderDto l;
    ARMHIVE_RETURN_IF_ERROR(parse_cluster_leader(*leader, "leader", l));
    c.leader = std::move(l);
  }
  ARMHIVE_RETURN_IF_ERROR(r.objects("members", c.members, parse_cluster_member));
  return c;
}

json to_json(const GithubStateDto& g) {
  json j = {{"last_reconcile_error", g.last_reconcile_error},
            {"pending_jobs", g.pending_jobs},
            {"runners", g.runners},
            {"reconciled_jobs_total", g.reconciled_jobs_total},
            {"ghosts_deleted_total", g.ghosts_deleted_total},
            {"forgotten_runners_total", g.forgotten_runners_total},
            {"rate_limited_total", g.rate_limited_total}};
  if (g.last_reconcile) j["last_reconcile"] = *g.last_reconcile;
  if (g.rate_limit_remaining) j["rate_limit_remaining"] = *g.rate_limit_remaining;
  if (g.rate_limit_reset) j["rate_limit_reset"] = *g.rate_limit_reset;
  if (g.backoff_until) j["backoff_until"] = *g.backoff_until;
  return j;
}

Result<GithubStateDto> github_state_from_json(const json& j) {
  JsonReader r(j, "");
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  GithubStateDto g;
  ARMHIVE_RETURN_IF_ERROR(r.opt_str("last_reconcile", g.last_reconcile));
  ARMHIVE_RETURN_IF_ERROR(r.str("last_reconcile_error", g.last_reconcile_error));
  ARMHIVE_RETURN_IF_ERROR(r.integer("pending_jobs", g.pending_jobs));
  ARMHIVE_RETURN_IF_ERROR(r.integer("runners", g.runners));
  if (r.find("rate_limit_remaining") != nullptr) {
    int64_t remaining = 0;
    ARMHIVE_RETURN_IF_ERROR(r.integer("rate_limit_remaining", remaining));
    g.rate_limit_remaining = remaining;
  }
  ARMHIVE_RETURN_IF_ERROR(r.opt_str("rate_limit_reset", g.rate_limit_reset));
  ARMHIVE_RETURN_IF_ERROR(r.opt_str("backoff_until", g.backoff_until));
  ARMHIVE_RETURN_IF_ERROR(r.integer("reconciled_jobs_total", g.reconciled_jobs_total));
  ARMHIVE_RETURN_IF_ERROR(r.integer("ghosts_deleted_total", g.ghosts_deleted_total));
  ARMHIVE_RETURN_IF_ERROR(r.integer("forgotten_runners_total", g.forgotten_runners_total));
  ARMHIVE_RETURN_IF_ERROR(r.integer("rate_limited_total", g.rate_limited_total));
  return g;
}

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
