#include "daemon/core/lease_rules.h"

namespace armhive {

Status check_lease_ttl(Seconds ttl, const PoolConfig& pool) {
  if (ttl.count() <= 0) return invalid_argument("ttl", "must be a positive duration");
  if (ttl > kMaxLeaseTtl) return invalid_argument("ttl", "must be at most 30 days");
  if (ttl > pool.max_ttl) {
    return Status(ErrorCode::kUnprocessable,
                  "ttl " + std::to_string(ttl.count()) + "s exceeds pool '" + pool.name +
                      "' max_ttl of " + std::to_string(pool.max_ttl.count()) + "s",
                  {}, "ttl");
  }
  return Status::ok();
}

bool expiry_due(const Lease& lease, TimePoint now) {
  return !is_terminal(lease.state) && lease.state != LeaseState::kReleasing &&
         lease.expires_at <= now;
}

std::string expiry_reason(const Lease& lease) {
  return "TTL of " + std::to_string(lease.ttl.count()) + "s ran out";
}

Status check_renewable(const std::string& id, LeaseState state) {
  if (is_terminal(state)) {
    return conflict(
        "lease " + id + " has ended (" + std::string(to_string(state)) + "); it cannot be renewed",
        id);
  }
  if (state == LeaseState::kReleasing) return conflict("lease " + id + " is being released", id);
  return Status::ok();
}

LostVmOutcome after_boot_failure(LeaseState state, bool host_down) {
  if (state == LeaseState::kReleasing) return LostVmOutcome::kEndedByRelease;
  return host_down ? LostVmOutcome::kRequeue : LostVmOutcome::kFail;
}

LostVmOutcome after_handout_failure(LeaseState state, int attempts) {
  if (state == LeaseState::kReleasing) return LostVmOutcome::kEndedByRelease;
  return attempts < kMaxHandoutAttempts ? LostVmOutcome::kRequeue : LostVmOutcome::kFail;
}

}  // namespace armhive
