// GET /v1/cluster: who leads the instances sharing the database, since when, and when each was
// last heard of. Any token may read it; a standby answers it too (daemon/standby_server.h).
#include "api/json.h"
#include "daemon/http/convert.h"
#include "daemon/http/handlers.h"
#include "daemon/http/params.h"

namespace armhive {
namespace {

Status cluster(ServerContext& ctx, Call& c) {
  ClusterView view;
  if (ctx.options.cluster) {
    ARMHIVE_ASSIGN_OR_RETURN(view, ctx.options.cluster());
  } else {
    // SQLite: one armhived, which leads since it started; it answers, so it is heard from now.
    view = single_instance_view(ctx.leader.holder, ctx.leader.url, ctx.leader.since_ms,
                                to_unix_ms(ctx.now()));
  }
  write_json(c.res, 200, to_json(to_dto(view)));
  return Status::ok();
}

}  // namespace

void add_cluster_routes(Router& router, ServerContext& ctx) {
  router.add({"GET", "/v1/cluster", Access::kRead, [&ctx](Call& c) { return cluster(ctx, c); }});
}

}  // namespace armhive
