#include "daemon/http/middleware.h"

#include <strings.h>

#include <boost/asio/post.hpp>
#include <chrono>
#include <exception>
#include <mutex>

#include "api/json.h"
#include "base/bearer_token.h"
#include "base/utf8.h"

namespace armhive {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Whether a Content-Type names JSON: application/json or application/*+json, any parameters.
bool is_json_media_type(std::string_view type) {
  type = type.substr(0, type.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.remove_suffix(1);
  constexpr std::string_view kJson = "application/json";
  if (type.size() == kJson.size() && strncasecmp(type.data(), kJson.data(), kJson.size()) == 0) {
    return true;
  }
  constexpr std::string_view kApp = "application/", kSuffix = "+json";
  return type.size() > kApp.size() + kSuffix.size() &&
         strncasecmp(type.data(), kApp.data(), kApp.size()) == 0 &&
         strncasecmp(type.data() + type.size() - kSuffix.size(), kSuffix.data(), kSuffix.size()) ==
             0;
}

// The method as a metric label: the ones HTTP defines, else "other". The method is whatever
// the client sent (Beast accepts any token), and every distinct label value is a series kept
// for the daemon's lifetime: without this, each invented method was a new series, from anyone
// without a token (issue 33 finding 2).
std::string_view method_label(std::string_view method) {
  for (std::string_view known :
       {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"}) {
    if (method == known) return known;
  }
  return "other";
}

// Records the reply's status once it is known, then forwards to the connection.
class RecordingExchange final : public Exchange,
                                public std::enable_shared_from_this<RecordingExchange> {
 public:
  using Recorder = std::function<void(int status)>;
  RecordingExchange(std::shared_ptr<Exchange> inner, Recorder recorder)
      : inner_(std::move(inner)), recorder_(std::move(recorder)) {}

  void respond(HttpResponse r) override {
    note(r.status);
    inner_->respond(std::move(r));
  }
  void begin_stream(HttpResponse head) override {
    note(head.status);
    inner_->begin_stream(std::move(head));
  }
  void write_chunk(std::string data) override { inner_->write_chunk(std::move(data)); }
  void end_stream() override { inner_->end_stream(); }
  void abort_stream() override { inner_->abort_stream(); }
  size_t queued_bytes() const override { return inner_->queued_bytes(); }
  boost::asio::any_io_executor executor() override { return inner_->executor(); }
  void on_abort(std::function<void()> callback) override { inner_->on_abort(std::move(callback)); }
  void upgrade(TunnelPlan plan) override {
    // The status is known once the connection has connected to the target (101) or not.
    plan.on_status = [self = shared_from_this()](int status) { self->note(status); };
    inner_->upgrade(std::move(plan));
  }

 private:
  void note(int status) {
    std::call_once(once_, [&] { recorder_(status); });
  }
  std::shared_ptr<Exchange> inner_;
  Recorder recorder_;
  std::once_flag once_;
};

}  // namespace

HttpResponse problem_response(const Status& s) {
  Problem p = problem_from_status(s);
  HttpResponse res;
  res.status = p.status;
  if (s.code() == ErrorCode::kUnauthenticated) {
    res.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"armhive\"");
  }
  res.content_type = "application/problem+json";
  res.body = dump_json(to_json(p));
  return res;
}

void Pipeline::dispatch(HttpRequest request, std::shared_ptr<Exchange> exchange, bool over_cap) {
  auto start = SteadyClock::now();
  Router::Match m = router_.match(request.method, request.path);
  std::string name = m.route ? m.route->pattern : "other";
  auto req = std::make_shared<HttpRequest>(std::move(request));
  auto recorded = std::make_shared<RecordingExchange>(std::move(exchange), [this, req, name,
                                                                            start](int status) {
    record(*req, name, status, std::chrono::duration<double>(SteadyClock::now() - start).count());
  });
  if (m.route == nullptr) {
    HttpResponse res;
    if (!m.allow.empty()) {
      res = problem_response(
          Status(ErrorCode::kMethodNotAllowed,
                 "no endpoint " + req->method + " " + req->path + "; this path allows " + m.allow));
      res.headers.emplace_back("Allow", m.allow);
    } else {
      res = problem_response(
          not_found("no endpoint " + req->method + " " + req->path + " (see /v1 in openapi.yaml)"));
    }
    recorded->respond(std::move(res));
    return;
  }
  if (over_cap && !m.route->over_cap) {
    HttpResponse res = problem_response(unavailable(
        "the server is at its connection limit; retry shortly (health and metrics still answer)"));
    res.headers.emplace_back("Retry-After", "1");
    res.close = true;
    recorded->respond(std::move(res));
    return;
  }
  req->path_params = std::move(m.params);
  const Route* route = m.route;
  if (route->on_io_thread) {
    run(*route, *req, recorded);
    return;
  }
  boost::asio::post(ctx_.workers, [this, route, req, recorded] { run(*route, *req, recorded); });
}

Status Pipeline::authorize(const Route& route, const HttpRequest& req, TokenInfo& who) {
  who.name = "anonymous";
  who.role = TokenRole::kRead;
  if (route.access == Access::kPublic) return Status::ok();
  const std::string auth = req.header("Authorization");
  ARMHIVE_ASSIGN_OR_RETURN(std::string_view secret, bearer_secret(auth));
  auto token = ctx_.tokens.authenticate(secret);
  if (!token.is_ok()) {
    if (token.status().code() == ErrorCode::kUnauthenticated) return token.status();
    return token.status().annotate("checking the token");
  }
  who = *token;
  if (route.access == Access::kWrite && who.role == TokenRole::kRead) {
    return {ErrorCode::kPermissionDenied,
            "token \"" + who.name + "\" has role read: it may only use GET requests"};
  }
  if (route.json_body && !req.body.empty() && !is_json_media_type(req.header("Content-Type"))) {
    std::string sent = req.header("Content-Type");
    return Status(ErrorCode::kUnsupportedMediaType,
                  "Content-Type must be application/json, not " +
                      (sent.empty() ? std::string("absent") : "\"" + sent + "\"") +
                      " (curl: use --json, or -H 'Content-Type: application/json')",
                  {}, "Content-Type");
  }
  return Status::ok();
}

void Pipeline::run(const Route& route, const HttpRequest& req,
                   const std::shared_ptr<Exchange>& exchange) {
  try {
    TokenInfo who;
    Status s = authorize(route, req, who);
    if (!s.is_ok()) {
      exchange->respond(problem_response(s));
      return;
    }
    Call call{who, req, {}, exchange};
    s = route.handler(call);
    if (!s.is_ok()) {
      exchange->respond(problem_response(s));
    } else if (!call.kept) {
      exchange->respond(std::move(call.res));
    }
  } catch (const std::exception& e) {
    ctx_.log("error: " + req.method + " " + req.path + ": " + e.what());
    exchange->respond(
        problem_response(internal_error("internal error while handling the request")));
  } catch (...) {
    ctx_.log("error: " + req.method + " " + req.path + ": unknown exception");
    exchange->respond(
        problem_response(internal_error("internal error while handling the request")));
  }
}

bool Pipeline::streams_body(std::string_view method, std::string_view path) const {
  Router::Match m = router_.match(method, path);
  return m.route != nullptr && m.route->streamed_body;
}

HttpResponse Pipeline::refuse(const HttpRequest& partial, const Status& status) {
  HttpResponse res = problem_response(status);
  res.close = true;
  record(partial, "other", res.status, 0);
  // A public route has no token to hold the refusal against (a webhook body over the limit):
  // it is audited, as what a stranger caused: rate limited per address, queued without
  // blocking this I/O thread, written by the audit log's own writer (AuditLog::record_stranger;
  // each refusal used to be a row and a task on the workers, issue 33 finding 3).
  Router::Match m = router_.match(partial.method, partial.path);
  if (m.route != nullptr && m.route->access == Access::kPublic) {
    (void)ctx_.audit.record_stranger("anonymous", "http.refused", partial.remote_addr, "",
                                     escape_for_log(partial.method + " " + partial.path) +
                                         " from " + partial.remote_addr + ": " +
                                         std::to_string(res.status) + " " + status.message());
  }
  return res;
}

// Every label is from a fixed set: the method through method_label(), the route the router's
// pattern (never the path as sent) or "other", the code one the server itself answered.
void Pipeline::record(const HttpRequest& req, const std::string& route, int status,
                      double seconds) {
  const std::string method(method_label(req.method));
  ctx_.metrics.inc("armhive_api_requests_total",
                   {{"method", method}, {"route", route}, {"code", std::to_string(status)}});
  if (route != "other") {
    ctx_.metrics.observe("armhive_api_request_duration_seconds",
                         {{"method", method}, {"route", route}}, seconds);
  }
  ctx_.log(req.remote_addr + " " + req.method + " " + req.path + " " + std::to_string(status));
}

}  // namespace armhive
