// The streamed exec over real HTTP: the in-process server (its service streams through
// LeaseService's default, output at the end) read by the CLI's client.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "api/exec_stream.h"
#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

std::string create_lease(ApiFixture& f) {
  auto r = f.request("POST", "/v1/leases", f.ci_b,
                     R"({"pool":"tiny","ttl":"1h","ssh_keys":[")" + std::string(kTestKey) + "\"]}");
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

TEST_CASE("http: a streamed exec sends output lines and then the outcome", "[http][exec_stream]") {
  ApiFixture f;
  std::string id = create_lease(f);
  auto client = client_for(f);
  std::string out, err;
  auto collect = [&](std::string_view stream, std::string_view data) {
    (stream == "stderr" ? err : out) += data;
  };
  ExecRequestDto req;
  req.argv = {"echo", "streamed", "arm"};
  req.timeout_s = 0;  // none: the lease bounds it
  auto r = client->exec_stream(id, req, collect);
  REQUIRE(r.is_ok());
  CHECK(out == "streamed arm\n");
  CHECK(r->result.exit_code == 0);
  CHECK_FALSE(r->cancelled);
  CHECK(f.leases.last_exec().timeout == std::chrono::hours(1));  // the buffered fallback's

  out.clear();
  req.argv = {"false"};
  req.timeout_s = 7;
  r = client->exec_stream(id, req, collect);
  REQUIRE(r.is_ok());
  CHECK(r->result.exit_code == 1);
  CHECK(err == "failed\n");
  CHECK(f.leases.last_exec().timeout == std::chrono::seconds(7));

  req.argv = {"binary"};
  r = client->exec_stream(id, req, collect);
  REQUIRE(r.is_ok());
  CHECK(out == std::string("\xff\xfe\x00\x01", 4));  // bytes survive (base64 on the wire)
}

TEST_CASE("http: a streamed exec that cannot start is an ordinary problem", "[http][exec_stream]") {
  ApiFixture f;
  auto client = client_for(f);
  ExecRequestDto req;
  req.argv = {"ls"};
  auto r = client->exec_stream("l-000000000000", req, [](std::string_view, std::string_view) {});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ErrorCode::kNotFound);
  std::string id = create_lease(f);
  req.argv = {"throw"};
  r = client->exec_stream(id, req, [](std::string_view, std::string_view) {});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ErrorCode::kInternal);
  CHECK(f.request("GET", "/healthz").status == 200);
}

TEST_CASE("api: exec stream lines round trip and reject garbage", "[api][exec_stream]") {
  std::string line = exec_output_line("stderr", std::string("a\0b", 3));
  REQUIRE(line.back() == '\n');
  line.pop_back();
  auto out = parse_exec_stream_line(line);
  REQUIRE(out.is_ok());
  CHECK(out->kind == ExecStreamLine::Kind::kOutput);
  CHECK(out->stream == "stderr");
  CHECK(out->data == std::string("a\0b", 3));

  ExecResultDto res;
  res.exit_code = 0;
  res.signal = 9;
  std::string fin = exec_result_line(res, true);
  fin.pop_back();
  auto done = parse_exec_stream_line(fin);
  REQUIRE(done.is_ok());
  CHECK(done->kind == ExecStreamLine::Kind::kResult);
  CHECK(done->result.signal == 9);
  CHECK(done->cancelled);

  Problem p;
  p.status = 503;
  p.detail = "the VM went away";
  std::string e = exec_error_line(p);
  e.pop_back();
  auto err = parse_exec_stream_line(e);
  REQUIRE(err.is_ok());
  CHECK(err->kind == ExecStreamLine::Kind::kError);
  CHECK(err->error.detail == "the VM went away");

  CHECK(parse_exec_stream_line("")->kind == ExecStreamLine::Kind::kKeepAlive);
  for (const char* bad : {"{", "[]", R"({"stream":"stdin","data":""})",
                          R"({"stream":"stdout","data":"***"})", R"({"exit_code":"0"})", "{}"}) {
    INFO(bad);
    CHECK_FALSE(parse_exec_stream_line(bad).is_ok());
  }
}

}  // namespace
}  // namespace armhive
