#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "base/metrics.h"
#include "daemon/http/server.h"
#include "daemon/store/database.h"
#include "daemon/store/token_store.h"
#include "tests/daemon/http/fake_host_admin.h"
#include "tests/daemon/http/fake_lease_service.h"
#include "tests/support/manual_clock.h"

namespace armhive {

struct HttpReply {
  int status = 0;
  std::string content_type;
  std::string body;
  std::map<std::string, std::string> headers;
};

// An HttpServer on 127.0.0.1:<ephemeral> over FakeLeaseService and FakeBenchmarkService, with
// an in-memory database holding four tokens:
//   admin   (admin)
//   ci-a    (ci, at most 2 concurrent leases, max ttl 4h)
//   ci-b    (ci, no limits)
//   reader  (read)
// When ARMHIVE_API_RESPONSES_DIR is set, every reply of request() is also written there
// (one JSON file each: method, path, status, content_type, body) for the OpenAPI check.
class ApiFixture {
 public:
  // `configure` adjusts the server's options before it starts (the access callbacks).
  explicit ApiFixture(bool with_benchmarks = true,
                      const std::function<void(HttpOptions&)>& configure = {});
  // With benchmarks and host_admin's hooks behind POST /v1/hosts and DELETE /v1/hosts/{name}.
  struct WithHostAdmin {};
  explicit ApiFixture(WithHostAdmin);
  ~ApiFixture();

  std::string url() const { return server->url(); }

  HttpReply request(const std::string& method, const std::string& path,
                    const std::string& token = {}, const std::string& body = {},
                    const std::map<std::string, std::string>& headers = {});

  std::unique_ptr<Database> db;
  SystemClock clock;
  // The audit log's clock (starts at the real time; tests move it to end a throttle window or
  // age rows past the retention).
  ManualClock audit_clock{SystemClock().now()};
  std::unique_ptr<TokenStore> tokens;
  std::unique_ptr<AuditLog> audit;
  Metrics metrics;
  FakeLeaseService leases;
  std::unique_ptr<FakeBenchmarkService> benchmarks;
  std::unique_ptr<FakeHostAdmin> host_admin;  // WithHostAdmin only
  std::unique_ptr<HttpServer> server;
  std::string admin, ci_a, ci_b, reader;  // secrets
};

// A syntactically valid public key (ssh-keygen -t ed25519 output shape).
inline constexpr const char* kTestKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ8vR2kq0b9Qn5o1c0fI1xQmQhJ3v7aWcV0lR9m2XyZa ci@test";

}  // namespace armhive
