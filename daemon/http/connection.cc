#include "daemon/http/connection.h"

#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <condition_variable>
#include <deque>
#include <limits>
#include <optional>

#include "base/close_on_exec.h"
#include "base/thread_annotations.h"
#include "daemon/http/tunnel_session.h"

namespace armhive {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr size_t kHeaderLimit = 16 * 1024;
constexpr size_t kMaxQueuedStreamBytes = 8 << 20;  // a stream reader this far behind is dropped
constexpr std::chrono::seconds kOverCapHeaderTimeout{2};
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr uint64_t kNoBodyLimit = std::numeric_limits<uint64_t>::max();
constexpr size_t kStreamedBodyPiece = 64 * 1024;  // bytes per read of a streamed body

tcp::socket& lowest_socket(beast::tcp_stream& s) { return s.socket(); }
tcp::socket& lowest_socket(beast::ssl_stream<beast::tcp_stream>& s) {
  return beast::get_lowest_layer(s).socket();
}
beast::tcp_stream& tcp_layer(beast::tcp_stream& s) { return s; }
beast::tcp_stream& tcp_layer(beast::ssl_stream<beast::tcp_stream>& s) {
  return beast::get_lowest_layer(s);
}

// The body of a Route::streamed_body request, handed from the connection's strand to the
// handler's thread. A read() that finds nothing buffered asks the strand for one more piece
// (`pull`) and waits for it, so at most one piece (64 KiB) is buffered per request: the client
// is held back by TCP, not by our memory.
//
// Threading: read() on the handler's thread; deliver()/fail() on the connection's strand.
class StreamedBody final : public ByteSource {
 public:
  StreamedBody(std::function<void()> pull, std::chrono::milliseconds timeout)
      : pull_(std::move(pull)), timeout_(timeout) {}

  Result<std::string> read(size_t max) override {
    MutexLock lock(mu_);
    if (pending_.empty() && !done_ && error_.is_ok()) {
      if (!pulling_) {
        pulling_ = true;
        lock.unlock();
        pull_();
        lock.lock();
      }
      bool ready = cv_.wait_for(lock, timeout_, [this]() REQUIRES(mu_) {
        return !pending_.empty() || done_ || !error_.is_ok();
      });
      if (!ready) {
        return Status(ErrorCode::kTimeout, "the request body stalled: nothing arrived for " +
                                               std::to_string(timeout_.count() / 1000) + " s");
      }
    }
    if (!pending_.empty()) {
      size_t n = std::min(max, pending_.size());
      std::string out = pending_.substr(0, n);
      pending_.erase(0, n);
      return out;
    }
    if (!error_.is_ok()) return error_;
    return std::string();
  }

  void deliver(std::string data, bool done) {
    {
      MutexLock lock(mu_);
      pending_ += data;
      done_ = done_ || done;
      pulling_ = false;
    }
    cv_.notify_all();
  }
  void fail(Status status) {
    {
      MutexLock lock(mu_);
      if (error_.is_ok() && !done_) error_ = std::move(status);
      pulling_ = false;
    }
    cv_.notify_all();
  }

 private:
  const std::function<void()> pull_;
  const std::chrono::milliseconds timeout_;
  Mutex mu_;
  std::condition_variable_any cv_;
  std::string pending_ GUARDED_BY(mu_);
  bool done_ GUARDED_BY(mu_) = false;
  bool pulling_ GUARDED_BY(mu_) = false;
  Status error_ GUARDED_BY(mu_);
};

template <class Stream>
class HttpConnection final : public ClientConnection,
                             public std::enable_shared_from_this<HttpConnection<Stream>> {
 public:
  HttpConnection(Stream stream, ConnectionEnv env, std::string remote)
      : stream_(std::move(stream)),
        ex_(stream_.get_executor()),
        env_(std::move(env)),
        remote_(std::move(remote)) {}
  ~HttpConnection() override {
    if (env_.on_closed) env_.on_closed();
  }

  void start(bool tls) {
    net::post(ex_, [self = this->shared_from_this(), tls] {
      if (tls) {
        self->handshake();
      } else {
        self->read_header();
      }
    });
  }

  void close_if_idle() override {
    net::post(ex_, [self = this->shared_from_this()] {
      if (self->state_ == State::kReading) self->close();
    });
  }
  void close_now() override {
    net::post(ex_, [self = this->shared_from_this()] { self->close(); });
  }

  // The Exchange of the request being answered; posts everything to the connection.
  class Reply final : public Exchange {
   public:
    explicit Reply(std::shared_ptr<HttpConnection> c) : c_(std::move(c)) {}
    void respond(HttpResponse r) override {
      net::post(c_->ex_, [c = c_, r = std::move(r)]() mutable { c->write_response(std::move(r)); });
    }
    void begin_stream(HttpResponse head) override {
      net::post(c_->ex_,
                [c = c_, h = std::move(head)]() mutable { c->write_stream_head(std::move(h)); });
    }
    void write_chunk(std::string data) override {
      net::post(c_->ex_,
                [c = c_, d = std::move(data)]() mutable { c->queue_chunk(std::move(d), false); });
    }
    void end_stream() override {
      net::post(c_->ex_, [c = c_] { c->queue_chunk({}, true); });
    }
    net::any_io_executor executor() override { return c_->ex_; }
    void upgrade(TunnelPlan plan) override {
      net::post(c_->ex_,
                [c = c_, p = std::move(plan)]() mutable { c->connect_tunnel(std::move(p)); });
    }
    void abort_stream() override {
      net::post(c_->ex_, [c = c_] { c->close(); });
    }
    size_t queued_bytes() const override { return c_->queued_bytes_.load(); }
    void on_abort(std::function<void()> callback) override {
      net::post(c_->ex_, [c = c_, cb = std::move(callback)]() mutable {
        if (c->state_ == State::kClosed) {
          cb();
        } else {
          c->on_abort_ = std::move(cb);
        }
      });
    }

   private:
    std::shared_ptr<HttpConnection> c_;
  };

 private:
  // kTunnel: the socket belongs to a TunnelSession (tunnel_session.h); the connection only holds
  // its cap slot and passes close_now() on.
  enum class State { kReading, kHandling, kWriting, kStreaming, kTunnel, kClosed };

  bool stopping() const { return env_.stopping != nullptr && env_.stopping->load(); }

  void handshake() {
    tcp_layer(stream_).expires_after(env_.options.header_timeout);
    if constexpr (std::is_same_v<Stream, beast::ssl_stream<beast::tcp_stream>>) {
      stream_.async_handshake(net::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return self->close();
                                self->read_header();
                              });
    }
  }

  void read_header() {
    if (state_ == State::kClosed) return;
    if (stopping() && requests_ > 0) return close();
    state_ = State::kReading;
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    // No body limit while the header is read: a Route::streamed_body request may be of any
    // size. The others get max_body_bytes in on_header, before their body is read. (Not
    // boost::none: Beast 1.74 compares a Content-Length with it as "greater", i.e. too large.)
    parser_->body_limit(kNoBodyLimit);
    auto deadline =
        requests_ == 0
            ? env_.options.header_timeout
            : std::chrono::duration_cast<std::chrono::seconds>(env_.options.keep_alive_timeout);
    if (env_.over_cap) deadline = std::min<std::chrono::seconds>(deadline, kOverCapHeaderTimeout);
    // One deadline for the whole header, however it trickles in.
    tcp_layer(stream_).expires_after(deadline);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  HttpRequest partial() const {
    HttpRequest r;
    r.method = std::string(parser_->get().method_string());
    r.target = std::string(parser_->get().target());
    parse_target(r.target, r);
    r.remote_addr = remote_;
    return r;
  }

  Status too_large() const {
    return Status(
        ErrorCode::kPayloadTooLarge,
        "the request body exceeds " + std::to_string(env_.options.max_body_bytes) + " bytes");
  }

  void on_header(beast::error_code ec) {
    if (state_ == State::kClosed) return;
    if (ec == http::error::body_limit) return refuse(too_large());
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::eof) {
      return close();
    }
    if (ec) return refuse(invalid_argument("request", "malformed HTTP request"));
    auto& msg = parser_->get();
    if (const HttpRequest head = partial(); env_.pipeline.streams_body(head.method, head.path)) {
      return dispatch_streamed();
    }
    if (msg.has_content_length() && parser_->content_length() &&
        *parser_->content_length() > env_.options.max_body_bytes) {
      return refuse(too_large());
    }
    parser_->body_limit(env_.options.max_body_bytes);
    if (parser_->is_done()) return dispatch();
    auto read_body = [self = this->shared_from_this()] {
      tcp_layer(self->stream_).expires_after(self->env_.options.read_timeout);
      http::async_read(self->stream_, self->buffer_, *self->parser_,
                       [self](beast::error_code e, size_t) { self->on_body(e); });
    };
    if (beast::iequals(msg[http::field::expect], "100-continue")) {
      tcp_layer(stream_).expires_after(env_.options.write_timeout);
      net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                       [self = this->shared_from_this(), read_body](beast::error_code e, size_t) {
                         if (e) return self->close();
                         read_body();
                       });
      return;
    }
    read_body();
  }

  void on_body(beast::error_code ec) {
    if (state_ == State::kClosed) return;
    if (ec == http::error::body_limit) return refuse(too_large());
    if (ec == beast::error::timeout || ec == net::error::operation_aborted) return close();
    if (ec == http::error::end_of_stream || ec == net::error::eof) return close();
    if (ec) return refuse(invalid_argument("body", "the request body could not be read"));
    dispatch();
  }

  void refuse(const Status& s) {
    HttpResponse res = env_.pipeline.refuse(partial(), s);
    keep_alive_ = false;
    state_ = State::kHandling;
    write_response(std::move(res));
  }

  void dispatch() {
    state_ = State::kHandling;
    ++requests_;
    on_abort_ = nullptr;                 // the previous request's, if any: answered already
    tcp_layer(stream_).expires_never();  // the answer may take a long-poll's time
    auto msg = parser_->release();
    upgrade_request_.reset();
    if (beast::websocket::is_upgrade(msg)) upgrade_request_ = msg;  // a tunnel needs the handshake
    keep_alive_ = msg.keep_alive() && !env_.over_cap;
    version_ = msg.version();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    parse_target(req.target, req);
    for (const auto& f : msg) {
      req.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    req.body = std::move(msg.body());
    req.remote_addr = remote_;
    env_.pipeline.dispatch(std::move(req), std::make_shared<Reply>(this->shared_from_this()),
                           env_.over_cap);
  }

  // A Route::streamed_body request: dispatched after its header; the handler pulls the body
  // through a StreamedBody (pull_body reads one piece per pull). `Expect: 100-continue` is
  // answered on the first pull, so a request refused before its body is read (413 against
  // the pool's limit) had not a byte of it sent by a client that waits for the 100.
  void dispatch_streamed() {
    state_ = State::kHandling;
    ++requests_;
    on_abort_ = nullptr;
    tcp_layer(stream_).expires_never();
    auto& msg = parser_->get();
    keep_alive_ = false;  // the body may be left unread: the connection ends with the answer
    version_ = msg.version();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    parse_target(req.target, req);
    for (const auto& f : msg) {
      req.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    if (msg.has_content_length() && parser_->content_length()) {
      req.content_length = *parser_->content_length();
    }
    req.remote_addr = remote_;
    expect_continue_ = beast::iequals(msg[http::field::expect], "100-continue");
    body_done_ = parser_->is_done();
    body_deadline_.reset();
    body_timed_out_ = false;
    body_budget_ =
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(env_.options.read_timeout);
    if (req.content_length) {
      body_budget_ += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(
              static_cast<double>(*req.content_length) /
              static_cast<double>(env_.options.upload_min_bytes_per_second)));
    }
    body_parser_.emplace(std::move(*parser_));
    body_parser_->body_limit(kNoBodyLimit);
    parser_.reset();
    std::weak_ptr<HttpConnection> weak = this->shared_from_this();
    auto body = std::make_shared<StreamedBody>(
        [weak] {
          if (auto c = weak.lock()) {
            net::post(c->ex_, [c] { c->pull_body(); });
          }
        },
        std::chrono::duration_cast<std::chrono::milliseconds>(env_.options.read_timeout) +
            std::chrono::seconds(1));
    body_ = body;
    req.body_source = std::move(body);
    env_.pipeline.dispatch(std::move(req), std::make_shared<Reply>(this->shared_from_this()),
                           env_.over_cap);
  }

  void pull_body() {
    auto body = body_.lock();
    if (!body) return;
    if (state_ == State::kClosed) {
      return body->fail(unavailable("the client went away before its body was read"));
    }
    if (body_done_ || body_parser_->is_done()) return body->deliver({}, true);
    if (expect_continue_) {
      expect_continue_ = false;
      net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                       [self = this->shared_from_this()](beast::error_code e, size_t) {
                         if (e) return self->close();
                         self->pull_body();
                       });
      return;
    }
    // The whole body's deadline starts with the first piece asked for (after the handler's
    // checks): read_timeout plus the declared length at upload_min_bytes_per_second.
    const auto now = std::chrono::steady_clock::now();
    if (!body_deadline_) body_deadline_ = now + body_budget_;
    if (now >= *body_deadline_) return body_late(*body);
    const auto piece_deadline = std::min(*body_deadline_, now + env_.options.read_timeout);
    body_piece_.resize(kStreamedBodyPiece);
    body_parser_->get().body().data = body_piece_.data();
    body_parser_->get().body().size = body_piece_.size();
    // Our own timer rather than the stream's expiry (which closes the socket): a late body is
    // answered 408 before the connection ends.
    tcp_layer(stream_).expires_never();
    body_timer_.expires_at(piece_deadline);
    const uint64_t read_id = ++body_reads_;
    body_reading_ = true;
    body_timer_.async_wait([weak = this->weak_from_this(), read_id](beast::error_code e) {
      auto self = weak.lock();
      if (e || !self || self->state_ == State::kClosed) return;
      // A read that completed while this wait was already queued is not the one to cut.
      if (!self->body_reading_ || self->body_reads_ != read_id) return;
      self->body_timed_out_ = true;
      beast::error_code ignored;
      lowest_socket(self->stream_).cancel(ignored);
    });
    http::async_read_some(
        stream_, buffer_, *body_parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) {
          self->body_reading_ = false;
          self->body_timer_.cancel();
          auto b = self->body_.lock();
          if (!b) return;
          if (ec == http::error::need_buffer) ec = {};
          if (self->body_timed_out_) return self->body_late(*b);
          if (ec) {
            b->fail(Status(ErrorCode::kUnavailable,
                           "the request body could not be read (" + ec.message() + ")"));
            return self->close();
          }
          size_t got = self->body_piece_.size() - self->body_parser_->get().body().size;
          b->deliver(self->body_piece_.substr(0, got), self->body_parser_->is_done());
        });
  }

  // The body missed its piece or whole-body deadline: the handler gets 408 to answer with; the
  // connection ends after that answer (keep_alive_ is off for streamed bodies).
  void body_late(StreamedBody& body) {
    const auto secs = [](auto d) {
      return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count());
    };
    const bool whole = body_deadline_ && std::chrono::steady_clock::now() >= *body_deadline_;
    body.fail(Status(ErrorCode::kRequestTimeout,
                     whole ? "the request body did not arrive within " + secs(body_budget_) +
                                 " s (read_timeout plus Content-Length at " +
                                 std::to_string(env_.options.upload_min_bytes_per_second) +
                                 " bytes/s)"
                           : "the request body stalled: nothing arrived for " +
                                 secs(env_.options.read_timeout) + " s",
                     {}, "body"));
  }

  void write_response(HttpResponse r) {
    if (state_ != State::kHandling) return;  // answered already, or closed
    state_ = State::kWriting;
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), version_ == 10 ? 10 : 11);
    res->set(http::field::server, "armhived");
    if (!r.content_type.empty()) res->set(http::field::content_type, r.content_type);
    for (const auto& [k, v] : r.headers) res->set(k, v);
    res->body() = std::move(r.body);
    bool keep = keep_alive_ && !r.close && !stopping();
    res->keep_alive(keep);
    res->prepare_payload();
    tcp_layer(stream_).expires_after(env_.options.write_timeout);
    http::async_write(stream_, *res,
                      [self = this->shared_from_this(), res, keep](beast::error_code ec, size_t) {
                        if (ec || !keep) return self->close();
                        self->read_header();
                      });
  }

  void write_stream_head(HttpResponse head) {
    if (state_ != State::kHandling) return;
    state_ = State::kStreaming;
    stream_head_.emplace(static_cast<http::status>(head.status), 11);
    stream_head_->set(http::field::server, "armhived");
    stream_head_->set(http::field::content_type, head.content_type);
    for (const auto& [k, v] : head.headers) stream_head_->set(k, v);
    stream_head_->keep_alive(false);  // a stream ends its connection
    stream_head_->chunked(true);
    serializer_.emplace(*stream_head_);
    writing_ = true;
    tcp_layer(stream_).expires_after(env_.options.write_timeout);
    http::async_write_header(stream_, *serializer_,
                             [self = this->shared_from_this()](beast::error_code ec, size_t) {
                               self->writing_ = false;
                               if (ec) return self->close();
                               self->pump();
                             });
  }

  void queue_chunk(std::string data, bool last) {
    if (state_ != State::kStreaming && state_ != State::kHandling) return;
    queued_bytes_ += data.size();
    if (queued_bytes_ > kMaxQueuedStreamBytes) return close();
    chunks_.push_back({std::move(data), last});
    if (state_ == State::kStreaming) pump();
  }

  void pump() {
    if (writing_ || chunks_.empty() || state_ != State::kStreaming) return;
    writing_ = true;
    tcp_layer(stream_).expires_after(env_.options.write_timeout);
    auto done = [self = this->shared_from_this()](beast::error_code ec, size_t) {
      self->writing_ = false;
      bool last = self->chunks_.front().last;
      self->queued_bytes_ -= self->chunks_.front().data.size();
      self->chunks_.pop_front();
      if (ec || last) return self->close();
      self->pump();
    };
    const Chunk& c = chunks_.front();
    if (c.last) {
      net::async_write(stream_, http::make_chunk_last(), std::move(done));
    } else {
      net::async_write(stream_, http::make_chunk(net::buffer(c.data)), std::move(done));
    }
  }

  // Connects to the tunnel's target, then hands the socket to a TunnelSession; a target that
  // cannot be reached within the plan's deadline is a 503 (504 on timeout) problem.
  void connect_tunnel(TunnelPlan plan) {
    if (state_ != State::kHandling) return;
    auto fail = [this](TunnelPlan& p, const Status& s) {
      HttpResponse res = problem_response(s);
      if (p.on_status) p.on_status(res.status);
      res.close = true;
      write_response(std::move(res));
    };
    if (!upgrade_request_) {
      return fail(plan, invalid_argument("Upgrade", "the request is not a WebSocket upgrade"));
    }
    beast::error_code ec;
    auto address = net::ip::make_address(plan.address, ec);
    if (ec) return fail(plan, internal_error("the tunnel's target address is not an IP address"));
    auto guest = std::make_shared<tcp::socket>(ex_);
    auto timer = std::make_shared<net::steady_timer>(ex_);
    auto timed_out = std::make_shared<bool>(false);
    timer->expires_after(plan.connect_timeout);
    timer->async_wait([guest, timed_out](beast::error_code e) {
      if (e) return;
      *timed_out = true;
      beast::error_code ignored;
      guest->close(ignored);
    });
    std::string target = plan.address + ":" + std::to_string(plan.port);
    tcp::endpoint endpoint(address, static_cast<unsigned short>(plan.port));
    guest->open(endpoint.protocol(), ec);
    if (ec) return fail(plan, unavailable("cannot open a socket for the tunnel: " + ec.message()));
    set_close_on_exec(guest->native_handle());
    guest->async_connect(endpoint, [self = this->shared_from_this(), guest, timer, timed_out,
                                    plan = std::move(plan), target,
                                    fail](beast::error_code e) mutable {
      timer->cancel();
      if (self->state_ != State::kHandling) return;
      if (e) {
        return *timed_out
                   ? fail(plan, Status(ErrorCode::kTimeout,
                                       "the lease's guest did not answer on " + target))
                   : fail(plan,
                          unavailable("the lease's guest refused " + target + ": " + e.message()));
      }
      guest->set_option(tcp::no_delay(true), e);
      self->state_ = State::kTunnel;
      self->tunnel_ =
          start_tunnel_session(std::move(self->stream_), std::move(*self->upgrade_request_),
                               std::move(*guest), std::move(plan), self->remote_, self);
      self->upgrade_request_.reset();
    });
  }

  void close() {
    if (state_ == State::kClosed) return;
    if (state_ == State::kTunnel) {
      state_ = State::kClosed;
      if (auto t = tunnel_.lock()) t->cut("server stopping");
      return;
    }
    state_ = State::kClosed;
    if (auto b = body_.lock()) b->fail(unavailable("the client went away"));
    beast::error_code ignored;
    lowest_socket(stream_).shutdown(tcp::socket::shutdown_both, ignored);
    lowest_socket(stream_).close(ignored);
    if (on_abort_) {
      auto cb = std::move(on_abort_);
      on_abort_ = nullptr;
      cb();
    }
  }

  struct Chunk {
    std::string data;
    bool last = false;
  };

  // Everything below is touched only on the connection's strand.
  Stream stream_;            // moved to the TunnelSession in kTunnel
  net::any_io_executor ex_;  // the socket's strand (outlives a moved stream_)
  ConnectionEnv env_;
  std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  // A streamed body's parser, the piece it reads into and the handler's end of it.
  std::optional<http::request_parser<http::buffer_body>> body_parser_;
  std::string body_piece_;
  std::weak_ptr<StreamedBody> body_;
  bool expect_continue_ = false;
  bool body_done_ = false;
  // The whole body's time (read_timeout + Content-Length / upload_min_bytes_per_second), its
  // deadline once the first piece was asked for, and the timer bounding each read by both.
  std::chrono::steady_clock::duration body_budget_{};
  std::optional<std::chrono::steady_clock::time_point> body_deadline_;
  net::steady_timer body_timer_{ex_};
  bool body_timed_out_ = false;
  bool body_reading_ = false;
  uint64_t body_reads_ = 0;
  State state_ = State::kReading;
  size_t requests_ = 0;
  bool keep_alive_ = true;
  unsigned version_ = 11;
  std::function<void()> on_abort_;
  std::optional<http::response<http::empty_body>> stream_head_;
  std::optional<http::response_serializer<http::empty_body>> serializer_;
  std::deque<Chunk> chunks_;
  std::atomic<size_t> queued_bytes_ = 0;  // written on the strand, read by queued_bytes()
  bool writing_ = false;
  std::optional<http::request<http::string_body>> upgrade_request_;
  std::weak_ptr<TunnelSession> tunnel_;
};

}  // namespace

std::weak_ptr<ClientConnection> start_connection(tcp::socket socket, net::ssl::context* tls,
                                                 ConnectionEnv env) {
  beast::error_code ec;
  auto endpoint = socket.remote_endpoint(ec);
  std::string remote = ec ? std::string("unknown") : endpoint.address().to_string();
  if (tls != nullptr) {
    using TlsStream = beast::ssl_stream<beast::tcp_stream>;
    auto c = std::make_shared<HttpConnection<TlsStream>>(
        TlsStream(beast::tcp_stream(std::move(socket)), *tls), std::move(env), remote);
    c->start(true);
    return c;
  }
  auto c = std::make_shared<HttpConnection<beast::tcp_stream>>(beast::tcp_stream(std::move(socket)),
                                                               std::move(env), remote);
  c->start(false);
  return c;
}

}  // namespace armhive
