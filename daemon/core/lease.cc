#include "daemon/core/lease.h"

#include <array>
#include <utility>

#include "base/validation.h"

namespace armhive {
namespace {

constexpr std::array<std::pair<LeaseState, std::string_view>, 9> kStateNames{{
    {LeaseState::kPending, "pending"},
    {LeaseState::kProvisioning, "provisioning"},
    {LeaseState::kReady, "ready"},
    {LeaseState::kReleasing, "releasing"},
    {LeaseState::kReleased, "released"},
    {LeaseState::kExpired, "expired"},
    {LeaseState::kFailed, "failed"},
    {LeaseState::kHostUnreachable, "host_unreachable"},
    {LeaseState::kLost, "lost"},
}};

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
  return s == LeaseState::kReleased || s == LeaseState::kExpired || s == LeaseState::kFailed ||
         s == LeaseState::kLost;
}

bool is_valid_transition(LeaseState from, LeaseState to) {
  using S = LeaseState;
  if (is_terminal(from)) return false;
  switch (to) {
    case S::kPending:
      return false;
    case S::kProvisioning:
      return from == S::kPending;
    case S::kReady:  // handed out, or its host answers again
      return from == S::kPending || from == S::kProvisioning || from == S::kHostUnreachable;
    case S::kReleasing:
      return from != S::kReleasing;
    // A lease ends directly when it never got a VM (cancelled while pending).
    case S::kReleased:
      return from == S::kReleasing || from == S::kPending;
    case S::kExpired:
      return from == S::kReleasing || from == S::kPending;
    case S::kFailed:
      return true;
    case S::kHostUnreachable:
      return from == S::kReady;
    case S::kLost:
      return from == S::kHostUnreachable;
  }
  return false;
}

std::string_view to_string(Purpose p) { return p == Purpose::kCi ? "ci" : "dev"; }

std::optional<Purpose> purpose_from_string(std::string_view s) {
  if (s == "ci") return Purpose::kCi;
  if (s == "dev") return Purpose::kDev;
  return std::nullopt;
}

// The rules live in base/validation (shared with the API and the CLI); these names keep daemon code
// in the vocabulary of its own module.
Status validate_name(std::string_view field, std::string_view value) {
  return check_name(field, value);
}

Status validate_ssh_key(std::string_view field, std::string_view key) {
  return check_ssh_key(field, key);
}

Status validate_labels(std::string_view field, const std::map<std::string, std::string>& labels) {
  return check_labels(field, labels);
}

Status validate_ssh_permissions(const std::string& field, const std::vector<std::string>& names) {
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string at = field + "[" + std::to_string(i) + "]";
    bool known = false;
    for (std::string_view k : kSshPermissions) known = known || names[i] == k;
    if (!known) {
      return invalid_argument(at, "unknown SSH permission \"" + names[i].substr(0, 64) +
                                      "\" (want pty, port-forwarding, agent-forwarding, "
                                      "x11-forwarding or user-rc)");
    }
    for (size_t j = 0; j < i; ++j) {
      if (names[j] == names[i]) return invalid_argument(at, "\"" + names[i] + "\" given twice");
    }
  }
  return Status::ok();
}

}  // namespace armhive
