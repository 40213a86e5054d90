#pragma once

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
// the target, and how much it carried when it ended.
struct ForwardConnection {
  std::string peer;  // "ADDRESS:PORT" of the client
  bool connected = false;
  std::string error;  // why the target could not be reached (connected == false)
};
using ForwardObserver = std::function<void(const ForwardConnection&)>;

// One listening TCP port relaying every accepted connection to target:port (the guest).
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
  void start_session(boost::asio::ip::tcp::socket client);

  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::ip::tcp::acceptor acceptor_;
  Options options_;
  ForwardObserver observer_;
  int port_ = 0;
  bool closed_ = false;                          // strand only
  std::set<std::shared_ptr<Session>> sessions_;  // strand only
};

}  // namespace armhive
