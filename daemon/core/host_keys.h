#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace armhive {

// A VM's SSH host keys: how the engine reads them through the guest agent before the VM counts
// as ready (warm, or a cold lease ready), and how they are checked. Pure; any thread.

// Prints the guest's SSH host public keys: OpenSSH's .pub files (the tiny image makes them in
// /run/ssh at boot), or dropbear's keys. A constant script run as `sh -c SCRIPT`: nothing from
// a request is in it. OpenSSH's keys (/run/ssh in the tiny image, /etc/ssh in Debian ones) count
// only once sshd has written its pid file, which it does after binding port 22: the keys exist
// a moment before sshd listens, and a client given them then would be refused. And nothing
// counts before the guest has its DHCP address (a route in /proc/net/route).
extern const char* const kHostKeysScript;

// What parse_host_keys accepts of a guest (its output is untrusted): at most kMaxHostKeys
// keys, each blob at most kMaxHostKeyBlob base64 characters (a 16384-bit RSA key fits), from
// at most kMaxHostKeysOutput bytes of output.
inline constexpr size_t kMaxHostKeys = 8;
inline constexpr size_t kMaxHostKeyBlob = 4096;
inline constexpr size_t kMaxHostKeysOutput = 64 * 1024;

// The "TYPE BASE64" host keys in the output of kHostKeysScript, in order, duplicates dropped,
// comments dropped. A line counts when its first field is ssh-ed25519, ecdsa-sha2-nistp256/
// 384/521 or ssh-rsa; other lines (dropbearkey's "Public key portion is:", "Fingerprint: …",
// key types we do not hand out such as ssh-dss) are ignored. A counted line must be
// well-formed: strict base64 whose decoded blob starts with the same type name (RFC 4253
// string). kInvalidArgument (field "host_keys") naming the line when one is not, when there
// are more than kMaxHostKeys keys or when the output is over kMaxHostKeysOutput. An empty
// vector: no key yet (sshd still starting).
Result<std::vector<std::string>> parse_host_keys(std::string_view text);

// Whether `key` is one "TYPE BASE64" key as parse_host_keys returns them (stored keys are
// checked again when read back).
bool is_host_key(std::string_view key);

// known_hosts lines naming `host_pattern` (a HostKeyAlias, a host, or "[host]:port"), one per
// key: "PATTERN TYPE BASE64\n".
std::string known_hosts_lines(std::string_view host_pattern, const std::vector<std::string>& keys);

}  // namespace armhive
