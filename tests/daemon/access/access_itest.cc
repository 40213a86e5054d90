// daemon/access over loopback: real sockets, an echo server standing in for the guest.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "base/metrics.h"
#include "daemon/access/forward_table.h"
#include "daemon/access/lease_access.h"
#include "tests/support/manual_clock.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// A loopback echo server on an ephemeral port, one thread per connection. Its destructor ends
// and joins every connection's thread: a thread left running would use the io_context (and
// the sockets' service) after it is gone.
class EchoServer {
 public:
  EchoServer() : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] {
      for (;;) {
        auto s = std::make_shared<tcp::socket>(io_);
        boost::system::error_code ec;
        acceptor_.accept(*s, ec);
        if (ec) return;
        std::lock_guard lock(mu_);
        sockets_.push_back(s);
        connections_.emplace_back([s] {
          char buf[4096];
          boost::system::error_code e;
          for (;;) {
            size_t n = s->read_some(asio::buffer(buf), e);
            if (e) break;
            asio::write(*s, asio::buffer(buf, n), e);
            if (e) break;
          }
          s->shutdown(tcp::socket::shutdown_both, e);  // the peer sees the end; the fd stays ours
        });
      }
    });
  }
  ~EchoServer() {
    // shutdown() wakes the blocking accept and reads (close() from another thread would not).
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    thread_.join();
    std::lock_guard lock(mu_);
    for (const auto& s : sockets_) ::shutdown(s->native_handle(), SHUT_RDWR);
    for (std::thread& t : connections_) t.join();
  }
  int port() const { return port_; }

 private:
  asio::io_context io_;
  tcp::acceptor acceptor_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  // The connections' sockets, kept open until the end (their fds are never reused meanwhile).
  std::vector<std::shared_ptr<tcp::socket>> sockets_;
  std::vector<std::thread> connections_;  // joined at the end
};

// A blocking client with a receive timeout, so a test fails instead of hanging.
struct Client {
  int fd = -1;
  explicit Client(int port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Client() { ::close(fd); }
  bool connected = false;
  bool send(const std::string& s) {
    return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == (ssize_t)s.size();
  }
  // Reads until `n` bytes arrived; returns what came (less on EOF, reset or timeout).
  std::string recv(size_t n) {
    std::string out;
    char buf[4096];
    while (out.size() < n) {
      ssize_t r = ::recv(fd, buf, sizeof buf, 0);
      if (r <= 0) break;
      out.append(buf, static_cast<size_t>(r));
    }
    return out;
  }
  // True when the peer ended the connection (EOF or reset) rather than going quiet.
  bool ended() {
    char c;
    ssize_t r = ::recv(fd, &c, 1, 0);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }
};

// Collects AccessEvents (delivered on the table's event thread).
struct Events {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<AccessEvent> list;
  AccessEventSink sink() {
    return [this](const AccessEvent& e) {
      std::lock_guard lock(mu);
      list.push_back(e);
      cv.notify_all();
    };
  }
  // Waits for an event of `type`; returns its detail (empty if it never came).
  std::optional<AccessEvent> wait(const std::string& type) {
    std::unique_lock lock(mu);
    std::optional<AccessEvent> found;
    cv.wait_for(lock, 10s, [&] {
      for (const auto& e : list)
        if (e.type == type) found = e;
      return found.has_value();
    });
    return found;
  }
};

// A free loopback port range of `n` ports (best effort: probes by binding).
// Starts at a random point of 41000-59999: tests of other processes (ctest -j, other checkouts
// on the machine) look for ranges at the same time, and a fixed start made them find the same
// free range and then race for it.
int free_base(int n) {
  static std::mt19937 rng(std::random_device{}());
  const int span = 19000 - n;
  const int start = static_cast<int>(rng() % static_cast<unsigned>(span));
  for (int i = 0; i < span; i += n) {
    int base = 41000 + (start + i) % span;
    bool all = true;
    for (int p = base; p < base + n && all; ++p) {
      asio::io_context io;
      tcp::acceptor a(io);
      boost::system::error_code ec;
      a.open(tcp::v4(), ec);
      a.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(p)),
             ec);
      all = !ec;
    }
    if (all) return base;
  }
  FAIL("no free port range");
  return 0;
}

bool eventually(const std::function<bool()>& f) {
  for (int i = 0; i < 200; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(25ms);
  }
  return false;
}

// close() returns before the listener is closed on its strand: wait for refusals.
bool refuses(int port) {
  return eventually([&] { return !Client(port).connected; });
}

AccessOptions options(int base, int n) {
  AccessOptions o;
  o.listen_address = "127.0.0.1";
  o.advertise_host = "armhive.example";
  o.port_min = base;
  o.port_max = base + n - 1;
  return o;
}

TEST_CASE("a forward relays both ways, reports each connection and cuts them when closed",
          "[access]") {
  EchoServer echo;
  Events events;
  int base = free_base(4);
  auto table = ForwardTable::start(options(base, 4), events.sink());
  REQUIRE(table.is_ok());
  auto fw = (*table)->open("l-1", "127.0.0.1", {echo.port()});
  REQUIRE(fw.is_ok());
  REQUIRE(fw->size() == 1);
  CHECK((*fw)[0].host == "armhive.example");
  CHECK((*fw)[0].port >= base);
  CHECK((*fw)[0].guest_port == echo.port());
  // Asking again returns the same forward.
  auto again = (*table)->open("l-1", "127.0.0.1", {echo.port()});
  REQUIRE(again.is_ok());
  CHECK((*again)[0].port == (*fw)[0].port);

  Client c((*fw)[0].port);
  REQUIRE(c.connected);
  std::string big(200000, 'x');
  REQUIRE(c.send(big));
  CHECK(c.recv(big.size()) == big);
  auto conn = events.wait("forward.connection");
  REQUIRE(conn);
  CHECK(conn->lease_id == "l-1");
  CHECK(conn->detail.find("from 127.0.0.1:") == 0);
  CHECK(events.wait("forward.opened"));

  (*table)->close("l-1", "released");
  CHECK(c.ended());  // the established session is cut
  CHECK(events.wait("forward.closed"));
  CHECK((*table)->find("l-1").empty());
  CHECK(refuses((*fw)[0].port));
}

TEST_CASE("a taken port is skipped, an exhausted range is unavailable and names the range",
          "[access]") {
  EchoServer echo;
  int base = free_base(2);
  // Someone else holds the first port of the range.
  asio::io_context io;
  tcp::acceptor squatter(
      io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(base)));
  auto table = ForwardTable::start(options(base, 2), {});
  REQUIRE(table.is_ok());
  auto a = (*table)->open("l-a", "127.0.0.1", {echo.port()});
  REQUIRE(a.is_ok());
  CHECK((*a)[0].port == base + 1);
  auto b = (*table)->open("l-b", "127.0.0.1", {echo.port()});
  REQUIRE_FALSE(b.is_ok());
  CHECK(b.status().code() == ErrorCode::kUnavailable);
  CHECK(b.status().message().find(std::to_string(base) + "-" + std::to_string(base + 1)) !=
        std::string::npos);
  // Two guest ports asked (distinct: the same one twice is one forward), one host port free:
  // nothing stays open. l-a's listener is gone first, so exactly one port of the range is free.
  (*table)->close("l-a", "test");
  REQUIRE(refuses(base + 1));
  auto two = (*table)->open("l-c", "127.0.0.1", {echo.port(), echo.port() + 1});
  CHECK_FALSE(two.is_ok());
  CHECK((*table)->find("l-c").empty());
  CHECK(refuses(base + 1));
}

TEST_CASE("callers opening the same lease's forward at once share it, with one port in range",
          "[access]") {
  EchoServer echo;
  int base = free_base(1);
  auto table = ForwardTable::start(options(base, 1), {});
  REQUIRE(table.is_ok());
  // The lease-event watcher and an API read both open the new lease's forward (e2e
  // access-bridge saw the second fail with "no free port").
  for (int round = 0; round < 20; ++round) {
    std::string id = "l-" + std::to_string(round);
    std::vector<std::optional<Result<std::vector<ForwardInfo>>>> got(4);
    std::vector<std::thread> callers;
    for (int i = 0; i < 4; ++i) {
      callers.emplace_back([&, i] { got[i] = (*table)->open(id, "127.0.0.1", {echo.port()}); });
    }
    for (std::thread& t : callers) t.join();
    for (const auto& r : got) {
      REQUIRE(r.has_value());
      INFO(r->status().to_string());
      REQUIRE(r->is_ok());
      CHECK((**r)[0].port == base);
    }
    (*table)->close(id, "test");
    REQUIRE(refuses(base));
  }
}

TEST_CASE("a connection to an unreachable guest is reported and closed", "[access]") {
  Events events;
  int base = free_base(1);
  int dead = free_base(1) + 1;  // nothing listens there
  auto table = ForwardTable::start(options(base, 1), events.sink());
  REQUIRE(table.is_ok());
  auto fw = (*table)->open("l-1", "127.0.0.1", {dead});
  REQUIRE(fw.is_ok());
  Client c((*fw)[0].port);
  REQUIRE(c.connected);
  CHECK(c.ended());
  auto failed = events.wait("forward.connection_failed");
  REQUIRE(failed);
  CHECK(failed->detail.find("127.0.0.1:" + std::to_string(dead)) != std::string::npos);
}

// Whether a new connection to `port` relays (the echo comes back).
bool relays(int port) {
  Client c(port);
  return c.connected && c.send("ping") && c.recv(4) == "ping";
}

TEST_CASE("a forward relays at most its cap of sessions: one more is closed and counted",
          "[access][hostile]") {
  EchoServer echo;
  Metrics metrics;
  int base = free_base(2);
  AccessOptions o = options(base, 2);
  o.max_sessions_per_forward = 3;
  auto table = ForwardTable::start(o, {}, &metrics);
  REQUIRE(table.is_ok());
  auto fw = (*table)->open("l-1", "127.0.0.1", {echo.port()});
  REQUIRE(fw.is_ok());
  const int port = (*fw)[0].port;
  std::vector<std::unique_ptr<Client>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<Client>(port));
    REQUIRE(held.back()->send("hi"));
    REQUIRE(held.back()->recv(2) == "hi");  // relaying: the session is counted
  }
  Client over(port);
  REQUIRE(over.connected);  // the kernel accepted it; the forward closes it at once
  CHECK(over.ended());
  CHECK(metrics.value("armhive_forward_sessions_refused_total", {{"cap", "forward"}}) == 1);
  CHECK(metrics.value("armhive_forward_sessions_refused_total", {{"cap", "host"}}) == 0);
  // A session that ends gives its place back.
  held.pop_back();
  CHECK(eventually([&] { return relays(port); }));
  // Another lease's forward has caps of its own.
  auto other = (*table)->open("l-2", "127.0.0.1", {echo.port()});
  REQUIRE(other.is_ok());
  CHECK(relays((*other)[0].port));
}

TEST_CASE("the forwards of a host together relay at most max_sessions", "[access][hostile]") {
  EchoServer echo;
  Metrics metrics;
  int base = free_base(2);
  AccessOptions o = options(base, 2);
  o.max_sessions = 3;
  auto table = ForwardTable::start(o, {}, &metrics);
  REQUIRE(table.is_ok());
  auto a = (*table)->open("l-a", "127.0.0.1", {echo.port()});
  auto b = (*table)->open("l-b", "127.0.0.1", {echo.port()});
  REQUIRE(a.is_ok());
  REQUIRE(b.is_ok());
  std::vector<std::unique_ptr<Client>> held;
  for (int p : {(*a)[0].port, (*a)[0].port, (*b)[0].port}) {
    held.push_back(std::make_unique<Client>(p));
    REQUIRE(held.back()->send("hi"));
    REQUIRE(held.back()->recv(2) == "hi");
  }
  Client over((*b)[0].port);
  REQUIRE(over.connected);
  CHECK(over.ended());
  CHECK(metrics.value("armhive_forward_sessions_refused_total", {{"cap", "host"}}) == 1);
  // Closing a lease's forward gives its sessions' places back to the others.
  (*table)->close("l-a", "released");
  CHECK(eventually([&] { return relays((*b)[0].port); }));
}

TEST_CASE("a reload lowers the host cap at once and the forward cap for forwards opened after it",
          "[access][hostile][reload]") {
  EchoServer echo;
  Metrics metrics;
  int base = free_base(3);
  AccessOptions o = options(base, 3);
  auto table = ForwardTable::start(o, {}, &metrics);
  REQUIRE(table.is_ok());
  auto a = (*table)->open("l-a", "127.0.0.1", {echo.port()});
  REQUIRE(a.is_ok());
  std::vector<std::unique_ptr<Client>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(std::make_unique<Client>((*a)[0].port));
    REQUIRE(held.back()->send("hi"));
    REQUIRE(held.back()->recv(2) == "hi");
  }
  // Host cap 2, forward cap 1: the two sessions running go on; a third is refused by the host.
  (*table)->set_limits(1, 2, o.idle_timeout);
  CHECK((held[0]->send("go") && held[0]->recv(2) == "go"));
  Client over((*a)[0].port);
  REQUIRE(over.connected);
  CHECK(over.ended());
  CHECK(metrics.value("armhive_forward_sessions_refused_total", {{"cap", "host"}}) == 1);
  // The host cap raised again (so only the forward's counts): a forward opened now has the
  // new cap of 1, the one opened before keeps its 64.
  (*table)->set_limits(1, 100, o.idle_timeout);
  held.clear();
  auto b = (*table)->open("l-b", "127.0.0.1", {echo.port()});
  REQUIRE(b.is_ok());
  Client first((*b)[0].port);
  REQUIRE(first.send("hi"));
  REQUIRE(first.recv(2) == "hi");
  Client second((*b)[0].port);
  REQUIRE(second.connected);
  CHECK(second.ended());
  Client third((*a)[0].port), fourth((*a)[0].port);
  CHECK((third.send("hi") && third.recv(2) == "hi"));
  CHECK((fourth.send("hi") && fourth.recv(2) == "hi"));
  CHECK(metrics.value("armhive_forward_sessions_refused_total", {{"cap", "forward"}}) == 1);
}

TEST_CASE("a forwarded session idle for the idle timeout is closed", "[access][hostile]") {
  EchoServer echo;
  int base = free_base(1);
  AccessOptions o = options(base, 1);
  o.idle_timeout = 300ms;  // armhived's is [access] forward_idle_timeout, 15 minutes
  auto table = ForwardTable::start(o, {});
  REQUIRE(table.is_ok());
  auto fw = (*table)->open("l-1", "127.0.0.1", {echo.port()});
  REQUIRE(fw.is_ok());
  Client quiet((*fw)[0].port);
  REQUIRE(quiet.send("hello"));
  REQUIRE(quiet.recv(5) == "hello");
  // Then nothing either way: the forward ends it (ended() waits up to 5 s for EOF or reset).
  CHECK(quiet.ended());
  CHECK_FALSE((*table)->find("l-1").empty());  // the forward itself stays open
  CHECK(relays((*fw)[0].port));
}

// A LeaseService with leases and events set by the test.
class ScriptedLeases final : public LeaseService {
 public:
  void set(Lease l, const std::string& event) {
    std::lock_guard lock(mu_);
    leases_[l.id] = l;
    Event e;
    e.seq = next_seq_++;
    e.type = event;
    e.lease_id = l.id;
    events_.push_back(e);
    cv_.notify_all();
  }
  // Changes a lease with no event: one the watcher missed (the engine's buffer is bounded).
  void set_silently(Lease l) {
    std::lock_guard lock(mu_);
    leases_[l.id] = l;
  }
  Result<Lease> get_lease(const std::string& id) override {
    std::lock_guard lock(mu_);
    auto it = leases_.find(id);
    if (it == leases_.end()) return not_found("no lease", id);
    return it->second;
  }
  Result<std::vector<Lease>> list_leases(const LeaseFilter& f) override {
    std::lock_guard lock(mu_);
    std::vector<Lease> out;
    for (const auto& [id, l] : leases_)
      if (!f.state || l.state == *f.state) out.push_back(l);
    return out;
  }
  std::vector<Event> events_since(uint64_t after, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mu_);
    std::vector<Event> out;
    cv_.wait_for(lock, timeout, [&] { return !events_.empty() && events_.back().seq > after; });
    for (const Event& e : events_)
      if (e.seq > after) out.push_back(e);
    return out;
  }
  Result<Lease> create_lease(const LeaseRequest&) override { return internal_error("unused"); }
  Result<Lease> wait_lease(const std::string&, std::chrono::milliseconds) override {
    return internal_error("unused");
  }
  Result<Lease> renew_lease(const std::string&, Seconds) override {
    return internal_error("unused");
  }
  Result<Lease> release_lease(const std::string&) override { return internal_error("unused"); }
  // Records the guest commands (trust, warnings) and answers each with exit 0.
  Result<GuestExecResult> exec(const std::string& id, const GuestExecRequest& req) override {
    if (req.argv.empty() || req.argv[0] != "sh") return internal_error("unexpected command");
    {
      std::lock_guard lock(mu_);
      commands_.push_back({id, req.argv});
    }
    GuestExecResult r;
    r.exit_code = 0;
    return r;
  }
  Result<std::string> console(const std::string&, size_t) override {
    return internal_error("unused");
  }
  std::vector<PoolStatus> pools() override {
    PoolStatus p;
    p.config.name = "ci";
    p.config.access_ports = {8080, 9000};
    PoolStatus narrow;  // a pool whose own cap is below the daemon's
    narrow.config.name = "one-port";
    narrow.config.access_ports = {8080, 9000};
    narrow.config.max_extra_ports = 1;
    return {p, narrow};
  }
  std::vector<HostView> hosts() override { return {}; }

  // The guest commands run so far: lease id and argv.
  std::vector<std::pair<std::string, std::vector<std::string>>> commands() {
    std::lock_guard lock(mu_);
    return commands_;
  }

 private:
  std::vector<std::pair<std::string, std::vector<std::string>>> commands_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Lease> leases_;
  std::vector<Event> events_;
  uint64_t next_seq_ = 1;
};

const std::string kHostKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL4VKYqD6zyeGmUdw5PnHb2hHd3HpM6d3ODBC8iXrGrg";

Lease lease(const std::string& id, LeaseState state) {
  Lease l;
  l.id = id;
  l.state = state;
  l.address = "127.0.0.1";
  if (state == LeaseState::kReady) l.host_keys = {kHostKey};  // read by the engine
  return l;
}

TEST_CASE("lease events open and close forwards, already ready leases get theirs at start",
          "[access]") {
  EchoServer echo;
  ScriptedLeases leases;
  int base = free_base(4);
  auto table = ForwardTable::start(options(base, 4), {});
  REQUIRE(table.is_ok());
  leases.set(lease("l-old", LeaseState::kReady), "lease.ready");  // before the watcher
  LeaseAccess access(leases, **table, 4, echo.port());
  access.start();
  CHECK(eventually([&] { return !(*table)->find("l-old").empty(); }));

  leases.set(lease("l-new", LeaseState::kProvisioning), "lease.provisioning");
  auto none = access.ssh_endpoint(lease("l-new", LeaseState::kProvisioning));
  REQUIRE(none.is_ok());
  CHECK_FALSE(none->has_value());
  leases.set(lease("l-new", LeaseState::kReady), "lease.ready");
  CHECK(eventually([&] { return !(*table)->find("l-new").empty(); }));
  auto ep = access.ssh_endpoint(lease("l-new", LeaseState::kReady));
  REQUIRE(ep.is_ok());
  REQUIRE(ep->has_value());
  CHECK((*ep)->host == "armhive.example");
  CHECK((*ep)->port == (*table)->find("l-new")[0].port);
  // The host keys are the lease's own, there from the first look: no guest command for them.
  CHECK((*ep)->host_keys == std::vector<std::string>{kHostKey});

  Client session((*ep)->port);
  REQUIRE(session.connected);
  REQUIRE(session.send("hello"));
  CHECK(session.recv(5) == "hello");
  leases.set(lease("l-new", LeaseState::kReleasing), "lease.releasing");
  CHECK(eventually([&] { return (*table)->find("l-new").empty(); }));
  CHECK(session.ended());
  CHECK_FALSE((*table)->find("l-old").empty());  // other leases keep theirs

  leases.set(lease("l-old", LeaseState::kExpired), "lease.expired");
  CHECK(eventually([&] { return (*table)->find("l-old").empty(); }));
  access.stop();
}

TEST_CASE("a guest this machine cannot reach gets no forward and no tunnel, saying why",
          "[access]") {
  EchoServer echo;
  ScriptedLeases leases;
  int base = free_base(4);
  auto table = ForwardTable::start(options(base, 4), {});
  REQUIRE(table.is_ok());
  LeaseAccess access(leases, **table, 4, echo.port());
  // As armhived says of a VM on a remote host behind that host's own NAT network.
  access.set_reach([](const Lease& l) -> Status {
    if (l.host != "h2") return Status::ok();
    return unavailable("its VM runs on host h2 behind that host's own network 'armhive' (nat)");
  });
  Lease far = lease("l-far", LeaseState::kReady);
  far.host = "h2";
  Lease near = lease("l-near", LeaseState::kReady);
  near.host = "h1";
  leases.set(far, "lease.ready");
  leases.set(near, "lease.ready");
  access.start();
  CHECK(eventually([&] { return !(*table)->find("l-near").empty(); }));
  auto none = access.ssh_endpoint(far);
  REQUIRE(none.is_ok());
  CHECK_FALSE(none->has_value());
  CHECK((*table)->find("l-far").empty());  // nothing listens for it, not even 127.0.0.1's guest
  auto tunnel = access.tunnel_target(far, echo.port());
  CHECK(tunnel.status().code() == ErrorCode::kConflict);
  CHECK_THAT(tunnel.status().message(), Catch::Contains("host h2 behind that host's own network"));
  CHECK(access.tunnel_target(near, echo.port()).is_ok());
  access.stop();
}

// The guest commands for `lease` whose script contains `marker`, as their trailing arguments.
std::vector<std::vector<std::string>> scripts(ScriptedLeases& leases, const std::string& lease,
                                              const std::string& marker) {
  std::vector<std::vector<std::string>> out;
  for (const auto& [id, argv] : leases.commands()) {
    if (id == lease && argv.size() >= 4 && argv[2].find(marker) != std::string::npos) {
      out.emplace_back(argv.begin() + 4, argv.end());
    }
  }
  return out;
}

TEST_CASE("a ready lease's guest gets the CA and its own principal, once", "[access][ssh-ca]") {
  EchoServer echo;
  ScriptedLeases leases;
  int base = free_base(4);
  auto table = ForwardTable::start(options(base, 4), {});
  REQUIRE(table.is_ok());
  LeaseAccess access(leases, **table, 4, echo.port());
  access.set_user_ca("ssh-ed25519 AAAACA armhive-user-ca");
  access.start();
  leases.set(lease("l-a", LeaseState::kReady), "lease.ready");
  leases.set(lease("l-b", LeaseState::kReady), "lease.ready");
  CHECK(eventually([&] { return scripts(leases, "l-b", "principals").size() == 1; }));
  // As the certificate endpoint does before answering: already done, so no second write.
  CHECK(access.install_trust(lease("l-a", LeaseState::kReady)).is_ok());
  access.stop();
  auto a = scripts(leases, "l-a", "principals");
  REQUIRE(a.size() == 1);
  CHECK(a[0] == std::vector<std::string>{"ssh-ed25519 AAAACA armhive-user-ca", "lease-l-a"});
  CHECK(scripts(leases, "l-b", "principals")[0][1] == "lease-l-b");
}

TEST_CASE("developer leases warn the guest's terminals 15 and 2 minutes before expiry",
          "[access][dev]") {
  EchoServer echo;
  ScriptedLeases leases;
  int base = free_base(4);
  auto table = ForwardTable::start(options(base, 4), {});
  REQUIRE(table.is_ok());
  ManualClock clock;
  LeaseAccess access(leases, **table, 4, echo.port(), &clock);
  Lease dev = lease("l-dev", LeaseState::kReady);
  dev.purpose = Purpose::kDev;
  dev.expires_at = clock.now() + std::chrono::minutes(20);
  Lease ci = lease("l-ci", LeaseState::kReady);
  ci.expires_at = dev.expires_at;
  for (const Lease& l : {dev, ci}) {
    leases.set(l, "lease.ready");
    REQUIRE(access.ssh_endpoint(l).is_ok());
  }
  access.warn_expiring();
  CHECK(scripts(leases, "l-dev", "/dev/pts").empty());  // 20 minutes left: nothing yet
  clock.advance(std::chrono::minutes(6));
  access.warn_expiring();
  access.warn_expiring();  // once per mark
  auto said = scripts(leases, "l-dev", "/dev/pts");
  REQUIRE(said.size() == 1);
  CHECK_THAT(said[0][0], Catch::Contains("ends in 14 minutes"));
  CHECK_THAT(said[0][0], Catch::Contains("armhive lease renew l-dev"));
  clock.advance(std::chrono::minutes(12));
  access.warn_expiring();
  said = scripts(leases, "l-dev", "/dev/pts");
  REQUIRE(said.size() == 2);
  CHECK_THAT(said[1][0], Catch::Contains("ends in 2 minutes"));
  // Renewed: the marks count again from the new expiry.
  dev.expires_at = clock.now() + std::chrono::minutes(10);
  leases.set(dev, "lease.renewed");
  access.warn_expiring();
  CHECK(scripts(leases, "l-dev", "/dev/pts").size() == 3);
  CHECK(scripts(leases, "l-ci", "/dev/pts").empty());  // CI leases are never warned
}

TEST_CASE("extra ports: checked against the pool, forwarded with SSH once the lease is ready",
          "[access]") {
  EchoServer echo;
  ScriptedLeases leases;
  int base = free_base(4);
  auto table = ForwardTable::start(options(base, 4), {});
  REQUIRE(table.is_ok());
  LeaseAccess access(leases, **table, 2, echo.port());
  CHECK(access.check_ports("ci", {8080, 9000}).is_ok());
  CHECK(access.check_ports("ci", {8080, 8081}).field() == "ports[1]");
  CHECK(access.check_ports("ci", {8080, 8080}).field() == "ports[1]");
  CHECK(access.check_ports("ci", {8080, 9000, 8080}).field() == "ports");  // more than 2
  CHECK(access.check_ports("other", {1234}).is_ok());  // unknown pool: creation says 404
  CHECK(access.check_ports("other", {1, 2, 3}).field() == "ports");  // still the daemon's cap

  // A pool's own cap (1) below the daemon's (2): the refusal names the pool and its cap.
  CHECK(access.check_ports("one-port", {9000}).is_ok());
  Status over = access.check_ports("one-port", {8080, 9000});
  CHECK(over.code() == ErrorCode::kInvalidArgument);
  CHECK(over.field() == "ports");
  CHECK_THAT(over.message(), Catch::Contains("at most 1 extra ports per lease in pool one-port"));
  CHECK(access.check_ports("one-port", {8081}).field() == "ports[0]");  // access_ports still apply

  // Asked for after the lease was handed out (a warm VM): opened at once beside SSH.
  leases.set(lease("l-1", LeaseState::kReady), "lease.ready");
  REQUIRE(access.ssh_endpoint(lease("l-1", LeaseState::kReady)).is_ok());
  CHECK((*table)->find("l-1").size() == 1);
  access.set_ports("l-1", {8080});
  auto ep = access.ssh_endpoint(lease("l-1", LeaseState::kReady));
  REQUIRE(ep.is_ok());
  REQUIRE(ep->has_value());
  REQUIRE((*ep)->extra.size() == 1);
  CHECK((*ep)->extra[0].guest_port == 8080);
  CHECK((*ep)->extra[0].port != (*ep)->port);
  CHECK((*table)->find("l-1").size() == 2);
}

}  // namespace
}  // namespace armhive

namespace armhive {
namespace {

TEST_CASE("a lease that ended without an event the watcher saw loses its forward at the sweep",
          "[access][hostile]") {
  EchoServer echo;
  ScriptedLeases leases;
  int base = free_base(4);
  auto table = ForwardTable::start(options(base, 4), {});
  REQUIRE(table.is_ok());
  LeaseAccess access(leases, **table, 4, echo.port());
  access.set_sweep_period(50ms);  // armhived's is LeaseAccess::kSweepPeriod
  access.start();
  leases.set(lease("l-1", LeaseState::kReady), "lease.ready");
  leases.set(lease("l-2", LeaseState::kReady), "lease.ready");
  REQUIRE(eventually([&] { return !(*table)->find("l-1").empty(); }));
  REQUIRE(eventually([&] { return !(*table)->find("l-2").empty(); }));
  Client session((*table)->find("l-1")[0].port);
  REQUIRE(session.send("hi"));
  REQUIRE(session.recv(2) == "hi");
  // Released, and the events said nothing: the periodic sweep still cuts it.
  leases.set_silently(lease("l-1", LeaseState::kReleased));
  CHECK(eventually([&] { return (*table)->find("l-1").empty(); }));
  CHECK(session.ended());
  // A lease whose host stopped answering keeps its forward: its VM keeps the address.
  leases.set_silently(lease("l-2", LeaseState::kHostUnreachable));
  access.sweep();
  CHECK_FALSE((*table)->find("l-2").empty());
  access.stop();
}

TEST_CASE("a sweep moves the forwards of a lease whose VM address changed", "[access][hostile]") {
  EchoServer echo;
  ScriptedLeases leases;
  int base = free_base(4);
  auto table = ForwardTable::start(options(base, 4), {});
  REQUIRE(table.is_ok());
  LeaseAccess access(leases, **table, 4, echo.port());
  leases.set(lease("l-1", LeaseState::kReady), "lease.ready");
  REQUIRE(access.ssh_endpoint(lease("l-1", LeaseState::kReady)).is_ok());
  REQUIRE((*table)->find("l-1").size() == 1);
  Client session((*table)->find("l-1")[0].port);
  REQUIRE(session.send("hi"));
  REQUIRE(session.recv(2) == "hi");
  Lease moved = lease("l-1", LeaseState::kReady);
  moved.address = "127.0.0.2";  // the old address may be another VM's by now
  leases.set_silently(moved);
  access.sweep();
  CHECK(session.ended());
  auto now = (*table)->find("l-1");
  REQUIRE(now.size() == 1);
  CHECK(now[0].guest_address == "127.0.0.2");
}

TEST_CASE("a lease read before its release never reopens the forward the release closed",
          "[access][hostile]") {
  EchoServer echo;
  ScriptedLeases leases;
  int base = free_base(4);
  auto table = ForwardTable::start(options(base, 4), {});
  REQUIRE(table.is_ok());
  LeaseAccess access(leases, **table, 4, echo.port());
  const Lease read_before = lease("l-1", LeaseState::kReady);  // an API handler's copy
  leases.set(read_before, "lease.ready");
  REQUIRE(access.ssh_endpoint(read_before).is_ok());
  REQUIRE_FALSE((*table)->find("l-1").empty());
  Event released;
  released.lease_id = "l-1";
  released.type = "lease.released";
  leases.set(lease("l-1", LeaseState::kReleased), released.type);
  access.on_event(released);
  REQUIRE((*table)->find("l-1").empty());
  // The handler goes on with its copy (the lease view, a tunnel): no forward, none opened.
  auto late = access.ssh_endpoint(read_before);
  REQUIRE(late.is_ok());
  CHECK_FALSE(late->has_value());
  CHECK((*table)->find("l-1").empty());
  CHECK(access.tunnel_target(read_before, echo.port()).status().code() == ErrorCode::kConflict);
  CHECK((*table)->find("l-1").empty());
}

TEST_CASE("an open whose ticket predates a close of its lease is refused", "[access][hostile]") {
  EchoServer echo;
  int base = free_base(2);
  auto table = ForwardTable::start(options(base, 2), {});
  REQUIRE(table.is_ok());
  // Read, then the close runs (the lease ended), then the open of what was read.
  ForwardTable::Ticket before = (*table)->ticket("l-1");
  (*table)->close("l-1", "released");
  auto stale = (*table)->open(before, "127.0.0.1", {echo.port()});
  CHECK(stale.status().code() == ErrorCode::kConflict);
  CHECK((*table)->find("l-1").empty());
  // A reading after the close opens as usual.
  CHECK((*table)->open((*table)->ticket("l-1"), "127.0.0.1", {echo.port()}).is_ok());
  CHECK((*table)->find("l-1").size() == 1);
}

}  // namespace
}  // namespace armhive
