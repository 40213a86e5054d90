#pragma once

#include <chrono>

namespace armhive {

using TimePoint = std::chrono::system_clock::time_point;
using Seconds = std::chrono::seconds;
using Millis = std::chrono::milliseconds;

// Wall-clock source. Lease deadlines are wall-clock instants (they are persisted and shown to
// users); tests inject a ManualClock to move time without sleeping. Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
};

class SystemClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::system_clock::now(); }
};

int64_t to_unix_ms(TimePoint t);
TimePoint from_unix_ms(int64_t ms);
std::string to_rfc3339(TimePoint t);  // "2026-11-30T01:02:03.456Z"

}  // namespace armhive
