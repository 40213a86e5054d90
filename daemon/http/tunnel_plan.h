#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace armhive {

// What one API tunnel (GET /v1/leases/{id}/tunnel, a WebSocket) carried, reported once when it
// ends.
struct TunnelStats {
  std::string peer;         // the client's address
  uint64_t to_guest = 0;    // bytes from the client to the guest port
  uint64_t from_guest = 0;  // bytes from the guest port to the client
  std::string reason;       // why it ended ("client closed", "guest closed", "lease ended", ...)
};

// How a handler turns its request into a tunnel (Exchange::upgrade): the connection connects to
// address:port (within connect_timeout; a failure is a 502 problem), accepts the WebSocket
// (101) and relays binary frames to and from that TCP connection on its own executor.
//
// Threading: every callback runs on the connection's executor (an I/O thread): each must return
// at once (post anything slow to a worker).
struct TunnelPlan {
  std::string address;  // IPv4/IPv6 literal
  int port = 0;
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // Called once the WebSocket is open, with a function that cuts the tunnel (callable from any
  // thread, returns at once). Returns false when the tunnel must not stay (the lease ended
  // meanwhile): it is cut at once.
  std::function<bool(std::function<void()> cut)> on_open;
  // Called exactly once after on_open returned true, when the tunnel has ended.
  std::function<void(const TunnelStats&)> on_closed;
  // The HTTP status the request got: 101, or the problem's (for the request metrics and log).
  std::function<void(int status)> on_status;
};

}  // namespace armhive
