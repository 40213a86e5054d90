#include "tests/daemon/http/api_fixture.h"

#include <httplib.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/response_recorder.h"

namespace armhive {
namespace {

std::string must(Result<std::string> r) {
  if (!r.is_ok()) {
    std::fprintf(stderr, "fixture: %s\n", r.status().to_string().c_str());
    std::abort();
  }
  return *r;
}

}  // namespace

ApiFixture::ApiFixture(bool with_benchmarks, const std::function<void(HttpOptions&)>& configure) {
  auto opened = Database::open(":memory:");
  if (!opened.is_ok()) std::abort();
  db = std::move(opened).value();
  auto t = TokenStore::open(*db, clock);
  auto a = AuditLog::open(*db, audit_clock, {}, &metrics);
  if (!t.is_ok() || !a.is_ok()) std::abort();
  tokens = std::move(t).value();
  audit = std::move(a).value();
  admin = must(tokens->create({"admin", TokenRole::kAdmin, 0, Seconds(0)}));
  ci_a = must(tokens->create({"ci-a", TokenRole::kCi, 2, Seconds(4 * 3600)}));
  ci_b = must(tokens->create({"ci-b", TokenRole::kCi, 0, Seconds(0)}));
  reader = must(tokens->create({"reader", TokenRole::kRead, 0, Seconds(0)}));
  if (with_benchmarks) benchmarks = std::make_unique<FakeBenchmarkService>(leases);
  HttpOptions o;
  o.port = 0;
  o.threads = 8;
  o.event_keepalive = std::chrono::milliseconds(200);
  o.version = "test";
  if (configure) configure(o);
  server = std::make_unique<HttpServer>(o, leases, benchmarks.get(), *tokens, *audit, metrics);
  Status s = server->start();
  if (!s.is_ok()) {
    std::fprintf(stderr, "fixture: %s\n", s.to_string().c_str());
    std::abort();
  }
}

ApiFixture::ApiFixture(WithHostAdmin)
    : ApiFixture(true, [this](HttpOptions& o) {
        host_admin = std::make_unique<FakeHostAdmin>(leases);
        host_admin->install(o);
      }) {}

ApiFixture::~ApiFixture() { server->stop(); }

HttpReply ApiFixture::request(const std::string& method, const std::string& path,
                              const std::string& token, const std::string& body,
                              const std::map<std::string, std::string>& headers) {
  httplib::Client cli(url());
  cli.set_read_timeout(std::chrono::seconds(60));
  httplib::Headers h;
  std::string put_type = "application/octet-stream";  // PUT: its Content-Type header, if any
  for (const auto& [k, v] : headers) {
    if (method == "PUT" && k == "Content-Type") {
      put_type = v;
    } else {
      h.emplace(k, v);
    }
  }
  if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
  httplib::Result res = method == "GET"    ? cli.Get(path, h)
                        : method == "POST" ? cli.Post(path, h, body, "application/json")
                        : method == "PUT"  ? cli.Put(path, h, body, put_type)
                                           : cli.Delete(path, h);
  HttpReply reply;
  if (!res) {
    reply.status = -1;
    reply.body = httplib::to_string(res.error());
    return reply;
  }
  reply.status = res->status;
  reply.content_type = res->get_header_value("Content-Type");
  reply.body = res->body;
  for (const auto& [k, v] : res->headers) reply.headers[k] = v;
  record_response(method, path, reply.status, reply.content_type, reply.body);
  return reply;
}

}  // namespace armhive
