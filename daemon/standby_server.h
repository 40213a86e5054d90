#pragma once

#include <memory>
#include <string>
#include <thread>

#include "base/result.h"
#include "base/thread_annotations.h"

namespace httplib {
class Server;
}

namespace armhive {

// What a standby armhived (daemon/leader_election.h) answers on the API's address while it
// waits to lead, so that clients and load balancers are told where the leader is:
// - GET /healthz: 503, a problem (`unavailable`) whose detail says "standby" and whose
//   `leader` names {"holder", "url", "epoch"} (a load balancer's health check sends no traffic
//   here);
// - anything else: 307 Temporary Redirect to the same path and query on the leader's API URL
//   (method and body kept, as 307 requires; clients that follow redirects reach the leader), or
//   503 problem+json while no leader is known.
// It closes before the instance starts its real API on the same address.
//
// cpp-httplib rather than daemon/http: this server has no service, no token and two routes, and
// must not depend on what only a leader builds.
//
// Threading: set_leader() from any thread; the server's own threads answer.
class StandbyServer {
 public:
  static Result<std::unique_ptr<StandbyServer>> start(const std::string& bind, int port,
                                                      const std::string& tls_cert,
                                                      const std::string& tls_key);
  ~StandbyServer();  // stops answering and joins
  StandbyServer(const StandbyServer&) = delete;
  StandbyServer& operator=(const StandbyServer&) = delete;

  void set_leader(const std::string& holder, const std::string& url, int64_t epoch) EXCLUDES(mu_);

 private:
  StandbyServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  Mutex mu_;
  std::string holder_ GUARDED_BY(mu_);
  std::string url_ GUARDED_BY(mu_);
  int64_t epoch_ GUARDED_BY(mu_) = 0;
};

}  // namespace armhive
