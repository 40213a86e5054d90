#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/process_runner.h"
#include "base/result.h"
#include "daemon/core/clock.h"

namespace armhive {

// An OpenSSH public key as a client sends it: "TYPE BASE64 [COMMENT]" on one line. The blob
// must decode and name TYPE itself (the wire format's first string); certificates, private keys
// and unknown types are refused. Returns "TYPE BASE64" (the comment dropped) or
// kInvalidArgument naming `public_key` and what is wrong. Pure.
Result<std::string> parse_ssh_public_key(std::string_view text);

// The principal a lease's certificates carry and its guest accepts (AuthorizedPrincipalsFile
// written at hand-out): one per lease, so a certificate never opens another lease's VM.
std::string lease_principal(const std::string& lease_id);

struct SshCertificate {
  std::string certificate;  // "ssh-ed25519-cert-v01@openssh.com AAAA..." (one line, no newline)
  std::string principal;
  std::string key_id;
  uint64_t serial = 0;
  TimePoint valid_after;
  TimePoint valid_before;
};

// armhived's SSH user certificate authority: an ed25519 key in a 0600 file, created on first
// use, signing with `ssh-keygen -s` (argv vector, no shell). Why ssh-keygen and not a
// hand-written signer: the certificate format (PROTOCOL.certkeys) is OpenSSH's, and its own
// tool is the reference implementation; a signature takes a few milliseconds.
//
// Serials are unique per CA key: microseconds since the epoch, strictly increasing within the
// process (a restart continues above the wall clock).
// Threading: sign() is thread-safe (each call signs in its own scratch directory).
class SshCertificateAuthority {
 public:
  // Opens the CA key at `key_path`, creating it (ssh-keygen, mode 0600) when absent; an
  // existing key readable by group or others is kPermissionDenied (check_secret_file).
  // `scratch_dir`: where per-signature temporary directories go.
  static Result<std::unique_ptr<SshCertificateAuthority>> open(std::string key_path,
                                                               ProcessRunner& runner,
                                                               std::string scratch_dir = "/tmp");

  // "ssh-ed25519 AAAA... armhive-user-ca": what guests put in TrustedUserCAKeys.
  const std::string& public_key() const { return public_key_; }

  // A user certificate for `public_key` (parse_ssh_public_key first: kInvalidArgument naming
  // `public_key`), principal lease_principal(lease_id), valid from 5 minutes before `now`
  // (guest clock skew) until `valid_before`, key id naming the lease, the token and the serial,
  // permitting exactly `permissions` (the pool's ssh_permissions, kSshPermissions names:
  // ssh-keygen's defaults, every forwarding included, are cleared first). kConflict when
  // valid_before is not after now (the lease has ended); kInternal for an unknown permission.
  Result<SshCertificate> sign(std::string_view public_key, const std::string& lease_id,
                              const std::string& token, TimePoint now, TimePoint valid_before,
                              const std::vector<std::string>& permissions);

 private:
  SshCertificateAuthority(std::string key_path, std::string public_key, ProcessRunner& runner,
                          std::string scratch_dir)
      : key_path_(std::move(key_path)),
        public_key_(std::move(public_key)),
        runner_(runner),
        scratch_dir_(std::move(scratch_dir)) {}
  uint64_t next_serial(TimePoint now);

  std::string key_path_;
  std::string public_key_;
  ProcessRunner& runner_;
  std::string scratch_dir_;
  std::atomic<uint64_t> last_serial_{0};
};

}  // namespace armhive
