// Pools, hosts (JSON and the SVG core map) and the /ui/hosts page.
#include <set>

#include "api/json.h"
#include "base/xml_escape.h"
#include "daemon/http/convert.h"
#include "daemon/http/core_map_svg.h"
#include "daemon/http/handlers.h"
#include "daemon/http/params.h"

namespace armhive {
namespace {

using nlohmann::json;

Status list_pools(ServerContext& ctx, Call& c) {
  json items = json::array();
  for (const auto& p : ctx.leases.pools()) items.push_back(to_json(to_dto(p)));
  write_json(c.res, 200, {{"items", std::move(items)}});
  return Status::ok();
}

// Hosts as `who` may see them: other owners' lease and VM names are blanked.
Result<std::vector<HostView>> visible_hosts(ServerContext& ctx, const TokenInfo& who) {
  auto hosts = ctx.leases.hosts();
  if (is_admin(who)) return hosts;
  std::set<std::string> ids;
  LeaseFilter f;
  f.owner = who.name;
  f.include_ended = false;
  f.limit = 1000;
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
  return hosts;
}

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
    write_text(c.res, 200, render_svg(hosts[index]), "image/svg+xml");
    return Status::ok();
  }
  json items = json::array();
  for (const auto& h : hosts) items.push_back(to_json(to_dto(h)));
  write_json(c.res, 200, {{"items", std::move(items)}});
  return Status::ok();
}

Status hosts_page(ServerContext& ctx, Call& c) {
  ARMHIVE_ASSIGN_OR_RETURN(auto hosts, visible_hosts(ctx, c.who));
  std::string html =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>armhive hosts</title>"
      "<style>body{font-family:sans-serif;margin:2em}section{margin-bottom:2em}</style>"
      "</head><body><h1>armhive hosts</h1>\n";
  if (hosts.empty()) html += "<p>No hosts are configured.</p>\n";
  for (const auto& h : hosts) {
    HostDto d = to_dto(h);
    html += "<section><h2>" + xml_escape(d.hostname) + "</h2><p>" + xml_escape(d.arch) + ", " +
            xml_escape(d.cpu_model) + ", " + xml_escape(d.accel) + ", " +
            std::to_string(h.topology.cpus.size()) + " CPUs, fragmentation " +
            std::to_string(d.fragmentation) +
            (d.state == "ok" ? "" : ", <b>" + xml_escape(d.state) + "</b>") + "</p>\n" +
            (d.last_error.empty() ? "" : "<p>Last error: " + xml_escape(d.last_error) + "</p>\n") +
            render_svg(h) + "\n</section>\n";
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
  router.add({"GET", "/ui/hosts", Access::kRead, h(hosts_page)});
}

}  // namespace armhive
