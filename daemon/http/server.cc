#include "daemon/http/server.h"

#include <sys/resource.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <map>
#include <thread>

#include "base/close_on_exec.h"
#include "base/thread_annotations.h"
#include "daemon/http/connection.h"
#include "daemon/http/context.h"
#include "daemon/http/event_hub.h"
#include "daemon/http/handlers.h"
#include "daemon/http/middleware.h"
#include "daemon/http/router.h"

namespace armhive {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// How long stop() waits for answers in flight before it closes what is left.
constexpr std::chrono::seconds kDrain{2};

// Raises the soft open-file limit towards the hard one: every connection is a descriptor,
// and the caps are meant to be the limit, not RLIMIT_NOFILE's default 1024.
void raise_open_file_limit(size_t wanted) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  rlim_t target = rl.rlim_max == RLIM_INFINITY ? static_cast<rlim_t>(wanted)
                                               : std::min<rlim_t>(rl.rlim_max, wanted);
  if (rl.rlim_cur >= target) return;
  rl.rlim_cur = target;
  setrlimit(RLIMIT_NOFILE, &rl);
}

// Who is connected: counts per remote address and in total for the caps, and the live
// connections so stop() can close them. Thread-safe.
class Connections {
 public:
  enum class Admit { kYes, kOverCap, kNo };
  explicit Connections(const HttpOptions& o) : options_(o) {}

  Admit admit(const std::string& addr) {
    MutexLock lock(mu_);
    if (total_ < options_.max_connections &&
        per_client_[addr] < options_.max_connections_per_client) {
      ++total_;
      ++per_client_[addr];
      return Admit::kYes;
    }
    if (over_cap_ < options_.over_cap_connections) {
      ++over_cap_;
      return Admit::kOverCap;
    }
    return Admit::kNo;
  }

  uint64_t add(Admit how, const std::string& addr) {
    MutexLock lock(mu_);
    uint64_t id = next_id_++;
    live_[id] = {how, addr, {}};
    return id;
  }
  void set_handle(uint64_t id, std::weak_ptr<ClientConnection> c) {
    MutexLock lock(mu_);
    auto it = live_.find(id);
    if (it != live_.end()) it->second.handle = std::move(c);
  }
  void remove(uint64_t id) {
    MutexLock lock(mu_);
    auto it = live_.find(id);
    if (it == live_.end()) return;
    if (it->second.how == Admit::kOverCap) {
      --over_cap_;
    } else {
      --total_;
      if (--per_client_[it->second.addr] == 0) per_client_.erase(it->second.addr);
    }
    live_.erase(it);
    if (live_.empty()) drained_.notify_all();
  }

  void for_each(const std::function<void(ClientConnection&)>& fn) {
    std::vector<std::shared_ptr<ClientConnection>> all;
    {
      MutexLock lock(mu_);
      for (auto& [id, c] : live_) {
        if (auto p = c.handle.lock()) all.push_back(std::move(p));
      }
    }
    for (auto& c : all) fn(*c);
  }
  bool wait_drained(std::chrono::milliseconds timeout) {
    MutexLock lock(mu_);
    return drained_.wait_for(lock, timeout, [&]() REQUIRES(mu_) { return live_.empty(); });
  }

 private:
  struct Live {
    Admit how;
    std::string addr;
    std::weak_ptr<ClientConnection> handle;
  };
  const HttpOptions& options_;
  Mutex mu_;
  std::condition_variable_any drained_;
  size_t total_ GUARDED_BY(mu_) = 0;
  size_t over_cap_ GUARDED_BY(mu_) = 0;
  std::map<std::string, size_t> per_client_ GUARDED_BY(mu_);
  std::map<uint64_t, Live> live_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
};

}  // namespace

// Everything that exists while the server runs; made by start(), destroyed by stop(). The
// declaration order is the teardown order reversed: workers go before the io_context (their
// queued tasks hold connections bound to it), the io_context before what its handlers use.
struct HttpServer::Impl {
  Impl(HttpOptions o, LeaseService& l, BenchmarkService* b, TokenStore& t, AuditLog& a, Metrics& m)
      : options(std::move(o)), leases(l), benchmarks(b), tokens(t), audit(a), metrics(m) {}

  struct Running {
    explicit Running(Impl& d)
        : connections(d.options),
          long_operations(d.options.long_operations, static_cast<size_t>(d.options.threads)),
          hub(d.leases),
          work(net::make_work_guard(io)),
          acceptor(net::make_strand(io)),
          retry(acceptor.get_executor()),
          workers(static_cast<size_t>(d.options.threads)),
          ctx{d.options, d.leases,         d.benchmarks, d.tokens,        d.audit, d.metrics, hub,
              workers,   stop.get_token(), {},           long_operations, {},      {}},
          pipeline(ctx, router) {}

    Connections connections;  // outlives every connection (their destructors report here)
    // Outlives the slots that workers, connections and their streams and tunnels hold.
    LongOperations long_operations;
    std::stop_source stop;
    std::atomic<bool> stopping{false};
    EventHub hub;  // outlives every waiter
    Router router;
    std::optional<net::ssl::context> tls;
    net::io_context io;
    net::executor_work_guard<net::io_context::executor_type> work;
    tcp::acceptor acceptor;
    net::steady_timer retry;  // after an accept error (no descriptors left)
    std::vector<std::thread> io_threads;
    net::thread_pool workers;  // before io goes: its leftover tasks hold connections
    ServerContext ctx;
    Pipeline pipeline;
  };

  void accept() {
    running->acceptor.async_accept(
        net::make_strand(running->io), [this](boost::system::error_code ec, tcp::socket socket) {
          Running& r = *running;
          if (ec == net::error::operation_aborted || !r.acceptor.is_open()) return;
          if (ec) {
            // EMFILE and friends: back off instead of spinning on a full descriptor table.
            r.retry.expires_after(std::chrono::milliseconds(50));
            r.retry.async_wait([this](boost::system::error_code e) {
              if (!e) accept();
            });
            return;
          }
          on_accepted(std::move(socket));
          accept();
        });
  }

  void on_accepted(tcp::socket socket) {
    Running& r = *running;
    boost::system::error_code ec;
    // Nagle would hold a reply's last segment until the client ACKs the previous one, which
    // a delayed-ACK client does ~40 ms later: every keep-alive request would wait that long.
    socket.set_option(tcp::no_delay(true), ec);
    set_close_on_exec(socket.native_handle());  // Asio's accept() does not
    auto endpoint = socket.remote_endpoint(ec);
    if (ec) return;
    std::string addr = endpoint.address().to_string();
    auto how = r.connections.admit(addr);
    if (how == Connections::Admit::kNo) return;  // the socket closes here
    uint64_t id = r.connections.add(how, addr);
    ConnectionEnv env{r.pipeline, options, [&r, id] { r.connections.remove(id); },
                      how == Connections::Admit::kOverCap, &r.stopping};
    r.connections.set_handle(
        id, start_connection(std::move(socket), r.tls ? &*r.tls : nullptr, std::move(env)));
  }

  HttpOptions options;
  LeaseService& leases;
  BenchmarkService* benchmarks;
  TokenStore& tokens;
  AuditLog& audit;
  Metrics& metrics;
  std::unique_ptr<Running> running;
  int bound_port = 0;
  bool tls = false;
};

HttpServer::HttpServer(HttpOptions options, LeaseService& leases, BenchmarkService* benchmarks,
                       TokenStore& tokens, AuditLog& audit, Metrics& metrics)
    : impl_(
          std::make_unique<Impl>(std::move(options), leases, benchmarks, tokens, audit, metrics)) {}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start() {
  Impl& d = *impl_;
  if (d.running) return conflict("the server is already started");
  const HttpOptions& o = d.options;
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return invalid_argument("tls", "set both the certificate and the key file, or neither");
  }
  if (o.threads < 2) return invalid_argument("threads", "must be at least 2");
  if (o.io_threads < 1) return invalid_argument("io_threads", "must be at least 1");
  const LongOperationLimits& lim = o.long_operations;
  if (lim.execs < 1 || lim.file_transfers < 1 || lim.tunnels < 1 || lim.event_streams < 1) {
    return invalid_argument("max_execs_per_token", "every per-token limit must be at least 1");
  }
  if (o.upload_min_bytes_per_second < 1) {
    return invalid_argument("upload_min_bytes_per_second", "must be at least 1");
  }
  auto r = std::make_unique<Impl::Running>(d);
  if (!o.tls_cert_file.empty()) {
    r->tls.emplace(net::ssl::context::tls_server);
    r->tls->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                        net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                        net::ssl::context::no_tlsv1_1);
    boost::system::error_code ec1, ec2;
    r->tls->use_certificate_chain_file(o.tls_cert_file, ec1);
    r->tls->use_private_key_file(o.tls_key_file, net::ssl::context::pem, ec2);
    if (ec1 || ec2) {
      return unavailable("cannot load the TLS certificate or key",
                         o.tls_cert_file + ", " + o.tls_key_file);
    }
  }
  boost::system::error_code ec;
  auto address = net::ip::make_address(o.bind_address, ec);
  if (ec) return invalid_argument("bind", "not an IP address: " + o.bind_address);
  tcp::endpoint endpoint(address, static_cast<unsigned short>(o.port));
  r->acceptor.open(endpoint.protocol(), ec);
  if (!ec) set_close_on_exec(r->acceptor.native_handle());  // Asio's socket() does not
  // SO_REUSEADDR alone allows quick restarts; no SO_REUSEPORT, which would let a second
  // daemon bind the same port silently.
  if (!ec) r->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) r->acceptor.bind(endpoint, ec);
  if (!ec) r->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return unavailable(o.port == 0 ? "cannot bind an ephemeral port"
                                   : "cannot bind (address in use, or not a local address?)",
                       o.bind_address + ":" + std::to_string(o.port));
  }
  raise_open_file_limit(o.max_connections + o.over_cap_connections + 1024);
  d.bound_port = r->acceptor.local_endpoint().port();
  d.tls = r->tls.has_value();
  r->ctx.url = url();
  r->ctx.leader =
      ClusterLeader{o.instance, r->ctx.url, o.leader_epoch,
                    o.leader_since_ms != 0
                        ? o.leader_since_ms
                        : to_unix_ms(o.clock != nullptr ? o.clock->now() : SystemClock().now())};
  describe_api_metrics(d.metrics);
  add_health_routes(r->router, r->ctx);
  add_cluster_routes(r->router, r->ctx);
  add_lease_routes(r->router, r->ctx);
  add_benchmark_routes(r->router, r->ctx);
  add_host_routes(r->router, r->ctx);
  add_event_routes(r->router, r->ctx);
  add_github_routes(r->router, r->ctx);
  add_file_routes(r->router, r->ctx);
  add_tunnel_routes(r->router, r->ctx);
  add_usage_routes(r->router, r->ctx);
  r->hub.start();
  d.running = std::move(r);
  d.accept();
  for (int i = 0; i < o.io_threads; ++i) {
    d.running->io_threads.emplace_back([&io = d.running->io] { io.run(); });
  }
  return Status::ok();
}

void HttpServer::stop() {
  Impl& d = *impl_;
  if (!d.running) return;
  Impl::Running& r = *d.running;
  r.stopping = true;
  net::post(r.acceptor.get_executor(), [&r] {
    boost::system::error_code ignored;
    r.acceptor.close(ignored);
    r.retry.cancel();
  });
  // Long-polls answer with the lease as it is; event streams end their body.
  r.stop.request_stop();
  r.hub.stop();
  r.connections.for_each([](ClientConnection& c) { c.close_if_idle(); });
  if (!r.connections.wait_drained(kDrain)) {
    r.connections.for_each([](ClientConnection& c) { c.close_now(); });
    r.connections.wait_drained(std::chrono::milliseconds(500));
  }
  r.workers.join();  // handlers in flight (an exec) finish; their answers go nowhere now
  r.work.reset();
  r.io.stop();
  for (auto& t : r.io_threads) t.join();
  d.running.reset();
  d.bound_port = 0;
}

int HttpServer::port() const { return impl_->bound_port; }

std::string HttpServer::url() const {
  return std::string(impl_->tls ? "https" : "http") + "://" +
         (impl_->options.bind_address == "0.0.0.0" ? std::string("127.0.0.1")
                                                   : impl_->options.bind_address) +
         ":" + std::to_string(impl_->bound_port);
}

}  // namespace armhive
