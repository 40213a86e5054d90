#pragma once

#include <chrono>
#include <optional>
#include <string_view>

#include "daemon/core/clock.h"

namespace armhive {

// How long GitHub asks armhived to wait after a rate-limited reply (docs.github.com, "Rate limits
// for the REST API": wait Retry-After; else, with X-RateLimit-Remaining 0, until
// X-RateLimit-Reset; else at least a minute, "and if your request continues to fail due to a
// secondary rate limit, wait for an exponentially increasing amount of time between retries").
// github_api.cc applies it; the functions here are pure, for any thread.

// Retry-After's value (RFC 9110 section 10.2.3) as a delay: delay-seconds ("120", digits only),
// or an HTTP date in the IMF-fixdate form ("Wed, 21 Oct 2015 07:28:00 GMT") taken relative to
// `response_time`, the time of the reply (its own Date header when that is a valid date, so a
// skewed local clock changes nothing; else when it arrived); a date not after it is 0. Anything
// else is nullopt: the header counts as absent. Delays beyond ~34 years are clamped to that, so
// no arithmetic overflows; the caller bounds the backoff further.
std::optional<std::chrono::seconds> parse_retry_after(std::string_view value,
                                                      TimePoint response_time);

// The wait for a secondary rate limit that says no Retry-After, the `consecutive`-th in a row
// (1 for the first; those that said Retry-After count too, as GitHub still limits us):
// kSecondaryLimitWait doubled for each one before it, at most kMaxSecondaryLimitWait. A reply
// that is neither a rate limit nor a server error starts the count again (github_api.cc).
inline constexpr std::chrono::seconds kSecondaryLimitWait{60};
inline constexpr std::chrono::seconds kMaxSecondaryLimitWait{15 * 60};
std::chrono::seconds secondary_limit_wait(int consecutive);

}  // namespace armhive
