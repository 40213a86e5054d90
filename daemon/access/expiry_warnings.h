#pragma once

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "daemon/core/clock.h"

namespace armhive {

// When a developer lease's guest warns its logged-in users that the VM is about to go: 15 and
// 2 minutes before expiry. Pure; the caller (LeaseAccess's watcher) keeps what was sent.
inline const std::vector<std::chrono::minutes>& expiry_warning_marks() {
  static const std::vector<std::chrono::minutes> kMarks{std::chrono::minutes(15),
                                                        std::chrono::minutes(2)};
  return kMarks;
}

// What has been said to one lease's guest, for the expiry it was said about: a renew moves the
// expiry, and the marks then count again from the new one.
struct ExpiryWarningState {
  TimePoint expires_at;
  std::set<int> sent_minutes;
};

// The one warning due now, if any: the smallest mark already reached (at most one message per
// check, so a lease first seen 1 minute before expiry gets "2 minutes", not both), not yet
// sent for this expiry, while the lease has not expired. Marks passed meanwhile are recorded
// as sent. Returns the minutes the message should name (0: nothing due).
int due_expiry_warning(ExpiryWarningState& state, TimePoint expires_at, TimePoint now);

// The text shown to logged-in users: names the lease, the time left and how to extend it.
std::string expiry_warning_text(const std::string& lease_id, TimePoint expires_at, TimePoint now);

}  // namespace armhive
