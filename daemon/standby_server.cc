#include "daemon/standby_server.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "base/bearer_token.h"
#include "base/version.h"
#include "daemon/http/convert.h"
#include "daemon/store/pg_leader_lease.h"

namespace armhive {

Result<std::unique_ptr<StandbyServer>> StandbyServer::start(const Options& options) {
  const std::string& bind = options.bind;
  const int port = options.port;
  const std::string& tls_cert = options.tls_cert;
  const std::string& tls_key = options.tls_key;
  std::unique_ptr<StandbyServer> s(new StandbyServer(options));
  if (!tls_cert.empty()) {
    s->server_ = std::make_unique<httplib::SSLServer>(tls_cert.c_str(), tls_key.c_str());
    if (!s->server_->is_valid()) {
      return unavailable("cannot load the TLS certificate and key", tls_cert);
    }
  } else {
    s->server_ = std::make_unique<httplib::Server>();
  }
  // SO_REUSEADDR, not httplib's default SO_REUSEPORT: the connections it answered leave
  // TIME_WAIT sockets on the port whose flag the leader's API (Boost.Asio, SO_REUSEADDR) must
  // match to bind it right after, and SO_REUSEPORT would let another process share the port.
  s->server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    (void)setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  StandbyServer* self = s.get();
  // Both answers are problems (`unavailable`); /healthz names the leader as an extension.
  auto unavailable_problem = [](const std::string& detail) {
    return nlohmann::json{{"type", "https://armhive.dev/problems/unavailable"},
                          {"title", "Service Unavailable"},
                          {"status", 503},
                          {"detail", detail}};
  };
  s->server_->Get("/healthz", [self, unavailable_problem](const httplib::Request&,
                                                          httplib::Response& res) {
    MutexLock lock(self->mu_);
    nlohmann::json body = unavailable_problem(
        self->holder_.empty()
            ? "standby (armhived " + std::string(kVersion) + "): no leader known yet"
            : "standby (armhived " + std::string(kVersion) + "): " + self->holder_ + " leads at " +
                  self->url_);
    if (!self->holder_.empty()) {
      body["leader"] = {{"holder", self->holder_}, {"url", self->url_}, {"epoch", self->epoch_}};
      if (self->since_ms_ != 0) body["leader"]["since"] = to_rfc3339(from_unix_ms(self->since_ms_));
    }
    res.status = 503;
    res.set_content(body.dump(), "application/problem+json");
  });
  auto redirect = [self, unavailable_problem](const httplib::Request& req, httplib::Response& res) {
    MutexLock lock(self->mu_);
    if (self->url_.empty()) {
      res.status = 503;
      res.set_content(
          unavailable_problem("this armhived is a standby and no leader is known yet").dump(),
          "application/problem+json");
      return;
    }
    res.status = 307;
    res.set_header("Location", self->url_ + req.target);
    res.set_header("Retry-After", "1");
  };
  s->server_->Get("/v1/cluster", [self](const httplib::Request& req, httplib::Response& res) {
    auto [status, body] = self->cluster(req.get_header_value("Authorization"));
    res.status = status;
    if (status == 401) res.set_header("WWW-Authenticate", "Bearer realm=\"armhive\"");
    res.set_content(body, status == 200 ? "application/json" : "application/problem+json");
  });
  const std::string any = R"(/.*)";
  s->server_->Get(any, redirect);
  s->server_->Post(any, redirect);
  s->server_->Put(any, redirect);
  s->server_->Patch(any, redirect);
  s->server_->Delete(any, redirect);
  s->port_ = port == 0 ? s->server_->bind_to_any_port(bind)
                       : (s->server_->bind_to_port(bind, port) ? port : -1);
  if (s->port_ < 0) return unavailable("cannot listen on " + bind + ":" + std::to_string(port));
  s->thread_ = std::thread([self] { self->server_->listen_after_bind(); });
  return s;
}

StandbyServer::StandbyServer(Options options) : options_(std::move(options)) {}

StandbyServer::~StandbyServer() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

void StandbyServer::set_leader(const std::string& holder, const std::string& url, int64_t epoch,
                               int64_t since_ms) {
  MutexLock lock(mu_);
  holder_ = holder;
  url_ = url;
  epoch_ = epoch;
  since_ms_ = since_ms;
}

Result<std::shared_ptr<StandbyServer::Store>> StandbyServer::store() {
  {
    MutexLock lock(mu_);
    if (store_) return store_;
  }
  // Connected without the lock (the connection has its own deadlines); two requests racing
  // here both connect and the second keeps the first's.
  auto made = std::make_shared<Store>();
  ARMHIVE_ASSIGN_OR_RETURN(made->db, PgDatabase::connect(options_.store_url));
  ARMHIVE_ASSIGN_OR_RETURN(made->tokens, TokenStore::open(*made->db, clock_));
  MutexLock lock(mu_);
  if (!store_) store_ = std::move(made);
  return store_;
}

std::pair<int, std::string> StandbyServer::cluster(const std::string& authorization) {
  auto fail = [](const Status& s) {
    return std::pair<int, std::string>(http_status(s.code()), problem_json_text(s));
  };
  // The leader's checks (bearer_secret, as daemon/http/middleware.cc): nothing is read before the
  // token is known good.
  auto secret = bearer_secret(authorization);
  if (!secret.is_ok()) return fail(secret.status());
  auto store = this->store();
  if (!store.is_ok()) {
    return fail(Status(ErrorCode::kUnavailable,
                       "standby: the database does not answer (" + store.status().message() + ")"));
  }
  auto who = (*store)->tokens->authenticate(*secret);
  if (!who.is_ok()) {
    if (who.status().code() == ErrorCode::kUnauthenticated) return fail(who.status());
    return fail(who.status().annotate("checking the token"));
  }
  auto view = PgLeaderLease::read_view(*(*store)->db, options_.lease);
  if (!view.is_ok()) return fail(view.status());
  return {200, cluster_json_text(*view)};
}

}  // namespace armhive
