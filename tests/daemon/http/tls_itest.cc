#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>

#include "api/client.h"
#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

// Writes a self-signed certificate for 127.0.0.1 (SAN IP) and its P-256 key as PEM files.
bool make_self_signed(const fs::path& cert_path, const fs::path& key_path) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (key == nullptr) return false;
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* san = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, "IP:127.0.0.1");
  bool ok =
      san != nullptr && X509_add_ext(cert, san, -1) == 1 && X509_sign(cert, key, EVP_sha256()) > 0;
  X509_EXTENSION_free(san);
  if (ok) {
    FILE* c = std::fopen(cert_path.c_str(), "w");
    FILE* k = std::fopen(key_path.c_str(), "w");
    ok = c != nullptr && k != nullptr && PEM_write_X509(c, cert) == 1 &&
         PEM_write_PrivateKey(k, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
    if (c) std::fclose(c);
    if (k) std::fclose(k);
  }
  X509_free(cert);
  EVP_PKEY_free(key);
  return ok;
}

TEST_CASE("http: with a certificate and key the server speaks only TLS", "[http][tls]") {
  fs::path dir = fs::temp_directory_path() / ("armhive-tls-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  REQUIRE(make_self_signed(dir / "cert.pem", dir / "key.pem"));

  ApiFixture f;  // for the stores and services; its own plain server is not used here
  HttpOptions o;
  o.port = 0;
  o.threads = 4;
  o.tls_cert_file = (dir / "cert.pem").string();
  o.tls_key_file = (dir / "key.pem").string();
  HttpServer tls(o, f.leases, nullptr, *f.tokens, *f.audit, f.metrics);
  REQUIRE(tls.start().is_ok());
  CHECK(tls.url().rfind("https://127.0.0.1:", 0) == 0);

  ClientOptions trusted;
  trusted.server = tls.url();
  trusted.token = f.ci_b;
  trusted.ca_file = (dir / "cert.pem").string();
  auto client = Client::create(trusted);
  REQUIRE(client.is_ok());
  auto health = (*client)->health();
  INFO(health.status().to_string());
  REQUIRE(health.is_ok());
  auto pools = (*client)->pools();
  REQUIRE(pools.is_ok());
  CHECK(pools->size() == 2);

  // Without the CA the certificate is not trusted; plain HTTP gets no answer.
  ClientOptions untrusted = trusted;
  untrusted.ca_file = "/nonexistent-ca.pem";
  auto refused = (*Client::create(untrusted))->health();
  CHECK_FALSE(refused.is_ok());
  CHECK(refused.status().code() == ErrorCode::kUnavailable);
  ClientOptions insecure = untrusted;
  insecure.ca_file.clear();
  insecure.insecure = true;
  CHECK((*Client::create(insecure))->health().is_ok());
  ClientOptions plain = trusted;
  plain.server = "http://127.0.0.1:" + std::to_string(tls.port());
  CHECK_FALSE((*Client::create(plain))->health().is_ok());

  tls.stop();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace armhive
