#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "daemon/core/clock.h"

namespace armhive {

// A libvirt host's state as the fleet sees it. Pure logic, no I/O: the engine reports what
// its calls to the host did and what the admin asked, with the instant from its Clock.

enum class HostHealth {
  kUp,           // connected, calls succeed
  kDegraded,     // connected, recent calls failed (last_error says which)
  kUnreachable,  // connection lost or a call missed its deadline
  kDraining,     // admin: no new VMs, live leases finish
  kMaintenance,  // admin: no new VMs, nothing expected to run
};
std::string_view to_string(HostHealth h);  // "up", "degraded", "unreachable", ...
std::optional<HostHealth> host_health_from_string(std::string_view s);
// Whether a host in this state takes new VMs.
bool takes_new_vms(HostHealth h);

// Two axes folded into one HostHealth: what the host's calls say (up / degraded / unreachable)
// and what the admin asked (nothing / drain / maintenance).
// - A call that fails makes an up host degraded; one that misses its deadline, or a lost
//   connection, makes it unreachable; a call that succeeds makes it up again.
// - health(): maintenance first (the admin took it out: nothing is expected of it), then
//   unreachable (its leases must show host_unreachable even while it drains), then draining,
//   then degraded / up.
// - unreachable_since() is when the host last went from reachable to unreachable: repeated
//   reports while unreachable do not restart the grace period after which its leases are lost.
// Plain value; not thread-safe (the engine keeps one per host under its lock).
class HostHealthTracker {
 public:
  enum class Admin { kNone, kDrain, kMaintenance };

  explicit HostHealthTracker(TimePoint now) : changed_at_(now) {}

  void call_succeeded(TimePoint now);
  void call_failed(TimePoint now, std::string error);
  void unreachable(TimePoint now, std::string error);
  void set_admin(TimePoint now, Admin admin);

  HostHealth health() const;
  Admin admin() const { return admin_; }
  // When health() last changed.
  TimePoint changed_at() const { return changed_at_; }
  // Set while the host is unreachable.
  std::optional<TimePoint> unreachable_since() const { return unreachable_since_; }
  // Whether the host has been unreachable for longer than `grace` at `now`.
  bool past_grace(TimePoint now, Seconds grace) const;
  // The last failure; it stays after the host is up again (it says what went wrong).
  const std::string& last_error() const { return last_error_; }
  TimePoint last_error_at() const { return last_error_at_; }

 private:
  enum class Link { kUp, kDegraded, kUnreachable };
  void update(TimePoint now, Link link, Admin admin);

  Link link_ = Link::kUp;
  Admin admin_ = Admin::kNone;
  TimePoint changed_at_;
  std::optional<TimePoint> unreachable_since_;
  std::string last_error_;
  TimePoint last_error_at_{};
};

// The admin axis by name: "none", "drain", "maintenance" (how the store keeps it).
std::string_view to_string(HostHealthTracker::Admin a);
std::optional<HostHealthTracker::Admin> host_admin_from_string(std::string_view s);

}  // namespace armhive
