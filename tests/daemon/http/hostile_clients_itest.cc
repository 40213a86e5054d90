// Waiting, slow and many clients against a live in-process server (issue 12 item 3): the
// server keeps answering /healthz and handing out leases while 1,000 long-polls wait, 200
// connections hold half a request and 200 trickle a byte at a time. Asserts answers, never
// latencies.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

void raise_fd_limit(rlim_t wanted) {
  rlimit rl{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &rl) == 0);
  if (rl.rlim_cur >= wanted) return;
  REQUIRE(rl.rlim_max >= wanted);
  rl.rlim_cur = wanted;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &rl) == 0);
}

// A raw loopback TCP connection (the clients here misbehave on purpose).
class RawConn {
 public:
  explicit RawConn(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawConn() {
    if (fd_ >= 0) close(fd_);
  }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  bool ok() const { return ok_; }
  bool send_all(std::string_view s) {
    while (!s.empty()) {
      ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Reads what is there within `ms`; false once the peer closed (or reset) the connection.
  bool read_some(std::string& into, int ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return true;
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    into.append(buf, static_cast<size_t>(n));
    return true;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

struct Hostile {
  Hostile()
      : server(
            [&] {
              HttpOptions o;
              o.port = 0;
              o.threads = 4;
              o.header_timeout = std::chrono::seconds(3);
              o.max_connections = 4096;
              o.max_connections_per_client = 2000;  // every client here is 127.0.0.1
              o.version = "hostile";
              return o;
            }(),
            f.leases, nullptr, *f.tokens, *f.audit, f.metrics) {}
  ApiFixture f;  // its stores and services; its own server is not used here
  HttpServer server;
};

TEST_CASE("http: 1,000 long-polls, 200 slowloris and 200 trickling clients do not stall it",
          "[hostile]") {
  raise_fd_limit(8192);
  Hostile h;
  REQUIRE(h.server.start().is_ok());
  const int port = h.server.port();
  auto pending = h.f.leases.create_lease({"slow", {}, {}, {}, Purpose::kCi, {}, "ci-b"});
  REQUIRE(pending.is_ok());

  std::vector<std::unique_ptr<RawConn>> polls, loris, trickle;
  const std::string poll_request = "GET /v1/leases/" + pending->id +
                                   "?wait=ready&timeout=2m HTTP/1.1\r\nHost: t\r\n"
                                   "Authorization: Bearer " +
                                   h.f.ci_b + "\r\n\r\n";
  for (int i = 0; i < 1000; ++i) {
    polls.push_back(std::make_unique<RawConn>(port));
    REQUIRE(polls.back()->ok());
    REQUIRE(polls.back()->send_all(poll_request));
  }
  for (int i = 0; i < 200; ++i) {
    loris.push_back(std::make_unique<RawConn>(port));
    REQUIRE(loris.back()->ok());
    REQUIRE(loris.back()->send_all("POST /v1/leases HTTP/1.1\r\nHost: t\r\nContent-Le"));
    trickle.push_back(std::make_unique<RawConn>(port));
    REQUIRE(trickle.back()->ok());
  }
  std::atomic<bool> done{false};
  std::thread trickler([&] {
    const std::string request =
        "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: " + std::string(4096, 'a') + "\r\n\r\n";
    for (size_t pos = 0; !done && pos < request.size(); ++pos) {
      for (auto& c : trickle) c->send_all(request.substr(pos, 1));  // the closed ones fail
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  // For 30 s (the slowloris hold), health and hand-outs keep being answered.
  httplib::Client cli(h.server.url());
  cli.set_connection_timeout(10);
  cli.set_read_timeout(10);
  httplib::Headers auth{{"Authorization", "Bearer " + h.f.ci_b}};
  int probes = 0, healthy = 0, handed_out = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    ++probes;
    auto health = cli.Get("/healthz");
    healthy += health && health->status == 200;
    auto lease = cli.Post("/v1/leases", auth, R"({"pool":"tiny"})", "application/json");
    handed_out += lease && lease->status == 201;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  done = true;
  trickler.join();
  CHECK(probes > 10);
  CHECK(healthy == probes);
  CHECK(handed_out == probes);

  // The half-requests and the trickles were cut off by the header deadline, not left open.
  size_t loris_closed = 0, trickle_closed = 0;
  for (auto& c : loris) {
    std::string ignored;
    loris_closed += !c->read_some(ignored, 1000);
  }
  for (auto& c : trickle) {
    std::string ignored;
    trickle_closed += !c->read_some(ignored, 1000);
  }
  CHECK(loris_closed == loris.size());
  CHECK(trickle_closed == trickle.size());

  // Every long-poll was still waiting, and each is answered once the lease is ready.
  h.f.leases.make_ready(pending->id);
  size_t answered = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::vector<std::string> replies(polls.size());
  std::vector<bool> have(polls.size(), false);
  while (answered < polls.size() && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < polls.size(); ++i) {
      if (have[i]) continue;
      polls[i]->read_some(replies[i], 0);
      if (replies[i].find("\"state\":\"ready\"") != std::string::npos) {
        have[i] = true;
        ++answered;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(answered == polls.size());
  for (const auto& r : replies) {
    if (r.rfind("HTTP/1.1 200", 0) != 0) {
      INFO(r.substr(0, 200));
      CHECK(false);
      break;
    }
  }
  h.server.stop();
}

TEST_CASE("http: at the connection cap health and metrics still answer, others get 503",
          "[hostile]") {
  ApiFixture f;
  HttpOptions o;
  o.port = 0;
  o.threads = 2;
  o.max_connections = 4;
  o.max_connections_per_client = 4;
  o.over_cap_connections = 8;
  HttpServer server(o, f.leases, nullptr, *f.tokens, *f.audit, f.metrics);
  REQUIRE(server.start().is_ok());
  std::vector<std::unique_ptr<RawConn>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(std::make_unique<RawConn>(server.port()));
    REQUIRE(idle.back()->ok());
  }
  // The four idle connections were admitted (accepting is asynchronous): wait for the cap.
  httplib::Client cli(server.url());
  httplib::Headers auth{{"Authorization", "Bearer " + f.ci_b}};
  int status = 0;
  std::string retry_after, content_type;
  for (int i = 0; i < 100 && status != 503; ++i) {
    auto pools = cli.Get("/v1/pools", auth);
    status = pools ? pools->status : -1;
    if (pools) {
      retry_after = pools->get_header_value("Retry-After");
      content_type = pools->get_header_value("Content-Type");
    }
    if (status != 503) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(status == 503);
  CHECK(retry_after == "1");
  CHECK(content_type == "application/problem+json");
  auto health = cli.Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
  auto metrics = cli.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->status == 200);
  CHECK(metrics->body.find("armhive_build_info") != std::string::npos);

  // Freed slots serve everything again.
  idle.clear();
  status = 0;
  for (int i = 0; i < 100 && status != 200; ++i) {
    auto again = cli.Get("/v1/pools", auth);
    status = again ? again->status : -1;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(status == 200);
  server.stop();
}

}  // namespace
}  // namespace armhive
