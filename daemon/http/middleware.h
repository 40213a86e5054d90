#pragma once

#include <memory>

#include "base/status.h"
#include "daemon/http/context.h"
#include "daemon/http/message.h"
#include "daemon/http/router.h"

namespace armhive {

// The problem+json reply for a failed Status (RFC 7807 body from api/json.h; 401 adds
// WWW-Authenticate).
HttpResponse problem_response(const Status& status);

// The path every complete request takes, in order: route match (404; 405 with Allow) →
// bearer authentication (401) → role (403: read tokens only GET) → media type (415 for a
// non-empty body that is not application/json) → the handler, on a worker thread unless the
// route is on_io_thread → a failed Status or an exception becomes a problem+json reply →
// request counter, latency histogram and access-log line, when the reply's status is known
// (for a long-poll, when it is answered; for a stream, when its head is sent).
//
// Threading: dispatch() and refuse() are called on connection threads, concurrently; the
// pipeline itself is immutable after construction.
class Pipeline {
 public:
  Pipeline(ServerContext& ctx, const Router& router) : ctx_(ctx), router_(router) {}

  // `over_cap`: the connection is beyond the connection caps; only Route::over_cap routes
  // are served, the rest get 503 with Retry-After.
  void dispatch(HttpRequest request, std::shared_ptr<Exchange> exchange, bool over_cap);
  // A reply the connection makes before the request is complete (413 while the body is
  // read, 400 for a malformed request), recorded like every other; on a public route (the
  // GitHub webhook) also audited as `http.refused`, since no token answers for it.
  HttpResponse refuse(const HttpRequest& partial, const Status& status);
  // Whether the route of this request reads its body itself (Route::streamed_body): then the
  // connection dispatches after the header, without max_body_bytes.
  bool streams_body(std::string_view method, std::string_view path) const;

 private:
  void run(const Route& route, const HttpRequest& req, const std::shared_ptr<Exchange>& exchange);
  Status authorize(const Route& route, const HttpRequest& req, TokenInfo& who);
  void record(const HttpRequest& req, const std::string& route, int status, double seconds);

  ServerContext& ctx_;
  const Router& router_;
};

}  // namespace armhive
