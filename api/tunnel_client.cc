#include "api/tunnel_client.h"

#include <poll.h>
#include <unistd.h>

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "api/json.h"
#include "api/server_url.h"
#include "base/url_encode.h"

namespace armhive {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr size_t kChunk = 64 * 1024;
constexpr std::chrono::seconds kIdleTimeout{90};  // the server pings every 30 s

struct ServerUrl {
  bool tls = false;
  std::string host;
  std::string port;
};

Result<ServerUrl> parse_server(const std::string& server) {
  ServerUrl u;
  std::string rest;
  if (server.rfind("https://", 0) == 0) {
    u.tls = true;
    rest = server.substr(8);
  } else if (server.rfind("http://", 0) == 0) {
    rest = server.substr(7);
  } else {
    return invalid_argument("server",
                            "must start with http:// or https:// (got \"" + server + "\")");
  }
  rest = rest.substr(0, rest.find('/'));
  if (!rest.empty() && rest.front() == '[') {  // [v6]:port
    size_t close = rest.find(']');
    if (close == std::string::npos) return invalid_argument("server", "unclosed [ in " + server);
    u.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size() && rest[close + 1] == ':') u.port = rest.substr(close + 2);
  } else {
    size_t colon = rest.rfind(':');
    u.host = rest.substr(0, colon);
    if (colon != std::string::npos) u.port = rest.substr(colon + 1);
  }
  if (u.host.empty()) return invalid_argument("server", "no host in " + server);
  if (u.port.empty()) u.port = u.tls ? "443" : "80";
  return u;
}

Status refused(const websocket::response_type& res) {
  int code = static_cast<int>(res.result_int());
  ErrorCode ec = code_from_http(code);
  if (ec == ErrorCode::kOk) ec = ErrorCode::kInternal;
  auto j = parse_json(res.body(), "response");
  if (j.is_ok()) {
    auto p = problem_from_json(*j);
    if (p.is_ok() && !p->detail.empty()) return {ec, p->detail, {}, p->field};
  }
  return {ec, "the server refused the tunnel: HTTP " + std::to_string(code)};
}

// Reads in_fd on its own thread (any kind of descriptor: pipe, socket, tty or file) and hands
// each chunk to the io_context, waiting until it is written: one chunk in flight.
class InputPump {
 public:
  InputPump() {
    if (pipe(stop_) != 0) stop_[0] = stop_[1] = -1;
  }
  ~InputPump() {
    stop();
    for (int fd : stop_) {
      if (fd >= 0) close(fd);
    }
  }
  template <class Send>
  void start(int fd, Send send) {
    thread_ = std::thread([this, fd, send] {
      std::array<char, kChunk> buf{};
      for (;;) {
        pollfd fds[2] = {{fd, POLLIN, 0}, {stop_[0], POLLIN, 0}};
        int r = poll(fds, 2, -1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 || (fds[1].revents != 0)) return;
        ssize_t n = read(fd, buf.data(), buf.size());
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return;  // end of input: the tunnel stays open for the answer
        {
          std::lock_guard lock(mu_);
          if (stopped_) return;
          sent_ = false;
        }
        send(std::string_view(buf.data(), static_cast<size_t>(n)), [this] {
          std::lock_guard lock(mu_);
          sent_ = true;
          cv_.notify_all();
        });
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return sent_ || stopped_; });
        if (stopped_) return;
      }
    });
  }
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopped_ = true;
    }
    cv_.notify_all();
    if (stop_[1] >= 0) (void)!write(stop_[1], "x", 1);
    if (thread_.joinable()) thread_.join();
  }

 private:
  int stop_[2] = {-1, -1};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool sent_ = false;
  bool stopped_ = false;
};

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

template <class Stream>
Status relay(net::io_context& io, websocket::stream<Stream>& ws, int in_fd, int out_fd) {
  Status result = Status::ok();
  bool done = false;
  beast::flat_buffer in;
  std::array<char, kChunk> chunk{};
  std::function<void()> read_ws;
  auto finish = [&](Status s) {
    if (done) return;
    done = true;
    result = std::move(s);
    beast::error_code ignored;
    beast::get_lowest_layer(ws).socket().close(ignored);
    io.stop();  // the WebSocket's idle timer may still be armed; nothing else is wanted now
  };
  read_ws = [&] {
    ws.async_read_some(net::buffer(chunk), [&](beast::error_code ec, size_t n) {
      if (done) return;
      if (ec == websocket::error::closed) return finish(Status::ok());
      if (ec) return finish(unavailable("the tunnel broke: " + ec.message()));
      if (!write_all(out_fd, chunk.data(), n)) return finish(Status::ok());  // reader gone
      read_ws();
    });
  };
  InputPump pump;
  pump.start(in_fd, [&](std::string_view data, std::function<void()> sent) {
    auto copy = std::make_shared<std::string>(data);
    net::post(io, [&, copy, sent = std::move(sent)] {
      if (done) return sent();
      ws.async_write(net::buffer(*copy), [&, copy, sent](beast::error_code ec, size_t) {
        if (ec && !done) finish(unavailable("the tunnel broke: " + ec.message()));
        sent();
      });
    });
  });
  read_ws();
  io.run();
  pump.stop();
  return result;
}

// How far one server got with the tunnel, for run_tunnel's failover.
struct Handshake {
  int status = 0;        // the HTTP answer to the upgrade, 0: none
  std::string location;  // of a 307/308
  bool relayed = false;  // the tunnel began: its end is the call's
};

template <class Stream>
Status handshake_and_relay(net::io_context& io, websocket::stream<Stream>& ws,
                           const ClientOptions& o, const std::string& origin,
                           const std::string& host, const std::string& target, int in_fd,
                           int out_fd, Handshake& hs) {
  ws.set_option(websocket::stream_base::decorator([&o](websocket::request_type& req) {
    req.set(http::field::user_agent, "armhive-tunnel");
    if (!o.token.empty()) req.set(http::field::authorization, "Bearer " + o.token);
  }));
  // Async: Beast 1.74's synchronous handshake drops a refusal's response (and its problem), and
  // only async operations honour the stream's deadline (options.timeout, set by the caller).
  websocket::response_type res;
  beast::error_code ec;
  beast::get_lowest_layer(ws).expires_after(o.timeout);
  ws.async_handshake(res, host, target, [&ec](beast::error_code e) { ec = e; });
  io.run();
  io.restart();
  if (ec) {
    if (res.result_int() != 0 && res.result() != http::status::switching_protocols) {
      hs.status = static_cast<int>(res.result_int());
      hs.location = std::string(res[http::field::location]);
      return refused(res);
    }
    return unavailable("no WebSocket handshake with " + origin + ": " + ec.message());
  }
  hs.relayed = true;
  beast::get_lowest_layer(ws).expires_never();
  websocket::stream_base::timeout t =
      websocket::stream_base::timeout::suggested(beast::role_type::client);
  t.idle_timeout = kIdleTimeout;
  t.keep_alive_pings = true;
  ws.set_option(t);
  ws.binary(true);
  return relay(io, ws, in_fd, out_fd);
}

// The tunnel through one server: `origin` (http(s)://host[:port]) and `target`.
Status tunnel_once(const ClientOptions& options, const std::string& origin,
                   const std::string& target, int in_fd, int out_fd, Handshake& hs) {
  ARMHIVE_ASSIGN_OR_RETURN(ServerUrl url, parse_server(origin));
  const std::string host_header = url.host + ":" + url.port;
  net::io_context io;
  beast::error_code ec;
  tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(url.host, url.port, ec);
  if (ec) return unavailable("cannot resolve " + url.host + ": " + ec.message());
  beast::tcp_stream tcp_stream(io);
  tcp_stream.expires_after(options.timeout);
  tcp_stream.connect(endpoints, ec);
  if (ec) {
    return unavailable("cannot reach " + origin + ": " + ec.message() +
                       " (is armhived running? check --server / ARMHIVE_SERVER)");
  }
  tcp_stream.socket().set_option(tcp::no_delay(true), ec);
  if (!url.tls) {
    websocket::stream<beast::tcp_stream> ws(std::move(tcp_stream));
    return handshake_and_relay(io, ws, options, origin, host_header, target, in_fd, out_fd, hs);
  }
  net::ssl::context ctx(net::ssl::context::tls_client);
  if (options.insecure) {
    ctx.set_verify_mode(net::ssl::verify_none);
  } else {
    ctx.set_verify_mode(net::ssl::verify_peer);
    if (!options.ca_file.empty()) {
      ctx.load_verify_file(options.ca_file, ec);
      if (ec)
        return invalid_argument("ca_file", "cannot load " + options.ca_file + ": " + ec.message());
    } else {
      ctx.set_default_verify_paths(ec);
    }
  }
  websocket::stream<beast::ssl_stream<beast::tcp_stream>> ws(std::move(tcp_stream), ctx);
  if (!options.insecure)
    ws.next_layer().set_verify_callback(net::ssl::host_name_verification(url.host));
  SSL_set_tlsext_host_name(ws.next_layer().native_handle(), url.host.c_str());
  ws.next_layer().handshake(net::ssl::stream_base::client, ec);
  if (ec) {
    return unavailable("TLS with " + origin + " failed: " + ec.message() +
                       " (give the CA with --ca-file, or --insecure)");
  }
  return handshake_and_relay(io, ws, options, origin, host_header, target, in_fd, out_fd, hs);
}

}  // namespace

Status run_tunnel(const ClientOptions& options, const std::string& lease_id, int port, int in_fd,
                  int out_fd) {
  std::vector<std::string> servers = options.servers;
  if (servers.empty()) servers.push_back(options.server);
  const std::string target =
      "/v1/leases/" + url_encode(lease_id) + "/tunnel?port=" + std::to_string(port);
  // The servers in order, as Client does (api/client.h), moving on only before the tunnel began:
  // a server not reached or answering 503; a 307/308 is followed once.
  std::string passed;
  std::optional<Status> last_503;
  Status last_failure;
  for (const std::string& server : servers) {
    ARMHIVE_ASSIGN_OR_RETURN(std::string origin, normalize_server(server));
    Handshake hs;
    Status st = tunnel_once(options, origin, target, in_fd, out_fd, hs);
    if ((hs.status == 307 || hs.status == 308) && !hs.location.empty()) {
      auto to = redirect_target(origin, hs.location);
      if (!to.is_ok()) {
        st = to.status();
        hs = Handshake{};
      } else {
        origin = to->origin;
        hs = Handshake{};
        st = tunnel_once(options, origin, to->target, in_fd, out_fd, hs);
      }
    }
    if (hs.relayed || (hs.status != 0 && hs.status != 503)) return st;
    passed += (passed.empty() ? "" : "; ") + origin + ": " + st.message();
    if (hs.status == 503) last_503 = st;
    last_failure = st;
  }
  if (servers.size() == 1) return last_failure;
  if (last_503) return *last_503;
  return unavailable("no armhived answered: " + passed);
}

}  // namespace armhive
