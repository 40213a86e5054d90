#pragma once

#include <boost/asio/thread_pool.hpp>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>

#include "base/utf8.h"
#include "daemon/core/cluster_view.h"
#include "daemon/engine/lease_service.h"
#include "daemon/http/long_operations.h"
#include "daemon/http/server.h"
#include "daemon/store/token_store.h"

namespace armhive {

class BenchmarkService;
class EventHub;
struct BenchmarkRun;

// What every handler file shares: the services (not owned), the options, the worker pool
// that runs service calls, the event hub that wakes waiting requests, and the server's stop
// token. One per HttpServer, alive from start() to stop().
//
// Threading: the references are thread-safe objects; quota_mu is the one lock handlers take
// themselves (around count-then-create), never across anything but the service calls it
// orders. long_operations locks only around its counts.
struct ServerContext {
  const HttpOptions& options;
  LeaseService& leases;
  BenchmarkService* benchmarks;  // null: the benchmark endpoints are 503
  TokenStore& tokens;
  AuditLog& audit;
  Metrics& metrics;
  EventHub& hub;
  boost::asio::thread_pool& workers;
  std::stop_token stop;
  std::mutex quota_mu;
  // The long operations each token has running (execs, transfers, tunnels, event streams).
  LongOperations& long_operations;
  // Set by start() before the routes are added, read-only after: the server's URL, and this
  // instance's term (HttpOptions::instance, leader_epoch, leader_since_ms or start()'s time).
  std::string url;
  ClusterLeader leader;

  // The wall clock for the rules that need it (dev lease lifetimes): options.clock or the
  // system's.
  TimePoint now() const {
    return options.clock != nullptr ? options.clock->now() : SystemClock().now();
  }
  // Every line the server logs goes through here, escaped (base/utf8.h escape_for_log): its
  // lines carry the request's method and percent-decoded path, which a client chooses, and a
  // "%0A" in a path used to end the line and forge the next one (issue 33 finding 10).
  void log(std::string_view line) const {
    if (options.log) options.log(escape_for_log(line));
  }
  // Records a lease action; a failure is logged, not returned (the action happened).
  void audit_action(const TokenInfo& who, std::string_view action, const std::string& lease_id,
                    const std::string& detail);
  // The lease if `who` may see it; another owner's lease is "not found" (its existence is not
  // revealed).
  Result<Lease> visible_lease(const TokenInfo& who, const std::string& id);
};

inline bool is_admin(const TokenInfo& t) { return t.role == TokenRole::kAdmin; }

}  // namespace armhive
