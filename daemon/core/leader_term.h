#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace armhive {

// Whether this armhived may act on the lab as its leader, from its renewals of the leader lease
// (a row in the shared database: holder, epoch, expiry in the database's clock; see
// daemon/store/pg_leader_lease.h). Pure: the caller passes the times, read from a monotonic
// clock (a wall clock that jumps must not lengthen a term).
//
// Safety: the database sets the expiry to (its now at the renewal) + lease, which is never
// before (our clock when we sent the renewal) + lease as long as the two clocks run at the same
// rate. We act only until sent_at + lease * kActingShare: the rest covers the clocks' rate
// difference and the time it takes to stop. A standby takes over only once the database's
// expiry has passed, so two leaders never act at once; a leader paused (SIGSTOP, a VM stall)
// past its term finds itself no longer acting the moment it runs again, whatever its renewal
// thread has not yet noticed.
//
// Threading: not thread-safe; the owner serialises (one election thread, readers under its
// lock).
class LeaderTerm {
 public:
  using Time = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::steady_clock::duration;
  static constexpr double kActingShare = 0.75;

  explicit LeaderTerm(Duration lease) : lease_(lease) {}

  // A renewal sent at `sent_at` came back: the lease is ours with `epoch`, or held by
  // `holder`. Replies are applied in the order sent (one in flight at a time).
  void renewed(Time sent_at, bool ours, int64_t epoch, const std::string& holder);
  // A renewal that failed (the database did not answer) changes nothing: the term runs out on
  // its own unless a later renewal succeeds.

  // True while this instance leads: its last renewal was ours and `now` is before that
  // renewal's send time + lease * kActingShare.
  bool acting(Time now) const;
  // The epoch of the current (or last) term; 0 before the first.
  int64_t epoch() const { return epoch_; }
  // Who held the lease at the last renewal that was not ours ("" when ours or unknown).
  const std::string& other_holder() const { return other_; }
  // When the next renewal is due after one sent at `sent_at`: a fifth of the lease, so that
  // three in a row can fail before the term ends.
  Time next_renewal(Time sent_at) const { return sent_at + lease_ / 5; }
  // When acting ends without another renewal (meaningful only while acting).
  Time acting_until() const { return acting_until_; }

 private:
  Duration lease_;
  bool ours_ = false;
  int64_t epoch_ = 0;
  Time acting_until_{};
  std::string other_;
};

}  // namespace armhive
