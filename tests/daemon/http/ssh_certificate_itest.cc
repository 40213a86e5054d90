// POST /v1/leases/{id}/ssh-certificate: who may ask, for which lease, with what body. The CA
// itself is daemon/access's (tests/daemon/access/ssh_ca_itest.cc); here a recording stand-in.
#include <catch2/catch.hpp>
#include <mutex>
#include <nlohmann/json.hpp>

#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

using nlohmann::json;

struct Issued {
  std::mutex mu;
  std::vector<std::string> leases, tokens, keys;
};

std::function<void(HttpOptions&)> with_ca(Issued& issued) {
  return [&issued](HttpOptions& o) {
    o.ssh_certificate = [&issued](const Lease& lease, const std::string& token,
                                  const std::string& key) -> Result<SshCertificateDto> {
      if (key.rfind("ssh-ed25519 AAAA", 0) != 0) return invalid_argument("public_key", "malformed");
      std::lock_guard lock(issued.mu);
      issued.leases.push_back(lease.id);
      issued.tokens.push_back(token);
      issued.keys.push_back(key);
      return SshCertificateDto{"ssh-ed25519-cert-v01@openssh.com AAAAcert",
                               lease.login_user,
                               "lease-" + lease.id,
                               "armhive lease=" + lease.id,
                               7,
                               "2026-01-01T00:00:00Z",
                               "2026-01-01T01:00:00Z"};
    };
  };
}

json body_of(const HttpReply& r) {
  INFO(r.body);
  json j = json::parse(r.body, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

std::string create(ApiFixture& f, const std::string& token, const std::string& pool = "tiny") {
  auto r = f.request(
      "POST", "/v1/leases", token,
      R"({"pool":")" + pool + R"(","ttl":"1h","ssh_keys":[")" + std::string(kTestKey) + R"("]})");
  INFO(r.body);
  REQUIRE(r.status == 201);
  return body_of(r)["id"].get<std::string>();
}

void check_problem(const HttpReply& r, int status, const std::string& field = {}) {
  INFO(r.body);
  CHECK(r.status == status);
  CHECK(r.content_type == "application/problem+json");
  if (!field.empty()) CHECK(body_of(r)["field"] == field);
}

std::string cert_body(const std::string& key) { return json{{"public_key", key}}.dump(); }

TEST_CASE("http: the lease's owner gets an SSH certificate for a ready lease, audited",
          "[http][ssh-cert]") {
  Issued issued;
  ApiFixture f(true, with_ca(issued));
  std::string id = create(f, f.ci_a);
  auto r = f.request("POST", "/v1/leases/" + id + "/ssh-certificate", f.ci_a, cert_body(kTestKey));
  REQUIRE(r.status == 200);
  json c = body_of(r);
  CHECK(c["principal"] == "lease-" + id);
  CHECK(c["certificate"].get<std::string>().rfind("ssh-ed25519-cert-v01@openssh.com ", 0) == 0);
  CHECK(c["serial"] == 7);
  REQUIRE(issued.leases.size() == 1);
  CHECK(issued.leases[0] == id);
  CHECK(issued.tokens[0] == "ci-a");
  CHECK(issued.keys[0] == kTestKey);
  auto entries = f.audit->recent(10, id);
  REQUIRE(entries.is_ok());
  REQUIRE_FALSE(entries->empty());
  CHECK((*entries)[0].action == "ssh.certificate");
  CHECK((*entries)[0].actor == "ci-a");
  CHECK((*entries)[0].detail.find("serial=7") != std::string::npos);

  // An admin may ask for any lease.
  CHECK(f.request("POST", "/v1/leases/" + id + "/ssh-certificate", f.admin, cert_body(kTestKey))
            .status == 200);
}

TEST_CASE("http: certificate requests for others' leases, bad bodies and unready leases fail",
          "[http][ssh-cert]") {
  Issued issued;
  ApiFixture f(true, with_ca(issued));
  std::string theirs = create(f, f.ci_b);
  std::string mine = create(f, f.ci_a);
  const std::string path = "/v1/leases/" + mine + "/ssh-certificate";
  // Another owner's lease does not exist for this token.
  check_problem(
      f.request("POST", "/v1/leases/" + theirs + "/ssh-certificate", f.ci_a, cert_body(kTestKey)),
      404);
  check_problem(f.request("POST", path, f.reader, cert_body(kTestKey)), 403);
  check_problem(f.request("POST", path, f.ci_a, "{}"), 400, "public_key");
  check_problem(f.request("POST", path, f.ci_a, R"({"public_key":42})"), 400, "public_key");
  check_problem(f.request("POST", path, f.ci_a, cert_body("ssh-rsa nope")), 400, "public_key");
  // The body cannot name another lease or principal.
  check_problem(f.request("POST", path, f.ci_a,
                          json{{"public_key", kTestKey}, {"principal", "lease-" + theirs}}.dump()),
                400, "principal");
  // Not ready yet, and ended.
  std::string pending = create(f, f.ci_b, "slow");
  check_problem(
      f.request("POST", "/v1/leases/" + pending + "/ssh-certificate", f.ci_b, cert_body(kTestKey)),
      409);
  REQUIRE(f.request("DELETE", "/v1/leases/" + mine, f.ci_a).status == 200);
  check_problem(f.request("POST", path, f.ci_a, cert_body(kTestKey)), 409);
  CHECK(issued.leases.empty());
}

TEST_CASE("http: without an SSH CA the certificate endpoint is 503", "[http][ssh-cert]") {
  ApiFixture f;
  std::string id = create(f, f.ci_b);
  check_problem(
      f.request("POST", "/v1/leases/" + id + "/ssh-certificate", f.ci_b, cert_body(kTestKey)), 503);
}

}  // namespace
}  // namespace armhive
