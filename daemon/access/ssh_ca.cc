#include "daemon/access/ssh_ca.h"

#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>
#include <vector>

#include "base/base64.h"
#include "base/secret_file.h"
#include "daemon/core/lease.h"

namespace armhive {

namespace {

constexpr std::string_view kField = "public_key";
constexpr size_t kMaxKeyText = 16 * 1024;  // an RSA-16384 key is ~2.8 KB of base64
constexpr std::chrono::minutes kClockSkew{5};

constexpr std::array<std::string_view, 7> kKeyTypes = {"ssh-ed25519",
                                                       "ecdsa-sha2-nistp256",
                                                       "ecdsa-sha2-nistp384",
                                                       "ecdsa-sha2-nistp521",
                                                       "sk-ssh-ed25519@openssh.com",
                                                       "sk-ecdsa-sha2-nistp256@openssh.com",
                                                       "ssh-rsa"};

Status bad_key(std::string message) { return invalid_argument(std::string(kField), message); }

// The first string of an SSH wire-format blob (uint32 big-endian length, bytes).
std::optional<std::string> wire_string(const std::string& blob) {
  if (blob.size() < 4) return std::nullopt;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(blob[i]);
  if (n > blob.size() - 4) return std::nullopt;
  return blob.substr(4, n);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string hex_seconds(TimePoint t) {
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
  std::ostringstream out;
  out << "0x" << std::hex << secs;
  return out.str();
}

// A private scratch directory (mode 0700) removed with everything in it on destruction.
class ScratchDir {
 public:
  static Result<ScratchDir> make(const std::string& parent) {
    std::string tmpl = parent + "/armhive-sshca-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) {
      return unavailable("cannot create a scratch directory", parent);
    }
    return ScratchDir(buf.data());
  }
  ScratchDir(ScratchDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  ScratchDir& operator=(ScratchDir&&) = delete;
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() noexcept {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return unavailable("cannot read", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

Result<std::string> parse_ssh_public_key(std::string_view text) {
  std::string line(text);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.empty())
    return bad_key("is empty (want an OpenSSH public key: \"ssh-ed25519 AAAA...\")");
  if (line.size() > kMaxKeyText) return bad_key("is longer than 16 KiB");
  for (char c : line) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return bad_key("must be one line of printable text");
  }
  if (line.find("PRIVATE KEY") != std::string::npos) {
    return bad_key("is a private key: send the .pub file, never the private key");
  }
  std::istringstream fields(line);
  std::string type;
  std::string blob64;
  fields >> type >> blob64;
  if (type.find("-cert-v01@openssh.com") != std::string::npos) {
    return bad_key("is a certificate; send the public key it certifies");
  }
  if (type == "ssh-dss") {
    return bad_key("DSA keys are not accepted (OpenSSH disabled them; use ssh-ed25519)");
  }
  bool known = false;
  for (std::string_view t : kKeyTypes) known = known || type == t;
  if (!known) {
    return bad_key("unknown key type \"" + type.substr(0, 64) +
                   "\" (want \"ssh-ed25519 AAAA...\", ecdsa-sha2-nistp* or ssh-rsa)");
  }
  if (blob64.empty()) return bad_key("has no key data after \"" + type + "\"");
  auto blob = base64_decode(kField, blob64);
  if (!blob.is_ok()) return bad_key("key data is not base64");
  auto inner = wire_string(*blob);
  if (!inner || *inner != type) {
    return bad_key("key data does not hold a " + type + " key");
  }
  return type + " " + blob64;
}

std::string lease_principal(const std::string& lease_id) { return "lease-" + lease_id; }

Result<std::unique_ptr<SshCertificateAuthority>> SshCertificateAuthority::open(
    std::string key_path, ProcessRunner& runner, std::string scratch_dir) {
  struct stat st {};
  if (::stat(key_path.c_str(), &st) != 0) {
    // ssh-keygen creates the private key 0600 itself (and refuses to overwrite one).
    auto made = runner.run({.argv = {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                                     "armhive-user-ca", "-f", key_path},
                            .timeout = std::chrono::seconds(30)});
    if (!made.is_ok()) return made.status().annotate("creating the SSH CA key");
    if (!made->ok()) {
      return unavailable("ssh-keygen could not create the SSH CA key: " + trim(made->err),
                         key_path);
    }
  }
  ARMHIVE_RETURN_IF_ERROR(check_secret_file(key_path, "the SSH CA key ([access] ssh_ca_key)"));
  auto pub = runner.run(
      {.argv = {"ssh-keygen", "-y", "-f", key_path}, .timeout = std::chrono::seconds(30)});
  if (!pub.is_ok()) return pub.status().annotate("reading the SSH CA key");
  if (!pub->ok()) {
    return unavailable("ssh-keygen cannot read the SSH CA key: " + trim(pub->err), key_path);
  }
  auto key = parse_ssh_public_key(trim(pub->out));
  if (!key.is_ok()) return unavailable("the SSH CA key is not a usable OpenSSH key", key_path);
  return std::unique_ptr<SshCertificateAuthority>(new SshCertificateAuthority(
      std::move(key_path), *key + " armhive-user-ca", runner, std::move(scratch_dir)));
}

uint64_t SshCertificateAuthority::next_serial(TimePoint now) {
  auto us = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count());
  uint64_t last = last_serial_.load();
  uint64_t next = 0;
  do {
    next = std::max(us, last + 1);
  } while (!last_serial_.compare_exchange_weak(last, next));
  return next;
}

Result<SshCertificate> SshCertificateAuthority::sign(std::string_view public_key,
                                                     const std::string& lease_id,
                                                     const std::string& token, TimePoint now,
                                                     TimePoint valid_before,
                                                     const std::vector<std::string>& permissions) {
  ARMHIVE_ASSIGN_OR_RETURN(std::string key, parse_ssh_public_key(public_key));
  if (Status s = validate_ssh_permissions("ssh_permissions", permissions); !s.is_ok()) {
    return internal_error("the pool's SSH permissions: " + s.message());
  }
  if (valid_before <= now) {
    return conflict("lease " + lease_id + " has expired: no certificate for it", lease_id);
  }
  SshCertificate cert;
  cert.serial = next_serial(now);
  cert.principal = lease_principal(lease_id);
  cert.key_id =
      "armhive lease=" + lease_id + " token=" + token + " serial=" + std::to_string(cert.serial);
  cert.valid_after = now - kClockSkew;
  cert.valid_before = valid_before;

  ARMHIVE_ASSIGN_OR_RETURN(ScratchDir dir, ScratchDir::make(scratch_dir_));
  const std::string user_key = dir.path() + "/user.pub";
  {
    std::ofstream out(user_key);
    out << key << "\n";
    if (!out.flush()) return unavailable("cannot write the key to sign", user_key);
  }
  std::vector<std::string> argv = {"ssh-keygen", "-q", "-s", key_path_, "-I", cert.key_id, "-n",
                                   cert.principal, "-z", std::to_string(cert.serial), "-V",
                                   hex_seconds(cert.valid_after) + ":" + hex_seconds(valid_before),
                                   // ssh-keygen permits pty, user-rc and every forwarding by
                                   // default: start from none, then add what the pool allows.
                                   "-O", "clear"};
  for (const std::string& p : permissions) {
    argv.push_back("-O");
    argv.push_back("permit-" + p);
  }
  argv.push_back(user_key);
  auto r = runner_.run({.argv = std::move(argv), .timeout = std::chrono::seconds(30)});
  if (!r.is_ok()) return r.status().annotate("signing an SSH certificate");
  if (!r->ok()) {
    // The CA key was readable at start, so a refusal is about the key sent.
    return bad_key("OpenSSH cannot certify this key: " + trim(r->err));
  }
  ARMHIVE_ASSIGN_OR_RETURN(std::string text, read_text(dir.path() + "/user-cert.pub"));
  cert.certificate = trim(text);
  if (cert.certificate.empty()) return internal_error("ssh-keygen wrote an empty certificate");
  return cert;
}

}  // namespace armhive
