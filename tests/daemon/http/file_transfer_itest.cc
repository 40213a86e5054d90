// `armhive cp`'s endpoints over real HTTP: the in-process server over FakeLeaseService, whose
// guest is the in-memory agent behind the real transfer and pool policy.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "base/sha256.h"
#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

std::string create_lease(ApiFixture& f, const std::string& pool = "tiny",
                         const std::string& token = {}) {
  auto r = f.request("POST", "/v1/leases", token.empty() ? f.ci_b : token,
                     R"({"pool":")" + pool + R"(","ttl":"1h"})");
  REQUIRE(r.status == 201);
  return nlohmann::json::parse(r.body)["id"].get<std::string>();
}

std::unique_ptr<Client> client_for(ApiFixture& f) {
  ClientOptions o;
  o.server = f.url();
  o.token = f.ci_b;
  auto c = Client::create(o);
  REQUIRE(c.is_ok());
  return std::move(c).value();
}

std::string problem_field(const HttpReply& r) {
  return nlohmann::json::parse(r.body).value("field", "");
}

std::string pattern(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += static_cast<char>(i * 131 % 251);
  return s;
}

// A raw loopback connection: to send a header without its body and see what comes back.
class RawConn {
 public:
  explicit RawConn(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  }
  ~RawConn() { close(fd_); }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;
  void send_all(std::string_view s) {
    REQUIRE(::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size()));
  }
  // Everything the server sends until it closes (at most 10 s).
  std::string read_all() {
    std::string out;
    for (int i = 0; i < 100; ++i) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  int fd_ = -1;
};

TEST_CASE("http: a file streams in and out with its checksum, audited", "[http][files]") {
  ApiFixture f;
  const std::string id = create_lease(f);
  auto client = client_for(f);
  const std::string data = pattern(300 * 1024);  // several body pieces and agent chunks
  auto up = client->put_file(id, "/work/in.bin", false, data.size(), sha256_hex(data),
                             [&](uint64_t offset, size_t max) -> Result<std::string> {
                               return data.substr(offset, std::min<size_t>(max, 10000));
                             });
  INFO(up.status().to_string());
  REQUIRE(up.is_ok());
  CHECK(up->path == "/work/in.bin");
  CHECK(up->kind == "file");
  CHECK(up->bytes == data.size());
  CHECK(up->sha256 == sha256_hex(data));
  CHECK(f.leases.guest().file("/work/in.bin") == data);

  std::string got, kind, sum;
  uint64_t size = 0;
  Status s = client->get_file(
      id, "/work/in.bin",
      [&](const std::string& k, uint64_t n, const std::string& h) {
        kind = k;
        size = n;
        sum = h;
        return Status::ok();
      },
      [&](std::string_view d) {
        got += d;
        return Status::ok();
      });
  REQUIRE(s.is_ok());
  CHECK(kind == "file");
  CHECK(size == data.size());
  CHECK(sum == sha256_hex(data));
  CHECK(got == data);

  auto entries = f.audit->recent(10, id);
  REQUIRE(entries.is_ok());
  std::vector<std::string> actions;
  for (const auto& e : *entries) actions.push_back(e.action);
  CHECK(std::count(actions.begin(), actions.end(), "lease.file_put") == 1);
  CHECK(std::count(actions.begin(), actions.end(), "lease.file_get") == 1);

  // The same through the fixture, for the recorded responses' contract check.
  auto put = f.request("PUT", "/v1/leases/" + id + "/files?path=/work/small.txt", f.ci_b, "hi");
  CHECK(put.status == 200);
  auto get = f.request("GET", "/v1/leases/" + id + "/files?path=/work/small.txt", f.ci_b);
  CHECK(get.status == 200);
  CHECK(get.body == "hi");
  CHECK(get.headers["X-Armhive-Sha256"] == sha256_hex("hi"));
}

TEST_CASE("http: an upload over the pool's limit is refused before a byte is sent",
          "[http][files]") {
  ApiFixture f;
  const std::string id = create_lease(f);
  RawConn c(f.server->port());
  // A client that waits for 100-continue: the refusal comes instead, and no 100 before it.
  c.send_all("PUT /v1/leases/" + id + "/files?path=/big HTTP/1.1\r\nHost: x\r\n" +
             "Authorization: Bearer " + f.ci_b +
             "\r\nContent-Type: application/octet-stream\r\nContent-Length: 2000000\r\n"
             "Expect: 100-continue\r\n\r\n");
  std::string reply = c.read_all();
  CHECK(reply.rfind("HTTP/1.1 413", 0) == 0);
  CHECK_THAT(reply, Catch::Contains("files.max_bytes"));
  CHECK_THAT(reply, !Catch::Contains("100 Continue"));
  CHECK(f.leases.guest().paths().empty());
  CHECK(f.leases.guest().writes == 0);
}

TEST_CASE("http: file requests with bad input are refused naming the field", "[http][files]") {
  ApiFixture f;
  const std::string id = create_lease(f);
  const std::string base = "/v1/leases/" + id + "/files?path=";
  auto put = [&](const std::string& query, const std::string& token,
                 const std::map<std::string, std::string>& headers = {}) {
    return f.request("PUT", "/v1/leases/" + id + "/files" + query, token, "data", headers);
  };
  auto r = put("?path=relative/x", f.ci_b);
  CHECK(r.status == 400);
  CHECK(problem_field(r) == "path");
  r = put("?path=/a/../etc/passwd", f.ci_b);
  CHECK(r.status == 400);
  CHECK(problem_field(r) == "path");
  r = put("?path=/a%00b", f.ci_b);
  CHECK(r.status == 400);
  CHECK(problem_field(r) == "path");
  r = put("", f.ci_b);
  CHECK(r.status == 400);
  CHECK(problem_field(r) == "path");
  r = put("?path=/x&sha256=zz", f.ci_b);
  CHECK(r.status == 400);
  CHECK(problem_field(r) == "sha256");
  r = put("?path=/x&sha256=" + std::string(64, 'a'), f.ci_b);
  CHECK(r.status == 400);
  CHECK(problem_field(r) == "sha256");
  CHECK(f.leases.guest().file("/x") == std::nullopt);
  r = put("?path=/x", f.ci_b, {{"Content-Type", "text/plain"}});
  CHECK(r.status == 415);
  CHECK(problem_field(r) == "Content-Type");
  r = put("?path=/x", f.reader);
  CHECK(r.status == 403);
  CHECK(f.request("GET", base + "/x", f.reader).status == 403);
  r = put("?path=/x", f.ci_a);  // another owner's lease is not found
  CHECK(r.status == 404);
  CHECK(f.request("GET", base + "/nothing-here", f.ci_b).status == 404);

  // A pool with a path prefix: outside it is 403 naming path and the prefix.
  const std::string slow = create_lease(f, "slow");
  r = f.request("PUT", "/v1/leases/" + slow + "/files?path=/etc/x", f.ci_b, "data");
  CHECK(r.status == 409);  // not ready yet
  f.leases.make_ready(slow);
  r = f.request("PUT", "/v1/leases/" + slow + "/files?path=/etc/x", f.ci_b, "data");
  CHECK(r.status == 403);
  CHECK(problem_field(r) == "path");
  CHECK_THAT(r.body, Catch::Contains("/work"));
  CHECK(f.request("PUT", "/v1/leases/" + slow + "/files?path=/work/x", f.ci_b, "data").status ==
        200);

  // A chunked body has no Content-Length to check the limit against.
  RawConn c(f.server->port());
  c.send_all("PUT " + base + "/y HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + f.ci_b +
             "\r\nTransfer-Encoding: chunked\r\n\r\n4\r\ndata\r\n0\r\n\r\n");
  std::string reply = c.read_all();
  CHECK(reply.rfind("HTTP/1.1 400", 0) == 0);
  CHECK_THAT(reply, Catch::Contains("Content-Length"));
}

TEST_CASE("http: downloads over the limit or from a lying guest fail clearly", "[http][files]") {
  ApiFixture f;
  const std::string id = create_lease(f);
  f.leases.guest().put("/big", pattern((1 << 20) + 1));
  auto r = f.request("GET", "/v1/leases/" + id + "/files?path=/big", f.ci_b);
  CHECK(r.status == 413);
  CHECK(problem_field(r) == "files.max_bytes");

  f.leases.guest().put("/f", pattern(200 * 1024));
  f.leases.guest().garbage_base64 = true;
  auto client = client_for(f);
  bool begun = false;
  Status s = client->get_file(
      id, "/f",
      [&](const std::string&, uint64_t, const std::string&) {
        begun = true;
        return Status::ok();
      },
      [](std::string_view) { return Status::ok(); });
  CHECK(begun);
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.code() == ErrorCode::kUnavailable);
  CHECK_THAT(s.message(), Catch::Contains("broke off"));
  CHECK(f.request("GET", "/healthz").status == 200);
}

}  // namespace
}  // namespace armhive
