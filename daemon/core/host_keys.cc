#include "daemon/core/host_keys.h"

#include <algorithm>
#include <array>

#include "base/base64.h"

namespace armhive {

const char* const kHostKeysScript =
    // No keys (not ready yet) until the guest has an IPv4 route off loopback, i.e. its DHCP
    // address: a ready lease must take an ssh login at once, and a systemd guest has its keys
    // (made at sysinit) and its agent long before networkd has an address. /proc, not ip(8):
    // busybox and iproute2 print differently.
    "[ \"$(wc -l < /proc/net/route)\" -gt 1 ] || exit 0; "
    "[ -s /run/sshd.pid ] && for k in /run/ssh/ssh_host_*_key.pub /etc/ssh/ssh_host_*_key.pub; "
    "do [ -f \"$k\" ] && cat \"$k\"; done; "
    "for k in /run/dropbear/*_host_key /etc/dropbear/dropbear_*_host_key; do "
    "[ -f \"$k\" ] && dropbearkey -y -f \"$k\"; done; true";

namespace {

constexpr std::array<std::string_view, 5> kKeyTypes = {
    "ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa"};

bool known_type(std::string_view type) {
  return std::find(kKeyTypes.begin(), kKeyTypes.end(), type) != kKeyTypes.end();
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// The next whitespace-separated field of `line` from `pos`.
std::string_view next_field(std::string_view line, size_t& pos) {
  while (pos < line.size() && is_space(line[pos])) ++pos;
  size_t start = pos;
  while (pos < line.size() && !is_space(line[pos])) ++pos;
  return line.substr(start, pos - start);
}

// Why `blob` is not a key of `type`, or empty when it is one: strict base64 of a blob that
// starts with the type name as an RFC 4253 string (uint32 length, then the name).
std::string blob_problem(std::string_view type, std::string_view blob) {
  if (blob.empty()) return "has no key after the type";
  if (blob.size() > kMaxHostKeyBlob) {
    return "has a key of " + std::to_string(blob.size()) + " characters (at most " +
           std::to_string(kMaxHostKeyBlob) + ")";
  }
  auto bytes = base64_decode("host_keys", blob);
  if (!bytes.is_ok()) return "has a key that is not base64";
  const std::string& b = *bytes;
  if (b.size() < 4 + type.size()) return "has a key too short for its type";
  size_t n = (static_cast<size_t>(static_cast<unsigned char>(b[0])) << 24) |
             (static_cast<size_t>(static_cast<unsigned char>(b[1])) << 16) |
             (static_cast<size_t>(static_cast<unsigned char>(b[2])) << 8) |
             static_cast<size_t>(static_cast<unsigned char>(b[3]));
  if (n != type.size() || std::string_view(b).substr(4, n) != type) {
    return "has a key whose blob is not of type " + std::string(type);
  }
  return {};
}

}  // namespace

Result<std::vector<std::string>> parse_host_keys(std::string_view text) {
  if (text.size() > kMaxHostKeysOutput) {
    return invalid_argument("host_keys", "the guest printed " + std::to_string(text.size()) +
                                             " bytes (at most " +
                                             std::to_string(kMaxHostKeysOutput) + ")");
  }
  std::vector<std::string> out;
  size_t line_no = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    size_t pos = 0;
    std::string_view type = next_field(line, pos);
    if (!known_type(type)) continue;
    std::string_view blob = next_field(line, pos);
    if (std::string why = blob_problem(type, blob); !why.empty()) {
      return invalid_argument(
          "host_keys", "line " + std::to_string(line_no) + " (" + std::string(type) + ") " + why);
    }
    std::string key = std::string(type) + " " + std::string(blob);
    if (std::find(out.begin(), out.end(), key) != out.end()) continue;
    if (out.size() == kMaxHostKeys) {
      return invalid_argument("host_keys", "the guest printed more than " +
                                               std::to_string(kMaxHostKeys) + " host keys");
    }
    out.push_back(std::move(key));
  }
  return out;
}

bool is_host_key(std::string_view key) {
  size_t pos = 0;
  std::string_view type = next_field(key, pos);
  std::string_view blob = next_field(key, pos);
  return known_type(type) && type.size() + 1 + blob.size() == key.size() &&
         key[type.size()] == ' ' && blob_problem(type, blob).empty();
}

std::string known_hosts_lines(std::string_view host_pattern, const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) {
    out.append(host_pattern);
    out += ' ';
    out += k;
    out += '\n';
  }
  return out;
}

}  // namespace armhive
