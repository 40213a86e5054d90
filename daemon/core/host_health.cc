#include "daemon/core/host_health.h"

#include <utility>

namespace armhive {
namespace {

constexpr std::pair<HostHealth, std::string_view> kHealthNames[] = {
    {HostHealth::kUp, "up"},
    {HostHealth::kDegraded, "degraded"},
    {HostHealth::kUnreachable, "unreachable"},
    {HostHealth::kDraining, "draining"},
    {HostHealth::kMaintenance, "maintenance"},
};

constexpr std::pair<HostHealthTracker::Admin, std::string_view> kAdminNames[] = {
    {HostHealthTracker::Admin::kNone, "none"},
    {HostHealthTracker::Admin::kDrain, "drain"},
    {HostHealthTracker::Admin::kMaintenance, "maintenance"},
};

}  // namespace

std::string_view to_string(HostHealthTracker::Admin a) {
  for (const auto& [value, name] : kAdminNames) {
    if (value == a) return name;
  }
  return "none";
}

std::optional<HostHealthTracker::Admin> host_admin_from_string(std::string_view s) {
  for (const auto& [value, name] : kAdminNames) {
    if (name == s) return value;
  }
  return std::nullopt;
}

std::string_view to_string(HostHealth h) {
  for (const auto& [value, name] : kHealthNames) {
    if (value == h) return name;
  }
  return "unknown";
}

std::optional<HostHealth> host_health_from_string(std::string_view s) {
  for (const auto& [value, name] : kHealthNames) {
    if (name == s) return value;
  }
  return std::nullopt;
}

bool takes_new_vms(HostHealth h) { return h == HostHealth::kUp || h == HostHealth::kDegraded; }

void HostHealthTracker::call_succeeded(TimePoint now) { update(now, Link::kUp, admin_); }

void HostHealthTracker::call_failed(TimePoint now, std::string error) {
  last_error_ = std::move(error);
  last_error_at_ = now;
  // A failing call answered: the host is reachable again, if it was not.
  update(now, Link::kDegraded, admin_);
}

void HostHealthTracker::unreachable(TimePoint now, std::string error) {
  last_error_ = std::move(error);
  last_error_at_ = now;
  update(now, Link::kUnreachable, admin_);
}

void HostHealthTracker::set_admin(TimePoint now, Admin admin) { update(now, link_, admin); }

HostHealth HostHealthTracker::health() const {
  if (admin_ == Admin::kMaintenance) return HostHealth::kMaintenance;
  if (link_ == Link::kUnreachable) return HostHealth::kUnreachable;
  if (admin_ == Admin::kDrain) return HostHealth::kDraining;
  return link_ == Link::kDegraded ? HostHealth::kDegraded : HostHealth::kUp;
}

bool HostHealthTracker::past_grace(TimePoint now, Seconds grace) const {
  return unreachable_since_.has_value() && now - *unreachable_since_ > grace;
}

void HostHealthTracker::update(TimePoint now, Link link, Admin admin) {
  HostHealth before = health();
  if (link == Link::kUnreachable && link_ != Link::kUnreachable) unreachable_since_ = now;
  if (link != Link::kUnreachable) unreachable_since_.reset();
  link_ = link;
  admin_ = admin;
  if (health() != before) changed_at_ = now;
}

}  // namespace armhive
