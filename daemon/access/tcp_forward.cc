#include "daemon/access/tcp_forward.h"

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "base/close_on_exec.h"

namespace armhive {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

std::string endpoint_text(const tcp::socket& s) {
  boost::system::error_code ec;
  tcp::endpoint ep = s.remote_endpoint(ec);
  if (ec) return "unknown";
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

}  // namespace

// One relayed connection: client <-> upstream, two half-duplex pumps. Ends (both sockets
// closed) when either side closes or fails, when it carried nothing for the idle timeout, or
// when the forward is closed. Its share of the host-wide budget goes back when it is destroyed
// (after its last handler ran), exactly once.
struct TcpForward::Session : std::enable_shared_from_this<Session> {
  static constexpr size_t kBuffer = 64 * 1024;
  Session(std::shared_ptr<TcpForward> forward, tcp::socket client, bool budgeted)
      : owner(std::move(forward)),
        client(std::move(client)),
        upstream(owner->strand_),
        timer(owner->strand_),
        budgeted(budgeted) {}
  ~Session() {
    if (budgeted && owner->options_.budget) owner->options_.budget->give_back();
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The idle check: the timer is not re-armed for every piece relayed, only when it fires
  // (at the latest last_activity + idle), so a busy session costs no timer operations.
  void watch_idle() {
    const auto idle = owner->options_.idle_timeout;
    if (idle.count() <= 0 || !client.is_open()) return;
    timer.expires_at(last_activity + idle);
    timer.async_wait([self = shared_from_this(), idle](boost::system::error_code e) {
      if (e || !self->client.is_open()) return;
      if (std::chrono::steady_clock::now() - self->last_activity >= idle) {
        self->stop();
        return;
      }
      self->watch_idle();
    });
  }

  void stop() {
    boost::system::error_code ec;
    client.shutdown(tcp::socket::shutdown_both, ec);
    client.close(ec);
    upstream.shutdown(tcp::socket::shutdown_both, ec);
    upstream.close(ec);
    timer.cancel();
    owner->sessions_.erase(shared_from_this());
  }

  void pump(tcp::socket& from, tcp::socket& to, std::array<char, kBuffer>& buf) {
    from.async_read_some(asio::buffer(buf), [self = shared_from_this(), &from, &to, &buf](
                                                boost::system::error_code ec, size_t n) {
      self->last_activity = std::chrono::steady_clock::now();
      if (ec) {
        // Half-close: pass the EOF on, keep the other direction until it ends too.
        if (ec == asio::error::eof && to.is_open()) {
          boost::system::error_code ignored;
          to.shutdown(tcp::socket::shutdown_send, ignored);
          if (++self->eofs < 2) return;
        }
        self->stop();
        return;
      }
      asio::async_write(to, asio::buffer(buf.data(), n),
                        [self, &from, &to, &buf](boost::system::error_code wec, size_t) {
                          if (wec) {
                            self->stop();
                            return;
                          }
                          self->pump(from, to, buf);
                        });
    });
  }

  std::shared_ptr<TcpForward> owner;
  tcp::socket client;
  tcp::socket upstream;
  asio::steady_timer timer;
  int eofs = 0;
  bool relaying = false;
  const bool budgeted;  // holds a share of options_.budget
  std::chrono::steady_clock::time_point last_activity = std::chrono::steady_clock::now();
  std::array<char, kBuffer> up_buf{};
  std::array<char, kBuffer> down_buf{};
};

TcpForward::TcpForward(asio::io_context& io, Options options, ForwardObserver observer)
    : strand_(asio::make_strand(io)),
      acceptor_(strand_),
      options_(std::move(options)),
      observer_(std::move(observer)) {}

TcpForward::~TcpForward() noexcept = default;

Result<std::shared_ptr<TcpForward>> TcpForward::open(asio::io_context& io, Options options,
                                                     ForwardObserver observer) {
  boost::system::error_code ec;
  asio::ip::address address = asio::ip::make_address(options.listen_address, ec);
  if (ec) return invalid_argument("access.listen", "not an IP address: " + options.listen_address);
  asio::ip::make_address(options.target_address, ec);
  if (ec) return invalid_argument("address", "not an IP address: " + options.target_address);
  std::shared_ptr<TcpForward> f(new TcpForward(io, std::move(options), std::move(observer)));
  tcp::endpoint ep(address, static_cast<unsigned short>(f->options_.listen_port));
  f->acceptor_.open(ep.protocol(), ec);
  if (!ec) set_close_on_exec(f->acceptor_.native_handle());
  if (!ec) f->acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) f->acceptor_.bind(ep, ec);
  if (!ec) f->acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    const std::string where =
        f->options_.listen_address + ":" + std::to_string(f->options_.listen_port);
    if (ec == asio::error::address_in_use) return conflict("port in use", where);
    return unavailable("cannot listen: " + ec.message(), where);
  }
  f->port_ = f->acceptor_.local_endpoint(ec).port();
  asio::post(f->strand_, [f] { f->accept(); });
  return f;
}

void TcpForward::accept() {
  if (closed_) return;
  // The accepted socket lives on the forward's strand, like everything of this forward, so
  // close() reaches every socket without locks.
  acceptor_.async_accept(
      strand_, [self = shared_from_this()](boost::system::error_code ec, tcp::socket client) {
        if (self->closed_) return;
        if (!ec) {
          set_close_on_exec(client.native_handle());
          const Options& o = self->options_;
          if (o.max_sessions > 0 && self->sessions_.size() >= static_cast<size_t>(o.max_sessions)) {
            self->refuse(std::move(client), "forward",
                         "the forward's cap of " + std::to_string(o.max_sessions) + " sessions");
          } else if (o.budget && !o.budget->try_take()) {
            self->refuse(
                std::move(client), "host",
                "the host's cap of " + std::to_string(o.budget->max()) + " forwarded sessions");
          } else {
            self->start_session(std::move(client), o.budget != nullptr);
          }
        }
        self->accept();
      });
}

void TcpForward::refuse(tcp::socket client, const char* cap, std::string why) {
  ForwardConnection info{endpoint_text(client), false, std::move(why), true, cap};
  // Counted before the close: whoever sees the connection end finds the refusal counted.
  if (observer_) observer_(info);
  boost::system::error_code ignored;
  client.shutdown(tcp::socket::shutdown_both, ignored);
  client.close(ignored);
}

void TcpForward::start_session(tcp::socket client, bool budgeted) {
  auto session = std::make_shared<Session>(shared_from_this(), std::move(client), budgeted);
  sessions_.insert(session);
  ForwardConnection info{endpoint_text(session->client), false, {}};
  tcp::endpoint target(asio::ip::make_address(options_.target_address),
                       static_cast<unsigned short>(options_.target_port));
  session->timer.expires_after(options_.connect_timeout);
  session->timer.async_wait([session](boost::system::error_code e) {
    // Fired before the connect completed: abort it (its handler reports "timed out").
    if (!e && !session->relaying) {
      boost::system::error_code ignored;
      session->upstream.cancel(ignored);
    }
  });
  boost::system::error_code opened;
  session->upstream.open(target.protocol(), opened);
  set_close_on_exec(session->upstream.native_handle());
  session->upstream.async_connect(
      target, [this, session, info](boost::system::error_code e) mutable {
        session->timer.cancel();
        if (closed_) return;
        info.connected = !e;
        if (e) info.error = e == asio::error::operation_aborted ? "timed out" : e.message();
        if (observer_) observer_(info);
        if (e) {
          session->stop();
          return;
        }
        session->relaying = true;
        boost::system::error_code ignored;
        session->upstream.set_option(tcp::no_delay(true), ignored);
        session->client.set_option(tcp::no_delay(true), ignored);
        session->pump(session->client, session->upstream, session->up_buf);
        session->pump(session->upstream, session->client, session->down_buf);
        session->last_activity = std::chrono::steady_clock::now();
        session->watch_idle();
      });
}

void TcpForward::close() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->closed_) return;
    self->closed_ = true;
    boost::system::error_code ec;
    self->acceptor_.close(ec);
    auto sessions = self->sessions_;  // stop() erases from the set
    for (const auto& s : sessions) s->stop();
  });
}

}  // namespace armhive
