// POST /v1/github/webhook: GitHub's workflow_job deliveries. No bearer token: the provider
// (daemon/github) authenticates each delivery by its HMAC signature and audits refusals.
#include "api/json.h"
#include "daemon/http/handlers.h"

namespace armhive {

void add_github_routes(Router& router, ServerContext& ctx) {
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
