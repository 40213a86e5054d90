#include "daemon/core/dev_limits.h"

#include "base/validation.h"

namespace armhive {

namespace {

Status exhausted(std::string field, std::string message) {
  return {ErrorCode::kResourceExhausted, std::move(message), {}, std::move(field)};
}

Status check_ttl(const DevLimits& limits, const std::string& token, Seconds ttl) {
  if (limits.max_ttl.count() > 0 && ttl > limits.max_ttl) {
    return exhausted("ttl", "token \"" + token + "\" may hold a dev lease for at most " +
                                format_duration(limits.max_ttl.count()) + " at a time; ttl " +
                                format_duration(ttl.count()) + " asked (ask for less)");
  }
  return Status::ok();
}

}  // namespace

Status check_dev_create(const DevLimits& limits, const std::string& token, size_t held,
                        Seconds ttl) {
  if (limits.max_leases > 0 && held >= static_cast<size_t>(limits.max_leases)) {
    return exhausted("purpose", "token \"" + token + "\" already holds " + std::to_string(held) +
                                    " of its " + std::to_string(limits.max_leases) +
                                    " dev leases (release one with `armhive lease rm ID`)");
  }
  return check_ttl(limits, token, ttl);
}

Status check_dev_renew(const DevLimits& limits, const std::string& token, const Lease& lease,
                       TimePoint now, Seconds ttl) {
  ARMHIVE_RETURN_IF_ERROR(check_ttl(limits, token, ttl));
  if (limits.max_lifetime.count() > 0) {
    const TimePoint hard_end = lease.created_at + limits.max_lifetime;
    if (now + ttl > hard_end) {
      auto left = std::chrono::duration_cast<Seconds>(hard_end - now).count();
      return exhausted("ttl", "dev lease " + lease.id + " may live at most " +
                                  format_duration(limits.max_lifetime.count()) +
                                  " from its creation (until " + to_rfc3339(hard_end) + "); " +
                                  (left >= 60 ? "renew for at most " + format_duration(left)
                                              : std::string("it cannot be renewed any more")) +
                                  " (ttl " + format_duration(ttl.count()) + " asked)");
    }
  }
  return Status::ok();
}

}  // namespace armhive
