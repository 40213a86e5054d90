// Pools, hosts (JSON and the SVG core map) and the /ui/hosts page.
#include <cctype>
#include <cstdio>
#include <set>

#include "api/json.h"
#include "base/url_encode.h"
#include "base/xml_escape.h"
#include "daemon/bench/health_chart.h"
#include "daemon/bench/svg.h"
#include "daemon/core/list_limit.h"
#include "daemon/http/convert.h"
#include "daemon/http/core_map_svg.h"
#include "daemon/http/handlers.h"
#include "daemon/http/params.h"

namespace armhive {
namespace {

std::string two_decimals(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

using nlohmann::json;

Status list_pools(ServerContext& ctx, Call& c) {
  json items = json::array();
  for (const auto& p : ctx.leases.pools()) items.push_back(to_json(to_dto(p)));
  write_json(c.res, 200, {{"items", std::move(items)}});
  return Status::ok();
}

// Hosts as `who` may see them: other owners' lease and VM names are blanked.
// Hosts never reached come last: they hold nothing of anyone's.
Result<std::vector<HostView>> visible_hosts(ServerContext& ctx, const TokenInfo& who) {
  auto hosts = ctx.leases.hosts();
  auto with_waiting = [&ctx](std::vector<HostView> out) {
    if (!ctx.options.waiting_hosts) return out;
    for (HostView& w : ctx.options.waiting_hosts()) out.push_back(std::move(w));
    return out;
  };
  if (is_admin(who)) return with_waiting(std::move(hosts));
  std::set<std::string> ids;
  LeaseFilter f;
  f.owner = who.name;
  f.include_ended = false;
  f.limit = kMaxListLimit;
  for (;;) {  // every page: a token may hold more leases than one page
    ARMHIVE_ASSIGN_OR_RETURN(auto mine, ctx.leases.list_leases(f));
    for (const auto& l : mine) ids.insert(l.id);
    if (mine.size() < f.limit) break;
    f.after_id = mine.back().id;
  }
  for (auto& h : hosts) {
    for (auto& c : h.cores) {
      if (!c.lease_id.empty() && ids.count(c.lease_id) == 0) {
        c.lease_id = "other";
        c.vm_name.clear();
      } else if (c.lease_id.empty() && !c.vm_name.empty()) {
        c.vm_name = "warm";  // a warm VM: not a lease, name is internal
      }
    }
  }
  return with_waiting(std::move(hosts));
}

// Never reached: no CPUs known, so no core map (the SVG would be an empty frame).
bool never_reached(const HostView& h) { return h.topology.cpus.empty(); }

std::string render_svg(const HostView& h) { return render_core_map_svg(h.topology, h.cores); }

Status list_hosts(ServerContext& ctx, Call& c) {
  const HttpRequest& req = c.req;
  std::string format = req.has_param("format") ? req.param("format") : "";
  if (!format.empty() && format != "json" && format != "svg") {
    return invalid_argument("format", "must be json or svg");
  }
  bool svg = format == "svg" ||
             (format.empty() && req.header("Accept").find("image/svg+xml") != std::string::npos);
  ARMHIVE_ASSIGN_OR_RETURN(auto hosts, visible_hosts(ctx, c.who));
  if (svg) {
    if (hosts.empty()) return not_found("no hosts are configured");
    size_t index = 0;
    if (req.has_param("host")) {
      std::string name = req.param("host");
      index = hosts.size();
      for (size_t i = 0; i < hosts.size(); ++i) {
        if (hosts[i].topology.hostname == name) index = i;
      }
      if (index == hosts.size()) return not_found("no host \"" + name + "\"");
    }
    if (never_reached(hosts[index])) {
      return unavailable(
          "host \"" + hosts[index].topology.hostname +
          "\" has not been reached yet, so its CPUs are not known: " + hosts[index].last_error);
    }
    write_text(c.res, 200, render_svg(hosts[index]), "image/svg+xml");
    return Status::ok();
  }
  json items = json::array();
  for (const auto& h : hosts) items.push_back(to_json(to_dto(h)));
  write_json(c.res, 200, {{"items", std::move(items)}});
  return Status::ok();
}

// The host's newest health result per pool, each linking its trend page.
std::string health_lines(const HostView& h) {
  if (h.health.empty()) return {};
  std::string out = "<ul class=\"health\">";
  for (const HealthResult& r : h.health) {
    const bool bad = r.verdict == "degraded";
    out += "<li>Health, pool " + xml_escape(r.pool) + ": " + (bad ? "<b>degraded</b> " : "") +
           xml_escape(svg_num(r.value, 2) + " " + r.unit + ": " + r.reason) + " (" +
           xml_escape(to_rfc3339(r.at)) + ") <a href=\"/ui/hosts/" +
           xml_escape(url_encode(h.topology.hostname)) +
           "/health?pool=" + xml_escape(url_encode(r.pool)) + "\">trend</a></li>";
  }
  return out + "</ul>\n";
}

// GET /v1/hosts/{name}/health[.svg], /ui/hosts/{name}/health: ?pool= (required) names a
// configured pool; ?limit= 1..1000 (200) results.
struct HealthQuery {
  std::string host;
  std::string pool;
  std::vector<HealthResult> results;
};
Result<HealthQuery> health_query(ServerContext& ctx, Call& c) {
  if (!ctx.options.health_series) {
    return unavailable("health benchmarks are not available on this server");
  }
  HealthQuery q;
  q.host = c.req.path_params[0];
  bool known = false;
  for (const HostView& h : ctx.leases.hosts()) known = known || h.topology.hostname == q.host;
  if (!known) return not_found("no host \"" + q.host + "\"");
  if (!c.req.has_param("pool") || c.req.param("pool").empty()) {
    return invalid_argument("pool", "is required: the pool whose health series to show");
  }
  q.pool = c.req.param("pool");
  bool pool_known = false;
  for (const PoolStatus& p : ctx.leases.pools()) pool_known = pool_known || p.config.name == q.pool;
  if (!pool_known) return not_found("no pool \"" + q.pool + "\"");
  ARMHIVE_ASSIGN_OR_RETURN(size_t limit, parse_size_param(c.req, "limit", 200, kMaxListLimit));
  ARMHIVE_ASSIGN_OR_RETURN(q.results, ctx.options.health_series(q.host, q.pool, limit));
  return q;
}

Status host_health(ServerContext& ctx, Call& c) {
  ARMHIVE_ASSIGN_OR_RETURN(HealthQuery q, health_query(ctx, c));
  json items = json::array();
  for (const HealthResult& r : q.results) items.push_back(to_json(to_dto(r)));
  write_json(c.res, 200, {{"host", q.host}, {"pool", q.pool}, {"items", std::move(items)}});
  return Status::ok();
}

Status host_health_svg(ServerContext& ctx, Call& c) {
  ARMHIVE_ASSIGN_OR_RETURN(HealthQuery q, health_query(ctx, c));
  write_text(c.res, 200, health_trend_svg(q.host, q.pool, q.results), "image/svg+xml");
  return Status::ok();
}

Status host_health_page(ServerContext& ctx, Call& c) {
  ARMHIVE_ASSIGN_OR_RETURN(HealthQuery q, health_query(ctx, c));
  write_text(c.res, 200, health_trend_html(q.host, q.pool, q.results), "text/html; charset=utf-8");
  return Status::ok();
}

// POST /v1/hosts/{name}/drain | undrain | maintenance: admin tokens only; answers the host.
Status set_host_admin(ServerContext& ctx, Call& c, HostHealthTracker::Admin admin,
                      std::string_view action) {
  if (!is_admin(c.who)) {
    return Status(ErrorCode::kPermissionDenied,
                  "only admin tokens may " + std::string(action) + " a host");
  }
  const std::string& name = c.req.path_params[0];
  ARMHIVE_RETURN_IF_ERROR(ctx.leases.set_host_admin(name, admin));
  ctx.audit_action(c.who, "host." + std::string(action), "", "host=" + name);
  for (const HostView& h : ctx.leases.hosts()) {
    if (h.topology.hostname != name) continue;
    write_json(c.res, 200, to_json(to_dto(h)));
    return Status::ok();
  }
  return not_found("no host named '" + name + "'", name).with_field("name");
}

Status drain_host(ServerContext& ctx, Call& c) {
  return set_host_admin(ctx, c, HostHealthTracker::Admin::kDrain, "drain");
}
Status undrain_host(ServerContext& ctx, Call& c) {
  return set_host_admin(ctx, c, HostHealthTracker::Admin::kNone, "undrain");
}
Status maintain_host(ServerContext& ctx, Call& c) {
  return set_host_admin(ctx, c, HostHealthTracker::Admin::kMaintenance, "maintenance");
}

// POST /v1/hosts: the body (400 naming the field), then the caller (403), then the host.
Status add_host(ServerContext& ctx, Call& c) {
  ARMHIVE_ASSIGN_OR_RETURN(json body, parse_json(c.req.body));
  ARMHIVE_ASSIGN_OR_RETURN(HostCreateDto in, host_create_from_json(body));
  if (!is_admin(c.who)) {
    return Status(ErrorCode::kPermissionDenied, "only admin tokens may add a host");
  }
  if (!ctx.options.add_host) return unavailable("this armhived does not add hosts at runtime");
  HostSpec spec = from_dto(in);
  // Before anything connects: libvirt's client would run or read what some URIs name.
  ARMHIVE_RETURN_IF_ERROR(check_libvirt_uri("libvirt_uri", spec.libvirt_uri, SpecOrigin::kApi,
                                            ctx.options.configured_host_uris));
  ARMHIVE_RETURN_IF_ERROR(ctx.options.add_host(spec));
  ctx.audit_action(c.who, "host.add", "", "host=" + spec.name + " uri=" + spec.libvirt_uri);
  for (const HostView& h : ctx.leases.hosts()) {
    if (h.topology.hostname != spec.name) continue;
    c.res.headers.emplace_back("Location", "/v1/hosts/" + url_encode(spec.name));
    write_json(c.res, 201, to_json(to_dto(h)));
    return Status::ok();
  }
  return internal_error("host '" + spec.name + "' was added but is not listed");
}

Status remove_host(ServerContext& ctx, Call& c) {
  if (!is_admin(c.who)) {
    return Status(ErrorCode::kPermissionDenied, "only admin tokens may remove a host");
  }
  const std::string& name = c.req.path_params[0];
  if (!ctx.options.remove_host) return unavailable("this armhived does not remove hosts");
  ARMHIVE_RETURN_IF_ERROR(ctx.options.remove_host(name));
  ctx.audit_action(c.who, "host.remove", "", "host=" + name);
  c.res.status = 204;
  return Status::ok();
}

// A host's section's first line: what it is and its state, or that it was never reached.
std::string summary_line(const HostView& h, const HostDto& d) {
  if (never_reached(h)) {
    return "<p><b>unreachable</b>, never reached since " + xml_escape(d.unreachable_since) +
           ": its CPUs are known once it answers (armhived keeps trying)</p>\n";
  }
  std::string line = "<p>" + xml_escape(d.arch) + ", " + xml_escape(d.cpu_model) + ", " +
                     xml_escape(d.accel) + ", " + std::to_string(h.topology.cpus.size()) +
                     " CPUs, fragmentation " + two_decimals(d.fragmentation);
  if (d.state != "ok") line += ", <b>" + xml_escape(d.state) + "</b>";
  if (!d.unreachable_since.empty()) {
    line += " since " + xml_escape(d.unreachable_since) +
            " (its leases show host_unreachable, then end as lost)";
  }
  return line + "</p>\n";
}

Status hosts_page(ServerContext& ctx, Call& c) {
  ARMHIVE_ASSIGN_OR_RETURN(auto hosts, visible_hosts(ctx, c.who));
  std::string html =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>armhive hosts</title>"
      "<style>body{font-family:sans-serif;margin:2em}section{margin-bottom:2em}</style>"
      "</head><body><h1>armhive hosts</h1>\n";
  if (hosts.empty()) html += "<p>No hosts are configured.</p>\n";
  // A fleet at a glance: every host's state, link and labels, before the core maps.
  if (hosts.size() > 1) {
    html +=
        "<table style=\"border-collapse:collapse\" cellpadding=\"4\"><tr style=\"text-align:"
        "left\"><th>host</th><th>state</th><th>CPUs in use</th><th>labels</th><th>libvirt</th>"
        "</tr>\n";
    for (const auto& h : hosts) {
      HostDto d = to_dto(h);
      int used = 0;
      for (const CoreDto& core : d.cores) used += core.vm.empty() && core.lease_id.empty() ? 0 : 1;
      std::string labels;
      for (const auto& [k, v] : d.labels) labels += (labels.empty() ? "" : ", ") + k + "=" + v;
      html += "<tr><td><a href=\"#host-" + xml_escape(d.hostname) + "\">" + xml_escape(d.hostname) +
              "</a></td><td>" + (d.state == "ok" ? "ok" : "<b>" + xml_escape(d.state) + "</b>") +
              "</td><td>" +
              (never_reached(h) ? std::string("not known yet")
                                : std::to_string(used) + " of " + std::to_string(d.cores.size())) +
              "</td><td>" + xml_escape(labels) + "</td><td><code>" + xml_escape(d.uri) +
              "</code></td></tr>\n";
    }
    html += "</table>\n";
  }
  for (const auto& h : hosts) {
    HostDto d = to_dto(h);
    std::string labels;
    for (const auto& [k, v] : d.labels) labels += (labels.empty() ? "" : ", ") + k + "=" + v;
    html += "<section id=\"host-" + xml_escape(d.hostname) + "\"><h2>" + xml_escape(d.hostname) +
            "</h2>" +
            (d.uri.empty() && labels.empty()
                 ? ""
                 : "<p>libvirt <code>" + xml_escape(d.uri) + "</code>" +
                       (labels.empty() ? "" : ", labels " + xml_escape(labels)) + "</p>") +
            summary_line(h, d) +
            (d.last_error.empty() ? "" : "<p>Last error: " + xml_escape(d.last_error) + "</p>\n") +
            health_lines(h) + (never_reached(h) ? "" : render_svg(h)) + "\n</section>\n";
  }
  html += "</body></html>\n";
  write_text(c.res, 200, std::move(html), "text/html; charset=utf-8");
  return Status::ok();
}

}  // namespace

void add_host_routes(Router& router, ServerContext& ctx) {
  auto h = [&ctx](Status (*fn)(ServerContext&, Call&)) {
    return [&ctx, fn](Call& c) { return fn(ctx, c); };
  };
  router.add({"GET", "/v1/pools", Access::kRead, h(list_pools)});
  router.add({"GET", "/v1/hosts", Access::kRead, h(list_hosts)});
  router.add({"POST", "/v1/hosts", Access::kWrite, h(add_host), /*json_body=*/true});
  router.add({"DELETE", "/v1/hosts/{name}", Access::kWrite, h(remove_host)});
  router.add({"GET", "/ui/hosts", Access::kRead, h(hosts_page)});
  router.add({"GET", "/v1/hosts/{name}/health", Access::kRead, h(host_health)});
  router.add({"POST", "/v1/hosts/{name}/drain", Access::kWrite, h(drain_host)});
  router.add({"POST", "/v1/hosts/{name}/undrain", Access::kWrite, h(undrain_host)});
  router.add({"POST", "/v1/hosts/{name}/maintenance", Access::kWrite, h(maintain_host)});
  router.add({"GET", "/v1/hosts/{name}/health.svg", Access::kRead, h(host_health_svg)});
  router.add({"GET", "/ui/hosts/{name}/health", Access::kRead, h(host_health_page)});
}

}  // namespace armhive
