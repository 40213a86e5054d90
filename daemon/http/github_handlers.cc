// POST /v1/github/webhook: GitHub's workflow_job deliveries. No bearer token: the provider
// (daemon/github) authenticates each delivery by its HMAC signature and audits refusals.
// GET /v1/github: the provider's reconciliation and rate limit, for admin tokens.
#include "api/json.h"
#include "daemon/http/context.h"
#include "daemon/http/handlers.h"
#include "daemon/http/params.h"

namespace armhive {

void add_github_routes(Router& router, ServerContext& ctx) {
  router.add({"GET", "/v1/github", Access::kRead, [&ctx](Call& c) -> Status {
                if (!is_admin(c.who)) {
                  return Status(ErrorCode::kPermissionDenied,
                                "only admin tokens may see the GitHub provider's state");
                }
                if (!ctx.options.github_state) {
                  return Status(ErrorCode::kNotFound,
                                "GitHub is not configured (no [github] table)");
                }
                write_json(c.res, 200, to_json(ctx.options.github_state()));
                return Status::ok();
              }});
  if (!ctx.options.github_webhook) return;
  router.add({"POST", "/v1/github/webhook", Access::kPublic, [&ctx](Call& c) -> Status {
                const HttpRequest& req = c.req;
                ARMHIVE_RETURN_IF_ERROR(ctx.options.github_webhook(
                    req.header("X-GitHub-Event"), req.header("X-GitHub-Delivery"),
                    req.header("X-Hub-Signature-256"), req.body, req.remote_addr));
                c.res.status = 202;
                c.res.content_type = "application/json";
                c.res.body = R"({"status":"accepted"})";
                return Status::ok();
              }});
}

}  // namespace armhive
