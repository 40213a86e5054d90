// GET /healthz and GET /metrics: public, and served also on connections over the caps.
#include <set>

#include "api/json.h"
#include "daemon/http/convert.h"
#include "daemon/http/event_hub.h"
#include "daemon/http/handlers.h"
#include "daemon/http/params.h"

namespace armhive {
namespace {

Status health(ServerContext& ctx, Call& c) {
  HealthDto h;
  h.version = ctx.options.version;
  h.leader = to_dto(ctx.leader);  // this instance: its API answers only while it leads
  if (ctx.options.restart_required) h.restart_required = ctx.options.restart_required();
  write_json(c.res, 200, to_json(h));
  return Status::ok();
}

Status metrics_text(ServerContext& ctx, Call& c) {
  Metrics& metrics = ctx.metrics;
  LeaseFilter f;
  f.include_ended = false;
  auto counts = ctx.leases.count_leases(f);  // in SQL: right at any number of leases
  if (counts.is_ok()) {
    metrics.clear("armhive_leases");
    for (auto s : {LeaseState::kPending, LeaseState::kProvisioning, LeaseState::kReady,
                   LeaseState::kReleasing, LeaseState::kHostUnreachable}) {
      auto it = counts->find(s);
      metrics.set("armhive_leases", {{"state", std::string(to_string(s))}},
                  it == counts->end() ? 0.0 : static_cast<double>(it->second));
    }
  }
  for (const char* g :
       {"armhive_pool_warm_vms", "armhive_pool_starting_vms", "armhive_pool_leased_vms",
        "armhive_pool_pending_leases", "armhive_pool_warm_target", "armhive_host_cores",
        "armhive_host_cores_allocated", "armhive_host_fragmentation", "armhive_host_state"}) {
    metrics.clear(g);
  }
  for (const auto& p : ctx.leases.pools()) {
    Metrics::Labels l{{"pool", p.config.name}};
    metrics.set("armhive_pool_warm_vms", l, p.warm);
    metrics.set("armhive_pool_starting_vms", l, p.starting);
    metrics.set("armhive_pool_leased_vms", l, p.leased);
    metrics.set("armhive_pool_pending_leases", l, p.pending_leases);
    if (p.warm_target) metrics.set("armhive_pool_warm_target", l, p.warm_target->target);
  }
  for (const auto& h : ctx.leases.hosts()) {
    std::map<std::string, int> roles;
    std::set<int> allocated;
    for (const auto& core : h.cores) {
      ++roles[core.role];
      if (!core.vm_name.empty() || !core.lease_id.empty()) allocated.insert(core.cpu);
    }
    std::string host = h.topology.hostname;
    for (const auto& [role, n] : roles) {
      metrics.set("armhive_host_cores", {{"host", host}, {"role", role}}, n);
    }
    metrics.set("armhive_host_cores_allocated", {{"host", host}},
                static_cast<double>(allocated.size()));
    metrics.set("armhive_host_fragmentation", {{"host", host}}, h.fragmentation);
    // A state set: 1 for the host's state as GET /v1/hosts shows it, 0 for the others, so an
    // alert on unreachable hosts is `armhive_host_state{state="unreachable"} == 1`.
    std::string state = to_dto(h).state;
    for (const char* s : {"ok", "degraded", "unreachable", "draining", "maintenance"}) {
      metrics.set("armhive_host_state", {{"host", host}, {"state", s}}, state == s ? 1 : 0);
    }
  }
  if (ctx.options.github_state) {
    // The provider counts its own totals (armhive_github_*_total); the remaining calls are
    // what GitHub's last reply said, -1 before any.
    const GithubStateDto g = ctx.options.github_state();
    metrics.set("armhive_github_rate_limit_remaining", {},
                static_cast<double>(g.rate_limit_remaining.value_or(-1)));
  }
  metrics.set("armhive_build_info", {{"version", ctx.options.version}}, 1);
  metrics.set("armhive_api_waiting_requests", {}, static_cast<double>(ctx.hub.waiting()));
  write_text(c.res, 200, metrics.exposition(), "text/plain; version=0.0.4; charset=utf-8");
  return Status::ok();
}

}  // namespace

void describe_api_metrics(Metrics& metrics) {
  metrics.describe_counter("armhive_api_requests_total",
                           "API requests by method, route and HTTP status");
  metrics.describe_histogram("armhive_api_request_duration_seconds",
                             "API request handling time by method and route (long-polls until "
                             "answered, streams until their head is sent)");
  metrics.describe_gauge("armhive_leases", "Non-terminal leases by state");
  metrics.describe_gauge("armhive_pool_warm_vms", "Booted idle VMs ready to hand out, by pool");
  metrics.describe_gauge("armhive_pool_starting_vms", "VMs booting, by pool");
  metrics.describe_gauge("armhive_pool_leased_vms", "VMs handed to leases, by pool");
  metrics.describe_gauge("armhive_pool_pending_leases", "Leases waiting for a VM, by pool");
  metrics.describe_gauge("armhive_pool_warm_target",
                         "Warm VMs a min_warm = \"auto\" pool holds for its demand now, by pool");
  metrics.describe_gauge("armhive_host_cores", "Host CPUs by host and role");
  metrics.describe_gauge("armhive_host_cores_allocated", "Host CPUs pinned to a VM, by host");
  metrics.describe_gauge("armhive_host_fragmentation",
                         "0 = free cores form whole clusters; 1 = fully scattered");
  metrics.describe_gauge("armhive_host_state",
                         "1 for each host's state (ok, degraded, unreachable, draining, "
                         "maintenance), 0 for the others");
  metrics.describe_gauge("armhive_github_rate_limit_remaining",
                         "GitHub API calls left in the rate-limit window, as GitHub's last reply "
                         "said (-1: none yet)");
  metrics.describe_gauge("armhive_build_info", "armhived version");
  metrics.describe_gauge("armhive_api_waiting_requests",
                         "Long-polls and event streams waiting for events (they hold no thread)");
}

void add_health_routes(Router& router, ServerContext& ctx) {
  Route healthz{"GET", "/healthz", Access::kPublic, [&ctx](Call& c) { return health(ctx, c); }};
  healthz.on_io_thread = true;  // touches no service: answers even when every worker is busy
  healthz.over_cap = true;
  router.add(std::move(healthz));
  Route metrics{"GET", "/metrics", Access::kPublic,
                [&ctx](Call& c) { return metrics_text(ctx, c); }};
  metrics.over_cap = true;
  router.add(std::move(metrics));
}

}  // namespace armhive
