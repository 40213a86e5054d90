#include "daemon/access/expiry_warnings.h"

namespace armhive {

int due_expiry_warning(ExpiryWarningState& state, TimePoint expires_at, TimePoint now) {
  if (state.expires_at != expires_at) {
    state.expires_at = expires_at;
    state.sent_minutes.clear();
  }
  if (now >= expires_at) return 0;
  int due = 0;
  for (std::chrono::minutes mark : expiry_warning_marks()) {
    if (now < expires_at - mark) continue;  // not reached yet
    int m = static_cast<int>(mark.count());
    if (state.sent_minutes.insert(m).second && (due == 0 || m < due)) due = m;
  }
  return due;
}

std::string expiry_warning_text(const std::string& lease_id, TimePoint expires_at, TimePoint now) {
  auto left = std::chrono::duration_cast<std::chrono::seconds>(expires_at - now).count();
  if (left < 0) left = 0;
  const long minutes = static_cast<long>((left + 59) / 60);
  return "armhive: this VM (lease " + lease_id + ") ends in " + std::to_string(minutes) +
         (minutes == 1 ? " minute" : " minutes") +
         " and everything on it is deleted. Extend it with: armhive lease renew " + lease_id +
         " --ttl 1h";
}

}  // namespace armhive
