#include "daemon/core/clock.h"

#include <ctime>
#include <string>

namespace armhive {

int64_t to_unix_ms(TimePoint t) {
  return std::chrono::duration_cast<Millis>(t.time_since_epoch()).count();
}

TimePoint from_unix_ms(int64_t ms) { return TimePoint(Millis(ms)); }

std::string to_rfc3339(TimePoint t) {
  int64_t ms = to_unix_ms(t);
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms % 1000));
  return out;
}

}  // namespace armhive
