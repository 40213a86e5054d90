#include "daemon/core/lease.h"

#include <array>
#include <utility>

namespace armhive {
namespace {

constexpr std::array<std::pair<LeaseState, std::string_view>, 7> kStateNames{{
    {LeaseState::kPending, "pending"},
    {LeaseState::kProvisioning, "provisioning"},
    {LeaseState::kReady, "ready"},
    {LeaseState::kReleasing, "releasing"},
    {LeaseState::kReleased, "released"},
    {LeaseState::kExpired, "expired"},
    {LeaseState::kFailed, "failed"},
}};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

}  // namespace

std::string_view to_string(LeaseState s) {
  for (const auto& [state, name] : kStateNames) {
    if (state == s) return name;
  }
  return "unknown";
}

std::optional<LeaseState> lease_state_from_string(std::string_view s) {
  for (const auto& [state, name] : kStateNames) {
    if (name == s) return state;
  }
  return std::nullopt;
}

bool is_terminal(LeaseState s) {
  return s == LeaseState::kReleased || s == LeaseState::kExpired || s == LeaseState::kFailed;
}

bool is_valid_transition(LeaseState from, LeaseState to) {
  using S = LeaseState;
  if (is_terminal(from)) return false;
  switch (to) {
    case S::kPending: return false;
    case S::kProvisioning: return from == S::kPending;
    case S::kReady: return from == S::kPending || from == S::kProvisioning;
    case S::kReleasing: return from != S::kReleasing;
    // A lease ends directly when it never got a VM (cancelled while pending).
    case S::kReleased: return from == S::kReleasing || from == S::kPending;
    case S::kExpired: return from == S::kReleasing || from == S::kPending;
    case S::kFailed: return true;
  }
  return false;
}

std::string_view to_string(Purpose p) { return p == Purpose::kCi ? "ci" : "dev"; }

std::optional<Purpose> purpose_from_string(std::string_view s) {
  if (s == "ci") return Purpose::kCi;
  if (s == "dev") return Purpose::kDev;
  return std::nullopt;
}

Status validate_name(std::string_view field, std::string_view value) {
  if (value.empty()) return invalid_argument(std::string(field), "must not be empty");
  if (value.size() > 63) return invalid_argument(std::string(field), "must be at most 63 characters");
  for (char c : value) {
    if (!is_name_char(c)) {
      return invalid_argument(std::string(field),
                              "may contain only lower-case letters, digits, '-', '_' and '.'");
    }
  }
  return Status::ok();
}

Status validate_ssh_key(std::string_view field, std::string_view key) {
  static constexpr std::array<std::string_view, 7> kTypes{
      "ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
      "ecdsa-sha2-nistp521", "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com"};
  if (key.size() > 16384) return invalid_argument(std::string(field), "key is too long");
  for (char c : key) {
    if (c == '\n' || c == '\r' || c == '\0') {
      return invalid_argument(std::string(field), "a key must be a single line");
    }
  }
  size_t sp = key.find(' ');
  if (sp == std::string_view::npos) {
    return invalid_argument(std::string(field), "expected '<type> <base64> [comment]'");
  }
  std::string_view type = key.substr(0, sp);
  bool known = false;
  for (auto t : kTypes) known = known || t == type;
  if (!known) {
    return invalid_argument(std::string(field), "unknown key type '" + std::string(type) + "'");
  }
  std::string_view rest = key.substr(sp + 1);
  std::string_view b64 = rest.substr(0, rest.find(' '));
  if (b64.size() < 16) return invalid_argument(std::string(field), "key data is too short");
  for (char c : b64) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/' || c == '=';
    if (!ok) return invalid_argument(std::string(field), "key data is not base64");
  }
  return Status::ok();
}

Status validate_labels(std::string_view field, const std::map<std::string, std::string>& labels) {
  if (labels.size() > 32) return invalid_argument(std::string(field), "at most 32 labels");
  for (const auto& [k, v] : labels) {
    ARMHIVE_RETURN_IF_ERROR(validate_name(std::string(field) + "." + k, k));
    if (v.size() > 256) {
      return invalid_argument(std::string(field) + "." + k, "value longer than 256 characters");
    }
    for (char c : v) {
      if (static_cast<unsigned char>(c) < 0x20) {
        return invalid_argument(std::string(field) + "." + k, "value has control characters");
      }
    }
  }
  return Status::ok();
}

}  // namespace armhive
