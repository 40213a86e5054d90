#include "daemon/core/lease_rules.h"

#include <catch2/catch.hpp>

#include "tests/support/manual_clock.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

PoolConfig pool_with_max_ttl(Seconds max_ttl) {
  PoolConfig p;
  p.name = "ci";
  p.max_ttl = max_ttl;
  return p;
}

TEST_CASE("lease rules: a TTL is positive, at most 30 days and within the pool's max_ttl",
          "[lease_rules]") {
  PoolConfig ci = pool_with_max_ttl(8h);
  CHECK(check_lease_ttl(1s, ci).is_ok());
  CHECK(check_lease_ttl(8h, ci).is_ok());
  for (Seconds bad : {0s, -5s}) {
    Status s = check_lease_ttl(bad, ci);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK(s.field() == "ttl");
  }
  Status over = check_lease_ttl(8h + 1s, ci);
  CHECK(over.code() == ErrorCode::kUnprocessable);
  CHECK(over.field() == "ttl");
  CHECK_THAT(over.message(), Catch::Contains("pool 'ci' max_ttl of 28800s"));
  // A pool configured beyond 30 days still cannot hand out more.
  PoolConfig lax = pool_with_max_ttl(Seconds(kMaxTtlSeconds * 2));
  CHECK(check_lease_ttl(kMaxLeaseTtl, lax).is_ok());
  CHECK(check_lease_ttl(kMaxLeaseTtl + 1s, lax).code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("lease rules: expiry is due at the deadline, once, and not while releasing",
          "[lease_rules]") {
  ManualClock clock;
  Lease l;
  l.ttl = 600s;
  l.state = LeaseState::kReady;
  l.expires_at = clock.now() + 600s;
  CHECK_FALSE(expiry_due(l, clock.now() + 599s));
  CHECK(expiry_due(l, clock.now() + 600s));
  CHECK(expiry_reason(l) == "TTL of 600s ran out");
  l.state = LeaseState::kPending;  // a waiting lease's TTL runs too
  CHECK(expiry_due(l, clock.now() + 601s));
  for (LeaseState s : {LeaseState::kReleasing, LeaseState::kExpired, LeaseState::kReleased}) {
    l.state = s;
    CHECK_FALSE(expiry_due(l, clock.now() + 601s));
  }
}

TEST_CASE("lease rules: only a live lease that is not being released is renewable",
          "[lease_rules]") {
  for (LeaseState s : {LeaseState::kPending, LeaseState::kProvisioning, LeaseState::kReady}) {
    CHECK(check_renewable("l-1", s).is_ok());
  }
  Status releasing = check_renewable("l-1", LeaseState::kReleasing);
  CHECK(releasing.code() == ErrorCode::kConflict);
  CHECK_THAT(releasing.message(), Catch::Contains("being released"));
  Status ended = check_renewable("l-1", LeaseState::kExpired);
  CHECK(ended.code() == ErrorCode::kConflict);
  CHECK_THAT(ended.message(), Catch::Contains("has ended (expired)"));
}

TEST_CASE("lease rules: a lease that lost its VM before ready is requeued, failed or ended",
          "[lease_rules]") {
  using O = LostVmOutcome;
  // A boot failure is the lease's end only when the host was not at fault.
  CHECK(after_boot_failure(LeaseState::kProvisioning, /*host_down=*/true) == O::kRequeue);
  CHECK(after_boot_failure(LeaseState::kProvisioning, /*host_down=*/false) == O::kFail);
  CHECK(after_boot_failure(LeaseState::kReleasing, true) == O::kEndedByRelease);
  CHECK(after_boot_failure(LeaseState::kReleasing, false) == O::kEndedByRelease);
  // A hand-out is tried on kMaxHandoutAttempts VMs, then the lease fails.
  for (int attempt = 1; attempt < kMaxHandoutAttempts; ++attempt) {
    CHECK(after_handout_failure(LeaseState::kProvisioning, attempt) == O::kRequeue);
  }
  CHECK(after_handout_failure(LeaseState::kProvisioning, kMaxHandoutAttempts) == O::kFail);
  CHECK(after_handout_failure(LeaseState::kReleasing, 1) == O::kEndedByRelease);
}

TEST_CASE("lease states: a host that stops answering holds a ready lease, then loses it",
          "[lease_rules]") {
  using S = LeaseState;
  CHECK(is_valid_transition(S::kReady, S::kHostUnreachable));
  CHECK(is_valid_transition(S::kHostUnreachable, S::kReady));  // the host answers again
  CHECK(is_valid_transition(S::kHostUnreachable, S::kLost));   // past the grace period
  CHECK(is_valid_transition(S::kHostUnreachable, S::kReleasing));
  // Only a handed-out lease can be held or lost: one still waiting takes a VM elsewhere.
  CHECK_FALSE(is_valid_transition(S::kPending, S::kHostUnreachable));
  CHECK_FALSE(is_valid_transition(S::kProvisioning, S::kHostUnreachable));
  CHECK_FALSE(is_valid_transition(S::kReady, S::kLost));
  CHECK_FALSE(is_valid_transition(S::kLost, S::kReady));
  CHECK(is_terminal(S::kLost));
  CHECK_FALSE(is_terminal(S::kHostUnreachable));
  CHECK(lease_state_from_string("host_unreachable") == S::kHostUnreachable);
  CHECK(to_string(S::kLost) == "lost");
  // Its owner may still renew it and its TTL still runs.
  CHECK(check_renewable("l-1", S::kHostUnreachable).is_ok());
  Lease l;
  l.state = S::kHostUnreachable;
  l.expires_at = TimePoint{} + std::chrono::seconds(10);
  CHECK(expiry_due(l, TimePoint{} + std::chrono::seconds(11)));
}

}  // namespace
}  // namespace armhive
