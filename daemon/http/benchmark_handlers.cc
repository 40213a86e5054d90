// Benchmark runs: start on a lease, list, get, reports (HTML, CSV) and comparisons.
#include "api/json.h"
#include "daemon/bench/benchmark_service.h"
#include "daemon/core/list_limit.h"
#include "daemon/http/handlers.h"
#include "daemon/http/params.h"

namespace armhive {
namespace {

using nlohmann::json;

Status need_benchmarks(const ServerContext& ctx) {
  if (ctx.benchmarks == nullptr) return unavailable("benchmarks are not enabled on this server");
  return Status::ok();
}

Result<BenchmarkRun> visible_run(ServerContext& ctx, const TokenInfo& who, const std::string& id) {
  auto run = ctx.benchmarks->get(id);
  if (!run.is_ok()) return run.status();
  if (!is_admin(who) && run->owner != who.name) {
    return not_found("no benchmark run \"" + id + "\"");
  }
  return run;
}

Status start_benchmark(ServerContext& ctx, Call& c) {
  ARMHIVE_RETURN_IF_ERROR(need_benchmarks(ctx));
  const std::string& id = c.req.path_params[0];
  json body = json::object();
  if (!c.req.body.empty()) {
    ARMHIVE_ASSIGN_OR_RETURN(body, parse_json(c.req.body));
  }
  ARMHIVE_ASSIGN_OR_RETURN(BenchmarkRequest r, benchmark_request_from_json(body));
  ARMHIVE_ASSIGN_OR_RETURN(Lease lease, ctx.visible_lease(c.who, id));
  // An MTU run changes the host's bridge, which every lease on it shares (and its tap): not a
  // tenant's to change for the others.
  if (!r.network.mtus.empty() && !is_admin(c.who)) {
    return Status(ErrorCode::kPermissionDenied,
                  "only admin tokens may run benchmarks at other MTUs: they change the host "
                  "bridge every lease shares",
                  {}, "network.mtus");
  }
  r.lease_id = lease.id;
  r.owner = c.who.name;
  ARMHIVE_ASSIGN_OR_RETURN(BenchmarkRun run, ctx.benchmarks->start(r));
  ctx.audit_action(c.who, "benchmark.start", lease.id, run.id);
  c.res.headers.emplace_back("Location", "/v1/benchmarks/" + run.id);
  write_json(c.res, 202, to_json(run));
  return Status::ok();
}

Status list_benchmarks(ServerContext& ctx, Call& c) {
  ARMHIVE_RETURN_IF_ERROR(need_benchmarks(ctx));
  const HttpRequest& req = c.req;
  BenchmarkFilter f;
  if (!is_admin(c.who)) f.owner = c.who.name;
  if (req.has_param("lease_id")) f.lease_id = req.param("lease_id");
  if (req.has_param("pool")) f.pool = req.param("pool");
  if (req.has_param("host")) f.host = req.param("host");
  if (req.has_param("state")) {
    auto st = benchmark_state_from_string(req.param("state"));
    if (!st) return invalid_argument("state", "must be queued, running, succeeded or failed");
    f.state = st;
  }
  ARMHIVE_ASSIGN_OR_RETURN(f.limit,
                           parse_size_param(req, "limit", kDefaultListLimit, kMaxListLimit));
  json items = json::array();
  for (const auto& run : ctx.benchmarks->list(f)) items.push_back(to_json(run));
  write_json(c.res, 200, {{"items", std::move(items)}});
  return Status::ok();
}

Status get_benchmark(ServerContext& ctx, Call& c) {
  ARMHIVE_RETURN_IF_ERROR(need_benchmarks(ctx));
  ARMHIVE_ASSIGN_OR_RETURN(BenchmarkRun run, visible_run(ctx, c.who, c.req.path_params[0]));
  write_json(c.res, 200, to_json(run));
  return Status::ok();
}

Status benchmark_report(ServerContext& ctx, Call& c, bool csv) {
  ARMHIVE_RETURN_IF_ERROR(need_benchmarks(ctx));
  ARMHIVE_ASSIGN_OR_RETURN(BenchmarkRun run, visible_run(ctx, c.who, c.req.path_params[0]));
  std::vector<std::string> ids{run.id};
  ARMHIVE_ASSIGN_OR_RETURN(
      std::string body, csv ? ctx.benchmarks->report_csv(ids) : ctx.benchmarks->report_html(ids));
  write_text(c.res, 200, std::move(body),
             csv ? "text/csv; charset=utf-8" : "text/html; charset=utf-8");
  return Status::ok();
}

Status compare_benchmarks(ServerContext& ctx, Call& c) {
  ARMHIVE_RETURN_IF_ERROR(need_benchmarks(ctx));
  std::vector<std::string> ids;
  std::string list = c.req.param("ids");
  size_t pos = 0;
  while (pos <= list.size() && !list.empty()) {
    size_t comma = list.find(',', pos);
    std::string id = list.substr(pos, comma == std::string::npos ? comma : comma - pos);
    if (!id.empty()) ids.push_back(id);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (ids.size() < 2) return invalid_argument("ids", "name at least two runs: ids=A,B");
  if (ids.size() > 16) return invalid_argument("ids", "at most 16 runs");
  for (const auto& id : ids) {
    ARMHIVE_ASSIGN_OR_RETURN(BenchmarkRun run, visible_run(ctx, c.who, id));
    (void)run;
  }
  std::string format = c.req.has_param("format") ? c.req.param("format") : "html";
  if (format == "json") {
    ARMHIVE_ASSIGN_OR_RETURN(json j, ctx.benchmarks->compare(ids));
    write_json(c.res, 200, j);
  } else if (format == "html") {
    ARMHIVE_ASSIGN_OR_RETURN(std::string html, ctx.benchmarks->report_html(ids));
    write_text(c.res, 200, std::move(html), "text/html; charset=utf-8");
  } else {
    return invalid_argument("format", "must be html or json");
  }
  return Status::ok();
}

}  // namespace

void add_benchmark_routes(Router& router, ServerContext& ctx) {
  auto h = [&ctx](Status (*fn)(ServerContext&, Call&)) {
    return [&ctx, fn](Call& c) { return fn(ctx, c); };
  };
  router.add({"POST", "/v1/leases/{id}/benchmarks", Access::kWrite, h(start_benchmark), true});
  router.add({"GET", "/v1/benchmarks", Access::kRead, h(list_benchmarks)});
  // Before /v1/benchmarks/{id}: routes match in registration order.
  router.add({"GET", "/v1/benchmarks/compare", Access::kRead, h(compare_benchmarks)});
  router.add({"GET", "/v1/benchmarks/{id}/report.html", Access::kRead,
              [&ctx](Call& c) { return benchmark_report(ctx, c, false); }});
  router.add({"GET", "/v1/benchmarks/{id}/report.csv", Access::kRead,
              [&ctx](Call& c) { return benchmark_report(ctx, c, true); }});
  router.add({"GET", "/v1/benchmarks/{id}", Access::kRead, h(get_benchmark)});
}

}  // namespace armhive
