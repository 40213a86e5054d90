#include "base/validation.h"

#include <array>
#include <limits>

namespace armhive {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

}  // namespace

Result<int64_t> parse_duration(std::string_view field, std::string_view text) {
  const std::string f(field);
  if (text.empty()) return invalid_argument(f, "must not be empty (e.g. \"2h\", \"90m\", 3600)");
  if (text.front() == '-') return invalid_argument(f, "must be positive");
  int64_t total = 0;
  int64_t number = -1;
  bool any_unit = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      if (number < 0) number = 0;
      if (number > (std::numeric_limits<int64_t>::max() - 9) / 10) {
        return invalid_argument(f, "is too large");
      }
      number = number * 10 + (c - '0');
      continue;
    }
    int64_t unit = 0;
    switch (c) {
      case 's':
        unit = 1;
        break;
      case 'm':
        unit = 60;
        break;
      case 'h':
        unit = 3600;
        break;
      case 'd':
        unit = 86400;
        break;
      default:
        return invalid_argument(
            f,
            "is not a duration: use seconds or a number with a unit s, m, h, d (\"2h\", \"90m\")");
    }
    if (number < 0) return invalid_argument(f, "has a unit without a number");
    if (number > std::numeric_limits<int64_t>::max() / unit - total) {
      return invalid_argument(f, "is too large");
    }
    total += number * unit;
    number = -1;
    any_unit = true;
  }
  if (number >= 0) {
    if (any_unit) return invalid_argument(f, "has a number without a unit at the end");
    total = number;
  }
  return total;
}

Status check_ttl(std::string_view field, int64_t seconds) {
  if (seconds <= 0) return invalid_argument(std::string(field), "must be positive");
  if (seconds > kMaxTtlSeconds) {
    return invalid_argument(std::string(field),
                            "must be at most 30 days (" + std::to_string(kMaxTtlSeconds) + " s)");
  }
  return Status::ok();
}

std::string format_duration(int64_t seconds) {
  if (seconds <= 0) return "0s";
  std::string out;
  int64_t d = seconds / 86400, h = seconds % 86400 / 3600, m = seconds % 3600 / 60,
          s = seconds % 60;
  if (d) out += std::to_string(d) + "d";
  if (h) out += std::to_string(h) + "h";
  if (m) out += std::to_string(m) + "m";
  if (s) out += std::to_string(s) + "s";
  return out;
}

Status check_name(std::string_view field, std::string_view value) {
  if (value.empty()) return invalid_argument(std::string(field), "must not be empty");
  if (value.size() > 63) {
    return invalid_argument(std::string(field), "must be at most 63 characters");
  }
  for (char c : value) {
    if (!is_name_char(c)) {
      return invalid_argument(std::string(field),
                              "may contain only lower-case letters, digits, '-', '_' and '.'");
    }
  }
  return Status::ok();
}

Status check_ssh_key(std::string_view field, std::string_view key) {
  static constexpr std::array<std::string_view, 7> kTypes{"ssh-ed25519",
                                                          "ssh-rsa",
                                                          "ecdsa-sha2-nistp256",
                                                          "ecdsa-sha2-nistp384",
                                                          "ecdsa-sha2-nistp521",
                                                          "sk-ssh-ed25519@openssh.com",
                                                          "sk-ecdsa-sha2-nistp256@openssh.com"};
  const std::string f(field);
  if (key.size() > 16384) return invalid_argument(f, "key is too long");
  for (char c : key) {
    if (c == '\n' || c == '\r' || c == '\0') {
      return invalid_argument(f, "a key must be a single line");
    }
  }
  size_t sp = key.find(' ');
  if (sp == std::string_view::npos) {
    return invalid_argument(f,
                            "expected an OpenSSH public key '<type> <base64> [comment]' "
                            "(the .pub file, not the private key)");
  }
  std::string_view type = key.substr(0, sp);
  bool known = false;
  for (auto t : kTypes) known = known || t == type;
  if (!known) return invalid_argument(f, "unknown key type '" + std::string(type) + "'");
  std::string_view rest = key.substr(sp + 1);
  std::string_view b64 = rest.substr(0, rest.find(' '));
  if (b64.size() < 16) return invalid_argument(f, "key data is too short");
  for (char c : b64) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/' || c == '=';
    if (!ok) return invalid_argument(f, "key data is not base64");
  }
  return Status::ok();
}

Status check_labels(std::string_view field, const std::map<std::string, std::string>& labels) {
  if (labels.size() > 32) return invalid_argument(std::string(field), "at most 32 labels");
  for (const auto& [k, v] : labels) {
    std::string f = std::string(field) + "." + k;
    ARMHIVE_RETURN_IF_ERROR(check_name(f, k));
    if (v.size() > 256) return invalid_argument(f, "value longer than 256 characters");
    for (char c : v) {
      if (static_cast<unsigned char>(c) < 0x20) {
        return invalid_argument(f, "value has control characters");
      }
    }
  }
  return Status::ok();
}

}  // namespace armhive
