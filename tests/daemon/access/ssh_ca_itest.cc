// The SSH CA against OpenSSH's own tools: the key file it makes, and certificates ssh-keygen
// reads back with the principal, validity, key id and serial the lease asked for.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/process_runner.h"
#include "daemon/access/ssh_ca.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("armhive-sshca-test-" + std::to_string(::getpid()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string make_user_key(SubprocessRunner& runner, const fs::path& path) {
  auto r =
      runner.run({.argv = {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path.string()}});
  REQUIRE(r.is_ok());
  REQUIRE(r->ok());
  std::ifstream in(path.string() + ".pub");
  std::string line;
  std::getline(in, line);
  return line;
}

TEST_CASE("the CA key is made 0600 on first open and reused after", "[access][ssh-ca]") {
  TempDir dir;
  SubprocessRunner runner;
  const std::string key = (dir.path / "ca").string();
  auto ca = SshCertificateAuthority::open(key, runner, dir.path.string());
  REQUIRE(ca.is_ok());
  struct stat st {};
  REQUIRE(::stat(key.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK((*ca)->public_key().rfind("ssh-ed25519 ", 0) == 0);
  auto again = SshCertificateAuthority::open(key, runner, dir.path.string());
  REQUIRE(again.is_ok());
  CHECK((*again)->public_key() == (*ca)->public_key());

  ::chmod(key.c_str(), 0644);
  auto exposed = SshCertificateAuthority::open(key, runner, dir.path.string());
  REQUIRE_FALSE(exposed.is_ok());
  CHECK(exposed.status().code() == ErrorCode::kPermissionDenied);
}

TEST_CASE("a certificate names the lease's principal and ends at its expiry", "[access][ssh-ca]") {
  TempDir dir;
  SubprocessRunner runner;
  auto ca = SshCertificateAuthority::open((dir.path / "ca").string(), runner, dir.path.string());
  REQUIRE(ca.is_ok());
  std::string user_key = make_user_key(runner, dir.path / "id");
  const TimePoint now = std::chrono::system_clock::now();
  const TimePoint expiry = now + std::chrono::hours(2);
  auto cert =
      (*ca)->sign(user_key + " me@laptop", "l-0123456789ab", "ci-bot", now, expiry, {"pty"});
  REQUIRE(cert.is_ok());
  CHECK(cert->principal == "lease-l-0123456789ab");
  CHECK(cert->certificate.rfind("ssh-ed25519-cert-v01@openssh.com ", 0) == 0);
  CHECK(cert->valid_before == expiry);

  // What OpenSSH itself reads in it.
  fs::path cert_file = dir.path / "id-cert.pub";
  std::ofstream(cert_file) << cert->certificate << "\n";
  auto shown = runner.run({.argv = {"ssh-keygen", "-L", "-f", cert_file.string()}});
  REQUIRE(shown.is_ok());
  REQUIRE(shown->ok());
  CHECK_THAT(shown->out, Catch::Contains("user certificate"));
  CHECK_THAT(shown->out, Catch::Contains("lease-l-0123456789ab"));
  CHECK_THAT(shown->out, Catch::Contains("lease=l-0123456789ab token=ci-bot"));
  CHECK_THAT(shown->out, Catch::Contains("Serial: " + std::to_string(cert->serial)));
  // Signed by this CA: its key's fingerprint is in the listing.
  fs::path ca_pub = dir.path / "ca.pub";
  std::ofstream(ca_pub) << (*ca)->public_key() << "\n";
  auto fp = runner.run({.argv = {"ssh-keygen", "-l", "-f", ca_pub.string()}});
  REQUIRE(fp.is_ok());
  std::string fingerprint = fp->out.substr(fp->out.find(' ') + 1);
  fingerprint = fingerprint.substr(0, fingerprint.find(' '));
  CHECK_THAT(shown->out, Catch::Contains(fingerprint));

  // Serials never repeat, even within one clock tick.
  auto second = (*ca)->sign(user_key, "l-0123456789ab", "ci-bot", now, expiry, {"pty"});
  REQUIRE(second.is_ok());
  CHECK(second->serial > cert->serial);
  // Scratch files are gone.
  for (const auto& e : fs::directory_iterator(dir.path)) {
    CHECK(e.path().filename().string().rfind("armhive-sshca-", 0) != 0);
  }
}

// Issue 33 (finding 10): certificates carried ssh-keygen's defaults (pty, user-rc, port, agent
// and X11 forwarding) whatever the pool; now exactly the pool's ssh_permissions.
TEST_CASE("a certificate permits exactly the pool's ssh_permissions", "[access][ssh-ca][hostile]") {
  TempDir dir;
  SubprocessRunner runner;
  auto ca = SshCertificateAuthority::open((dir.path / "ca").string(), runner, dir.path.string());
  REQUIRE(ca.is_ok());
  std::string user_key = make_user_key(runner, dir.path / "id");
  const TimePoint now = std::chrono::system_clock::now();
  // The extensions `ssh-keygen -L` lists for a certificate of these permissions.
  auto extensions = [&](const std::vector<std::string>& permissions) {
    auto cert = (*ca)->sign(user_key, "l-0123456789ab", "ci-bot", now, now + std::chrono::hours(1),
                            permissions);
    REQUIRE(cert.is_ok());
    fs::path file = dir.path / "perm-cert.pub";
    std::ofstream(file) << cert->certificate << "\n";
    auto shown = runner.run({.argv = {"ssh-keygen", "-L", "-f", file.string()}});
    REQUIRE(shown.is_ok());
    REQUIRE(shown->ok());
    std::vector<std::string> out;
    std::istringstream lines(shown->out);
    bool in_extensions = false;
    for (std::string line; std::getline(lines, line);) {
      const size_t start = line.find_first_not_of(" \t");
      if (start == std::string::npos) continue;
      line = line.substr(start);
      if (line.rfind("Extensions:", 0) == 0) {
        in_extensions = line.find("(none)") == std::string::npos;
        continue;
      }
      if (line.back() == ':' || line.find(": ") != std::string::npos) {
        in_extensions = false;
        continue;
      }
      if (in_extensions) out.push_back(line);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  // The default pool (a CI pool): a terminal, nothing else.
  CHECK(extensions({"pty"}) == std::vector<std::string>{"permit-pty"});
  CHECK(extensions({}).empty());
  CHECK(
      extensions({"pty", "port-forwarding", "agent-forwarding"}) ==
      std::vector<std::string>{"permit-agent-forwarding", "permit-port-forwarding", "permit-pty"});
  auto unknown = (*ca)->sign(user_key, "l-0123456789ab", "ci-bot", now, now + std::chrono::hours(1),
                             {"permit-everything"});
  CHECK_FALSE(unknown.is_ok());
}

TEST_CASE("no certificate for an ended lease or a malformed key", "[access][ssh-ca]") {
  TempDir dir;
  SubprocessRunner runner;
  auto ca = SshCertificateAuthority::open((dir.path / "ca").string(), runner, dir.path.string());
  REQUIRE(ca.is_ok());
  std::string user_key = make_user_key(runner, dir.path / "id");
  const TimePoint now = std::chrono::system_clock::now();
  auto ended =
      (*ca)->sign(user_key, "l-0123456789ab", "t", now, now - std::chrono::seconds(1), {"pty"});
  REQUIRE_FALSE(ended.is_ok());
  CHECK(ended.status().code() == ErrorCode::kConflict);
  auto bad = (*ca)->sign("ssh-ed25519 AAAA", "l-0123456789ab", "t", now,
                         now + std::chrono::hours(1), {"pty"});
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().field() == "public_key");
}

}  // namespace
}  // namespace armhive
