#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/core/clock.h"
#include "daemon/store/pg_database.h"
#include "daemon/store/token_store.h"

namespace httplib {
class Server;
}

namespace armhive {

// What a standby armhived (daemon/leader_election.h) answers on the API's address while it
// waits to lead, so that clients and load balancers are told where the leader is:
// - GET /healthz: 503, a problem (`unavailable`) whose detail says "standby" and whose
//   `leader` names {"holder", "url", "epoch", "since"} (a load balancer's health check sends
//   no traffic here);
// - GET /v1/cluster: answered here, not redirected (the point is to ask any instance who leads,
//   even while the leader is down), as the leader answers it: from the database, on a
//   connection of this server's own, for a bearer token the database's token store
//   (daemon/store/token_store.h) accepts; 401 problem+json otherwise, 503 while the database
//   does not answer;
// - anything else: 307 Temporary Redirect to the same path and query on the leader's API URL
//   (method and body kept, as 307 requires; clients that follow redirects reach the leader), or
//   503 problem+json while no leader is known.
// It closes before the instance starts its real API on the same address.
//
// cpp-httplib rather than daemon/http: this server has no service and three routes, and must
// not depend on what only a leader builds.
//
// Threading: set_leader() from any thread; the server's own threads answer. mu_ is never held
// across a database call.
class StandbyServer {
 public:
  struct Options {
    std::string bind;
    int port = 0;
    std::string tls_cert;
    std::string tls_key;
    std::string store_url;  // [store] url: GET /v1/cluster reads there
    std::chrono::milliseconds lease{std::chrono::seconds(10)};  // [store] leader_lease
  };
  static Result<std::unique_ptr<StandbyServer>> start(const Options& options);
  ~StandbyServer();  // stops answering and joins
  StandbyServer(const StandbyServer&) = delete;
  StandbyServer& operator=(const StandbyServer&) = delete;

  int port() const { return port_; }  // the bound port (Options::port 0: an ephemeral one)
  // `since_ms`: when the leader's epoch began (database clock, ms since the Unix epoch).
  void set_leader(const std::string& holder, const std::string& url, int64_t epoch,
                  int64_t since_ms) EXCLUDES(mu_);

 private:
  // The database connection GET /v1/cluster reads on, made at the first request that needs it
  // (the database may be down when the standby starts; PgDatabase re-makes a lost connection).
  struct Store {
    std::unique_ptr<PgDatabase> db;
    std::unique_ptr<TokenStore> tokens;  // on db; declared after it, so destroyed first
  };
  explicit StandbyServer(Options options);  // in the .cc, where httplib::Server is complete
  Result<std::shared_ptr<Store>> store() EXCLUDES(mu_);
  // GET /v1/cluster's answer for the Authorization header `authorization`: the status and the
  // body (the cluster, or a problem).
  std::pair<int, std::string> cluster(const std::string& authorization);

  const Options options_;
  SystemClock clock_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  Mutex mu_;
  std::string holder_ GUARDED_BY(mu_);
  std::string url_ GUARDED_BY(mu_);
  int64_t epoch_ GUARDED_BY(mu_) = 0;
  int64_t since_ms_ GUARDED_BY(mu_) = 0;
  std::shared_ptr<Store> store_ GUARDED_BY(mu_);
};

}  // namespace armhive
