#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/core/hypervisor.h"
#include "daemon/http/tunnel_plan.h"

namespace armhive {

// One HTTP request as the handlers see it: parsed, body complete (at most max_body_bytes),
// independent of the wire library. Built by the connection (connection.h), read-only after.
struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path and query
  std::string path;    // percent-decoded path
  // Query parameters in order, name and value percent-decoded, split at the first '='
  // ("label=k=v" keeps "k=v"); a bare "wait" has an empty value.
  std::vector<std::pair<std::string, std::string>> query;
  std::vector<std::pair<std::string, std::string>> headers;  // names as sent
  std::string body;  // empty on a Route::streamed_body route: read body_source instead
  // Route::streamed_body only: the body as it arrives (read on the handler's thread, each
  // read bounded by read_timeout and the whole body by read_timeout + Content-Length /
  // upload_min_bytes_per_second: kRequestTimeout (408) naming "body" past either; an error
  // once the client went away), and its declared Content-Length (nullopt: none was sent, e.g. a
  // chunked body).
  std::shared_ptr<ByteSource> body_source;
  std::optional<uint64_t> content_length;
  std::string remote_addr;
  std::vector<std::string> path_params;  // the {id} segments of the matched route, in order

  // The first header with this name (case-insensitive); empty when absent.
  std::string header(std::string_view name) const;
  bool has_param(std::string_view name) const;
  // The first value of a query parameter; empty when absent.
  std::string param(std::string_view name) const;
  std::vector<std::string> params(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  bool close = false;  // end the connection after this response
};

// Splits a request target into its decoded path and query (HttpRequest::path, HttpRequest::query).
void parse_target(std::string_view target, HttpRequest& request);
std::string percent_decode(std::string_view s, bool plus_is_space);

// The open exchange of a request whose answer comes later (a long-poll) or in pieces (the
// event stream). Handlers that keep it answer through it from any thread; every method
// posts to the connection, so none blocks. A handler that returns without keeping it gets its
// HttpResponse written at once.
//
// Threading: all methods may be called from any thread. Exactly one of respond() or
// begin_stream() takes effect; calls after the first, or after the client went away, are
// ignored.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void respond(HttpResponse response) = 0;
  // Sends the head (status, content type, headers) with chunked transfer encoding; then
  // write_chunk() any number of times and end_stream() once.
  virtual void begin_stream(HttpResponse head) = 0;
  virtual void write_chunk(std::string data) = 0;
  virtual void end_stream() = 0;
  // Ends a begun stream without its last chunk, so the client sees it broken off (a download
  // whose source failed midway) rather than complete.
  virtual void abort_stream() = 0;
  // Bytes handed to write_chunk() not yet written to the socket: a producer that can wait
  // (a download) keeps this bounded instead of being dropped at 8 MiB.
  virtual size_t queued_bytes() const = 0;
  // The connection's serialised executor, for timers of the waiting request.
  virtual boost::asio::any_io_executor executor() = 0;
  // Called once, on the connection's executor, when the connection ends before the answer
  // was complete (client gone, write timeout, server stop). May be set once.
  virtual void on_abort(std::function<void()> callback) = 0;
  // Instead of an answer: turns the request (a WebSocket upgrade) into a tunnel to
  // plan.address:plan.port (tunnel_plan.h). Like respond(), only the first answer counts.
  virtual void upgrade(TunnelPlan plan) = 0;
};

}  // namespace armhive
