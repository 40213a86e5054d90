#include "daemon/core/vm_record.h"

namespace armhive {

std::string_view to_string(VmState s) {
  switch (s) {
    case VmState::kStarting:
      return "starting";
    case VmState::kWarm:
      return "warm";
    case VmState::kLeased:
      return "leased";
    case VmState::kDestroying:
      return "destroying";
  }
  return "starting";
}

std::optional<VmState> vm_state_from_string(std::string_view s) {
  for (VmState v : {VmState::kStarting, VmState::kWarm, VmState::kLeased, VmState::kDestroying}) {
    if (to_string(v) == s) return v;
  }
  return std::nullopt;
}

}  // namespace armhive
