#include "daemon/core/leader_term.h"

namespace armhive {

void LeaderTerm::renewed(Time sent_at, bool ours, int64_t epoch, const std::string& holder) {
  if (!ours) {
    ours_ = false;
    other_ = holder;
    return;
  }
  // A new epoch is a new term: whatever the last one allowed ended with it.
  ours_ = true;
  other_.clear();
  epoch_ = epoch;
  acting_until_ = sent_at + std::chrono::duration_cast<Duration>(lease_ * kActingShare);
}

bool LeaderTerm::acting(Time now) const { return ours_ && now < acting_until_; }

}  // namespace armhive
