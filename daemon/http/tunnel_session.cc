#include "daemon/http/tunnel_session.h"

#include <array>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

namespace armhive {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr size_t kBufferBytes = 64 * 1024;  // per direction
constexpr std::chrono::seconds kHandshakeTimeout{10};
constexpr std::chrono::seconds kIdleTimeout{60};

template <class Stream>
class Session final : public TunnelSession, public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Stream stream, tcp::socket guest, TunnelPlan plan, std::string peer,
          std::shared_ptr<void> hold)
      : ws_(std::move(stream)),
        guest_(std::move(guest)),
        plan_(std::move(plan)),
        hold_(std::move(hold)) {
    stats_.peer = std::move(peer);
  }

  void start(http::request<http::string_body> request) {
    beast::get_lowest_layer(ws_).expires_never();  // the WebSocket's own timeouts apply
    websocket::stream_base::timeout t{};
    t.handshake_timeout = kHandshakeTimeout;
    t.idle_timeout = kIdleTimeout;
    t.keep_alive_pings = true;
    ws_.set_option(t);
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& res) { res.set(http::field::server, "armhived"); }));
    ws_.binary(true);
    auto req = std::make_shared<http::request<http::string_body>>(std::move(request));
    ++pending_;
    ws_.async_accept(*req, [self = this->shared_from_this(), req](beast::error_code ec) {
      --self->pending_;
      if (self->done_) return self->report();
      if (ec) return self->finish("the WebSocket handshake failed: " + ec.message(), false);
      self->opened();
    });
  }

  void cut(std::string reason) override {
    net::post(ws_.get_executor(),
              [self = this->shared_from_this(), r = std::move(reason)] { self->finish(r, false); });
  }

 private:
  void opened() {
    accepted_ = true;
    if (plan_.on_status) plan_.on_status(101);
    std::weak_ptr<Session> weak = this->shared_from_this();
    bool keep = !plan_.on_open || plan_.on_open([weak] {
      if (auto self = weak.lock()) self->cut("lease ended");
    });
    open_ = keep;
    if (!keep) return finish("lease ended", false);
    read_client();
    read_guest();
  }

  // Every handler below first counts its operation done; once the tunnel is finishing, the last
  // one to complete reports (so the byte counts include every write that made it).
  void read_client() {
    ++pending_;
    ws_.async_read_some(net::buffer(up_), [self = this->shared_from_this()](beast::error_code ec,
                                                                            size_t n) {
      --self->pending_;
      if (self->done_) return self->report();
      if (ec) {
        return self->finish(ec == websocket::error::closed ? "client closed" : ec.message(), false);
      }
      ++self->pending_;
      net::async_write(self->guest_, net::buffer(self->up_.data(), n),
                       [self](beast::error_code e, size_t written) {
                         --self->pending_;
                         self->stats_.to_guest += written;
                         if (self->done_) return self->report();
                         if (e) return self->finish(e.message(), false);
                         self->read_client();
                       });
    });
  }

  void read_guest() {
    ++pending_;
    guest_.async_read_some(
        net::buffer(down_), [self = this->shared_from_this()](beast::error_code ec, size_t n) {
          --self->pending_;
          if (self->done_) return self->report();
          if (ec) return self->finish(ec == net::error::eof ? "guest closed" : ec.message(), true);
          self->writing_ = true;
          ++self->pending_;
          self->ws_.async_write(net::buffer(self->down_.data(), n),
                                [self](beast::error_code e, size_t written) {
                                  --self->pending_;
                                  self->writing_ = false;
                                  self->stats_.from_guest += written;
                                  if (self->done_) return self->report();
                                  if (e) return self->finish(e.message(), false);
                                  self->read_guest();
                                });
        });
  }

  // Ends the tunnel once: the guest connection closes; the client gets a WebSocket close when
  // the guest ended it (and no frame is being written), otherwise its socket is closed.
  void finish(std::string reason, bool graceful) {
    if (done_) return;
    done_ = true;
    stats_.reason = std::move(reason);
    beast::error_code ignored;
    guest_.shutdown(tcp::socket::shutdown_both, ignored);
    guest_.close(ignored);
    if (graceful && !writing_ && ws_.is_open()) {
      ++pending_;
      ws_.async_close(websocket::close_code::normal,
                      [self = this->shared_from_this()](beast::error_code) {
                        --self->pending_;
                        self->close_client();
                        self->report();
                      });
      return;
    }
    close_client();
    report();
  }

  void close_client() {
    beast::error_code ignored;
    auto& socket = beast::get_lowest_layer(ws_).socket();
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    hold_.reset();  // the HTTP connection's cap slot
  }

  // Once finished and no operation is pending: on_closed (once), then the plan is dropped. A
  // server stopping its io_context before that loses the report, never touches a freed context.
  void report() {
    if (!done_ || pending_ > 0 || reported_) return;
    reported_ = true;
    if (!accepted_ && plan_.on_status) plan_.on_status(400);  // the handshake itself failed
    if (open_ && plan_.on_closed) plan_.on_closed(stats_);
    plan_ = {};
  }

  // Everything below is touched only on the strand.
  websocket::stream<Stream> ws_;
  tcp::socket guest_;
  TunnelPlan plan_;
  std::shared_ptr<void> hold_;
  TunnelStats stats_;
  std::array<char, kBufferBytes> up_{};
  std::array<char, kBufferBytes> down_{};
  int pending_ = 0;        // operations started and not yet completed
  bool accepted_ = false;  // the 101 went out
  bool open_ = false;      // accepted and attached to the lease (on_open said keep)
  bool done_ = false;
  bool reported_ = false;
  bool writing_ = false;
};

template <class Stream>
std::shared_ptr<TunnelSession> start(Stream stream, http::request<http::string_body> request,
                                     tcp::socket guest, TunnelPlan plan, std::string peer,
                                     std::shared_ptr<void> hold) {
  auto s = std::make_shared<Session<Stream>>(std::move(stream), std::move(guest), std::move(plan),
                                             std::move(peer), std::move(hold));
  s->start(std::move(request));
  return s;
}

}  // namespace

std::shared_ptr<TunnelSession> start_tunnel_session(beast::tcp_stream stream,
                                                    http::request<http::string_body> request,
                                                    tcp::socket guest, TunnelPlan plan,
                                                    std::string peer, std::shared_ptr<void> hold) {
  return start(std::move(stream), std::move(request), std::move(guest), std::move(plan),
               std::move(peer), std::move(hold));
}

std::shared_ptr<TunnelSession> start_tunnel_session(beast::ssl_stream<beast::tcp_stream> stream,
                                                    http::request<http::string_body> request,
                                                    tcp::socket guest, TunnelPlan plan,
                                                    std::string peer, std::shared_ptr<void> hold) {
  return start(std::move(stream), std::move(request), std::move(guest), std::move(plan),
               std::move(peer), std::move(hold));
}

}  // namespace armhive
