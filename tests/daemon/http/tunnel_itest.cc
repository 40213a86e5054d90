// GET /v1/leases/{id}/tunnel: who may open it, to which port, in which lease state, and that it
// relays and is cut with the lease. The real route, the real ForwardTable and LeaseAccess over
// FakeLeaseService; a loopback echo server stands in for the guest's port and
// api/tunnel_client.h (what `armhive tunnel` runs) is the client.
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <future>
#include <thread>

#include "api/tunnel_client.h"
#include "base/process_runner.h"
#include "daemon/access/forward_table.h"
#include "daemon/access/lease_access.h"
#include "tests/daemon/http/api_fixture.h"
#include "tests/support/response_recorder.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// The guest's port: echoes what it gets; "quit" makes it close its side.
class EchoGuest {
 public:
  EchoGuest() : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] {
      for (;;) {
        tcp::socket s(io_);
        boost::system::error_code ec;
        acceptor_.accept(s, ec);
        if (ec) return;
        std::thread([s = std::move(s)]() mutable {
          char buf[4096];
          boost::system::error_code e;
          for (;;) {
            size_t n = s.read_some(asio::buffer(buf), e);
            if (e || std::string_view(buf, n) == "quit") return;
            asio::write(s, asio::buffer(buf, n), e);
            if (e) return;
          }
        }).detach();
      }
    });
  }
  ~EchoGuest() {
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  asio::io_context io_;
  tcp::acceptor acceptor_;
  int port_ = 0;
  std::thread thread_;
};

// The daemon's wiring of HttpOptions::tunnel (daemon/main.cc), with the guest at 127.0.0.1:
// the lease's SSH port is the echo guest's port.
struct TunnelFixture {
  EchoGuest guest;
  std::unique_ptr<ForwardTable> forwards;
  std::unique_ptr<LeaseAccess> access;
  std::unique_ptr<ApiFixture> api;

  // `tls_dir`: serve HTTPS with the certificate and key there (cert.pem, key.pem).
  explicit TunnelFixture(const std::string& tls_dir = {}) {
    AccessOptions o;
    o.listen_address = "127.0.0.1";
    o.port_min = 39400;
    o.port_max = 39499;
    auto t = ForwardTable::start(o, {});
    REQUIRE(t.is_ok());
    forwards = std::move(t).value();
    api = std::make_unique<ApiFixture>(true, [this, tls_dir](HttpOptions& h) {
      if (!tls_dir.empty()) {
        h.tls_cert_file = tls_dir + "/cert.pem";
        h.tls_key_file = tls_dir + "/key.pem";
      }
      h.tunnel = [this](const Lease& lease, int port) -> Result<TunnelRoute> {
        Lease local = lease;
        local.address = "127.0.0.1";
        ARMHIVE_ASSIGN_OR_RETURN(LeaseAccess::TunnelTarget target,
                                 access->tunnel_target(local, port));
        TunnelRoute route{target.address, target.port, {}, {}};
        route.attach = [this, id = lease.id](std::function<void()> cut) {
          return forwards->attach(id, std::move(cut));
        };
        route.detach = [this, id = lease.id](uint64_t n) { forwards->detach(id, n); };
        return route;
      };
      h.check_ports = [this](const std::string& pool, const std::vector<int>& ports) {
        return access->check_ports(pool, ports);
      };
      h.lease_ports = [this](const std::string& id, const std::vector<int>& ports) {
        access->set_ports(id, ports);
      };
    });
    access = std::make_unique<LeaseAccess>(api->leases, *forwards, 4, guest.port());
    access->start();
  }
  ~TunnelFixture() {
    access->stop();
    api.reset();
    forwards->stop();
  }

  ClientOptions client(const std::string& token) const {
    ClientOptions c;
    c.server = api->url();
    c.token = token;
    return c;
  }
  std::string create(const std::string& token, const std::string& pool = "tiny") {
    auto r = api->request(
        "POST", "/v1/leases", token,
        R"({"pool":")" + pool + R"(","ttl":"1h","ssh_keys":[")" + std::string(kTestKey) + R"("]})");
    INFO(r.body);
    REQUIRE(r.status == 201);
    return nlohmann::json::parse(r.body)["id"].get<std::string>();
  }
  // The audit entry `action` of the lease, waited for (tunnel events are written off the I/O
  // thread); empty when none came within 10 s.
  std::string audited(const std::string& lease, const std::string& action) {
    for (int i = 0; i < 200; ++i) {
      auto entries = api->audit->recent(50, lease);
      REQUIRE(entries.is_ok());
      for (const AuditEntry& e : *entries) {
        if (e.action == action) return e.actor + ": " + e.detail;
      }
      std::this_thread::sleep_for(50ms);
    }
    return {};
  }
};

// A tunnel run on its own thread over one end of a socket pair; the test talks on the other.
struct OpenTunnel {
  int test_fd = -1;
  int tunnel_fd = -1;
  std::future<Status> done;

  OpenTunnel(const ClientOptions& options, const std::string& lease, int port) {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    test_fd = sv[0];
    tunnel_fd = sv[1];
    done = std::async(std::launch::async, [options, lease, port, fd = tunnel_fd] {
      return run_tunnel(options, lease, port, fd, fd);
    });
  }
  ~OpenTunnel() {
    close(test_fd);
    if (done.valid()) done.wait();
    close(tunnel_fd);
  }
  void send(std::string_view s) const {
    REQUIRE(write(test_fd, s.data(), s.size()) == static_cast<ssize_t>(s.size()));
  }
  std::string receive(size_t n) const {
    std::string out;
    char buf[4096];
    while (out.size() < n) {
      ssize_t r = read(test_fd, buf, std::min(sizeof buf, n - out.size()));
      if (r <= 0) break;
      out.append(buf, static_cast<size_t>(r));
    }
    return out;
  }
  // The tunnel's outcome, waited for up to 20 s (nullopt: still open).
  std::optional<Status> outcome() {
    if (done.wait_for(20s) != std::future_status::ready) return std::nullopt;
    return done.get();
  }
};

Status refusal(const ClientOptions& options, const std::string& lease, int port) {
  OpenTunnel t(options, lease, port);
  auto s = t.outcome();
  REQUIRE(s);
  return *s;
}

TEST_CASE("tunnel: the owner's WebSocket relays to the guest port, audited with bytes each way",
          "[http][tunnel]") {
  TunnelFixture f;
  std::string id = f.create(f.api->ci_a);
  OpenTunnel t(f.client(f.api->ci_a), id, f.guest.port());
  t.send("hello through the API");
  REQUIRE(t.receive(21) == "hello through the API");
  // The server switched protocols (101): recorded for the contract check like every reply.
  record_response("GET", "/v1/leases/" + id + "/tunnel", 101, "", "");
  std::string big(200000, 'x');  // more than one relay buffer each way
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  std::thread writer([&] { t.send(big); });
  CHECK(t.receive(big.size()) == big);
  writer.join();
  t.send("quit");  // the guest closes its side: the tunnel ends normally
  auto s = t.outcome();
  REQUIRE(s);
  CHECK(s->is_ok());
  CHECK_THAT(f.audited(id, "tunnel.opened"), Catch::Contains("ci-a: from 127.0.0.1 to 127.0.0.1:"));
  std::string closed = f.audited(id, "tunnel.closed");
  CHECK_THAT(closed, Catch::Contains("bytes_to_guest=" + std::to_string(21 + big.size() + 4)));
  CHECK_THAT(closed, Catch::Contains("bytes_from_guest=" + std::to_string(21 + big.size())));
  CHECK_THAT(closed, Catch::Contains("guest closed"));
}

TEST_CASE("tunnel: another owner's lease is not found, a read token is forbidden, no token 401",
          "[http][tunnel]") {
  TunnelFixture f;
  std::string id = f.create(f.api->ci_a);
  CHECK(refusal(f.client(f.api->ci_b), id, f.guest.port()).code() == ErrorCode::kNotFound);
  CHECK(refusal(f.client(f.api->reader), id, f.guest.port()).code() ==
        ErrorCode::kPermissionDenied);
  CHECK(refusal(f.client(""), id, f.guest.port()).code() == ErrorCode::kUnauthenticated);
  // An admin may open anyone's.
  OpenTunnel admin(f.client(f.api->admin), id, f.guest.port());
  admin.send("ping");
  CHECK(admin.receive(4) == "ping");
  admin.send("quit");
  REQUIRE(admin.outcome());
  CHECK(f.audited(id, "tunnel.opened").rfind("admin: ", 0) == 0);
}

TEST_CASE("tunnel: only the SSH port or the lease's own ports, named in a 400", "[http][tunnel]") {
  TunnelFixture f;
  std::string id = f.create(f.api->ci_a);
  Status s = refusal(f.client(f.api->ci_a), id, 8080);
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.field() == "port");
  CHECK_THAT(s.message(), Catch::Contains("no port 8080"));
  f.access->set_ports(id, {8080});  // what "ports": [8080] at create does
  auto r = f.api->request("GET", "/v1/leases/" + id + "/tunnel?port=0", f.api->ci_a);
  CHECK(r.status == 400);
  CHECK_THAT(r.body, Catch::Contains("\"field\":\"port\""));
  // 8080 is allowed now: the refusal is the guest's (nothing listens there), not the rule's.
  Status guest = refusal(f.client(f.api->ci_a), id, 8080);
  CHECK(guest.code() != ErrorCode::kInvalidArgument);
}

// Not the tunnel itself: the "ports" a lease asks for, as LeaseAccess checks them for the route
// (this fixture is the one wiring LeaseAccess into a server). The daemon's cap is 4; pool
// "slow" sets its own, 1.
TEST_CASE("lease ports: a pool's own max_extra_ports is a 400 naming ports and the pool's cap",
          "[http][access]") {
  TunnelFixture f;
  auto post = [&](const std::string& pool, const std::string& ports) {
    return f.api->request("POST", "/v1/leases", f.api->ci_b,
                          R"({"pool":")" + pool + R"(","ttl":"1h","ports":)" + ports + "}");
  };
  auto wide = post("tiny", "[8080, 9000]");
  INFO(wide.body);
  CHECK(wide.status == 201);
  auto over = post("slow", "[8080, 9000]");
  INFO(over.body);
  CHECK(over.status == 400);
  CHECK_THAT(over.content_type, Catch::Contains("application/problem+json"));
  auto problem = nlohmann::json::parse(over.body);
  CHECK(problem["field"] == "ports");
  CHECK_THAT(problem["detail"].get<std::string>(),
             Catch::Contains("at most 1 extra ports per lease in pool slow (asked for 2)"));
  CHECK(post("slow", "[9000]").status == 201);
  CHECK(post("slow", "[8081]").status == 400);  // not in its access_ports: ports[0], as before
}

TEST_CASE("tunnel: a lease that is not ready is 409, a plain GET is 400 naming Upgrade",
          "[http][tunnel]") {
  TunnelFixture f;
  std::string pending = f.create(f.api->ci_a, "slow");
  Status s = refusal(f.client(f.api->ci_a), pending, f.guest.port());
  CHECK(s.code() == ErrorCode::kConflict);
  CHECK_THAT(s.message(), Catch::Contains("ready leases only"));
  std::string id = f.create(f.api->ci_a);
  auto r = f.api->request("GET", "/v1/leases/" + id + "/tunnel", f.api->ci_a);
  CHECK(r.status == 400);
  CHECK(r.content_type == "application/problem+json");
  CHECK_THAT(r.body, Catch::Contains("\"field\":\"Upgrade\""));
}

TEST_CASE("tunnel: releasing the lease cuts an open tunnel, and a new one is refused",
          "[http][tunnel]") {
  TunnelFixture f;
  std::string id = f.create(f.api->ci_a);
  OpenTunnel t(f.client(f.api->ci_a), id, f.guest.port());
  t.send("before");
  REQUIRE(t.receive(6) == "before");
  auto r = f.api->request("DELETE", "/v1/leases/" + id, f.api->ci_a);
  REQUIRE(r.status == 200);
  auto s = t.outcome();
  REQUIRE(s);  // cut, not left open
  CHECK_THAT(f.audited(id, "tunnel.closed"), Catch::Contains("lease ended"));
  CHECK(refusal(f.client(f.api->ci_a), id, f.guest.port()).code() == ErrorCode::kConflict);
}

TEST_CASE("tunnel: over TLS when the server has TLS, the server's certificate verified",
          "[http][tunnel][tls]") {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("armhive-tunnel-tls-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  SubprocessRunner run;
  auto made = run.run(
      {.argv = {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem", "-days", "1",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"}});
  REQUIRE(made.is_ok());
  REQUIRE(made->ok());
  {
    TunnelFixture f(dir);
    REQUIRE(f.api->url().rfind("https://", 0) == 0);
    LeaseRequest req;
    req.pool = "tiny";
    req.owner = "ci-a";
    auto lease = f.api->leases.create_lease(req);
    REQUIRE(lease.is_ok());
    ClientOptions untrusted = f.client(f.api->ci_a);
    Status refused = refusal(untrusted, lease->id, f.guest.port());
    CHECK(refused.code() == ErrorCode::kUnavailable);
    CHECK_THAT(refused.message(), Catch::Contains("TLS"));
    ClientOptions trusted = untrusted;
    trusted.ca_file = dir + "/cert.pem";
    OpenTunnel t(trusted, lease->id, f.guest.port());
    t.send("over tls");
    CHECK(t.receive(8) == "over tls");
    t.send("quit");
    auto s = t.outcome();
    REQUIRE(s);
    CHECK(s->is_ok());
  }
  std::filesystem::remove_all(dir);
}

// The real `armhive` binary: its refusals name what to fix, and `ssh --tunnel` runs ssh through
// `armhive tunnel` with host keys looked up under the lease's alias.
ProcessResult cli(const TunnelFixture& f, std::vector<std::string> args) {
  args.insert(args.begin(), ARMHIVE_CLI_PATH);
  ProcessRequest req;
  req.argv = args;
  req.timeout = std::chrono::seconds(60);
  req.env = {{"HOME", "/nonexistent"},
             {"ARMHIVE_CONFIG", ""},
             {"ARMHIVE_SERVER", f.api->url()},
             {"ARMHIVE_TOKEN", f.api->ci_a}};
  SubprocessRunner runner;
  auto r = runner.run(req);
  REQUIRE(r.is_ok());
  return *r;
}

TEST_CASE("tunnel: the CLI says why a tunnel is refused, ssh --tunnel uses it as ProxyCommand",
          "[http][tunnel][cli]") {
  TunnelFixture f;
  std::string id = f.create(f.api->ci_a);
  auto port = cli(f, {"tunnel", id, "8080"});
  CHECK(port.exit_code == 2);
  CHECK_THAT(port.err, Catch::Contains("no port 8080"));
  CHECK_THAT(port.err, Catch::Contains("port"));
  std::string pending = f.create(f.api->ci_a, "slow");
  auto not_ready = cli(f, {"tunnel", pending, "22"});
  CHECK(not_ready.exit_code == 2);
  CHECK_THAT(not_ready.err, Catch::Contains("ready leases only"));
  auto dry = cli(f, {"ssh", id, "--tunnel", "--dry-run", "--", "true"});
  INFO(dry.err);
  REQUIRE(dry.exit_code == 0);
  CHECK_THAT(dry.out, Catch::Contains("ProxyCommand="));
  CHECK_THAT(dry.out, Catch::Contains(" tunnel " + id + " 22"));
  CHECK_THAT(dry.out, Catch::Contains("@armhive-lease-" + id));
  CHECK_THAT(dry.out, !Catch::Contains("StrictHostKeyChecking=no"));
}

}  // namespace
}  // namespace armhive
