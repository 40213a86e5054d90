// Issue 33, finding 6: one tenant must not tie up every API worker. Long operations (streamed
// execs here) are limited per token (429 naming the limit, with Retry-After) while another
// token's requests are still answered; a client that goes away gives its slot back; an upload
// trickled within each piece's deadline is still cut at its whole-body deadline (408).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

using nlohmann::json;

// A raw loopback connection: a streamed request held open, then dropped at will.
class RawConn {
 public:
  explicit RawConn(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(fd_ >= 0);
    REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  }
  ~RawConn() { close(fd_); }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  void send_all(std::string_view s) {
    while (!s.empty()) {
      ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      REQUIRE(n > 0);
      s.remove_prefix(static_cast<size_t>(n));
    }
  }
  // Whether the peer sent something (appended to `into`) or closed within `ms`.
  bool wait_readable(int ms) {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, ms) > 0;
  }
  // Reads until `marker` is in what was read, the peer closes, `ms` of silence, or 1,000 reads
  // (a stream's keep-alives never fall silent).
  std::string read_until(std::string_view marker, int ms = 20000) {
    for (int reads = 0; reads < 1000 && received_.find(marker) == std::string::npos; ++reads) {
      if (!wait_readable(ms)) break;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      received_.append(buf, static_cast<size_t>(n));
    }
    return received_;
  }
  int status() {
    std::string head = read_until("\r\n\r\n");
    if (head.rfind("HTTP/1.1 ", 0) != 0) return -1;
    return std::atoi(head.c_str() + 9);
  }

 private:
  int fd_ = -1;
  std::string received_;
};

std::string create_lease(ApiFixture& f, const std::string& token) {
  auto r = f.request("POST", "/v1/leases", token, R"({"pool":"tiny","ttl":"1h"})");
  REQUIRE(r.status == 201);
  return json::parse(r.body)["id"].get<std::string>();
}

// A streamed exec of `hold` (runs until the client goes away), without timeout_s.
std::unique_ptr<RawConn> start_held_exec(ApiFixture& f, const std::string& token,
                                         const std::string& lease) {
  auto c = std::make_unique<RawConn>(f.server->port());
  const std::string body = R"({"argv":["hold"]})";
  c->send_all("POST /v1/leases/" + lease + "/exec HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " +
              token +
              "\r\nAccept: application/x-ndjson\r\nContent-Type: application/json\r\n"
              "Content-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body);
  return c;
}

TEST_CASE("http: one token's long execs are limited, other tokens are still answered",
          "[http][hostile][long_operations]") {
  constexpr size_t kLimit = 3;
  ApiFixture f(true, [](HttpOptions& o) {
    o.threads = 8;
    o.long_operations.execs = kLimit;
  });
  const std::string lease = create_lease(f, f.ci_b);
  std::vector<std::unique_ptr<RawConn>> held;
  for (size_t i = 0; i < kLimit; ++i) {
    held.push_back(start_held_exec(f, f.ci_b, lease));
    REQUIRE(held.back()->status() == 200);
    // The command runs (its first output line is out): the worker is taken.
    REQUIRE_THAT(held.back()->read_until("\"stdout\""), Catch::Contains("\"stdout\""));
  }

  // The next one is refused at once, naming the limit and how many run.
  auto over = start_held_exec(f, f.ci_b, lease);
  std::string reply = over->read_until("}");
  REQUIRE(reply.rfind("HTTP/1.1 429", 0) == 0);
  CHECK(reply.find("Retry-After: ") != std::string::npos);
  CHECK(reply.find("application/problem+json") != std::string::npos);
  json problem = json::parse(reply.substr(reply.find("\r\n\r\n") + 4));
  CHECK(problem["status"] == 429);
  CHECK(problem["field"] == "max_execs_per_token");
  CHECK_THAT(problem["detail"].get<std::string>(), Catch::Contains("has 3 execs running"));
  CHECK_THAT(problem["detail"].get<std::string>(), Catch::Contains("is 3"));

  // The buffered exec counts too.
  auto buffered =
      f.request("POST", "/v1/leases/" + lease + "/exec", f.ci_b, R"({"argv":["echo","x"]})");
  CHECK(buffered.status == 429);
  CHECK(buffered.headers.count("Retry-After") == 1);

  // Another token is answered while ci-b holds its limit, and may run its own exec.
  CHECK(f.request("GET", "/v1/leases", f.ci_a).status == 200);
  const std::string other = create_lease(f, f.ci_a);
  auto echo =
      f.request("POST", "/v1/leases/" + other + "/exec", f.ci_a, R"({"argv":["echo","x"]})");
  CHECK(echo.status == 200);
  CHECK(f.leases.holding() == static_cast<int>(kLimit));
}

TEST_CASE("http: a streamed exec whose client went away gives its slot back",
          "[http][hostile][long_operations]") {
  ApiFixture f(true, [](HttpOptions& o) { o.long_operations.execs = 1; });
  const std::string lease = create_lease(f, f.ci_b);
  auto first = start_held_exec(f, f.ci_b, lease);
  REQUIRE(first->status() == 200);
  first->read_until("\"stdout\"");
  auto refused = start_held_exec(f, f.ci_b, lease);
  REQUIRE(refused->status() == 429);
  refused.reset();

  first.reset();  // the client disconnects: the command is cancelled, the slot freed
  // The slot comes back once the worker has seen the cancellation: retry as a client told
  // Retry-After would, a bounded number of times.
  int status = 0;
  for (int attempt = 0; attempt < 200 && status != 200; ++attempt) {
    auto next = start_held_exec(f, f.ci_b, lease);
    status = next->status();
    if (status == 200) {
      next->read_until("\"stdout\"");
      CHECK(f.leases.holding() == 1);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  CHECK(status == 200);
}

TEST_CASE("http: an upload trickled within each read deadline is cut at its whole-body deadline",
          "[http][hostile][long_operations][files]") {
  ApiFixture f(true, [](HttpOptions& o) {
    o.read_timeout = std::chrono::seconds(1);
    o.upload_min_bytes_per_second = 1000;  // 1,000 bytes: at most 1 s + 1 s for the body
  });
  const std::string lease = create_lease(f, f.ci_b);
  RawConn c(f.server->port());
  c.send_all("PUT /v1/leases/" + lease +
             "/files?path=/tmp/trickled HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + f.ci_b +
             "\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\n");
  // A byte every 300 ms: each piece well within read_timeout, the whole far beyond 2 s. Stop
  // at the answer, or after 40 bytes (12 s) at most.
  bool answered = false;
  for (int i = 0; i < 40 && !answered; ++i) {
    c.send_all("x");
    answered = c.wait_readable(300);
  }
  REQUIRE(answered);
  std::string reply = c.read_until("}");
  INFO(reply);
  REQUIRE(reply.rfind("HTTP/1.1 408", 0) == 0);
  json problem = json::parse(reply.substr(reply.find("\r\n\r\n") + 4));
  CHECK(problem["field"] == "body");
  CHECK_THAT(problem["detail"].get<std::string>(), Catch::Contains("did not arrive within 2 s"));
}

}  // namespace
}  // namespace armhive
