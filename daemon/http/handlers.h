#pragma once

#include "daemon/http/context.h"
#include "daemon/http/router.h"

namespace armhive {

// One file per resource registers its routes (api/openapi.yaml has the contract of each).
void add_health_routes(Router& router, ServerContext& ctx);     // metrics_handlers.cc
void add_lease_routes(Router& router, ServerContext& ctx);      // lease_handlers.cc
void add_benchmark_routes(Router& router, ServerContext& ctx);  // benchmark_handlers.cc
void add_host_routes(Router& router, ServerContext& ctx);       // host_handlers.cc (+ /ui)
void add_event_routes(Router& router, ServerContext& ctx);      // event_handlers.cc
void add_github_routes(Router& router, ServerContext& ctx);     // github_handlers.cc
void add_file_routes(Router& router, ServerContext& ctx);       // file_handlers.cc
void add_tunnel_routes(Router& router, ServerContext& ctx);     // tunnel_handlers.cc
void add_usage_routes(Router& router, ServerContext& ctx);      // usage_handlers.cc
void add_cluster_routes(Router& router, ServerContext& ctx);    // cluster_handlers.cc

// Describes the API's metric families in the registry (metrics_handlers.cc).
void describe_api_metrics(Metrics& metrics);

}  // namespace armhive
