#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <functional>
#include <memory>
#include <string>

#include "daemon/http/middleware.h"
#include "daemon/http/server.h"

namespace armhive {

// One accepted connection as the server tracks it.
// Threading: both methods may be called from any thread; they post to the connection.
class ClientConnection {
 public:
  virtual ~ClientConnection() = default;
  // Closes the connection if it is between requests (waiting for one to arrive); a busy one
  // closes after its current answer.
  virtual void close_if_idle() = 0;
  // Closes it now, abandoning whatever it was doing (the final step of stop()).
  virtual void close_now() = 0;
};

struct ConnectionEnv {
  Pipeline& pipeline;
  const HttpOptions& options;
  // Called once, from the connection's destructor (any thread): frees its cap slot.
  std::function<void()> on_closed;
  bool over_cap = false;  // admitted beyond the caps: one request, health and metrics only
  const std::atomic<bool>* stopping = nullptr;  // set by stop(): answer, then close
};

// Starts the per-connection state machine on the socket's executor (a strand): read the
// header (deadline: header_timeout, keep_alive_timeout between requests) → read the body
// (read_timeout; at most max_body_bytes, chunked included: 413) → the pipeline → write
// (write_timeout) → again while keep-alive. With `tls`, a TLS handshake comes first (within
// header_timeout). Every wait has a deadline, so a slow or silent client only ever holds its
// own socket, never a thread. The returned handle does not keep the connection alive.
std::weak_ptr<ClientConnection> start_connection(boost::asio::ip::tcp::socket socket,
                                                 boost::asio::ssl::context* tls, ConnectionEnv env);

}  // namespace armhive
