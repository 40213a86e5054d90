#include "daemon/standby_server.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "base/version.h"

namespace armhive {

Result<std::unique_ptr<StandbyServer>> StandbyServer::start(const std::string& bind, int port,
                                                            const std::string& tls_cert,
                                                            const std::string& tls_key) {
  std::unique_ptr<StandbyServer> s(new StandbyServer());
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
  const std::string any = R"(/.*)";
  s->server_->Get(any, redirect);
  s->server_->Post(any, redirect);
  s->server_->Put(any, redirect);
  s->server_->Patch(any, redirect);
  s->server_->Delete(any, redirect);
  const bool bound =
      port == 0 ? s->server_->bind_to_any_port(bind) >= 0 : s->server_->bind_to_port(bind, port);
  if (!bound) return unavailable("cannot listen on " + bind + ":" + std::to_string(port));
  s->thread_ = std::thread([self] { self->server_->listen_after_bind(); });
  return s;
}

StandbyServer::~StandbyServer() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

void StandbyServer::set_leader(const std::string& holder, const std::string& url, int64_t epoch) {
  MutexLock lock(mu_);
  holder_ = holder;
  url_ = url;
  epoch_ = epoch;
}

}  // namespace armhive
