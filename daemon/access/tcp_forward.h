#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "base/result.h"

namespace armhive {

// What a forward reports: a connection accepted (from which address), one that could not reach
// the target, and one refused over a session cap.
struct ForwardConnection {
  std::string peer;  // "ADDRESS:PORT" of the client
  bool connected = false;
  std::string error;  // why the target could not be reached, or the cap (connected == false)
  // Closed at once because the forward or the host had its most sessions open; `cap` says which
  // ("forward" or "host").
  bool refused = false;
  std::string cap;
};

// The sessions every forward of a host may hold together: a counter shared by the forwards
// (the host-wide cap). Thread-safe (an atomic); shared by the forwards and their sessions.
class SessionBudget {
 public:
  explicit SessionBudget(int max) : max_(max) {}
  // Takes a session's share; false when `max` are taken already.
  bool try_take() {
    int n = used_.load();
    while (n < max_.load()) {
      if (used_.compare_exchange_weak(n, n + 1)) return true;
    }
    return false;
  }
  void give_back() { used_.fetch_sub(1); }
  int used() const { return used_.load(); }
  int max() const { return max_.load(); }
  // A reload: sessions over a lowered cap run on (nothing running is cut); new ones wait for
  // room.
  void set_max(int max) { max_.store(max); }

 private:
  std::atomic<int> max_;
  std::atomic<int> used_{0};
};
using ForwardObserver = std::function<void(const ForwardConnection&)>;

// One listening TCP port relaying every accepted connection to target:port (the guest), at
// most Options::max_sessions at once (and within the shared budget), each closed when idle.
//
// Ownership: shared (the acceptor's and the connections' handlers keep it alive); close()
// ends it. Threading: everything runs on the forward's strand over a borrowed io_context;
// open() binds synchronously (a local syscall, no network wait); close() may be called from
// any thread and returns at once, the sockets being closed on the strand soon after.
// The observer is called on the strand: it must not block (copy and return).
class TcpForward : public std::enable_shared_from_this<TcpForward> {
 public:
  struct Options {
    std::string listen_address;  // IPv4/IPv6 literal
    int listen_port = 0;         // 0: an ephemeral port
    std::string target_address;
    int target_port = 0;
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
    // Sessions this forward relays at once; a connection beyond it is accepted and closed at
    // once (reported with refused, cap "forward"). Zero or less: no cap of its own.
    int max_sessions = 64;
    // The host-wide cap shared with other forwards (cap "host"); null: none.
    std::shared_ptr<SessionBudget> budget;
    // A relaying session that carries no byte either way for this long is closed (a client that
    // went away without closing, or one holding a slot). Zero: never.
    std::chrono::milliseconds idle_timeout{std::chrono::minutes(15)};
  };

  // kConflict when the port is taken (the caller tries another), kInvalidArgument for a bad
  // address, kUnavailable for other bind errors.
  static Result<std::shared_ptr<TcpForward>> open(boost::asio::io_context& io, Options options,
                                                  ForwardObserver observer);
  ~TcpForward() noexcept;
  TcpForward(const TcpForward&) = delete;
  TcpForward& operator=(const TcpForward&) = delete;

  int port() const { return port_; }
  // Stops listening and cuts every established connection. Idempotent.
  void close();

 private:
  struct Session;
  TcpForward(boost::asio::io_context& io, Options options, ForwardObserver observer);
  void accept();
  void start_session(boost::asio::ip::tcp::socket client, bool budgeted);
  void refuse(boost::asio::ip::tcp::socket client, const char* cap, std::string why);

  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::ip::tcp::acceptor acceptor_;
  Options options_;
  ForwardObserver observer_;
  int port_ = 0;
  bool closed_ = false;                          // strand only
  std::set<std::shared_ptr<Session>> sessions_;  // strand only
};

}  // namespace armhive
