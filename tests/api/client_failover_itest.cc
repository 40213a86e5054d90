// Client with several servers (api/client.h): which server a call goes to and when it moves on,
// against real HTTP servers on 127.0.0.1 — cpp-httplib servers standing in for armhived, a
// port that refuses connections, and a raw socket that takes a request and hangs up.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "api/client.h"
#include "api/json.h"
#include "base/thread_annotations.h"
#include "tests/support/closed_port.h"

namespace armhive {
namespace {

// What a stand-in server saw of one request.
struct Seen {
  std::string method;
  std::string path;
  std::string body;
  std::string authorization;
  std::string idempotency_key;
};

// A cpp-httplib server on 127.0.0.1 and a port of its own, answering every GET, POST and DELETE
// with `handler` and recording what it was sent. Stops and joins when destroyed.
class StandIn {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
  explicit StandIn(Handler handler) : handler_(std::move(handler)) {
    auto record = [this](const httplib::Request& req, httplib::Response& res) {
      {
        MutexLock lock(mu_);
        seen_.push_back({req.method, req.target, req.body, req.get_header_value("Authorization"),
                         req.get_header_value("Idempotency-Key")});
      }
      handler_(req, res);
    };
    server_.Get(".*", record);
    server_.Post(".*", record);
    server_.Delete(".*", record);
    port_ = server_.bind_to_any_port("127.0.0.1");
    REQUIRE(port_ > 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() is a no-op before the listen loop runs: wait for it (bounded) so the destructor
    // never joins a server that will not stop.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!server_.is_running() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(server_.is_running());
  }
  ~StandIn() {
    server_.stop();
    thread_.join();
  }
  StandIn(const StandIn&) = delete;
  StandIn& operator=(const StandIn&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<Seen> seen() {
    MutexLock lock(mu_);
    return seen_;
  }

 private:
  Handler handler_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  Mutex mu_;
  std::vector<Seen> seen_ GUARDED_BY(mu_);
};

// Accepts one connection on 127.0.0.1, reads one request (head and Content-Length body) and
// closes without answering: a server that died after taking the request. request() is what it
// read; the reading thread gives up after 30 s.
class HangUp {
 public:
  HangUp() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 4) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~HangUp() {
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  HangUp(const HangUp&) = delete;
  HangUp& operator=(const HangUp&) = delete;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Waits for the reading thread (at most its 30 s), then returns what it read.
  std::string request() {
    if (thread_.joinable()) thread_.join();
    return request_;
  }

 private:
  void serve() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 30000) <= 0) return;
    int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      size_t head_end = request_.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        size_t length = 0;
        size_t at = request_.find("Content-Length: ");
        if (at != std::string::npos) length = std::stoul(request_.substr(at + 16));
        if (request_.size() >= head_end + 4 + length) break;
      }
      if (std::chrono::steady_clock::now() > deadline) break;
      pollfd q{c, POLLIN, 0};
      if (::poll(&q, 1, 1000) < 0) break;
      if (q.revents == 0) continue;
      char buf[4096];
      ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      request_.append(buf, static_cast<size_t>(n));
    }
    ::close(c);
  }

  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::string request_;  // written by thread_ only, read after joining it
};

std::string header_of(const std::string& request, const std::string& name) {
  size_t at = request.find("\r\n" + name + ": ");
  if (at == std::string::npos) return {};
  size_t begin = at + 4 + name.size();
  return request.substr(begin, request.find("\r\n", begin) - begin);
}

void answer_health(const httplib::Request&, httplib::Response& res) {
  res.set_content(R"({"status":"ok","version":"stand-in"})", "application/json");
}

void answer_503(const httplib::Request&, httplib::Response& res) {
  res.status = 503;
  res.set_content(R"({"type":"about:blank","title":"Service Unavailable","status":503,)"
                  R"("detail":"standby: the leader is not known yet"})",
                  "application/problem+json");
}

std::string lease_json(const std::string& id) {
  LeaseDto l;
  l.id = id;
  l.pool = "tiny";
  l.owner = "ci";
  l.state = "pending";
  l.purpose = "ci";
  l.created_at = "2026-01-01T00:00:00Z";
  l.expires_at = "2026-01-01T01:00:00Z";
  return dump_json(to_json(l));
}

std::unique_ptr<Client> client_of(std::vector<std::string> servers) {
  ClientOptions o;
  o.servers = std::move(servers);
  o.token = "ah_test";
  o.timeout = std::chrono::seconds(10);
  auto c = Client::create(std::move(o));
  REQUIRE(c.is_ok());
  return std::move(c).value();
}

LeaseCreateRequest tiny_lease() {
  LeaseCreateRequest r;
  r.pool = "tiny";
  return r;
}

TEST_CASE("client: a server refusing connections is passed over for the next",
          "[client][failover]") {
  ClosedPort down;
  StandIn up(answer_health);
  auto client = client_of({down.url(), up.url()});
  auto h = client->health();
  INFO(h.status().to_string());
  REQUIRE(h.is_ok());
  CHECK(h->version == "stand-in");
  CHECK(up.seen().size() == 1);
  CHECK(client->current_server() == up.url());
}

TEST_CASE("client: a 503 moves a call to the next server and the last 503 is the answer",
          "[client][failover]") {
  StandIn standby(answer_503);
  StandIn leader(answer_health);
  auto client = client_of({standby.url(), leader.url()});
  REQUIRE(client->health().is_ok());
  CHECK(standby.seen().size() == 1);
  CHECK(leader.seen().size() == 1);

  // Every server 503: the (last) problem comes back as with one server.
  StandIn other(answer_503);
  auto all = client_of({standby.url(), other.url()})->health();
  REQUIRE_FALSE(all.is_ok());
  CHECK(all.status().code() == ErrorCode::kUnavailable);
  CHECK(all.status().message() == "standby: the leader is not known yet");
}

TEST_CASE("client: a 307 is followed to its Location with the method body and token",
          "[client][failover]") {
  StandIn leader([](const httplib::Request&, httplib::Response& res) {
    res.status = 201;
    res.set_content(lease_json("l-307"), "application/json");
  });
  StandIn standby([&leader](const httplib::Request& req, httplib::Response& res) {
    res.status = 307;
    res.set_header("Location", leader.url() + req.target);
  });
  ClosedPort down;
  // The leader is in no list: only the standby's redirect names it.
  auto client = client_of({down.url(), standby.url()});
  auto lease = client->create_lease(tiny_lease(), "key-307");
  INFO(lease.status().to_string());
  REQUIRE(lease.is_ok());
  CHECK(lease->id == "l-307");
  auto at_standby = standby.seen();
  auto at_leader = leader.seen();
  REQUIRE(at_standby.size() == 1);
  REQUIRE(at_leader.size() == 1);
  CHECK(at_leader[0].method == "POST");
  CHECK(at_leader[0].path == "/v1/leases");
  CHECK(at_leader[0].body == at_standby[0].body);
  CHECK(at_leader[0].body.find("\"tiny\"") != std::string::npos);
  CHECK(at_leader[0].authorization == "Bearer ah_test");
  CHECK(at_leader[0].idempotency_key == "key-307");

  // A redirect that is not http(s) is not followed; with no server left the call fails
  // naming it.
  StandIn odd([](const httplib::Request&, httplib::Response& res) {
    res.status = 307;
    res.set_header("Location", "ftp://127.0.0.1/v1/healthz");
  });
  auto refused = client_of({odd.url()})->health();
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().message().find("ftp://127.0.0.1") != std::string::npos);
}

TEST_CASE("client: when no server answers the error is kUnavailable naming every server tried",
          "[client][failover]") {
  ClosedPort a, b, c;
  auto h = client_of({a.url(), b.url(), c.url()})->health();
  REQUIRE_FALSE(h.is_ok());
  CHECK(h.status().code() == ErrorCode::kUnavailable);
  const std::string& m = h.status().message();
  INFO(m);
  CHECK(m.find(a.url() + ": connection failed") != std::string::npos);
  CHECK(m.find(b.url() + ": connection failed") != std::string::npos);
  CHECK(m.find(c.url() + ": connection failed") != std::string::npos);
}

TEST_CASE("client: after a failover the next call goes first to the server that answered",
          "[client][failover]") {
  StandIn standby(answer_503);
  StandIn leader(answer_health);
  auto client = client_of({standby.url(), leader.url()});
  REQUIRE(client->health().is_ok());
  REQUIRE(client->health().is_ok());
  REQUIRE(client->health().is_ok());
  CHECK(standby.seen().size() == 1);
  CHECK(leader.seen().size() == 3);
}

TEST_CASE(
    "client: a lease creation the first server took without answering is repeated with "
    "its Idempotency-Key",
    "[client][failover]") {
  StandIn next([](const httplib::Request&, httplib::Response& res) {
    res.status = 201;
    res.set_content(lease_json("l-retried"), "application/json");
  });
  SECTION("a key the client makes") {
    HangUp dies;
    auto lease = client_of({dies.url(), next.url()})->create_lease(tiny_lease());
    INFO(lease.status().to_string());
    REQUIRE(lease.is_ok());
    CHECK(lease->id == "l-retried");
    const std::string first = dies.request();
    INFO(first);
    REQUIRE(first.rfind("POST /v1/leases ", 0) == 0);
    const std::string key = header_of(first, "Idempotency-Key");
    CHECK(key.rfind("armhive-", 0) == 0);
    auto seen = next.seen();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].idempotency_key == key);
    CHECK(first.find(seen[0].body) != std::string::npos);
  }
  SECTION("the caller's key") {
    HangUp dies;
    auto lease = client_of({dies.url(), next.url()})->create_lease(tiny_lease(), "gitlab-job-7");
    REQUIRE(lease.is_ok());
    CHECK(header_of(dies.request(), "Idempotency-Key") == "gitlab-job-7");
    auto seen = next.seen();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].idempotency_key == "gitlab-job-7");
  }
}

TEST_CASE("client: a release the first server took without answering is not repeated elsewhere",
          "[client][failover]") {
  HangUp dies;
  StandIn next([](const httplib::Request&, httplib::Response& res) {
    res.set_content(lease_json("l-1"), "application/json");
  });
  auto released = client_of({dies.url(), next.url()})->release_lease("l-1");
  REQUIRE_FALSE(released.is_ok());
  CHECK(released.status().code() == ErrorCode::kUnavailable);
  CHECK(dies.request().rfind("DELETE /v1/leases/l-1 ", 0) == 0);
  CHECK(next.seen().empty());
}

TEST_CASE("client: one server keeps a single-server error and a bad entry of a list is named",
          "[client][failover]") {
  ClosedPort down;
  ClientOptions one;
  one.server = down.url();
  auto c = Client::create(one);
  REQUIRE(c.is_ok());
  CHECK((*c)->options().servers == std::vector<std::string>{down.url()});
  auto h = (*c)->health();
  REQUIRE_FALSE(h.is_ok());
  CHECK(h.status().message().find("cannot reach " + down.url()) != std::string::npos);

  ClientOptions bad;
  bad.servers = {"http://127.0.0.1:8470/", "ftp://b.example"};
  auto made = Client::create(bad);
  REQUIRE_FALSE(made.is_ok());
  CHECK(made.status().code() == ErrorCode::kInvalidArgument);
  CHECK(made.status().field() == "server");
  CHECK(made.status().message().find("entry 2 of 2") != std::string::npos);
  CHECK(made.status().message().find("ftp://b.example") != std::string::npos);
}

}  // namespace
}  // namespace armhive
