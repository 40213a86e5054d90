#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "daemon/http/message.h"
#include "daemon/store/token_store.h"

namespace armhive {

enum class Access { kPublic, kRead, kWrite };

// What a handler gets: the authenticated caller, the request, a response to fill, and the
// exchange, which it keeps (keep()) to answer later from another thread instead.
struct Call {
  const TokenInfo& who;
  const HttpRequest& req;
  HttpResponse res;
  std::shared_ptr<Exchange> exchange;
  bool kept = false;

  std::shared_ptr<Exchange> keep() {
    kept = true;
    return exchange;
  }
};

// A failed Status becomes a problem+json reply; on success `res` is sent unless kept.
using Handler = std::function<Status(Call&)>;

struct Route {
  std::string method;
  std::string pattern;  // "/v1/leases/{id}/renew": a {name} segment matches one segment
  Access access = Access::kRead;
  Handler handler;
  bool json_body = false;  // POST with a JSON body: a non-empty body must be application/json
  // Answered on the connection's thread without a worker: cheap and touching no service.
  bool on_io_thread = false;
  // The body is not read before the handler runs: it reads HttpRequest::body_source itself,
  // in pieces and without max_body_bytes (an upload of any size that never sits in memory).
  // The connection is closed after the answer (the body may be left unread).
  bool streamed_body = false;
  // Served also on connections over the caps (health and metrics stay reachable).
  bool over_cap = false;
};

// The route table. Routes match in registration order (literal routes before the {id} ones
// beside them). Built before start(), read-only while serving (no lock).
class Router {
 public:
  void add(Route route);

  struct Match {
    const Route* route = nullptr;     // null: no route for this method
    std::vector<std::string> params;  // the {name} segments
    std::string allow;                // route null, path known: the methods it has ("GET, POST")
  };
  Match match(std::string_view method, std::string_view path) const;

 private:
  struct Entry {
    Route route;
    std::vector<std::string> segments;
  };
  std::vector<Entry> entries_;
};

}  // namespace armhive
