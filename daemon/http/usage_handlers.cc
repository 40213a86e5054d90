// GET /v1/usage: what the leases created in a window used, summed per owner, pool or value of
// one label, as JSON or (Accept: text/csv) CSV. A token that is not admin sees only its own
// leases, as in every listing.
#include "api/json.h"
#include "api/usage_report.h"
#include "base/validation.h"
#include "daemon/http/convert.h"
#include "daemon/http/handlers.h"
#include "daemon/http/params.h"

namespace armhive {
namespace {

bool wants_csv(const HttpRequest& req) {
  return req.header("Accept").find("text/csv") != std::string::npos;
}

// The query of a request: since/until (RFC 3339 or a duration before now; until defaults to
// now, since to kDefaultUsageWindowSeconds before until), group_by (default owner), label
// (the key, with group_by=label only). Every error names its parameter.
Result<UsageQuery> usage_query(const ServerContext& ctx, const Call& c) {
  const HttpRequest& req = c.req;
  const int64_t now = to_unix_ms(ctx.now());
  int64_t until = now;
  if (req.has_param("until")) {
    ARMHIVE_ASSIGN_OR_RETURN(until, parse_usage_time("until", req.param("until"), now));
  }
  int64_t since = until - kDefaultUsageWindowSeconds * 1000;
  if (req.has_param("since")) {
    ARMHIVE_ASSIGN_OR_RETURN(since, parse_usage_time("since", req.param("since"), now));
  }
  if (since > until) return invalid_argument("since", "must not be after until");
  UsageQuery q;
  q.since = from_unix_ms(since);
  q.until = from_unix_ms(until);
  if (req.has_param("group_by")) {
    auto group_by = usage_group_by_from_string(req.param("group_by"));
    if (!group_by) return invalid_argument("group_by", "must be owner, pool or label");
    q.group_by = *group_by;
  }
  if (q.group_by == UsageGroupBy::kLabel) {
    if (!req.has_param("label")) {
      return invalid_argument("label",
                              "group_by=label needs label=KEY: the label whose values group");
    }
    q.label = req.param("label");
    ARMHIVE_RETURN_IF_ERROR(check_name("label", q.label));
  } else if (req.has_param("label")) {
    return invalid_argument("label", "is only used with group_by=label");
  }
  if (!is_admin(c.who)) q.owner = c.who.name;
  return q;
}

Status usage_report(ServerContext& ctx, Call& c) {
  ARMHIVE_ASSIGN_OR_RETURN(UsageQuery q, usage_query(ctx, c));
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<UsageRow> rows, ctx.leases.usage(q));
  UsageReportDto report;
  report.since = to_rfc3339(q.since);
  report.until = to_rfc3339(q.until);
  report.group_by = std::string(to_string(q.group_by));
  report.label = q.label;
  for (const UsageRow& r : rows) report.rows.push_back(to_dto(r));
  if (wants_csv(c.req)) {
    write_text(c.res, 200, usage_report_csv(report), "text/csv; charset=utf-8");
  } else {
    write_json(c.res, 200, to_json(report));
  }
  return Status::ok();
}

}  // namespace

void add_usage_routes(Router& router, ServerContext& ctx) {
  router.add({"GET", "/v1/usage", Access::kRead, [&ctx](Call& c) { return usage_report(ctx, c); }});
}

}  // namespace armhive
