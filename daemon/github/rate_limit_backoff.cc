#include "daemon/github/rate_limit_backoff.h"

#include <algorithm>
#include <cstdint>

#include "base/utc_time.h"

namespace armhive {

namespace {

// 2^30 seconds (~34 years): beyond any bound the caller applies, and far from overflowing a
// TimePoint when added to now.
constexpr int64_t kMaxDelaySeconds = int64_t{1} << 30;

}  // namespace

std::optional<std::chrono::seconds> parse_retry_after(std::string_view value,
                                                      TimePoint response_time) {
  if (value.empty()) return std::nullopt;
  if (value.find_first_not_of("0123456789") == std::string_view::npos) {
    // delay-seconds = 1*DIGIT: any number of digits, leading zeros allowed.
    int64_t seconds = 0;
    for (char c : value) {
      seconds = std::min(seconds * 10 + (c - '0'), kMaxDelaySeconds);
    }
    return std::chrono::seconds(seconds);
  }
  auto date = parse_imf_fixdate("Retry-After", value);
  if (!date.is_ok()) return std::nullopt;
  const int64_t at =
      std::chrono::duration_cast<std::chrono::seconds>(response_time.time_since_epoch()).count();
  return std::chrono::seconds(std::clamp(*date - at, int64_t{0}, kMaxDelaySeconds));
}

std::chrono::seconds secondary_limit_wait(int consecutive) {
  std::chrono::seconds wait = kSecondaryLimitWait;
  for (int i = 1; i < consecutive && wait < kMaxSecondaryLimitWait; ++i) wait *= 2;
  return std::min(wait, kMaxSecondaryLimitWait);
}

}  // namespace armhive
