#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <memory>
#include <string>

#include "daemon/http/tunnel_plan.h"

namespace armhive {

// One open API tunnel: a WebSocket on the client's connection relaying binary frames to and
// from one TCP connection to the guest (tunnel_plan.h).
//
// Design: both directions are async on the connection's strand, each with one fixed 64 KiB
// buffer: a read from one side is followed by its write to the other before the next read, so a
// slow reader stalls its writer (TCP backpressure end to end) and memory per tunnel is bounded.
// No thread is held. The WebSocket pings an idle client every 30 s and ends a tunnel whose client
// stayed silent for 60 s (a vanished laptop does not keep a guest connection open).
//
// Ownership: the session keeps itself alive while an operation is pending, and keeps `hold` (the
// HTTP connection, whose cap slot the tunnel still uses) until it ends.
// Threading: cut() may be called from any thread; everything else runs on the strand.
class TunnelSession {
 public:
  virtual ~TunnelSession() = default;
  // Ends the tunnel now (both sockets closed); idempotent.
  virtual void cut(std::string reason) = 0;
};

// Accepts the WebSocket of `request` on `stream` and relays to `guest` (connected already, on
// the stream's executor). `peer` is the client's address for TunnelStats.
std::shared_ptr<TunnelSession> start_tunnel_session(
    boost::beast::tcp_stream stream,
    boost::beast::http::request<boost::beast::http::string_body> request,
    boost::asio::ip::tcp::socket guest, TunnelPlan plan, std::string peer,
    std::shared_ptr<void> hold);
std::shared_ptr<TunnelSession> start_tunnel_session(
    boost::beast::ssl_stream<boost::beast::tcp_stream> stream,
    boost::beast::http::request<boost::beast::http::string_body> request,
    boost::asio::ip::tcp::socket guest, TunnelPlan plan, std::string peer,
    std::shared_ptr<void> hold);

}  // namespace armhive
