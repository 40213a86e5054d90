// armhived itself refuses to start on a secret file others can read, before it touches libvirt.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "base/process_runner.h"
#include "daemon/config/secret_files.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

TEST_CASE("armhived refuses to start when a secret file is group- or world-readable",
          "[config][secrets]") {
  fs::path dir = fs::temp_directory_path() / ("armhive-secrets-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path token = dir / "admin.token";
  fs::path key = dir / "key.pem";
  { std::ofstream(token) << "ah_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n"; }
  { std::ofstream(key) << "-----BEGIN PRIVATE KEY-----\n"; }
  ::chmod(token.c_str(), 0644);
  ::chmod(key.c_str(), 0600);
  fs::path config = dir / "armhived.toml";
  {
    std::ofstream(config)
        << "[server]\nport = 1\ntls_cert = \"" << (dir / "cert.pem").string() << "\"\ntls_key = \""
        << key.string() << "\"\nbootstrap_token_file = \"" << token.string()
        << "\"\n[host]\nstate_dir = \"" << (dir / "state").string()
        << "\"\nlibvirt_uri = \"test:///default\"\n"
        << "[[networks]]\nname = \"n\"\n[[pools]]\nname = \"p\"\nimage = \"tiny\"\n"
        << "network = \"n\"\n";
  }
  DaemonConfig c;
  c.bootstrap_token_file = token.string();
  c.tls_key = key.string();
  CHECK(check_secret_files(c).code() == ErrorCode::kPermissionDenied);

  SubprocessRunner runner;
  auto r = runner.run(
      {.argv = {ARMHIVE_DAEMON_PATH, "-c", config.string()}, .timeout = std::chrono::seconds(30)});
  REQUIRE(r.is_ok());
  CHECK(r->exit_code == 1);
  std::string said = r->out + r->err;
  CHECK_THAT(said, Catch::Contains(token.string()));
  CHECK_THAT(said, Catch::Contains("chmod 600"));
  CHECK_FALSE(fs::exists(dir / "state"));  // refused before creating anything

  ::chmod(token.c_str(), 0600);
  ::chmod(key.c_str(), 0640);
  CHECK_THAT(check_secret_files(c).message(), Catch::Contains("the TLS key"));
  ::chmod(key.c_str(), 0600);
  CHECK(check_secret_files(c).is_ok());
  fs::remove(token);  // absent: armhived creates it 0600
  CHECK(check_secret_files(c).is_ok());
  fs::remove_all(dir);
}

TEST_CASE("the SSH CA key is a checked secret when access is configured", "[config][secrets]") {
  fs::path dir = fs::temp_directory_path() / ("armhive-secrets-ca-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  DaemonConfig c;
  c.state_dir = dir.string();
  fs::path ca = dir / "ssh_ca_key";
  { std::ofstream(ca) << "-----BEGIN OPENSSH PRIVATE KEY-----\n"; }
  ::chmod(ca.c_str(), 0644);
  CHECK(check_secret_files(c).is_ok());  // no [access]: armhived never reads it
  c.access.enabled = true;
  Status s = check_secret_files(c);
  CHECK(s.code() == ErrorCode::kPermissionDenied);
  CHECK_THAT(s.message(), Catch::Contains("SSH CA key"));
  CHECK_THAT(s.to_string(), Catch::Contains(ca.string()));
  c.access.ssh_ca_key = (dir / "other_ca").string();  // configured elsewhere: that one counts
  CHECK(check_secret_files(c).is_ok());
  ::chmod(ca.c_str(), 0600);
  c.access.ssh_ca_key.clear();
  CHECK(check_secret_files(c).is_ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace armhive
